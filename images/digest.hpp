#pragma once
// sha256 digests as lower-case hex, the form indexes, locks and the cache use.
#include <cstddef>
#include <string>
#include <string_view>

namespace gpuenv::images {

/// Lower-case hex of `n` bytes.
std::string to_hex(const unsigned char* bytes, std::size_t n);
/// Lower-case hex sha256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace gpuenv::images
