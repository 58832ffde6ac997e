// What an image holds and how it was made (issue 39; docs/build.md "Attestations"), in process against OCI layouts,
// an archive and the real docker-registry on 127.0.0.1: `build --attest sbom,provenance` stores a signed CycloneDX
// SBOM and SLSA provenance beside the image, `verify --sbom/--provenance` counts them, and refuses a statement signed
// by another key, one naming another image and one with a byte changed; `inspect` lists them; two builds of one lock
// give the same documents (the provenance's start and end apart). The published schemas and independent readers
// (cyclonedx-python-lib, spdx-tools, in-toto-attestation, securesystemslib) check real builds' documents in
// tests/marks/attest_oracles.py and the online smoke.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fakes/cli_in_process.hpp"
#include "fakes/docker_registry.hpp"
#include "marks/att_image.hpp"
#include "marks/dsse.hpp"
#include "marks/in_toto.hpp"
#include "marks/store.hpp"

namespace cli_attest_test {

namespace fs = std::filesystem;
using gpuenv::testing::DockerRegistry;
using nlohmann::json;
namespace marks = gpuenv::marks;

const std::string k_attest_empty_lock = std::string(GPUENV_SOURCE_DIR) + "/tests/data/locks/empty.lock";

class CliAttest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { s_registry = new DockerRegistry(DockerRegistry::Setup::plain); }
  static void TearDownTestSuite() {
    delete s_registry;
    s_registry = nullptr;
  }
  void SetUp() override {
    gpuenv::testing::write_file(m_dir / "empty.lock", gpuenv::testing::read_file(k_attest_empty_lock));
    std::string other = gpuenv::testing::read_file(k_attest_empty_lock);
    other.replace(other.find("\"empty\""), 7, "\"other\"");
    gpuenv::testing::write_file(m_dir / "other.lock", other);
    fs::create_directories(m_dir / "home");
    ASSERT_EQ(gpuenv({"key", "generate", "-o", m_dir / "keys"}).code, 0);
    ASSERT_EQ(gpuenv({"key", "generate", "-o", m_dir / "other"}).code, 0);
  }

  gpuenv::testing::CliOutcome gpuenv(const std::vector<std::string>& args, std::optional<std::int64_t> now = std::nullopt,
                                     const std::map<std::string, std::string>& env = {}) {
    std::map<std::string, std::string> all = {{"GPUENV_CACHE_DIR", m_dir / "cache"}, {"HOME", m_dir / "home"}, {"SOURCE_DATE_EPOCH", "1700000000"}};
    for (const auto& [k, v] : env) all[k] = v;
    return gpuenv::testing::run_cli_in_process(args, all, [&](gpuenv::cli::Context& ctx) {
      if (now) ctx.clock = [t = *now] { return t; };
    });
  }

  /// Builds LOCK into m_dir/NAME with --attest KINDS (none when empty); returns build's JSON.
  json build(const std::string& lock, const std::string& name, const std::string& kinds = "sbom,provenance", std::optional<std::int64_t> now = std::nullopt,
             std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"build", m_dir / lock, "-o", m_dir / name, "--json"};
    if (!kinds.empty()) args.insert(args.end(), {"--attest", kinds, "--key", m_dir / "keys/gpuenv.key"});
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = gpuenv(args, now);
    EXPECT_EQ(r.code, 0) << r.err << r.out;
    return json::parse(r.out, nullptr, false);
  }

  gpuenv::testing::CliOutcome verify(const std::string& image, const std::string& key = "keys", std::vector<std::string> kinds = {"--sbom", "--provenance"}) {
    std::vector<std::string> args = {"verify", image, "--key", m_dir / (key + "/gpuenv.pub"), "--plain-http", "--json"};
    args.insert(args.end(), kinds.begin(), kinds.end());
    return gpuenv(args);
  }

  /// The envelopes of the image in the layout DIR, by predicate type (the layer's annotation), read from its files.
  std::map<std::string, std::string> envelopes(const std::string& dir) {
    auto store = marks::open_layout_mark_store(dir, "");
    EXPECT_TRUE(store.ok());
    auto image = (*store)->image_descriptor();
    auto att = (*store)->read_att(image->digest);
    EXPECT_TRUE(att.ok() && att->has_value());
    std::map<std::string, std::string> out;
    if (!att.ok() || !att->has_value()) return out;
    for (const auto& layer : (*att)->layers) out[layer.annotations.at("predicateType")] = *(*store)->read_record(layer, 1 << 24);
    return out;
  }
  static std::string payload_of(const std::string& envelope) { return marks::parse_envelope(envelope, "test")->payload; }

  /// Appends ENVELOPE to the attestation image of the image in the layout DIR, as a writer other than gpuenv would.
  static void append(const std::string& dir, const std::string& envelope, std::string_view type) {
    auto store = marks::open_layout_mark_store(dir, "");
    ASSERT_TRUE(store.ok());
    const auto image = (*store)->image_descriptor()->digest;
    auto existing = (*store)->read_att(image);
    ASSERT_TRUE(existing.ok());
    ASSERT_TRUE((*store)->write_att(image, marks::append_record(*existing, envelope, type), envelope).ok());
  }

  static bool has_reason(const gpuenv::testing::CliOutcome& r, const std::string& part) {
    const json j = json::parse(r.out, nullptr, false);
    if (!j.is_object()) return false;
    for (const auto& rec : j["records"])
      for (const auto& reason : rec["reasons"])
        if (reason.get<std::string>().find(part) != std::string::npos) return true;
    return false;
  }

  static inline DockerRegistry* s_registry = nullptr;
  gpuenv::testing::RegistryTempDir m_dir;
};

TEST_F(CliAttest, ALayoutsSbomAndProvenanceAreSignedStoredVerifiedAndListed) {
  const json b = build("empty.lock", "a");
  ASSERT_EQ(b["attested"].size(), 2u) << b.dump();
  const std::string digest = b["digest"];
  EXPECT_EQ(b["attested"][0]["kind"], "sbom");
  EXPECT_EQ(b["attested"][1]["kind"], "provenance");
  EXPECT_TRUE(fs::exists(m_dir / "a/sbom.cdx.json"));
  EXPECT_TRUE(fs::exists(m_dir / "a/sbom.spdx.json"));

  const auto v = verify(m_dir / "a");
  EXPECT_EQ(v.code, 0) << v.out << v.err;
  const json j = json::parse(v.out);
  EXPECT_EQ(j["schema"], "gpuenv-verify-statements-v1");
  EXPECT_EQ(j["image"], digest);
  ASSERT_EQ(j["records"].size(), 2u);
  for (const auto& r : j["records"]) EXPECT_TRUE(r["counts"].get<bool>()) << r.dump();

  // The SBOM statement's predicate is the CycloneDX file beside the layout; its subject is the image.
  const auto env = envelopes(m_dir / "a");
  const auto sbom = marks::parse_in_toto(payload_of(env.at(std::string(marks::k_cyclonedx_predicate_type))), "test");
  ASSERT_TRUE(sbom.ok());
  EXPECT_EQ(json::parse(sbom->predicate), json::parse(gpuenv::testing::read_file(m_dir / "a/sbom.cdx.json")));
  EXPECT_EQ(sbom->subjects.at(0).digest.str(), digest);
  const auto prov = marks::parse_in_toto(payload_of(env.at(std::string(marks::k_slsa_predicate_type))), "test");
  ASSERT_TRUE(prov.ok());
  EXPECT_EQ(json::parse(prov->predicate)["buildDefinition"]["externalParameters"]["lock"]["digest"]["sha256"],
            gpuenv::Digest::of(gpuenv::testing::read_file(m_dir / "empty.lock")).hex());

  // inspect lists both; verify of marks does not take them for marks.
  const auto listed = gpuenv({"inspect", m_dir / "a", "--json"});
  ASSERT_EQ(listed.code, 0) << listed.err;
  const json marks_listed = json::parse(listed.out)["marks"];
  ASSERT_EQ(marks_listed.size(), 2u);
  EXPECT_NE(marks_listed[0]["summary"].get<std::string>().find("CycloneDX 1.6"), std::string::npos);
  EXPECT_NE(marks_listed[1]["summary"].get<std::string>().find("SLSA v1"), std::string::npos);
  const auto text = gpuenv({"inspect", m_dir / "a"});
  EXPECT_NE(text.out.find("attestation sha256:"), std::string::npos) << text.out;
  const auto mark_verify = gpuenv({"verify", m_dir / "a", "--key", m_dir / "keys/gpuenv.pub", "--gpu", "any", "--driver", "any", "--cc", "any", "--json"});
  EXPECT_EQ(mark_verify.code, 1);
  EXPECT_EQ(json::parse(mark_verify.out)["records"].size(), 0u) << "statements are not marks";

  // Asking for one kind judges that kind only.
  const auto only = verify(m_dir / "a", "keys", {"--provenance"});
  EXPECT_EQ(only.code, 0);
  EXPECT_EQ(json::parse(only.out)["records"].size(), 1u);
}

TEST_F(CliAttest, TwoBuildsOfOneLockGiveTheSameDocumentsApartFromTheProvenancesOwnTimes) {
  const json a = build("empty.lock", "a", "sbom,provenance", 1765000000);
  const json b = build("empty.lock", "b", "sbom,provenance", 1765090000);
  ASSERT_EQ(a["digest"], b["digest"]);
  EXPECT_EQ(gpuenv::testing::read_file(m_dir / "a/sbom.cdx.json"), gpuenv::testing::read_file(m_dir / "b/sbom.cdx.json"));
  const auto ea = envelopes(m_dir / "a"), eb = envelopes(m_dir / "b");
  const std::string cdx(marks::k_cyclonedx_predicate_type), slsa(marks::k_slsa_predicate_type);
  EXPECT_EQ(payload_of(ea.at(cdx)), payload_of(eb.at(cdx))) << "the SBOM statement: the same bytes";
  json pa = json::parse(payload_of(ea.at(slsa))), pb = json::parse(payload_of(eb.at(slsa)));
  EXPECT_EQ(pa["predicate"]["runDetails"]["metadata"]["startedOn"], "2025-12-06T05:46:40Z");
  EXPECT_NE(pa, pb);
  pa["predicate"]["runDetails"].erase("metadata");
  pb["predicate"]["runDetails"].erase("metadata");
  EXPECT_EQ(pa, pb) << "only runDetails.metadata (startedOn, finishedOn) carries the build's own time";
}

TEST_F(CliAttest, ARebuildIntoTheSameLayoutKeepsOneSbomAndAddsItsProvenance) {
  build("empty.lock", "a", "sbom,provenance", 1765000000);
  const json again = build("empty.lock", "a", "sbom,provenance", 1765000100);
  ASSERT_EQ(again["attested"].size(), 2u);
  EXPECT_TRUE(again["attested"][0]["already_there"].get<bool>()) << "the same SBOM statement under the same key: not added again";
  EXPECT_TRUE(again["attested"][0]["record"].is_null());
  EXPECT_FALSE(again["attested"][1]["already_there"].get<bool>()) << "another build, another provenance (as cosign attest appends)";
  const auto v = verify(m_dir / "a");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(json::parse(v.out)["records"].size(), 3u);
  // Another key's signature over the same SBOM is its own record.
  const auto other = gpuenv({"build", m_dir / "empty.lock", "-o", m_dir / "a", "--attest", "sbom", "--key", m_dir / "other/gpuenv.key", "--json"});
  ASSERT_EQ(other.code, 0) << other.err;
  EXPECT_FALSE(json::parse(other.out)["attested"][0]["already_there"].get<bool>());
  EXPECT_EQ(verify(m_dir / "a", "other", {"--sbom"}).code, 0);
}

TEST_F(CliAttest, VerifyRefusesAnotherKeyAnotherImageAndAChangedByte) {
  const json a = build("empty.lock", "a");
  const auto env = envelopes(m_dir / "a");
  const std::string cdx(marks::k_cyclonedx_predicate_type);

  // Signed by another key.
  const auto other_key = verify(m_dir / "a", "other", {"--sbom"});
  EXPECT_EQ(other_key.code, 1) << other_key.out;
  EXPECT_TRUE(has_reason(other_key, "signed by none of the given keys")) << other_key.out;

  // A's SBOM statement copied to another image: it names A, not B.
  build("other.lock", "b", "");
  append(m_dir / "b", env.at(cdx), marks::k_cyclonedx_predicate_type);
  const auto another = verify(m_dir / "b", "keys", {"--sbom"});
  EXPECT_EQ(another.code, 1) << another.out;
  EXPECT_TRUE(has_reason(another, "names another image")) << another.out;
  EXPECT_TRUE(has_reason(another, "the SBOM describes " + a["digest"].get<std::string>())) << another.out;

  // One byte of the signed payload changed (the signature kept), on an image of the same digest with no statement.
  build("empty.lock", "c", "");
  json e = json::parse(env.at(cdx));
  std::string payload = payload_of(env.at(cdx));
  payload[payload.find("CycloneDX")] = 'c';
  e["payload"] = marks::base64_encode(payload);
  append(m_dir / "c", e.dump(), marks::k_cyclonedx_predicate_type);
  const auto changed = verify(m_dir / "c", "keys", {"--sbom"});
  EXPECT_EQ(changed.code, 1) << changed.out;
  EXPECT_TRUE(has_reason(changed, "signed by none of the given keys")) << changed.out;

  // One byte of the stored blob changed: its digest no longer matches.
  const std::string blob = m_dir / ("a/blobs/sha256/" + gpuenv::Digest::of(env.at(cdx)).hex());
  std::string bytes = gpuenv::testing::read_file(blob);
  bytes[bytes.size() / 2] ^= 1;
  fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
  gpuenv::testing::write_file(blob, bytes);
  const auto tampered = verify(m_dir / "a", "keys", {"--sbom"});
  EXPECT_EQ(tampered.code, 1) << tampered.out;
  EXPECT_TRUE(has_reason(tampered, "could not be read")) << tampered.out;

  // No statement at all.
  const auto none = verify(m_dir / "b", "keys", {"--provenance"});
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(json::parse(none.out)["records"].size(), 0u);
  const auto none_text = gpuenv({"verify", m_dir / "b", "--key", m_dir / "keys/gpuenv.pub", "--provenance"});
  EXPECT_NE(none_text.out.find("NOT verified: no provenance statement"), std::string::npos) << none_text.out;
}

TEST_F(CliAttest, ABadAttestListOrAMissingKeyIsRefusedBeforeAnythingIsBuilt) {
  const auto bad = gpuenv({"build", m_dir / "empty.lock", "-o", m_dir / "x", "--attest", "sbom,spdx", "--key", m_dir / "keys/gpuenv.key"});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("build.attest"), std::string::npos) << bad.err;
  const auto no_key = gpuenv({"build", m_dir / "empty.lock", "-o", m_dir / "y", "--attest", "provenance"});
  EXPECT_EQ(no_key.code, 2) << no_key.err;
  EXPECT_NE(no_key.err.find("key.missing"), std::string::npos) << no_key.err;
  EXPECT_FALSE(fs::exists(m_dir / "x"));
  EXPECT_FALSE(fs::exists(m_dir / "y"));
  // GPUENV_MARK_KEY names the key when --key does not.
  const auto from_env = gpuenv({"build", m_dir / "empty.lock", "-o", m_dir / "z", "--attest", "sbom"}, std::nullopt, {{"GPUENV_MARK_KEY", m_dir / "keys/gpuenv.key"}});
  EXPECT_EQ(from_env.code, 0) << from_env.err;
  EXPECT_EQ(verify(m_dir / "z", "keys", {"--sbom"}).code, 0);
}

TEST_F(CliAttest, EachPlatformOfAMultiPlatformImageGetsItsOwnStatements) {
  std::string text = gpuenv::testing::read_file(k_attest_empty_lock);
  text.replace(text.find("packages: []"), 12, "platforms: [\"linux/amd64\", \"linux/arm64\"]\npackages: []");
  gpuenv::testing::write_file(m_dir / "multi.lock", text);
  const json b = build("multi.lock", "multi");
  ASSERT_EQ(b["platforms"].size(), 2u) << b.dump();
  ASSERT_EQ(b["attested"].size(), 4u) << b.dump();
  auto store = marks::open_layout_mark_store(m_dir / "multi", "");
  ASSERT_TRUE(store.ok());
  for (std::size_t i = 0; i < 2; ++i) {
    const auto platform = b["platforms"][i];
    EXPECT_TRUE(fs::exists(m_dir / ("multi/sbom.linux-" + std::string(i == 0 ? "amd64" : "arm64") + ".cdx.json")));
    const auto image = gpuenv::Digest::parse(platform["digest"].get<std::string>());
    ASSERT_TRUE(image.has_value());
    auto att = (*store)->read_att(*image);
    ASSERT_TRUE(att.ok() && att->has_value()) << platform.dump();
    ASSERT_EQ((*att)->layers.size(), 2u);
    for (const auto& layer : (*att)->layers) {
      const auto statement = marks::parse_in_toto(payload_of(*(*store)->read_record(layer, 1 << 24)), "test");
      ASSERT_TRUE(statement.ok());
      EXPECT_TRUE(statement->names(*image)) << "each platform's statements name that platform's manifest";
      if (statement->predicate_type == marks::k_slsa_predicate_type)
        EXPECT_EQ(json::parse(statement->predicate)["buildDefinition"]["externalParameters"]["platform"], platform["platform"]);
    }
  }
  // verify resolves the image as marks do (a layout: linux/amd64), and finds that platform's statements.
  EXPECT_EQ(verify(m_dir / "multi").code, 0);
}

TEST_F(CliAttest, AnArchiveAndARegistryHoldTheStatementsToo) {
  const auto archive = gpuenv({"build", m_dir / "empty.lock", "--format", "oci-archive", "-o", m_dir / "image.tar", "--attest", "sbom,provenance", "--key",
                               m_dir / "keys/gpuenv.key"});
  ASSERT_EQ(archive.code, 0) << archive.err;
  const auto in_archive = verify("oci-archive:" + m_dir / "image.tar");
  EXPECT_EQ(in_archive.code, 0) << in_archive.out << in_archive.err;

  if (!s_registry->skip_reason().empty()) GTEST_SKIP() << s_registry->skip_reason();
  const std::string ref = s_registry->host() + "/attest/empty:1";
  const json pushed = build("empty.lock", "pushed", "sbom,provenance", std::nullopt, {"--push", ref, "--plain-http", "--referrers"});
  ASSERT_EQ(pushed["attested"].size(), 4u) << "two in the layout, two in the registry: " << pushed.dump();
  // --referrers: each statement also an OCI 1.1 referrer (Debian's registry has no referrers API: the fallback tag).
  for (const auto& a : pushed["attested"]) {
    ASSERT_TRUE(a["referrer"].is_string()) << a.dump();
    EXPECT_NE(a["referrer"].get<std::string>().find("sha256-"), std::string::npos) << a.dump();
  }
  const std::string fallback = "sha256-" + pushed["digest"].get<std::string>().substr(7);
  const auto index = gpuenv::testing::run("skopeo inspect --raw --tls-verify=false docker://" + s_registry->host() + "/attest/empty:" + fallback);
  if (index) {
    const json referrers = json::parse(*index);
    ASSERT_EQ(referrers["manifests"].size(), 2u) << "the registry's two (the layout keeps its own fallback index): " << *index;
    std::set<std::string> types;
    for (const auto& m : referrers["manifests"]) types.insert(m["annotations"]["dev.sigstore.bundle.predicateType"].get<std::string>());
    EXPECT_EQ(types, (std::set<std::string>{std::string(marks::k_cyclonedx_predicate_type), std::string(marks::k_slsa_predicate_type)}));
  }
  const auto in_registry = verify("docker://" + ref);
  EXPECT_EQ(in_registry.code, 0) << in_registry.out << in_registry.err;
  const json j = json::parse(in_registry.out);
  EXPECT_NE(j["where"].get<std::string>().find(".att"), std::string::npos);
  // The registry's statements name the image by its repository.
  const auto listed = gpuenv({"inspect", "docker://" + ref, "--plain-http", "--json"});
  EXPECT_EQ(listed.code, 0) << listed.err;
}

}  // namespace cli_attest_test
