#pragma once
// Removing a suite's scratch directory when a gpg-agent may still live in it.
//
// gpg starts a gpg-agent in GNUPGHOME for key generation and signing. The agent outlives the gpg call and, when it
// notices its home going away, deletes its own sockets; std::filesystem::remove_all then meets a file that vanished
// between listing and unlinking and throws ("cannot remove all: No such file or directory ... S.gpg-agent.ssh"),
// which fails the suite's teardown at random. So the agent is stopped first (gpgconf waits for it), and removal
// tolerates entries that are already gone.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace gpuenv::testing {

/// Stops the gpg-agent of GNUPG_HOME (if any), then removes DIR and everything in it. Never throws.
inline void remove_scratch(const std::filesystem::path& dir, const std::filesystem::path& gnupg_home) {
  if (dir.empty()) return;
  if (!gnupg_home.empty() && std::filesystem::exists(gnupg_home)) {
    const std::string kill = "gpgconf --homedir '" + gnupg_home.string() + "' --kill all >/dev/null 2>&1";
    (void)std::system(kill.c_str());
  }
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (!ec || !std::filesystem::exists(dir)) return;
  }
}

}  // namespace gpuenv::testing
