#pragma once
// Signing keys of validation marks: ECDSA P-256, as cosign generates them. The private key is a PKCS#8 PEM file
// ("PRIVATE KEY", mode 0600), the public key a PKIX PEM file ("PUBLIC KEY"); cosign, Kyverno and sigstore
// policy-controller read the public key as it is (docs/mark.md). Key bytes are never printed or put in an error.
#include <memory>
#include <string>
#include <string_view>

#include "base/error.hpp"

namespace gpuenv::marks {

/// An EC P-256 key: private (can sign) or public only.
class Key {
 public:
  ~Key();
  Key(Key&&) noexcept;
  Key& operator=(Key&&) noexcept;
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;

  [[nodiscard]] bool can_sign() const;
  /// The public key as PKIX PEM text.
  [[nodiscard]] std::string public_pem() const;
  /// The sha256 (hex) of the public key's PKIX DER bytes: what a record's reader is told the key is by.
  [[nodiscard]] std::string fingerprint() const;

  struct Impl;  ///< the OpenSSL key (keys.cpp)
  explicit Key(std::unique_ptr<Impl> impl);
  [[nodiscard]] const Impl& impl() const { return *m_impl; }

 private:
  std::unique_ptr<Impl> m_impl;
};

/// A new P-256 key from the system's random source. Error `key.generate` (ErrorKind::internal).
Result<Key> generate_key();

/// Writes DIR/gpuenv.key (PKCS#8 PEM, mode 0600) and DIR/gpuenv.pub (PKIX PEM), each atomically. Refuses to
/// replace an existing key (`key.exists`, ErrorKind::usage) unless `overwrite`.
Status write_key_pair(const Key& key, const std::string& dir, bool overwrite);

/// The files generate_key_pair wrote.
struct KeyPairFiles {
  std::string private_key, public_key;
  std::string fingerprint;  ///< Key::fingerprint()
};
/// generate_key, then write_key_pair into DIR.
Result<KeyPairFiles> generate_key_pair(const std::string& dir, bool overwrite);

/// A private key from PEM text ("PRIVATE KEY" or "EC PRIVATE KEY", unencrypted). Errors (ErrorKind::usage, WHERE the
/// file): `key.bad_private` for anything else, another curve or an encrypted key (with what to do).
Result<Key> parse_private_key(std::string_view pem, const std::string& where);
/// A public key from PKIX PEM text ("PUBLIC KEY"). Error `key.bad_public` (ErrorKind::usage).
Result<Key> parse_public_key(std::string_view pem, const std::string& where);

/// Reads a private key file: refused when group or others may read it (`key.permissions`: chmod 600), larger
/// than 64 KiB or not a regular file. `key.not_found` when it is absent.
Result<Key> read_private_key(const std::string& path);
/// Reads a public key file (at most 64 KiB).
Result<Key> read_public_key(const std::string& path);

}  // namespace gpuenv::marks
