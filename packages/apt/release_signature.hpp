#pragma once
// Verifying an apt repository's signed index (InRelease, or Release with Release.gpg) with gpgv against the
// source's keyrings, as apt does. Only what gpgv verified is returned.
#include <string>
#include <string_view>
#include <vector>

#include "base/process/command_runner.hpp"
#include "base/error.hpp"

namespace gpuenv::packages {

struct VerifiedRelease {
  std::string text;         ///< the signed Release content, exactly as gpgv verified it
  std::string fingerprint;  ///< of the key that made the valid signature
};

/// Keyrings are files (binary OpenPGP keyrings or ASCII-armored keys, which are de-armored into `work_dir`).
/// Fails with "apt.unsigned" (no signature), "apt.bad_signature" (bad, unknown key, expired, revoked, weak
/// SHA-1 digest) or "process.*" when gpgv cannot run.
Result<VerifiedRelease> verify_inrelease(CommandRunner& runner, std::string_view inrelease, const std::vector<std::string>& keyrings,
                                         const std::string& origin, const std::string& work_dir);

/// The same for a Release file with a detached Release.gpg signature.
Result<VerifiedRelease> verify_detached_release(CommandRunner& runner, std::string_view release, std::string_view signature,
                                                const std::vector<std::string>& keyrings, const std::string& origin,
                                                const std::string& work_dir);

/// Decodes an ASCII-armored OpenPGP block into its binary packets.
Result<std::string> dearmor(std::string_view armored, const std::string& origin);

}  // namespace gpuenv::packages
