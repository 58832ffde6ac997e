#pragma once
// A scratch directory for one test: made fresh (mkdtemp) under the system's temporary directory and removed with
// its contents when the test's scope ends.
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace gpuenv::testing {

/// A fresh, empty directory named PREFIX-XXXXXX, removed with everything in it at the end of the scope. Throws
/// std::runtime_error when it cannot be made (the test then fails with the reason).
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "gpuenv-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!::mkdtemp(pattern.data())) {
      throw std::runtime_error("mkdtemp " + pattern + ": " + std::generic_category().message(errno));
    }
    m_path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

}  // namespace gpuenv::testing
