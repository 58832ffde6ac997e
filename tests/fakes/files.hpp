#pragma once
// Small file helpers for tests that write trees and compare outputs byte for byte.
#include <filesystem>
#include <fstream>
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

/// The bytes of P ("" when it cannot be read). Read in blocks, not by a stream iterator: tests build at -O0 in CI,
/// where an iterator over a disk image's hundreds of MiB took a minute.
inline std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string out;
  char block[1 << 16];
  while (in.read(block, sizeof block) || in.gcount() > 0) out.append(block, static_cast<std::size_t>(in.gcount()));
  return out;
}

/// The hex sha256 of P's bytes.
inline std::string file_sha256(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  Sha256 hash;
  char block[1 << 16];
  while (in.read(block, sizeof block) || in.gcount() > 0) hash.update(block, static_cast<std::size_t>(in.gcount()));
  return hash.finish();
}

}  // namespace gpuenv::testing
