#pragma once
// The published CC evidence the attest tests read at run time from ../shared/cc_vectors (never copied into the
// repository): where it is, reading a file of it, and the skip when it is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace gpuenv::testing {

inline const std::filesystem::path k_cc_vectors = std::filesystem::path(GPUENV_SOURCE_DIR) / ".." / "shared" / "cc_vectors";

/// The bytes of P; empty when it cannot be read.
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace gpuenv::testing

/// Skips the test, saying why, where the published evidence is absent.
#define NEED_VECTORS()                                                                         \
  if (!std::filesystem::exists(gpuenv::testing::k_cc_vectors / "vectors.json"))              \
  GTEST_SKIP() << "the published CC evidence is not at " << gpuenv::testing::k_cc_vectors.string() \
               << " (../shared/cc_vectors beside the checkout)"
