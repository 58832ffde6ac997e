#pragma once
// Fetching one apt repository's indexes the way apt does: InRelease (or Release + Release.gpg) verified with
// the source's keyrings, then the Packages files of each component and architecture, by the SHA256 the
// verified Release names (by-hash when the repository offers it), through the cache.
#include <cstdint>
#include <string>
#include <vector>

#include "packages/apt/apt_sources.hpp"
#include "packages/apt/deb822.hpp"
#include "base/cache/blob_store.hpp"
#include "base/net/fetcher.hpp"
#include "base/process/command_runner.hpp"

namespace gpuenv::packages {

struct AptFetchContext {
  Fetcher* fetcher = nullptr;      ///< required (indexes are not content-addressed until the Release is known)
  BlobStore* cache = nullptr;      ///< Packages files go through it
  CommandRunner* runner = nullptr; ///< runs gpgv
  std::string work_dir;            ///< for temporary files
  std::vector<std::string> default_keyrings;  ///< used when a source has no signed-by (apt's trusted.gpg.d)
  std::vector<std::string> architectures = {"amd64"};
  std::int64_t now_unix = 0;       ///< for Valid-Until; 0 skips the check
};

/// One Packages file of a repository, decompressed and verified.
struct PackagesFile {
  std::string component;     ///< "" for a flat repository
  std::string architecture;
  std::string url;           ///< where it came from
  Digest sha256;             ///< of the compressed file as fetched
  std::string text;
};

struct RepositoryIndexes {
  ReleaseFile release;
  std::string signed_by;  ///< fingerprint of the key that signed it, or "" for a trusted unsigned source
  std::vector<PackagesFile> packages;
};

/// Fetches and verifies. Errors: "apt.unsigned" / "apt.bad_signature" (refused unless the source says
/// trusted: true), "apt.expired" (Valid-Until passed), "apt.missing_index" (Release lists no Packages for a
/// component/architecture), "fetch.*" and "cache.*" from below; a Packages file whose hash does not match
/// the Release never enters the cache.
Result<RepositoryIndexes> fetch_repository(const AptSource& source, AptFetchContext& ctx);

}  // namespace gpuenv::packages
