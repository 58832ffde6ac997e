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


}  // namespace

std::string pre_authentication_encoding(std::string_view payload_type, std::string_view payload) {
  std::string out = "DSSEv1 " + std::to_string(payload_type.size()) + " ";
  out += payload_type;
  out += " " + std::to_string(payload.size()) + " ";
  out += payload;
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
