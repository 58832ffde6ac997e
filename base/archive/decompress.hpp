#pragma once
// Decompressing a single compressed stream (Packages.xz, .gz, .bz2, .zst, .lz4) with libarchive's filters.
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.hpp"

namespace gpuenv {

/// Decompresses `bytes` (any filter libarchive reads; uncompressed input is returned as it is). Output past
/// `max_bytes` is "archive.limit"; damaged input is "archive.corrupt".
Result<std::string> decompress(std::string_view bytes, const std::string& origin, std::uint64_t max_bytes = 2ull << 30);

}  // namespace gpuenv
