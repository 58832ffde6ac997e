// The referrer form of a mark: a Sigstore bundle v0.3 around the same envelope, the referrer manifest, and the
// fallback index kept by the client.
#include "marks/referrer.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "images/registry/referrers.hpp"
#include "marks/dsse.hpp"
#include "marks/statement.hpp"

namespace {

using namespace gpuenv::marks;
using nlohmann::json;

TEST(Referrer, TheBundleCarriesTheEnvelopeAndTheKeysHintAndTheManifestNamesItsSubject) {
  auto key = generate_key();
  ASSERT_TRUE(key.ok());
  auto envelope = sign_envelope("{\"_type\":\"x\"}", k_in_toto_payload_type, *key);
  ASSERT_TRUE(envelope.ok());
  auto bundle = bundle_of(*envelope, *key);
  ASSERT_TRUE(bundle.ok()) << bundle.error().to_string();
  const json b = json::parse(*bundle);
  const json e = json::parse(*envelope);
  EXPECT_EQ(b["mediaType"], "application/vnd.dev.sigstore.bundle.v0.3+json");
  EXPECT_EQ(b["dsseEnvelope"]["payload"], e["payload"]);
  EXPECT_EQ(b["dsseEnvelope"]["signatures"][0]["sig"], e["signatures"][0]["sig"]);
  const std::string hint = *base64_decode(b["verificationMaterial"]["publicKey"]["hint"].get<std::string>());
  ASSERT_EQ(hint.size(), 32u);
  static const char* hex = "0123456789abcdef";
  std::string hint_hex;
  for (unsigned char c : hint) hint_hex += std::string{hex[c >> 4], hex[c & 15]};
  EXPECT_EQ(hint_hex, key->fingerprint());
  EXPECT_FALSE(bundle_of("{not json", *key).ok());

  gpuenv::images::Descriptor subject;
  subject.media_type = "application/vnd.oci.image.manifest.v1+json";
  subject.digest = gpuenv::Digest::of("image");
  subject.size = 5;
  const std::string manifest = referrer_manifest(*bundle, subject, k_predicate_type, "2026-12-01T12:00:00Z");
  const json m = json::parse(manifest);
  EXPECT_EQ(m["artifactType"], "application/vnd.dev.sigstore.bundle.v0.3+json");
  EXPECT_EQ(m["config"]["digest"], "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a") << "the OCI empty descriptor";
  EXPECT_EQ(m["config"]["size"], 2);
  EXPECT_EQ(m["layers"][0]["digest"], gpuenv::Digest::of(*bundle).str());
  EXPECT_EQ(m["subject"]["digest"], subject.digest.str());
  EXPECT_EQ(m["annotations"]["dev.sigstore.bundle.predicateType"], std::string(k_predicate_type));
  EXPECT_EQ(gpuenv::images::referrers_fallback_tag(subject.digest), "sha256-" + subject.digest.hex());

  const std::string one = gpuenv::images::referrers_index_with(std::nullopt, manifest);
  const std::string again = gpuenv::images::referrers_index_with(one, manifest);
  EXPECT_EQ(again, one) << "one entry per digest";
  const json i = json::parse(one);
  EXPECT_EQ(i["mediaType"], "application/vnd.oci.image.index.v1+json");
  ASSERT_EQ(i["manifests"].size(), 1u);
  EXPECT_EQ(i["manifests"][0]["artifactType"], "application/vnd.dev.sigstore.bundle.v0.3+json");
  EXPECT_EQ(i["manifests"][0]["annotations"]["dev.sigstore.bundle.content"], "dsse-envelope") << "annotations copied, as the spec asks";
  const std::string other = referrer_manifest(*bundle, subject, k_predicate_type, "2026-12-02T12:00:00Z");
  EXPECT_EQ(json::parse(gpuenv::images::referrers_index_with(one, other))["manifests"].size(), 2u);
  EXPECT_EQ(json::parse(gpuenv::images::referrers_index_with(std::string("not an index"), other))["manifests"].size(), 1u);
}

}  // namespace
