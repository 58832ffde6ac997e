#pragma once
// Small file helpers for tests that write trees and compare outputs byte for byte.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "base/digest.hpp"

namespace gpuenv::testing {

/// PATH in single quotes, for a shell command line (test paths hold no quote).
inline std::string sh_quote(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

/// Writes TEXT to P, making its directories.
inline void write_tree_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

/// The bytes of P ("" when it cannot be read).
inline std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {(std::istreambuf_iterator<char>(in)), {}};
}

/// The hex sha256 of P's bytes.
inline std::string file_sha256(const std::filesystem::path& p) { return sha256_hex(read_all(p)); }

}  // namespace gpuenv::testing
