#include "marks/dsse.hpp"

#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include "marks/key_impl.hpp"

namespace gpuenv::marks {

namespace {

constexpr std::size_t k_max_envelope = 4u << 20;

struct MdCtx {
  EVP_MD_CTX* c = EVP_MD_CTX_new();
  ~MdCtx() { EVP_MD_CTX_free(c); }
  MdCtx() = default;
  MdCtx(const MdCtx&) = delete;
  MdCtx& operator=(const MdCtx&) = delete;
};

Error bad(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::environment, "mark.bad_envelope", what, where, "the record is damaged or is not a DSSE envelope; mark the image again");
}

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

}  // namespace

std::string pre_authentication_encoding(std::string_view payload_type, std::string_view payload) {
  std::string out = "DSSEv1 " + std::to_string(payload_type.size()) + " ";
  out += payload_type;
  out += " " + std::to_string(payload.size()) + " ";
  out += payload;
  return out;
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::uint32_t a = static_cast<unsigned char>(bytes[i]);
    const std::uint32_t b = i + 1 < bytes.size() ? static_cast<unsigned char>(bytes[i + 1]) : 0;
    const std::uint32_t c = i + 2 < bytes.size() ? static_cast<unsigned char>(bytes[i + 2]) : 0;
    const std::uint32_t n = (a << 16) | (b << 8) | c;
    out += k[(n >> 18) & 63];
    out += k[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? k[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? k[n & 63] : '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char ch : text) {
    const int v = sextet(ch);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return std::nullopt;  // non-canonical trailing bits
  return out;
}

Result<std::string> sign_envelope(std::string_view payload, std::string_view payload_type, const Key& key) {
  if (!key.can_sign()) return make_error(ErrorKind::usage, "mark.sign", "this key cannot sign (it is a public key)", {}, "give the private key (gpuenv.key)");
  const std::string pae = pre_authentication_encoding(payload_type, payload);
  MdCtx ctx;
  std::size_t len = 0;
  if (ctx.c == nullptr || EVP_DigestSignInit(ctx.c, nullptr, EVP_sha256(), nullptr, key.impl().pkey) != 1 ||
      EVP_DigestSign(ctx.c, nullptr, &len, reinterpret_cast<const unsigned char*>(pae.data()), pae.size()) != 1)
    return make_error(ErrorKind::internal, "mark.sign", "OpenSSL could not sign", {}, "");
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.c, reinterpret_cast<unsigned char*>(sig.data()), &len, reinterpret_cast<const unsigned char*>(pae.data()), pae.size()) != 1)
    return make_error(ErrorKind::internal, "mark.sign", "OpenSSL could not sign", {}, "");
  sig.resize(len);
  nlohmann::ordered_json env = {{"payload", base64_encode(payload)},
                                {"payloadType", std::string(payload_type)},
                                {"signatures", nlohmann::ordered_json::array({{{"keyid", ""}, {"sig", base64_encode(sig)}}})}};
  return env.dump();
}

Result<Envelope> parse_envelope(std::string_view json_text, const std::string& where) {
  if (json_text.size() > k_max_envelope) return bad("the envelope is larger than 4 MiB", where);
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object", where);
  auto text = [&](const nlohmann::json& o, const char* k) -> const std::string* {
    return o.is_object() && o.contains(k) && o[k].is_string() ? o[k].get_ptr<const std::string*>() : nullptr;
  };
  const std::string* type = text(j, "payloadType");
  const std::string* payload = text(j, "payload");
  if (type == nullptr || payload == nullptr) return bad("payloadType or payload is missing or not a string", where);
  if (!j.contains("signatures") || !j["signatures"].is_array() || j["signatures"].empty()) return bad("the envelope has no signatures", where);
  Envelope out;
  out.payload_type = *type;
  auto decoded = base64_decode(*payload);
  if (!decoded) return bad("the payload is not base64", where);
  out.payload = std::move(*decoded);
  for (const auto& s : j["signatures"]) {
    const std::string* sig = text(s, "sig");
    if (sig == nullptr) return bad("a signature has no sig", where);
    auto raw = base64_decode(*sig);
    if (!raw) return bad("a signature is not base64", where);
    out.signatures.push_back(std::move(*raw));
  }
  return out;
}

int verifying_key(const Envelope& envelope, const std::vector<const Key*>& keys) {
  const std::string pae = pre_authentication_encoding(envelope.payload_type, envelope.payload);
  for (std::size_t k = 0; k < keys.size(); ++k) {
    if (keys[k] == nullptr) continue;
    for (const std::string& sig : envelope.signatures) {
      MdCtx ctx;
      if (ctx.c == nullptr || EVP_DigestVerifyInit(ctx.c, nullptr, EVP_sha256(), nullptr, keys[k]->impl().pkey) != 1) continue;
      if (EVP_DigestVerify(ctx.c, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(), reinterpret_cast<const unsigned char*>(pae.data()), pae.size()) == 1)
        return static_cast<int>(k);
    }
  }
  return -1;
}

}  // namespace gpuenv::marks
