// cosign's attestation image: records appended, never replaced, and an image skopeo reads and copies whole.
#include "marks/att_image.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "images/oci/layout.hpp"
#include "marks/dsse.hpp"
#include "marks/statement.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpuenv::marks;

const gpuenv::Digest k_att_image = *gpuenv::Digest::from_hex(std::string(64, 'c'));

TEST(AttImage, RecordsAreAppendedOnceEachInCosignsShape) {
  EXPECT_EQ(attestation_tag(k_att_image), "sha256-" + std::string(64, 'c') + ".att");
  const AttImage one = append_record(std::nullopt, R"({"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[]})", k_predicate_type);
  const AttImage two = append_record(one, R"({"payload":"e30K","payloadType":"application/vnd.in-toto+json","signatures":[]})", k_predicate_type);
  const AttImage same = append_record(two, R"({"payload":"e30K","payloadType":"application/vnd.in-toto+json","signatures":[]})", k_predicate_type);
  ASSERT_EQ(one.layers.size(), 1u);
  ASSERT_EQ(two.layers.size(), 2u);
  EXPECT_EQ(two.layers[0].digest, one.layers[0].digest) << "the older record stays first";
  EXPECT_EQ(same.manifest, two.manifest) << "a record already there is not added twice";
  const auto m = nlohmann::json::parse(two.manifest);
  EXPECT_EQ(m["mediaType"], "application/vnd.oci.image.manifest.v1+json");
  EXPECT_EQ(m["layers"][1]["mediaType"], "application/vnd.dsse.envelope.v1+json");
  EXPECT_EQ(m["layers"][1]["annotations"]["dev.cosignproject.cosign/signature"], "");
  EXPECT_EQ(m["layers"][1]["annotations"]["predicateType"], std::string(k_predicate_type));
  EXPECT_EQ(m["config"]["digest"], gpuenv::Digest::of(two.config).str());
  const auto c = nlohmann::json::parse(two.config);
  EXPECT_EQ(c["rootfs"]["diff_ids"], nlohmann::json::array({one.layers[0].digest.str(), two.layers[1].digest.str()}));
  auto back = parse_att_manifest(two.manifest, two.config, "att");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  ASSERT_EQ(back->layers.size(), 2u);
  EXPECT_EQ(back->layers[1].annotations.at("predicateType"), std::string(k_predicate_type));
  EXPECT_EQ(parse_att_manifest("{\"schemaVersion\":2}", "", "att").error().id, "mark.bad_att");
  EXPECT_EQ(parse_att_manifest(R"({"layers":[{"digest":"sha256:../x","size":1}]})", "", "att").error().id, "mark.bad_att");
}

TEST(AttImage, SkopeoCopiesTheAttestationImageWhole) {
  if (std::system("command -v skopeo >/dev/null") != 0) GTEST_SKIP() << "skopeo missing (scripts/deps.sh installs it)";
  const fs::path dir = fs::temp_directory_path() / ("gpuenv-att-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto key = generate_key();
  ASSERT_TRUE(key.ok());
  MarkPredicate p;
  p.passed = true;
  p.level = "quick";
  p.gpu_product = "NVIDIA-L4";
  p.driver_version = "580.65.06";
  p.cc_mode = "off";
  p.backend = "replay";
  std::optional<AttImage> att;
  std::vector<std::string> envelopes;
  for (const char* gpu : {"NVIDIA-L4", "NVIDIA-H200"}) {
    p.gpu_product = gpu;
    envelopes.push_back(*sign_envelope(render_statement("x", k_att_image, p), k_in_toto_payload_type, *key));
    att = append_record(att, envelopes.back(), k_predicate_type);
  }
  auto layout = gpuenv::images::OciLayout::open((dir / "layout").string());
  ASSERT_TRUE(layout.ok());
  for (const auto& e : envelopes) ASSERT_TRUE(layout->put_bytes(e, std::string(k_envelope_media_type)).ok());
  ASSERT_TRUE(layout->put_bytes(att->config, gpuenv::images::media_type::k_config).ok());
  auto manifest = layout->put_bytes(att->manifest, gpuenv::images::media_type::k_manifest);
  ASSERT_TRUE(manifest.ok());
  manifest->annotations["org.opencontainers.image.ref.name"] = attestation_tag(k_att_image);
  ASSERT_TRUE(layout->write_index({*manifest}).ok());
  const std::string ref = "oci:" + (dir / "layout").string() + ":" + attestation_tag(k_att_image);
  EXPECT_EQ(std::system(("skopeo copy -q " + ref + " dir:" + (dir / "copy").string() + " >/dev/null 2>&1").c_str()), 0);
  std::ifstream in(dir / "copy" / "manifest.json");
  const auto copied = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(copied.is_discarded());
  EXPECT_EQ(copied["layers"].size(), 2u);
  fs::remove_all(dir);
}

}  // namespace
