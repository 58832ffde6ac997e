// Marking images good (docs/mark.md) in process, against the real docker-registry on 127.0.0.1 and an OCI layout:
// `key generate`, `mark` from a saved report, `verify` with every reason a record may not count, `inspect` listing
// the records, `validate --mark` refusing what it must refuse, two marks of one image at once (two processes), a
// garbage collection of the registry, and the stored envelope checked by openssl (and securesystemslib where the
// test script made its virtual environment) over bytes the test builds itself.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/digest.hpp"
#include "base/net/curl_fetcher.hpp"
#include "base/net/http_client.hpp"
#include "cli/context.hpp"
#include "fakes/cli_in_process.hpp"
#include "fakes/docker_registry.hpp"
#include "images/registry/registry_client.hpp"
#include "marks/att_image.hpp"
#include "marks/dsse.hpp"
#include "marks/statement.hpp"

#ifndef GPUENV_TEST_VENV
#define GPUENV_TEST_VENV ""
#endif

namespace {

namespace fs = std::filesystem;
using gpuenv::testing::DockerRegistry;
using nlohmann::json;

const std::string k_data = std::string(GPUENV_SOURCE_DIR) + "/tests/data/validate/";

/// A lock with no packages and no Python: it builds, offline, into an image holding only gpuenv's metadata layer.
const std::string k_empty_lock_path = std::string(GPUENV_SOURCE_DIR) + "/tests/data/locks/empty.lock";

using CliResult = gpuenv::testing::CliOutcome;

class CliMark : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { s_registry = new DockerRegistry(DockerRegistry::Setup::plain); }
  static void TearDownTestSuite() {
    delete s_registry;
    s_registry = nullptr;
  }
  void SetUp() override {
    gpuenv::testing::write_file(m_dir / "empty.lock", gpuenv::testing::read_file(k_empty_lock_path));
    fs::create_directories(m_dir / "home");
    ASSERT_EQ(gpuenv({"key", "generate", "-o", m_dir / "keys"}).code, 0);
    ASSERT_EQ(gpuenv({"key", "generate", "-o", m_dir / "other"}).code, 0);
  }

  /// gpuenv ARGS in process, with the test's cache and HOME; NOW (seconds) as the clock when given.
  CliResult gpuenv(const std::vector<std::string>& args, std::optional<std::int64_t> now = std::nullopt, const std::map<std::string, std::string>& env = {}) {
    std::map<std::string, std::string> all = {{"GPUENV_CACHE_DIR", m_dir / "cache"}, {"HOME", m_dir / "home"}, {"SOURCE_DATE_EPOCH", "1700000000"}};
    for (const auto& [k, v] : env) all[k] = v;
    return gpuenv::testing::run_cli_in_process(args, all, [&](gpuenv::cli::Context& ctx) {
      if (now) ctx.clock = [t = *now] { return t; };
    });
  }

  /// Builds the empty lock into m_dir/NAME and returns its manifest digest; with ANOTHER, a lock of another spec
  /// name (its metadata layer differs, so the image does).
  std::string build_layout(const std::string& name, bool another = false) {
    std::string lock = m_dir / "empty.lock";
    if (another) {
      std::string text = gpuenv::testing::read_file(k_empty_lock_path);
      text.replace(text.find("\"empty\""), 7, "\"other\"");
      lock = m_dir / "other.lock";
      gpuenv::testing::write_file(lock, text);
    }
    const CliResult r = gpuenv({"build", lock, "-o", m_dir / name, "--tag", "1", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return json::parse(r.out, nullptr, false).value("digest", "");
  }

  /// Builds and pushes the empty image to the registry as REPO:1; returns the reference.
  std::string pushed_image(const std::string& repo) {
    const std::string ref = s_registry->host() + "/" + repo + ":1";
    const CliResult r = gpuenv({"build", m_dir / "empty.lock", "-o", m_dir / "img", "--push", ref, "--plain-http", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return ref;
  }

  /// A passing report of the image in LAYOUT, validated on the recording REPLAY (quick level, checks that need
  /// nothing inside the image), saved as m_dir/NAME; EDIT changes the JSON afterwards (another GPU, level, ...).
  std::string report(const std::string& layout, const std::string& replay, const std::string& name,
                     const std::function<void(json&)>& edit = nullptr) {
    const CliResult r = gpuenv({"validate", "--backend", "replay:" + k_data + replay, "--level", "quick", "--image", m_dir / layout, "--check",
                                "driver_loaded", "--check", "device_nodes", "--json"});
    EXPECT_EQ(r.code, 0) << r.err << r.out;
    std::string text = r.out;
    if (edit) {
      json j = json::parse(text);
      edit(j);
      text = j.dump(2) + "\n";
    }
    gpuenv::testing::write_file(m_dir / name, text);
    return m_dir / name;
  }

  CliResult mark(const std::string& image, const std::string& report_path, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"mark", image, "--report", report_path, "--key", m_dir / "keys/gpuenv.key", "--allow-replay", "--plain-http"};
    args.insert(args.end(), extra.begin(), extra.end());
    return gpuenv(args);
  }

  /// verify IMAGE as a 1x H200 with driver 550.90.07 and CC off, replay marks allowed, then EXTRA (later flags win).
  CliResult verify(const std::string& image, std::vector<std::string> extra = {}, std::optional<std::int64_t> now = std::nullopt) {
    std::vector<std::string> args = {"verify", image, "--key", m_dir / "keys/gpuenv.pub", "--gpu", "NVIDIA H200", "--driver", "550.90.07", "--cc", "off",
                                     "--plain-http", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return gpuenv(args, now);
  }

  /// The reasons verify --json gave for record I.
  static std::vector<std::string> reasons(const CliResult& r, std::size_t i) {
    const json j = json::parse(r.out, nullptr, false);
    if (!j.is_object() || !j.contains("records") || j["records"].size() <= i) return {"(no record " + std::to_string(i) + " in: " + r.out + r.err + ")"};
    return j["records"][i]["reasons"].get<std::vector<std::string>>();
  }
  static bool has_reason(const CliResult& r, std::size_t i, const std::string& part) {
    for (const auto& s : reasons(r, i))
      if (s.find(part) != std::string::npos) return true;
    return false;
  }

  /// What `openssl dgst -sha256 -verify` says of SIG (base64 DER) over the pre-authentication encoding of
  /// PAYLOAD, built here by hand from the DSSE spec ("DSSEv1" SP len(type) SP type SP len(body) SP body), under
  /// the test's public key.
  std::string openssl_verify(const std::string& payload, const json& sig) {
    gpuenv::testing::write_file(m_dir / "pae.bin", "DSSEv1 28 application/vnd.in-toto+json " + std::to_string(payload.size()) + " " + payload);
    gpuenv::testing::write_file(m_dir / "sig.der", gpuenv::marks::base64_decode(sig.get<std::string>()).value_or(""));
    return gpuenv::testing::run("openssl dgst -sha256 -verify " + (m_dir / "keys/gpuenv.pub") + " -signature " + (m_dir / "sig.der") + " " +
                                (m_dir / "pae.bin") + " 2>&1")
        .value_or("(openssl failed)");
  }

  /// The attestation image of the image REF in the registry, read with the registry client: its manifest and config
  /// (to append to), and the payload of its first record (to forge others from).
  struct Attestations {
    gpuenv::images::ImageReference ref;
    std::string tag;
    std::optional<gpuenv::marks::AttImage> att;
    std::string first_payload;
  };
  Attestations attestations(const std::string& ref, gpuenv::images::RegistryClient& client) {
    Attestations a{gpuenv::images::parse_image_reference(ref).value(), "", std::nullopt, ""};
    const std::string digest = json::parse(verify("docker://" + ref, {"--allow-replay"}).out)["image"];
    a.tag = "sha256-" + digest.substr(7) + ".att";
    auto manifest = client.get_manifest(a.ref, a.tag);
    EXPECT_TRUE(manifest.ok() && manifest->has_value());
    const json m = json::parse((*manifest)->bytes);
    const auto envelope_d = gpuenv::images::parse_descriptor(m["layers"][0], "att");
    const json env = json::parse(*client.get_blob(a.ref, *envelope_d, 1 << 20));
    a.first_payload = *gpuenv::marks::base64_decode(env["payload"].get<std::string>());
    const auto config_d = gpuenv::images::parse_descriptor(m["config"], "att");
    a.att = gpuenv::marks::parse_att_manifest((*manifest)->bytes, *client.get_blob(a.ref, *config_d, 1 << 20), "att").value();
    return a;
  }
  /// Appends the envelopes ENVELOPES to A's attestation image as records and stores it back.
  static void append_records(Attestations& a, gpuenv::images::RegistryClient& client, const std::vector<std::string>& envelopes) {
    for (const std::string& bytes : envelopes) {
      a.att = gpuenv::marks::append_record(a.att, bytes, gpuenv::marks::k_predicate_type);
      ASSERT_TRUE(client.put_blob(a.ref, gpuenv::images::BlobSource::of(bytes)).ok());
    }
    ASSERT_TRUE(client.put_blob(a.ref, gpuenv::images::BlobSource::of(a.att->config)).ok());
    ASSERT_TRUE(client.put_manifest(a.ref, a.tag, a.att->manifest, "application/vnd.oci.image.manifest.v1+json").ok());
  }

  void skip_without_registry() {
    if (!s_registry->skip_reason().empty()) GTEST_SKIP() << s_registry->skip_reason();
  }

  static inline DockerRegistry* s_registry = nullptr;
  gpuenv::testing::RegistryTempDir m_dir;
};

// ---- a layout ----

// Issue 34 (time from the clock): a report's started_at is the injected clock's, not the wall clock's, so the
// canonical report bytes a mark's digest names are reproducible under a fixed clock.
TEST_F(CliMark, AReportsStartIsTheInjectedClocksTime) {
  const CliResult r = gpuenv({"validate", "--backend", "replay:" + k_data + "h200x1.yaml", "--level", "quick", "--check", "driver_loaded", "--json"},
                             1796126400);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["started_at"], "2026-12-01T12:00:00Z");
}

TEST_F(CliMark, ALayoutIsMarkedVerifiedAndListedAndStillRunsAsOneImage) {
  const std::string digest = build_layout("img");
  const std::string rep = report("img", "h200x1.yaml", "report.json");
  const CliResult m = mark(m_dir / "img", rep, {"--json"});
  ASSERT_EQ(m.code, 0) << m.err;
  const json mj = json::parse(m.out);
  EXPECT_EQ(mj["image"], digest);
  EXPECT_EQ(mj["records"], 1);
  EXPECT_EQ(mj["predicate"]["gpu"]["product"], "NVIDIA-H200");
  EXPECT_EQ(mj["predicate"]["backend"], "replay");

  const CliResult v = verify(m_dir / "img", {"--allow-replay"});
  EXPECT_EQ(v.code, 0) << v.out << v.err;
  EXPECT_EQ(json::parse(v.out)["ok"], true);

  // The image is still the layout's one image for the readers that take a layout without a ref.
  const CliResult i = gpuenv({"inspect", m_dir / "img", "--json"});
  ASSERT_EQ(i.code, 0) << i.err;
  const json ij = json::parse(i.out);
  EXPECT_EQ(ij["digest"], digest);
  ASSERT_EQ(ij["marks"].size(), 1u) << i.out;
  EXPECT_EQ(ij["marks"][0]["gpu"], "NVIDIA-H200");
  EXPECT_EQ(ij["marks"][0]["subject"], digest);

  // A rebuild of the same lock keeps the image's marks; skopeo copies the attestation image out of the layout.
  ASSERT_EQ(gpuenv({"build", m_dir / "empty.lock", "-o", m_dir / "img", "--tag", "1"}).code, 0);
  EXPECT_EQ(verify(m_dir / "img", {"--allow-replay"}).code, 0) << "a rebuild lost the marks";
  if (gpuenv::testing::have("skopeo")) {
    const std::string tag = "sha256-" + digest.substr(7) + ".att";
    const auto out = gpuenv::testing::run("skopeo inspect --raw oci:" + (m_dir / "img") + ":" + tag + " 2>&1");
    ASSERT_TRUE(out.has_value()) << "skopeo could not read the attestation image";
    EXPECT_EQ(json::parse(*out)["layers"][0]["mediaType"], "application/vnd.dsse.envelope.v1+json");
  }
}

TEST_F(CliMark, AnArchiveTakesMarksInsideItAndStaysAnImageSkopeoReads) {
  const std::string digest = build_layout("img");
  const std::string rep = report("img", "h200x1.yaml", "report.json");
  for (const std::string format : {"oci-archive", "docker-archive"}) {
    const std::string file = m_dir / ("img-" + format + ".tar");
    CliResult r = gpuenv({"build", m_dir / "empty.lock", "--format", format, "-o", file, "--tag", "1", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_EQ(json::parse(r.out)["digest"], digest) << "the same lock, the same image";
    r = mark(file, rep, {"--json"});
    ASSERT_EQ(r.code, 0) << format << ": " << r.err;
    EXPECT_EQ(json::parse(r.out)["records"], 1);
    ASSERT_EQ(mark(format + ":" + file, report("img", "l4x1.yaml", "l4.json")).code, 0) << format;
    const CliResult v = verify(file, {"--allow-replay"});
    EXPECT_EQ(v.code, 0) << format << ": " << v.out << v.err;
    EXPECT_EQ(json::parse(v.out)["records"].size(), 2u) << v.out;
    const CliResult i = gpuenv({"inspect", file, "--json"});
    ASSERT_EQ(i.code, 0) << i.err;
    EXPECT_EQ(json::parse(i.out)["digest"], digest);
    EXPECT_EQ(json::parse(i.out)["marks"].size(), 2u) << i.out;
    if (gpuenv::testing::have("skopeo")) {
      const std::string tag = "sha256-" + digest.substr(7) + ".att";
      // Beside the records the image needs its name for skopeo, as in a marked layout (docs/mark.md).
      const std::string transport = format == "oci-archive" ? "oci-archive:" + file + ":1" : "docker-archive:" + file;
      EXPECT_TRUE(gpuenv::testing::run("skopeo inspect --raw " + transport + " >/dev/null 2>&1").has_value()) << format << ": skopeo no longer reads the image";
      if (format == "oci-archive") {
        const auto att = gpuenv::testing::run("skopeo inspect --raw oci-archive:" + file + ":" + tag + " 2>&1");
        ASSERT_TRUE(att.has_value()) << "skopeo cannot read the attestation image in the archive";
        EXPECT_EQ(json::parse(*att)["layers"].size(), 2u) << *att;
      }
    }
  }
  // A tar that is no image is refused as one.
  gpuenv::testing::write_file(m_dir / "junk.tar", std::string(1024, '\0'));
  EXPECT_EQ(mark(m_dir / "junk.tar", rep).code, 2);
}

TEST_F(CliMark, MarkRefusesAFailedReportAnotherImagesReportAndAReplayReportWithoutBeingAsked) {
  const std::string first = build_layout("img");
  ASSERT_NE(build_layout("img2", true), first);
  const std::string rep = report("img", "h200x1.yaml", "report.json");
  CliResult r = gpuenv({"mark", m_dir / "img", "--report", rep, "--key", m_dir / "keys/gpuenv.key"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("replay backend"), std::string::npos) << r.err;
  r = mark(m_dir / "img2", rep);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the report is for image"), std::string::npos) << r.err;
  const std::string failed = report("img", "h200x1.yaml", "failed.json", [](json& j) {
    j["status"] = "fail";
    j["exit_code"] = 1;
  });
  r = mark(m_dir / "img", failed);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("did not pass"), std::string::npos) << r.err;
  gpuenv::testing::write_file(m_dir / "junk.json", "{\"schema\": \"something-else\"}");
  r = mark(m_dir / "img", m_dir / "junk.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("schema"), std::string::npos) << r.err;
  // No key: a usage error that says where a key comes from; a key others may read is refused.
  r = gpuenv({"mark", m_dir / "img", "--report", rep, "--allow-replay"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("GPUENV_MARK_KEY"), std::string::npos) << r.err;
  fs::permissions(m_dir / "keys/gpuenv.key", fs::perms::others_read, fs::perm_options::add);
  r = mark(m_dir / "img", rep);
  EXPECT_EQ(r.code, 2) << r.err;
  fs::permissions(m_dir / "keys/gpuenv.key", fs::perms::others_read, fs::perm_options::remove);
  // The key from the variable naming its file.
  r = gpuenv({"mark", m_dir / "img", "--report", rep, "--allow-replay"}, std::nullopt, {{"GPUENV_MARK_KEY", m_dir / "keys/gpuenv.key"}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("PRIVATE KEY"), std::string::npos);
}

TEST_F(CliMark, ValidateMarkRefusesTheReplayBackendAndAFailedRun) {
  build_layout("img");
  CliResult r = gpuenv({"validate", "--backend", "replay:" + k_data + "h200x1.yaml", "--level", "quick", "--image", m_dir / "img", "--check", "driver_loaded",
                        "--mark", "--key", m_dir / "keys/gpuenv.key"});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("replay backend"), std::string::npos) << r.err;
  r = gpuenv({"validate", "--backend", "replay:" + k_data + "faults/driver_old.yaml", "--level", "quick", "--image", m_dir / "img", "--mark", "--key",
              m_dir / "keys/gpuenv.key"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("not marked"), std::string::npos) << r.err;
  r = gpuenv({"validate", "--backend", "replay:" + k_data + "h200x1.yaml", "--mark", "--key", m_dir / "keys/gpuenv.key"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--image"), std::string::npos) << r.err;
  EXPECT_EQ(gpuenv({"verify", m_dir / "img", "--key", m_dir / "keys/gpuenv.pub", "--gpu", "NVIDIA H200", "--driver", "550.90.07", "--cc", "off"}).code, 1)
      << "nothing was marked";
  // On a host without an NVIDIA GPU, auto cannot look: exit 4, naming what to give instead.
  r = gpuenv({"verify", m_dir / "img", "--key", m_dir / "keys/gpuenv.pub"}, std::nullopt, {{"GPUENV_GPUS", "none"}, {"GPUENV_DRIVER", "550.90.07"}});
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_NE(r.err.find("--gpu"), std::string::npos) << r.err;
}

// ---- a registry ----

TEST_F(CliMark, InTheRegistryTwoGpuModelsAccumulateAndVerifyPicksTheOneForThisHost) {
  skip_without_registry();
  const std::string ref = pushed_image("ml/two");
  const std::string h200 = report("img", "h200x1.yaml", "h200.json");
  const std::string l4 = report("img", "l4x1.yaml", "l4.json");
  ASSERT_EQ(mark("docker://" + ref, h200).code, 0);
  const CliResult second = mark("docker://" + ref, l4, {"--json"});
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(json::parse(second.out)["records"], 2);

  CliResult v = verify("docker://" + ref, {"--allow-replay"});
  ASSERT_EQ(v.code, 0) << v.out << v.err;
  json j = json::parse(v.out);
  ASSERT_EQ(j["records"].size(), 2u);
  EXPECT_EQ(j["records"][0]["counts"], true);
  EXPECT_EQ(j["records"][1]["counts"], false);
  EXPECT_TRUE(has_reason(v, 1, "validated on NVIDIA-L4, not NVIDIA-H200")) << v.out;

  const std::string l4_driver = json::parse(gpuenv::testing::read_file(l4))["driver"]["version"];
  v = verify("docker://" + ref, {"--allow-replay", "--gpu", "NVIDIA L4", "--driver", l4_driver});
  ASSERT_EQ(v.code, 0) << v.out;
  j = json::parse(v.out);
  EXPECT_EQ(j["records"][0]["counts"], false);
  EXPECT_EQ(j["records"][1]["counts"], true);

  // Issue 32: the spec's own model name is mapped to NVML's (L4 is one product, NVIDIA L4) ...
  v = verify("docker://" + ref, {"--allow-replay", "--gpu", "L4", "--driver", l4_driver});
  ASSERT_EQ(v.code, 0) << v.out << v.err;
  EXPECT_EQ(json::parse(v.out)["records"][1]["counts"], true);
  // ... and one that is several products is refused with the candidates, before any record is judged.
  v = verify("docker://" + ref, {"--allow-replay", "--gpu", "H200"});
  EXPECT_EQ(v.code, 2) << v.out << v.err;
  EXPECT_NE(v.err.find("verify.ambiguous_gpu"), std::string::npos) << v.err;
  EXPECT_NE(v.err.find("'NVIDIA H200', 'NVIDIA H200 NVL'"), std::string::npos) << v.err;
  // The usage error comes before the host is asked (this machine has no GPU: --driver auto alone would be exit 4).
  v = verify("docker://" + ref, {"--allow-replay", "--gpu", "H200", "--driver", "auto"});
  EXPECT_EQ(v.code, 2) << v.out << v.err;
  EXPECT_NE(v.err.find("verify.ambiguous_gpu"), std::string::npos) << v.err;
  v = verify("docker://" + ref, {"--allow-replay", "--gpu", "H200 NVL"});  // the NVL alone: not what was validated
  EXPECT_EQ(v.code, 1) << v.out << v.err;
  EXPECT_TRUE(has_reason(v, 0, "validated on NVIDIA-H200, not NVIDIA-H200-NVL")) << v.out;

  v = verify("docker://" + ref, {"--allow-replay", "--gpu", "NVIDIA H100 80GB HBM3"});
  EXPECT_EQ(v.code, 1);
  // The text names every record and why it does not count.
  v = gpuenv({"verify", "docker://" + ref, "--key", m_dir / "keys/gpuenv.pub", "--gpu", "NVIDIA H100 80GB HBM3", "--driver", "550.90.07", "--cc", "off",
              "--plain-http"});
  EXPECT_EQ(v.code, 1);
  EXPECT_NE(v.out.find("NOT verified: 0 of 2 records"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("made from recorded GPU answers"), std::string::npos) << v.out;

  const CliResult i = gpuenv({"inspect", "docker://" + ref, "--plain-http", "--json"});
  ASSERT_EQ(i.code, 0) << i.err;
  EXPECT_EQ(json::parse(i.out)["marks"].size(), 2u) << i.out;
}

TEST_F(CliMark, EachKindOfBadRecordIsNamedWithItsOwnReason) {
  skip_without_registry();
  const std::string ref = pushed_image("ml/bad");
  const std::string rep = report("img", "h200x1.yaml", "report.json");
  ASSERT_EQ(mark("docker://" + ref, rep).code, 0);
  const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();

  CliResult v = verify("docker://" + ref, {"--allow-replay"});
  ASSERT_EQ(v.code, 0) << v.out << v.err;
  EXPECT_TRUE(has_reason(verify("docker://" + ref), 0, "recorded GPU answers")) << "replay-made";
  {
    // Only another key given: the signature is not theirs.
    const CliResult other = gpuenv({"verify", "docker://" + ref, "--key", m_dir / "other/gpuenv.pub", "--gpu", "NVIDIA H200", "--driver", "550.90.07",
                                    "--cc", "off", "--allow-replay", "--plain-http", "--json"});
    EXPECT_EQ(other.code, 1);
    EXPECT_TRUE(has_reason(other, 0, "no given key verifies its signature")) << other.out;
  }
  EXPECT_TRUE(has_reason(verify("docker://" + ref, {"--allow-replay"}, now + 31 * 86400), 0, "expired")) << "past notAfter";
  EXPECT_TRUE(has_reason(verify("docker://" + ref, {"--allow-replay", "--max-age", "1s"}, now + 3600), 0, "more than 1 s ago")) << "max age";
  EXPECT_TRUE(has_reason(verify("docker://" + ref, {"--allow-replay", "--gpu", "NVIDIA L4"}), 0, "not NVIDIA-L4")) << "wrong GPU model";
  EXPECT_TRUE(has_reason(verify("docker://" + ref, {"--allow-replay", "--level", "long"}), 0, "below long")) << "lower level";
  EXPECT_TRUE(has_reason(verify("docker://" + ref, {"--allow-replay", "--driver", "550.54.15"}), 0, "does not cover 550.54.15")) << "older driver";
  EXPECT_TRUE(has_reason(verify("docker://" + ref, {"--allow-replay", "--driver", "555.42.02"}), 0, "does not cover 555.42.02")) << "another branch";
  EXPECT_EQ(verify("docker://" + ref, {"--allow-replay", "--driver", "550.127.05"}).code, 0) << "same branch, newer";
  EXPECT_TRUE(has_reason(verify("docker://" + ref, {"--allow-replay", "--cc", "on"}), 0, "not on")) << "CC mode";

  // Tampered records, written into the attestation image with the registry client: a payload byte changed, a
  // record naming another image, malformed envelope JSON, and a layer that is no envelope at all.
  auto http = gpuenv::make_curl_http_client({});
  gpuenv::images::RegistryOptions ro;
  ro.plain_http = true;
  gpuenv::images::RegistryClient client(*http, ro);
  const auto parsed = gpuenv::images::parse_image_reference(ref);
  ASSERT_TRUE(parsed.ok());
  const std::string digest = json::parse(verify("docker://" + ref, {"--allow-replay"}).out)["image"];
  const std::string tag = "sha256-" + digest.substr(7) + ".att";
  auto att_manifest = client.get_manifest(*parsed, tag);
  ASSERT_TRUE(att_manifest.ok() && att_manifest->has_value());
  const json m = json::parse((*att_manifest)->bytes);
  const auto envelope_d = gpuenv::images::parse_descriptor(m["layers"][0], "att");
  ASSERT_TRUE(envelope_d.ok());
  const auto envelope = client.get_blob(*parsed, *envelope_d, 1 << 20);
  ASSERT_TRUE(envelope.ok());
  json env = json::parse(*envelope);
  std::string payload = *gpuenv::marks::base64_decode(env["payload"].get<std::string>());
  const std::string original_payload = payload;
  payload[payload.find("NVIDIA-H200") + 7] = 'X';  // NVIDIA-X200
  env["payload"] = gpuenv::marks::base64_encode(payload);
  const std::string changed = env.dump();
  json other_image = json::parse(original_payload);
  other_image["subject"][0]["digest"]["sha256"] = std::string(64, 'e');
  const std::string foreign = gpuenv::marks::sign_envelope(other_image.dump(), gpuenv::marks::k_in_toto_payload_type,
                                                           *gpuenv::marks::read_private_key(m_dir / "keys/gpuenv.key"))
                                  .value();
  std::optional<gpuenv::marks::AttImage> att;
  const auto config_d = gpuenv::images::parse_descriptor(m["config"], "att");
  att = gpuenv::marks::parse_att_manifest((*att_manifest)->bytes, *client.get_blob(*parsed, *config_d, 1 << 20), "att").value();
  for (const std::string& bytes : {changed, foreign, std::string("{\"payload\": not json")}) {
    att = gpuenv::marks::append_record(att, bytes, gpuenv::marks::k_predicate_type);
    ASSERT_TRUE(client.put_blob(*parsed, gpuenv::images::BlobSource::of(bytes)).ok());
  }
  gpuenv::images::Descriptor not_envelope;
  const std::string tarball = "not an envelope";
  not_envelope.media_type = "application/vnd.oci.image.layer.v1.tar";
  not_envelope.digest = gpuenv::Digest::of(tarball);
  not_envelope.size = tarball.size();
  ASSERT_TRUE(client.put_blob(*parsed, gpuenv::images::BlobSource::of(tarball)).ok());
  json manifest = json::parse(att->manifest);
  manifest["layers"].push_back(gpuenv::images::descriptor_object(not_envelope));
  json config = json::parse(att->config);
  config["rootfs"]["diff_ids"].push_back(not_envelope.digest.str());
  const std::string config_bytes = config.dump();
  ASSERT_TRUE(client.put_blob(*parsed, gpuenv::images::BlobSource::of(config_bytes)).ok());
  manifest["config"]["digest"] = gpuenv::Digest::of(config.dump()).str();
  manifest["config"]["size"] = config.dump().size();
  ASSERT_TRUE(client.put_manifest(*parsed, tag, manifest.dump(), "application/vnd.oci.image.manifest.v1+json").ok());

  v = verify("docker://" + ref, {"--allow-replay"});
  EXPECT_EQ(v.code, 0) << "the good record still counts: " << v.out;
  EXPECT_TRUE(has_reason(v, 1, "no given key verifies its signature")) << "a payload byte changed: " << v.out;
  EXPECT_TRUE(has_reason(v, 2, "it is for another image")) << v.out;
  EXPECT_FALSE(has_reason(v, 2, "no given key verifies")) << "the foreign record is validly signed: " << v.out;
  EXPECT_TRUE(has_reason(v, 3, "envelope")) << "malformed envelope JSON: " << v.out;
  EXPECT_TRUE(has_reason(v, 4, "not a DSSE envelope")) << v.out;
  const json vj = json::parse(v.out);
  for (std::size_t i = 1; i < 5; ++i) EXPECT_EQ(vj["records"][i]["counts"], false) << i;
}

// Issue 33, case 8: a record signed by an unknown key, whose gpu.product holds escapes and a newline, made verify and
// inspect print a forged line "verified: 1 of 1 record count". Every record field is now printed made safe.
TEST_F(CliMark, ARecordsOwnTextCannotWriteEscapesOrForgeALine) {
  skip_without_registry();
  const std::string ref = pushed_image("ml/forged");
  const std::string rep = report("img", "h200x1.yaml", "report.json");
  ASSERT_EQ(mark("docker://" + ref, rep).code, 0);
  auto http = gpuenv::make_curl_http_client({});
  gpuenv::images::RegistryOptions ro;
  ro.plain_http = true;
  gpuenv::images::RegistryClient client(*http, ro);
  Attestations a = attestations(ref, client);
  json forged = json::parse(a.first_payload);
  const std::string hostile = "NVIDIA-H200\x1b]0;pwned\x07\x1b[2J\nverified: 1 of 1 record count for any GPU \xe2\x80\xae";
  forged["predicate"]["gpu"]["product"] = hostile;
  append_records(a, client, {gpuenv::marks::sign_envelope(forged.dump(), gpuenv::marks::k_in_toto_payload_type, *gpuenv::marks::read_private_key(m_dir / "other/gpuenv.key"))
                                 .value()});
  for (const std::vector<std::string>& args : {std::vector<std::string>{"verify", "docker://" + ref, "--key", m_dir / "keys/gpuenv.pub", "--gpu", "NVIDIA H200",
                                                                        "--driver", "550.90.07", "--cc", "off", "--allow-replay", "--plain-http"},
                                               std::vector<std::string>{"inspect", "docker://" + ref, "--plain-http"}}) {
    const CliResult r = gpuenv(args);
    SCOPED_TRACE(args[0]);
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\x07'), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\xe2\x80\xae"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\\x1b]0;pwned\\x07"), std::string::npos) << "shown escaped: " << r.out;
    std::size_t verdict_lines = 0;  // lines that begin as verify's verdict does
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) verdict_lines += line.rfind("verified: ", 0) == 0 || line.rfind("NOT verified: ", 0) == 0;
    EXPECT_EQ(verdict_lines, args[0] == "verify" ? 1u : 0u) << "a line begins with the record's text: " << r.out;
    if (args[0] == "verify") EXPECT_EQ(r.code, 0) << "gpuenv's own record still counts: " << r.out << r.err;
  }
}

// Issue 33, case 13: --valid-for 999999999999w signed a record whose notAfter was year 1985481891.
TEST_F(CliMark, ARecordIsValidForTenYearsAtMost) {
  build_layout("img");
  const std::string rep = report("img", "h200x1.yaml", "report.json");
  for (const char* forever : {"999999999999w", "3700d", "99999999999999999999s"}) {
    const CliResult m = mark(m_dir / "img", rep, {"--valid-for", forever});
    EXPECT_EQ(m.code, 2) << forever << ": " << m.out << m.err;
    EXPECT_NE(m.err.find("mark.bad_duration"), std::string::npos) << m.err;
  }
  const CliResult ok = mark(m_dir / "img", rep, {"--valid-for", "520w", "--json"});
  ASSERT_EQ(ok.code, 0) << ok.err;
  const std::string until = json::parse(ok.out)["predicate"]["notAfter"];
  EXPECT_EQ(until.size(), 20u) << until;
  EXPECT_LT(until, "2100") << until;
}

TEST_F(CliMark, TwoMarksOfOneImageAtOnceBothLandAndTheRecordsSurviveGarbageCollection) {
  skip_without_registry();
  const std::string ref = pushed_image("ml/race");
  const std::string h200 = report("img", "h200x1.yaml", "h200.json");
  const std::string l4 = report("img", "l4x1.yaml", "l4.json");
  // Two processes of the real binary, started together.
  auto command = [&](const std::string& rep, const std::string& log) {
    return "GPUENV_CACHE_DIR=" + (m_dir / "cache") + " " + std::string(GPUENV_BINARY) + " mark docker://" + ref + " --report " + rep + " --key " +
           (m_dir / "keys/gpuenv.key") + " --allow-replay --plain-http >" + log + " 2>&1";
  };
  const auto both = gpuenv::testing::run("(" + command(h200, m_dir / "a.log") + "; echo $? > " + (m_dir / "a.rc") + ") & (" + command(l4, m_dir / "b.log") +
                                         "; echo $? > " + (m_dir / "b.rc") + ") & wait");
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(gpuenv::testing::read_file(m_dir / "a.rc"), "0\n") << gpuenv::testing::read_file(m_dir / "a.log");
  EXPECT_EQ(gpuenv::testing::read_file(m_dir / "b.rc"), "0\n") << gpuenv::testing::read_file(m_dir / "b.log");
  CliResult v = verify("docker://" + ref, {"--allow-replay", "--gpu", "any", "--driver", "any"});
  ASSERT_EQ(v.code, 0) << v.out << v.err;
  EXPECT_EQ(json::parse(v.out)["records"].size(), 2u) << "a mark was lost: " << v.out;

  const auto gc = gpuenv::testing::run("docker-registry garbage-collect --delete-untagged " + s_registry->config() + " 2>&1");
  ASSERT_TRUE(gc.has_value()) << "garbage-collect failed";
  v = verify("docker://" + ref, {"--allow-replay", "--gpu", "any", "--driver", "any"});
  EXPECT_EQ(v.code, 0) << v.out << v.err;
  EXPECT_EQ(json::parse(v.out)["records"].size(), 2u) << "garbage collection took a record: " << v.out;
}

TEST_F(CliMark, TheStoredEnvelopeVerifiesWithOpensslAndSecuresystemslib) {
  skip_without_registry();
  const std::string ref = pushed_image("ml/check");
  ASSERT_EQ(mark("docker://" + ref, report("img", "h200x1.yaml", "report.json")).code, 0);
  // The attestation image copied out of the registry by skopeo, read back by the test.
  if (!gpuenv::testing::have("skopeo")) GTEST_SKIP() << "skopeo missing (scripts/deps.sh installs it)";
  const std::string digest = json::parse(verify("docker://" + ref, {"--allow-replay"}).out)["image"];
  const std::string tag = "sha256-" + digest.substr(7) + ".att";
  ASSERT_TRUE(gpuenv::testing::run("skopeo copy --src-tls-verify=false docker://" + s_registry->host() + "/ml/check:" + tag + " oci:" + (m_dir / "att") +
                                   ":att >/dev/null 2>&1"))
      << "skopeo could not copy the attestation image";
  const json index = json::parse(gpuenv::testing::read_file(m_dir / "att/index.json"));
  const json m = json::parse(gpuenv::testing::read_file(m_dir / ("att/blobs/sha256/" + index["manifests"][0]["digest"].get<std::string>().substr(7))));
  EXPECT_EQ(m["layers"][0]["mediaType"], "application/vnd.dsse.envelope.v1+json");
  EXPECT_EQ(m["layers"][0]["annotations"]["predicateType"], "https://gpuenv.dev/attestation/validation/v1");
  const std::string envelope_path = m_dir / ("att/blobs/sha256/" + m["layers"][0]["digest"].get<std::string>().substr(7));
  const json env = json::parse(gpuenv::testing::read_file(envelope_path));
  EXPECT_EQ(env["payloadType"], "application/vnd.in-toto+json");
  EXPECT_EQ(env["signatures"][0]["keyid"], "");
  const std::string payload = *gpuenv::marks::base64_decode(env["payload"].get<std::string>());
  const json statement = json::parse(payload);
  EXPECT_EQ(statement["subject"][0]["digest"]["sha256"], digest.substr(7));
  EXPECT_EQ(statement.size(), 4u);
  EXPECT_EQ(openssl_verify(payload, env["signatures"][0]["sig"]), "Verified OK\n");
  const std::string python = std::string(GPUENV_TEST_VENV) + "/bin/python";
  if (std::string(GPUENV_TEST_VENV).empty() || !fs::exists(python)) GTEST_SKIP() << "no securesystemslib venv (scripts/test.sh makes " << GPUENV_TEST_VENV << ")";
  const std::string script =
      "import json,sys\nfrom securesystemslib.dsse import Envelope\nfrom securesystemslib.signer import SSlibKey\n"
      "env = Envelope.from_dict(json.load(open(sys.argv[1])))\n"
      "key = SSlibKey('', 'ecdsa', 'ecdsa-sha2-nistp256', {'public': open(sys.argv[2]).read()})\n"
      "env.verify([key], 1)\nprint('securesystemslib: verified')\n";
  gpuenv::testing::write_file(m_dir / "check.py", script);
  const auto py = gpuenv::testing::run(python + " " + (m_dir / "check.py") + " " + envelope_path + " " + (m_dir / "keys/gpuenv.pub") + " 2>&1");
  ASSERT_TRUE(py.has_value()) << "securesystemslib refused the envelope";
  EXPECT_NE(py->find("securesystemslib: verified"), std::string::npos) << *py;
}

TEST_F(CliMark, BuildPushValidateMarkRunsTheWholeMissionAndRefusesToMarkRecordedAnswers) {
  skip_without_registry();
  const std::string ref = s_registry->host() + "/ml/mission:1";
  CliResult r = gpuenv({"build", m_dir / "empty.lock", "-o", m_dir / "img", "--mark", "--key", m_dir / "keys/gpuenv.key"});
  EXPECT_EQ(r.code, 2) << "--mark without --validate";
  EXPECT_NE(r.err.find("--validate"), std::string::npos) << r.err;
  // Recorded answers stand in for the GPU here: the build is pushed and validated, and the mark is refused.
  r = gpuenv({"build", m_dir / "empty.lock", "-o", m_dir / "img", "--push", ref, "--plain-http", "--validate", "--level", "quick", "--mark", "--key",
              m_dir / "keys/gpuenv.key", "--json"},
             std::nullopt, {{"GPUENV_BACKEND", "replay:" + k_data + "h200x1.yaml"}});
  EXPECT_NE(r.code, 0) << r.out;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  EXPECT_EQ(j["push"]["reference"], ref);
  EXPECT_EQ(j["validation"]["schema"], "gpuenv-validation-v1");
  EXPECT_EQ(j["validation"]["backend"], "replay");
  EXPECT_EQ(j["validation"]["image"]["digest"], j["digest"]) << "the report names the image built";
  EXPECT_TRUE(j["mark"].contains("error")) << r.out;
  EXPECT_EQ(verify("docker://" + ref, {"--allow-replay"}).code, 1) << "nothing was marked";
}

TEST_F(CliMark, WithReferrersTheRecordIsAlsoASigstoreBundleReferrerFoundThroughTheFallbackIndex) {
  skip_without_registry();
  const std::string ref = pushed_image("ml/referred");
  const std::string h200 = report("img", "h200x1.yaml", "h200.json");
  const std::string l4 = report("img", "l4x1.yaml", "l4.json");
  CliResult r = mark("docker://" + ref, h200, {"--referrers", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(json::parse(r.out)["referrer"].get<std::string>().find("fallback index"), std::string::npos) << r.out;
  ASSERT_EQ(mark("docker://" + ref, l4, {"--referrers"}).code, 0);

  auto http = gpuenv::make_curl_http_client({});
  gpuenv::images::RegistryOptions ro;
  ro.plain_http = true;
  gpuenv::images::RegistryClient client(*http, ro);
  const auto parsed = gpuenv::images::parse_image_reference(ref);
  ASSERT_TRUE(parsed.ok());
  const std::string digest = json::parse(r.out)["image"];
  // Debian's docker-registry has no referrers API: the index lives under the tag schema's fallback tag.
  auto api = client.has_referrers_api(*parsed, gpuenv::Digest::parse(digest).value());
  ASSERT_TRUE(api.ok()) << api.error().to_string();
  EXPECT_FALSE(*api);
  auto index = client.get_manifest(*parsed, "sha256-" + digest.substr(7));
  ASSERT_TRUE(index.ok() && index->has_value()) << "no fallback index";
  const json ij = json::parse((*index)->bytes);
  EXPECT_EQ(ij["mediaType"], "application/vnd.oci.image.index.v1+json");
  ASSERT_EQ(ij["manifests"].size(), 2u) << ij.dump();
  const json& entry = ij["manifests"][0];
  EXPECT_EQ(entry["artifactType"], "application/vnd.dev.sigstore.bundle.v0.3+json");
  EXPECT_EQ(entry["annotations"]["dev.sigstore.bundle.predicateType"], "https://gpuenv.dev/attestation/validation/v1");
  EXPECT_EQ(entry["annotations"]["dev.sigstore.bundle.content"], "dsse-envelope");
  auto referrer = client.get_manifest(*parsed, entry["digest"].get<std::string>());
  ASSERT_TRUE(referrer.ok() && referrer->has_value());
  const json rm = json::parse((*referrer)->bytes);
  EXPECT_EQ(rm["subject"]["digest"], digest);
  EXPECT_EQ(rm["config"]["mediaType"], "application/vnd.oci.empty.v1+json");
  const auto bundle_d = gpuenv::images::parse_descriptor(rm["layers"][0], "referrer");
  ASSERT_TRUE(bundle_d.ok());
  const auto bundle = client.get_blob(*parsed, *bundle_d, 1 << 20);
  ASSERT_TRUE(bundle.ok());
  const json b = json::parse(*bundle);
  EXPECT_EQ(b["mediaType"], "application/vnd.dev.sigstore.bundle.v0.3+json");
  EXPECT_EQ(b["dsseEnvelope"]["signatures"].size(), 1u);
  EXPECT_FALSE(b["dsseEnvelope"]["signatures"][0].contains("keyid"));
  // The hint is the standard base64 of the sha256 of the public key's DER bytes, computed here with openssl.
  const auto hint = gpuenv::testing::run("openssl pkey -pubin -in " + (m_dir / "keys/gpuenv.pub") + " -outform DER | openssl dgst -sha256 -binary | base64");
  ASSERT_TRUE(hint.has_value());
  EXPECT_EQ(b["verificationMaterial"]["publicKey"]["hint"].get<std::string>() + "\n", *hint);
  // The bundle's envelope verifies with openssl over a PAE built here.
  const std::string payload = *gpuenv::marks::base64_decode(b["dsseEnvelope"]["payload"].get<std::string>());
  EXPECT_EQ(openssl_verify(payload, b["dsseEnvelope"]["signatures"][0]["sig"]), "Verified OK\n");
  // The cosign-style records are there as before, and the image is still what the tag names.
  EXPECT_EQ(verify("docker://" + ref, {"--allow-replay"}).code, 0);

  // In a layout the fallback index is an index.json entry too, and the layout still holds one image.
  build_layout("layout");
  const std::string rep = report("layout", "h200x1.yaml", "layout.json");
  ASSERT_EQ(mark(m_dir / "layout", rep, {"--referrers"}).code, 0);
  const json layout_index = json::parse(gpuenv::testing::read_file(m_dir / "layout/index.json"));
  EXPECT_EQ(layout_index["manifests"].size(), 3u) << layout_index.dump();
  EXPECT_EQ(gpuenv({"inspect", m_dir / "layout"}).code, 0);
  EXPECT_EQ(verify(m_dir / "layout", {"--allow-replay"}).code, 0);
}

TEST_F(CliMark, VerifyTakesKeysBeforeTheImageAndNamesAnImageThatIsNotThere) {
  build_layout("img");
  CliResult r = gpuenv({"verify", "--key", m_dir / "keys/gpuenv.pub", "--key", m_dir / "other/gpuenv.pub", m_dir / "img", "--gpu", "any", "--driver", "any",
                        "--cc", "any"});
  EXPECT_EQ(r.code, 1) << "the image is the positional, not a third key: " << r.err;
  EXPECT_NE(r.out.find("no marks"), std::string::npos) << r.out;
  r = gpuenv({"verify", m_dir / "nowhere", "--key", m_dir / "keys/gpuenv.pub", "--gpu", "any", "--driver", "any", "--cc", "any"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no such image layout or archive"), std::string::npos) << r.err;
}

TEST_F(CliMark, VerifyThatCannotReachTheRegistryExitsFour) {
  const int port = gpuenv::testing::free_port();
  const CliResult r = gpuenv({"verify", "docker://127.0.0.1:" + std::to_string(port) + "/ml/none:1", "--key", m_dir / "keys/gpuenv.pub", "--gpu", "any",
                              "--driver", "any", "--cc", "any", "--plain-http"},
                             std::nullopt, {{"GPUENV_CONNECT_TIMEOUT", "2"}});
  EXPECT_EQ(r.code, 4) << r.out << r.err;
}

}  // namespace
