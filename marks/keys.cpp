#include "marks/keys.hpp"

#include <sys/stat.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <filesystem>

#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "marks/key_impl.hpp"

namespace gpuenv::marks {

namespace {

constexpr std::size_t k_max_key_file = 64 * 1024;

struct Bio {
  BIO* b;
  explicit Bio(BIO* bio) : b(bio) {}
  ~Bio() { BIO_free(b); }
  Bio(const Bio&) = delete;
  Bio& operator=(const Bio&) = delete;
  [[nodiscard]] std::string text() const {
    char* data = nullptr;
    const long n = BIO_get_mem_data(b, &data);
    return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
  }
};

bool is_p256(EVP_PKEY* pkey) {
  if (pkey == nullptr || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_EC) return false;
  char group[64] = {0};
  std::size_t len = 0;
  if (EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &len) != 1) return false;
  const std::string g(group, len);
  return g == "prime256v1" || g == "P-256";
}

Key make_key(EVP_PKEY* pkey, bool is_private);

}  // namespace

Key::Key(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Key::~Key() = default;
Key::Key(Key&&) noexcept = default;
Key& Key::operator=(Key&&) noexcept = default;

bool Key::can_sign() const { return m_impl && m_impl->is_private && m_impl->pkey != nullptr; }


std::string Key::public_pem() const {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio.b == nullptr || m_impl->pkey == nullptr || PEM_write_bio_PUBKEY(bio.b, m_impl->pkey) != 1) return {};
  return bio.text();
}

std::string Key::fingerprint() const {
  unsigned char* der = nullptr;
  const int n = i2d_PUBKEY(m_impl->pkey, &der);
  if (n <= 0) return {};
  std::string bytes(reinterpret_cast<const char*>(der), static_cast<std::size_t>(n));
  OPENSSL_free(der);
  return sha256_hex(bytes);
}

namespace {

Key make_key(EVP_PKEY* pkey, bool is_private) {
  auto impl = std::make_unique<Key::Impl>();
  impl->pkey = pkey;
  impl->is_private = is_private;
  return Key(std::move(impl));
}

Error key_error(const std::string& id, const std::string& what, const std::string& where, const std::string& hint) {
  return make_error(ErrorKind::usage, id, what, where, hint);
}

Result<std::string> read_key_file(const std::string& path, bool is_private) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return key_error("key.not_found", std::string(is_private ? "the private key" : "the public key") + " does not exist", path,
                     is_private ? "create a key pair with `gpuenv key generate -o DIR`" : "give the gpuenv.pub of the key that signed");
  if (!S_ISREG(st.st_mode)) return key_error(is_private ? "key.bad_private" : "key.bad_public", "not a regular file", path, "give the key file itself");
  if (is_private && (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return key_error("key.permissions", std::string("the private key may be read by others (mode ") + mode + ")", path, "chmod 600 " + path);
  }
  return read_file_limited(path, k_max_key_file);
}

}  // namespace

Result<Key> generate_key() {
  EVP_PKEY* pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  if (pkey == nullptr) return make_error(ErrorKind::internal, "key.generate", "OpenSSL could not generate a P-256 key", {}, "");
  return make_key(pkey, true);
}

Status write_key_pair(const Key& key, const std::string& dir, bool overwrite) {
  if (!key.can_sign()) return make_error(ErrorKind::internal, "key.generate", "only a private key can be written as a pair", dir, "");
  const std::string priv = dir + "/gpuenv.key", pub = dir + "/gpuenv.pub";
  std::error_code ec;
  if (!overwrite && (std::filesystem::exists(priv, ec) || std::filesystem::exists(pub, ec)))
    return key_error("key.exists", "a key pair is already there", dir, "choose another directory with -o, or pass --force to replace it");
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ErrorKind::environment, "key.io", "cannot create the directory: " + ec.message(), dir, "");
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio.b == nullptr || PEM_write_bio_PrivateKey(bio.b, key.impl().pkey, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return make_error(ErrorKind::internal, "key.generate", "OpenSSL could not encode the private key", priv, "");
  GPUENV_CHECK(write_file_atomic(priv, bio.text(), 0600));
  return write_file_atomic(pub, key.public_pem(), 0644);
}

Result<KeyPairFiles> generate_key_pair(const std::string& dir, bool overwrite) {
  GPUENV_TRY(key, generate_key());
  GPUENV_CHECK(write_key_pair(key, dir, overwrite));
  return KeyPairFiles{dir + "/gpuenv.key", dir + "/gpuenv.pub", key.fingerprint()};
}

Result<Key> parse_private_key(std::string_view pem, const std::string& where) {
  const std::string text(pem);
  if (text.find("ENCRYPTED") != std::string::npos)
    return key_error("key.bad_private", "the private key is encrypted", where,
                     "gpuenv reads unencrypted PEM keys kept with mode 0600 (a cosign key: `openssl pkey` cannot read it; make one with `gpuenv key generate`)");
  Bio bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  EVP_PKEY* pkey = bio.b ? PEM_read_bio_PrivateKey(bio.b, nullptr, [](char*, int, int, void*) { return 0; }, nullptr) : nullptr;
  if (pkey == nullptr) return key_error("key.bad_private", "not a PEM private key", where, "give the gpuenv.key that `gpuenv key generate` wrote");
  if (!is_p256(pkey)) {
    EVP_PKEY_free(pkey);
    return key_error("key.bad_private", "not an ECDSA P-256 key", where, "marks are signed with P-256 keys, as cosign's; make one with `gpuenv key generate`");
  }
  return make_key(pkey, true);
}

Result<Key> parse_public_key(std::string_view pem, const std::string& where) {
  const std::string text(pem);
  Bio bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  EVP_PKEY* pkey = bio.b ? PEM_read_bio_PUBKEY(bio.b, nullptr, nullptr, nullptr) : nullptr;
  if (pkey == nullptr) return key_error("key.bad_public", "not a PEM public key (\"BEGIN PUBLIC KEY\")", where, "give the gpuenv.pub of the key that signed");
  if (!is_p256(pkey)) {
    EVP_PKEY_free(pkey);
    return key_error("key.bad_public", "not an ECDSA P-256 key", where, "marks are signed with P-256 keys");
  }
  return make_key(pkey, false);
}

Result<Key> read_private_key(const std::string& path) {
  GPUENV_TRY(text, read_key_file(path, true));
  return parse_private_key(text, path);
}

Result<Key> read_public_key(const std::string& path) {
  GPUENV_TRY(text, read_key_file(path, false));
  return parse_public_key(text, path);
}

}  // namespace gpuenv::marks
