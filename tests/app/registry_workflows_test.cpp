// The registry workflows as library calls (issue 34): push (app::build), pull (app::fetch_registry_image), inspect,
// validate-and-mark, mark and verify, each through app::Services with doubles only: the in-memory registry behind
// the HttpClient port, a fetcher that refuses every request (the empty lock needs none), the recorded H200 as the
// GPU backend and a fixed clock. The CLI tests run the same workflows against a real docker-registry on 127.0.0.1;
// these show what each workflow asks of its ports, request by request.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "app/base_image.hpp"
#include "app/build.hpp"
#include "app/inspect.hpp"
#include "app/marks.hpp"
#include "app/validate_and_mark.hpp"
#include "base/cache/blob_store.hpp"
#include "fakes/fake_fetcher.hpp"
#include "fakes/fake_gpu_backend.hpp"
#include "fakes/files.hpp"
#include "fakes/memory_registry.hpp"
#include "fakes/temp_dir.hpp"
#include "marks/keys.hpp"
#include "validate/report.hpp"
#include "validate/replay/replay_backend.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::testing::MemoryRegistry;

const std::string k_host = "registry.test:5000";
const std::string k_source = GPUENV_SOURCE_DIR;
constexpr std::int64_t k_now = 1796126400;  // 2026-12-01T12:00:00Z

class AppRegistry : public ::testing::Test {
 protected:
  void SetUp() override {
    gpuenv::testing::write_tree_file(m_dir.path() / "empty.lock", gpuenv::testing::read_all(k_source + "/tests/data/locks/empty.lock"));
    m_services.env = {{"GPUENV_CACHE_DIR", (m_dir.path() / "cache").string()},
                      {"HOME", (m_dir.path() / "home").string()},
                      {"SOURCE_DATE_EPOCH", "1700000000"},
                      {"GPUENV_INSECURE_REGISTRIES", k_host}};
    m_services.make_fetcher = [this](const gpuenv::NetLimits&) { return std::make_unique<gpuenv::testing::BorrowedFetcher>(m_fetcher); };
    m_services.make_http_client = [this](const gpuenv::HttpOptions&) -> std::unique_ptr<gpuenv::HttpClient> {
      ++m_clients;
      return std::make_unique<MemoryRegistry::Client>(m_registry);
    };
    m_services.make_blob_store = [](const std::string& root) { return gpuenv::make_dir_blob_store(root); };
    // "replay:FILE" is a recording; anything else is "this machine": one H200 behind the GpuBackend double, named as
    // the real backend is, so that a passing run may be marked.
    m_services.make_gpu_backend = [](const std::string& choice, const std::optional<gpuenv::validate::ImageLibraries>&)
        -> gpuenv::Result<std::unique_ptr<gpuenv::validate::GpuBackend>> {
      if (choice.rfind("replay:", 0) == 0) return gpuenv::validate::load_replay_backend_file(choice.substr(7));
      auto gpu = std::make_unique<gpuenv::testing::FakeGpuBackend>();
      gpu->backend_name = "nvml+cuda";
      gpu->driver_state.loaded = true;
      gpu->driver_state.version = "550.90.07";
      gpu->driver_state.cuda_driver_version = 12040;
      gpu->driver_state.cc_state = "off";
      gpuenv::validate::GpuInfo h200;
      h200.uuid = "GPU-00000000";
      h200.name = "NVIDIA H200";
      h200.pci_bus_id = "00000000:10:00.0";
      h200.pci_device_id = 0x2335;
      h200.cc_major = 9;
      h200.memory_total_bytes = 141ull << 30;
      gpu->inventory.push_back(h200);
      return std::unique_ptr<gpuenv::validate::GpuBackend>(std::move(gpu));
    };
    m_services.clock = [] { return k_now; };
    const auto keys = gpuenv::marks::generate_key_pair((m_dir.path() / "keys").string(), false);
    ASSERT_TRUE(keys.ok()) << keys.error().to_string();
  }

  /// Builds the empty lock into a layout and pushes it to REPO:1 (app::build with push).
  gpuenv::Result<gpuenv::app::Built> push(const std::string& repo, const std::string& layout = "img") {
    gpuenv::app::BuildRequest rq;
    rq.lock.resolve.spec_path = (m_dir.path() / "empty.lock").string();
    rq.output = (m_dir.path() / layout).string();
    rq.push = k_host + "/" + repo + ":1";
    return gpuenv::app::build(rq, m_services);
  }

  gpuenv::app::ValidateAndMarkRequest validate_request(const std::string& image) const {
    gpuenv::app::ValidateAndMarkRequest rq;
    rq.validate.level = "quick";
    rq.validate.image = image;
    rq.validate.checks = {"driver_loaded", "device_nodes"};
    rq.validate.backend = "replay:" + k_source + "/tests/data/validate/h200x1.yaml";
    rq.key_path = (m_dir.path() / "keys/gpuenv.key").string();
    return rq;
  }

  gpuenv::app::VerifyRequest verify_request(const std::string& image) const {
    gpuenv::app::VerifyRequest rq;
    rq.image = image;
    rq.keys = {(m_dir.path() / "keys/gpuenv.pub").string()};
    rq.gpu = "NVIDIA H200";
    rq.driver = "550.90.07";
    rq.cc = "off";
    rq.allow_replay = true;
    return rq;
  }

  gpuenv::testing::TempDir m_dir;
  MemoryRegistry m_registry{k_host};
  gpuenv::testing::FakeFetcher m_fetcher;  // knows no URL: a workflow that reaches for a package or index fails
  gpuenv::app::Services m_services;
  int m_clients = 0;
};

TEST_F(AppRegistry, APushUploadsEachBlobOnceAndASecondPushUploadsNothing) {
  auto first = push("app/empty");
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  ASSERT_TRUE(first->pushed);
  const std::string digest = first->image.manifest.digest.str();
  EXPECT_EQ(first->pushed->digest.str(), digest);
  EXPECT_EQ(first->pushed->blobs_uploaded, 2u);  // the metadata layer and the config
  EXPECT_EQ(first->pushed->blobs_present, 0u);
  const auto stored = m_registry.manifest("app/empty", "1");
  ASSERT_TRUE(stored);
  EXPECT_EQ(gpuenv::Digest::of(stored->bytes).str(), digest);
  EXPECT_EQ(stored->media_type, "application/vnd.oci.image.manifest.v1+json");
  for (const auto& layer : first->image.layers) EXPECT_TRUE(m_registry.has_blob("app/empty", layer.blob.digest.str())) << layer.name;

  const std::size_t puts = m_registry.count("PUT", "/uploads/");
  auto second = push("app/empty");
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_EQ(second->pushed->digest.str(), digest);  // the same image, byte for byte
  EXPECT_EQ(second->pushed->blobs_uploaded, 0u);
  EXPECT_EQ(second->pushed->blobs_present, 2u);
  EXPECT_EQ(m_registry.count("PUT", "/uploads/"), puts);  // no blob went up again
}

TEST_F(AppRegistry, APullChecksEveryDigestAndACachedPinnedDigestNeedsNoNetwork) {
  auto pushed = push("app/pulled");
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  const std::string digest = pushed->image.manifest.digest.str();

  gpuenv::app::BaseImage image;
  const gpuenv::app::RegistryImageUse use{"run", "the image", false};
  const auto pulled = gpuenv::app::fetch_registry_image("docker://" + k_host + "/app/pulled:1", false, m_services, use, image);
  ASSERT_TRUE(pulled.ok()) << pulled.error().to_string();
  EXPECT_EQ(image.manifest_digest, digest);
  EXPECT_TRUE(fs::exists(fs::path(image.layout_dir) / "index.json"));
  for (const auto& layer : pushed->image.layers)
    EXPECT_TRUE(fs::exists(fs::path(image.layout_dir) / "blobs/sha256" / layer.blob.digest.hex())) << layer.name;

  // Pinned by the digest the cache holds: answered from the cache, not one request more.
  const std::size_t before = m_registry.requests().size();
  gpuenv::app::BaseImage again;
  const auto cached = gpuenv::app::fetch_registry_image("docker://" + k_host + "/app/pulled@" + digest, false, m_services, use, again);
  ASSERT_TRUE(cached.ok()) << cached.error().to_string();
  EXPECT_EQ(again.manifest_digest, digest);
  EXPECT_EQ(m_registry.requests().size(), before);
}

TEST_F(AppRegistry, APullRefusesABlobTheRegistryChanged) {
  auto pushed = push("app/tampered");
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  const std::string layer = pushed->image.layers.at(0).blob.digest.str();
  m_registry.corrupt_blob("app/tampered", layer, "not the layer");
  gpuenv::app::BaseImage image;
  const auto pulled = gpuenv::app::fetch_registry_image("docker://" + k_host + "/app/tampered:1", false, m_services, {"run", "the image", false}, image);
  ASSERT_FALSE(pulled.ok());
  EXPECT_NE(pulled.error().to_string().find(layer.substr(7, 12)), std::string::npos) << pulled.error().to_string();
  EXPECT_FALSE(fs::exists(fs::path(image.layout_dir) / "blobs/sha256" / layer.substr(7)));  // nothing unchecked kept
}

TEST_F(AppRegistry, InspectReadsTheManifestAndConfigOnly) {
  auto pushed = push("app/inspected");
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  gpuenv::app::InspectRequest rq;
  rq.image = "docker://" + k_host + "/app/inspected:1";
  auto inspected = gpuenv::app::inspect(rq, m_services);
  ASSERT_TRUE(inspected.ok()) << inspected.error().to_string();
  EXPECT_EQ(inspected->image.digest, pushed->image.manifest.digest.str());
  ASSERT_EQ(inspected->image.layers.size(), 1u);
  EXPECT_EQ(inspected->image.layers[0].name, "metadata");
  EXPECT_TRUE(inspected->marks.empty());
  const std::string layer = pushed->image.layers.at(0).blob.digest.str();
  EXPECT_EQ(m_registry.count("GET", "/blobs/" + layer), 0u) << ::testing::PrintToString(m_registry.requests());  // no layer was downloaded
  const std::string config = pushed->image.config.digest.str();
  EXPECT_EQ(m_registry.count("GET", "/blobs/" + config), 1u);  // the config once: the marks' lookup needs the manifest alone
  EXPECT_EQ(m_registry.count("GET", "/manifests/sha256-" + pushed->image.manifest.digest.hex() + ".att"), 1u);  // its marks were looked for
}

TEST_F(AppRegistry, ValidateAndMarkReturnsTheReportBytesTheRecordNamesAndVerifyCountsIt) {
  auto pushed = push("app/marked");
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  const std::string image = "docker://" + k_host + "/app/marked:1";
  auto rq = validate_request((m_dir.path() / "img").string());
  rq.mark = true;
  rq.mark_image = image;
  // The recording is not a real GPU: validate-and-mark refuses to mark it (mark.replay), the report still stands.
  auto refused = gpuenv::app::validate_and_mark(rq, m_services);
  ASSERT_TRUE(refused.ok()) << refused.error().to_string();
  EXPECT_EQ(refused->exit_code, gpuenv::exit_code(gpuenv::ErrorKind::usage));
  ASSERT_TRUE(refused->mark_error);
  EXPECT_EQ(refused->mark_error->id, "mark.replay");
  EXPECT_FALSE(refused->mark);
  EXPECT_FALSE(m_registry.manifest("app/marked", "sha256-" + pushed->image.manifest.digest.hex() + ".att"));
  EXPECT_EQ(refused->report_bytes, gpuenv::validate::report_json(refused->report).dump(2) + "\n");  // what --json prints
  EXPECT_NE(refused->report_bytes.find("\"started_at\": \"2026-12-01T12:00:00Z\""), std::string::npos) << refused->report_bytes;

  // The same report, marked through app::mark with replay allowed: the record names these very bytes.
  gpuenv::app::MarkRequest m;
  m.image = image;
  m.report_bytes = refused->report_bytes;
  m.key_path = rq.key_path;
  m.allow_replay = true;
  auto marked = gpuenv::app::mark(m, m_services);
  ASSERT_TRUE(marked.ok()) << marked.error().to_string();
  EXPECT_EQ(marked->image.str(), pushed->image.manifest.digest.str());
  EXPECT_EQ(marked->records, 1u);
  EXPECT_EQ(marked->predicate.report_sha256, gpuenv::Digest::of(refused->report_bytes).hex());
  EXPECT_EQ(marked->predicate.time_verified, k_now);
  EXPECT_TRUE(m_registry.manifest("app/marked", "sha256-" + pushed->image.manifest.digest.hex() + ".att"));

  auto verified = gpuenv::app::verify(verify_request(image), m_services);
  ASSERT_TRUE(verified.ok()) << verified.error().to_string();
  EXPECT_TRUE(verified->ok());
  ASSERT_EQ(verified->records.size(), 1u);
  EXPECT_EQ(verified->records[0].digest, marked->record_digest);

  // The record speaks for the H200 it was made on: a node of another model finds no record that counts.
  auto other_gpu = verify_request(image);
  other_gpu.gpu = "NVIDIA L4";
  auto not_for_it = gpuenv::app::verify(other_gpu, m_services);
  ASSERT_TRUE(not_for_it.ok()) << not_for_it.error().to_string();
  EXPECT_FALSE(not_for_it->ok());
}

TEST_F(AppRegistry, APassingRunOnTheGpuIsMarkedInOneCallAndTheRecordNamesTheReturnedReport) {
  auto pushed = push("app/passed");
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  const std::string image = "docker://" + k_host + "/app/passed:1";
  auto rq = validate_request((m_dir.path() / "img").string());
  rq.validate.backend = "real";
  rq.mark = true;
  rq.mark_image = image;
  auto done = gpuenv::app::validate_and_mark(rq, m_services);
  ASSERT_TRUE(done.ok()) << done.error().to_string();
  ASSERT_EQ(done->exit_code, 0) << done->report_bytes;
  ASSERT_FALSE(done->mark_error) << done->mark_error->to_string();
  ASSERT_TRUE(done->mark);
  EXPECT_EQ(done->mark->image.str(), pushed->image.manifest.digest.str());
  EXPECT_EQ(done->mark->predicate.backend, "nvml+cuda");
  EXPECT_EQ(done->mark->predicate.report_sha256, gpuenv::Digest::of(done->report_bytes).hex());
  EXPECT_EQ(done->mark->predicate.time_verified, k_now);
  auto verify = verify_request(image);
  verify.allow_replay = false;  // a record of the GPU itself
  auto verified = gpuenv::app::verify(verify, m_services);
  ASSERT_TRUE(verified.ok()) << verified.error().to_string();
  EXPECT_TRUE(verified->ok());
  EXPECT_GT(m_clients, 0);  // every registry request went through the services' HTTP client
}

TEST_F(AppRegistry, ValidateAndMarkWithoutAnImageIsAUsageErrorAndAFailedRunIsNeverMarked) {
  auto no_image = validate_request("");
  no_image.mark = true;
  auto refused = gpuenv::app::validate_and_mark(no_image, m_services);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().id, "mark.no_image");
  EXPECT_EQ(refused.error().kind, gpuenv::ErrorKind::usage);

  auto pushed = push("app/failed");
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  std::string lock = gpuenv::testing::read_all(m_dir.path() / "empty.lock");
  lock.replace(lock.find("525.60.13"), 9, "999.99.99");  // a floor no recorded driver meets
  gpuenv::testing::write_tree_file(m_dir.path() / "high-floor.lock", lock);
  auto failing = validate_request((m_dir.path() / "img").string());
  failing.validate.lock = (m_dir.path() / "high-floor.lock").string();
  failing.validate.checks = {"driver_meets_lock"};
  failing.mark = true;
  failing.mark_image = "docker://" + k_host + "/app/failed:1";
  auto failed = gpuenv::app::validate_and_mark(failing, m_services);
  ASSERT_TRUE(failed.ok()) << failed.error().to_string();
  EXPECT_EQ(failed->exit_code, 1);
  ASSERT_TRUE(failed->mark_error);
  EXPECT_EQ(failed->mark_error->id, "mark.not_passed");
  EXPECT_FALSE(failed->mark);
  EXPECT_EQ(m_registry.count("PUT", "/manifests/sha256-"), 0u);
}

}  // namespace
