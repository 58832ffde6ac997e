#pragma once
// File reading with limits and atomic writes, used by commands.
#include <cstddef>
#include <string>

#include "resolver/error.hpp"

namespace gpuenv::cli {

/// Reads a whole file; refuses directories and files over max_bytes (without reading them).
/// Missing file: ErrorKind::usage; other failures: ErrorKind::environment.
Result<std::string> read_file_limited(const std::string& path, std::size_t max_bytes);

/// Writes `text` to `path` atomically: a temporary file beside it, fsync, rename, fsync of the directory.
/// On failure nothing is left behind and `path` is untouched.
Status write_file_atomic(const std::string& path, const std::string& text);

/// Lower-case hex SHA-256 of bytes.
std::string sha256_hex(std::string_view bytes);

}  // namespace gpuenv::cli
