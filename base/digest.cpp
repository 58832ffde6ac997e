#include "base/digest.hpp"

#include <openssl/evp.h>

namespace gpuenv {

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

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

std::optional<Digest> Digest::parse(std::string_view text) {
  if (!is_sha256_digest(text)) return std::nullopt;
  return Digest(std::string(text.substr(7)));
}

std::optional<Digest> Digest::from_hex(std::string_view hex) {
  if (!is_sha256_hex(hex)) return std::nullopt;
  return Digest(std::string(hex));
}

Digest Digest::of(std::string_view bytes) { return Digest(sha256_hex(bytes)); }

Sha256::Sha256() : m_ctx(EVP_MD_CTX_new()) { reset(); }
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(m_ctx)); }
void Sha256::reset() { EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(m_ctx), EVP_sha256(), nullptr); }
void Sha256::update(const void* data, std::size_t size) { EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(m_ctx), data, size); }
std::string Sha256::finish() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(m_ctx), md, &n);
  return to_hex(md, n);
}
Digest Sha256::finish_digest() { return *Digest::from_hex(finish()); }

}  // namespace gpuenv
