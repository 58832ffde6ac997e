#include "images/digest.hpp"

#include <openssl/evp.h>

namespace gpuenv::images {

std::string to_hex(const unsigned char* bytes, std::size_t n) {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out += k_hex[bytes[i] >> 4];
    out += k_hex[bytes[i] & 0xf];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  return to_hex(md, n);
}

}  // namespace gpuenv::images
