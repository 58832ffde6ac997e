#pragma once
// sha256 digests as lower-case hex, the form indexes, locks and the cache use.
#include <compare>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpuenv {

/// Lower-case hex of `n` bytes.
std::string to_hex(const unsigned char* bytes, std::size_t n);
/// The bytes of HEX (either case, an even number of digits); std::nullopt for anything else.
std::optional<std::string> from_hex(std::string_view hex);
/// Lower-case hex sha256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

/// Whether HEX is 64 lower-case hex digits (a sha256 as gpuenv names blobs by it; safe as a file name).
inline bool is_sha256_hex(std::string_view hex) {
  return hex.size() == 64 && hex.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}
/// Whether DIGEST is "sha256:" and 64 lower-case hex digits (the only OCI digests gpuenv writes or accepts).
inline bool is_sha256_digest(std::string_view digest) { return digest.size() == 71 && digest.substr(0, 7) == "sha256:" && is_sha256_hex(digest.substr(7)); }
/// The hex of a sha256 digest; "" when DIGEST is not one.
inline std::string digest_hex(std::string_view digest) { return is_sha256_digest(digest) ? std::string(digest.substr(7)) : std::string(); }

/// A sha256 digest: 64 lower-case hex digits, or empty (no digest given). A non-empty Digest is always valid:
/// it is made only by hashing bytes or by parsing text that passed the check, so code holding one may use its
/// hex as a file name. Written "sha256:<hex>" in OCI documents and bare hex in locks, package indexes and the cache.
class Digest {
 public:
  Digest() = default;
  /// "sha256:" and 64 lower-case hex digits; std::nullopt for anything else.
  static std::optional<Digest> parse(std::string_view text);
  /// 64 lower-case hex digits; std::nullopt for anything else.
  static std::optional<Digest> from_hex(std::string_view hex);
  /// The sha256 of BYTES.
  static Digest of(std::string_view bytes);

  [[nodiscard]] bool empty() const { return m_hex.empty(); }
  /// The 64 hex digits ("" when empty).
  [[nodiscard]] const std::string& hex() const { return m_hex; }
  /// "sha256:<hex>" ("" when empty).
  [[nodiscard]] std::string str() const { return m_hex.empty() ? std::string() : "sha256:" + m_hex; }

  friend bool operator==(const Digest&, const Digest&) = default;
  friend auto operator<=>(const Digest&, const Digest&) = default;

 private:
  explicit Digest(std::string hex) : m_hex(std::move(hex)) {}
  std::string m_hex;
};

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
  /// finish() as a Digest.
  Digest finish_digest();

 private:
  void* m_ctx;  // EVP_MD_CTX
};

}  // namespace gpuenv
