#pragma once
// File reading with limits and atomic writes, used by commands.
#include <cstddef>
#include <string>

#include <vector>

#include "resolver/catalog.hpp"
#include "base/error.hpp"

namespace gpuenv::cli {

/// Reads a whole file; refuses directories and files over max_bytes (without reading them).
/// Missing file: ErrorKind::usage; other failures: ErrorKind::environment.
Result<std::string> read_file_limited(const std::string& path, std::size_t max_bytes);

/// Writes `text` to `path` atomically: a temporary file beside it, fsync, rename, fsync of the directory.
/// On failure nothing is left behind and `path` is untouched.
Status write_file_atomic(const std::string& path, const std::string& text);

/// Lower-case hex SHA-256 of bytes.
std::string sha256_hex(std::string_view bytes);

/// The catalog digest recorded in locks: sha256 over each file's base name, a NUL, its bytes and a NUL,
/// in the given (sorted) order.
std::string catalog_digest(const std::vector<resolver::CatalogFile>& files);

}  // namespace gpuenv::cli
