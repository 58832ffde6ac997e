#pragma once
// sha256 digests as lower-case hex, the form indexes, locks and the cache use.
#include <cstddef>
#include <string>
#include <string_view>

namespace gpuenv {

/// Lower-case hex of `n` bytes.
std::string to_hex(const unsigned char* bytes, std::size_t n);
/// Lower-case hex sha256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

/// An incremental sha256 (OpenSSL EVP).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void reset();
  void update(const void* data, std::size_t size);
  /// Lower-case hex of everything given since the last reset; the object must be reset before reuse.
  std::string finish();

 private:
  void* m_ctx;  // EVP_MD_CTX
};

}  // namespace gpuenv
