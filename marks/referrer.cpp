#include "marks/referrer.hpp"

#include <nlohmann/json.hpp>

#include "marks/dsse.hpp"

namespace gpuenv::marks {
namespace {

using ojson = nlohmann::ordered_json;

/// Bytes from lower-case hex (a Digest's), for the key hint.
std::string unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}

}  // namespace

Result<std::string> bundle_of(std::string_view envelope_json, const Key& key) {
  GPUENV_TRY(env, parse_envelope(envelope_json, "the record"));
  if (env.signatures.size() != 1)
    return make_error(ErrorKind::internal, "mark.bad_envelope", "a bundle's envelope has exactly one signature", "the record", "");
  const ojson bundle = {
      {"mediaType", std::string(k_bundle_media_type)},
      {"verificationMaterial", {{"publicKey", {{"hint", base64_encode(unhex(key.fingerprint()))}}}}},
      {"dsseEnvelope",
       {{"payload", base64_encode(env.payload)}, {"payloadType", env.payload_type}, {"signatures", ojson::array({{{"sig", base64_encode(env.signatures[0])}}})}}}};
  return bundle.dump();
}

std::string referrer_manifest(std::string_view bundle, const images::Descriptor& subject, std::string_view predicate_type, const std::string& created) {
  const ojson manifest = {
      {"schemaVersion", 2},
      {"mediaType", images::media_type::k_manifest},
      {"artifactType", std::string(k_bundle_media_type)},
      {"config", {{"mediaType", std::string(k_empty_media_type)}, {"digest", Digest::of(k_empty_blob).str()}, {"size", k_empty_blob.size()}}},
      {"layers", ojson::array({{{"mediaType", std::string(k_bundle_media_type)}, {"digest", Digest::of(bundle).str()}, {"size", bundle.size()}}})},
      {"subject", {{"mediaType", subject.media_type}, {"digest", subject.digest.str()}, {"size", subject.size}}},
      {"annotations",
       {{"dev.sigstore.bundle.content", "dsse-envelope"}, {"dev.sigstore.bundle.predicateType", std::string(predicate_type)}, {"org.opencontainers.image.created", created}}}};
  return manifest.dump();
}

}  // namespace gpuenv::marks
