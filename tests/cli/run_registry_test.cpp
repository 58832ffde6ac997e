// Issue 32: `gpuenv run` and `gpuenv validate --image` take an image by its registry reference. Against the real
// docker-registry on 127.0.0.1: the image gpuenv pushed runs and validates from an empty cache, by tag and by
// digest. Against tests/images/registry_fake.py: a pulled image is untrusted input like a layout (a layer that is
// not what its digest names, a short, stalled or endless blob, a manifest for another digest), refused in bounded
// time with nothing half-written left in the cache.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/digest.hpp"
#include "base/net/curl_fetcher.hpp"
#include "base/net/http_client.hpp"
#include "base/process/command_runner.hpp"
#include "cli/context.hpp"
#include "fakes/cli_in_process.hpp"
#include "fakes/docker_registry.hpp"
#include "fakes/registry_fake.hpp"
#include "images/registry/registry_client.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::testing::DockerRegistry;
using gpuenv::testing::FakeRegistry;
using nlohmann::json;

const std::string k_recordings = std::string(GPUENV_SOURCE_DIR) + "/tests/data/validate/";
const std::string k_empty_lock_file = std::string(GPUENV_SOURCE_DIR) + "/tests/data/locks/empty.lock";

using RunCliResult = gpuenv::testing::CliOutcome;

class CliRunRegistry : public ::testing::Test {
 protected:
  void SetUp() override {
    // A lock without CUDA (issue 32, item 1): only the H100's floor, no CUDA version for the driver to meet.
    std::string lock = gpuenv::testing::read_file(k_empty_lock_file);
    lock.replace(lock.find("\"empty\""), 7, "\"nocuda\"");
    gpuenv::testing::write_file(m_dir / "nocuda.lock", lock);
    fs::create_directories(m_dir / "home");
  }

  RunCliResult gpuenv(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
    std::map<std::string, std::string> all = {{"GPUENV_CACHE_DIR", m_dir / "cache"}, {"HOME", m_dir / "home"}, {"SOURCE_DATE_EPOCH", "1700000000"}};
    for (const auto& [k, v] : env) all[k] = v;
    return gpuenv::testing::run_cli_in_process(args, all);
  }

  /// Builds the no-CUDA lock into m_dir/img; its manifest digest.
  std::string build() {
    const RunCliResult r = gpuenv({"build", m_dir / "nocuda.lock", "-o", m_dir / "img", "--tag", "1", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return json::parse(r.out, nullptr, false).value("digest", "");
  }

  /// Pushes m_dir/img to HOST/REPO:1 over plain HTTP.
  static void push(const std::string& layout, const std::string& host, const std::string& repo) {
    auto http = gpuenv::make_curl_http_client({});
    gpuenv::images::RegistryOptions ro;
    ro.plain_http = true;
    const auto ref = gpuenv::images::parse_image_reference(host + "/" + repo + ":1");
    ASSERT_TRUE(ref.ok());
    const auto pushed = gpuenv::images::RegistryClient(*http, ro).push(layout, *ref);
    ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  }

  /// The files under the cache (relative paths), for "nothing half-written stays".
  std::vector<std::string> cache_files() const {
    std::vector<std::string> out;
    std::error_code ec;
    if (!fs::exists(m_dir / "cache", ec)) return out;
    for (auto it = fs::recursive_directory_iterator(m_dir / "cache", fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec)) out.push_back(fs::relative(it->path(), m_dir / "cache").string());
    return out;
  }

  gpuenv::testing::RegistryTempDir m_dir;
};

TEST_F(CliRunRegistry, AnImageInARegistryValidatesAndRunsFromAnEmptyCacheByTagAndByDigest) {
  DockerRegistry registry(DockerRegistry::Setup::plain);
  if (!registry.skip_reason().empty()) GTEST_SKIP() << registry.skip_reason();
  const std::string digest = build();
  ASSERT_FALSE(digest.empty());
  push(m_dir / "img", registry.host(), "run/nocuda");
  const std::string ref = "docker://" + registry.host() + "/run/nocuda:1";

  // validate --image by tag, with an empty cache: pulled, its own lock read, judged on the recorded 8x H100
  // (driver 550.54.15); a lock without CUDA passes driver_meets_lock on the floor alone and says why.
  fs::remove_all(m_dir / "cache");
  const RunCliResult v = gpuenv({"validate", "--image", ref, "--plain-http", "--backend", "replay:" + k_recordings + "h100x8.yaml", "--level", "quick",
                              "--check", "driver_meets_lock", "--json"});
  ASSERT_EQ(v.code, 0) << v.err << v.out;
  const json report = json::parse(v.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << v.out;
  EXPECT_EQ(report["image"]["ref"], ref);
  EXPECT_EQ(report["image"]["digest"], digest);
  EXPECT_NE(v.out.find("the lock has no CUDA, so the driver's CUDA version is not judged"), std::string::npos) << v.out;

  // By digest (the variable instead of the flag), the same image, and from the cache: the pull finds every blob.
  const std::string pinned = "docker://" + registry.host() + "/run/nocuda@" + digest;
  const RunCliResult again = gpuenv({"validate", "--image", pinned, "--backend", "replay:" + k_recordings + "h100x8.yaml", "--level", "quick", "--check",
                                  "driver_meets_lock", "--json"},
                                 {{"GPUENV_INSECURE_REGISTRIES", registry.host()}});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(json::parse(again.out)["image"]["digest"], digest);

  // run, out of process (it hands the terminal to the command): a static program bound in prints 42.
  if (!gpuenv::testing::have("bwrap") || !gpuenv::testing::run("bwrap --ro-bind / / true 2>/dev/null"))
    GTEST_SKIP() << "bubblewrap cannot make a sandbox here";
  gpuenv::testing::write_file(m_dir / "h.c", "#include <stdio.h>\nint main(void) { puts(\"42\"); return 0; }\n");
  if (!gpuenv::testing::run("cc -static -O1 -o " + (m_dir / "h") + " " + (m_dir / "h.c") + " 2>/dev/null"))
    GTEST_SKIP() << "no static C compiler";
  fs::remove_all(m_dir / "cache");
  const auto out = gpuenv::testing::run("env GPUENV_CACHE_DIR=" + (m_dir / "cache") + " HOME=" + (m_dir / "home") + " " + GPUENV_BINARY + " run " + ref +
                                        " --plain-http --no-gpu --bind " + (m_dir / "h") + ":/tmp/h -- /tmp/h 2>&1");
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out, "42\n");
}

TEST_F(CliRunRegistry, AReferenceWithARegistryHostNeedsNoSchemeWhereNoSuchDirectoryExists) {
  // 127.0.0.1:1 refuses connections: the argument was taken as a registry image, not as a missing directory.
  const RunCliResult r = gpuenv({"validate", "--image", "127.0.0.1:1/run/x:1", "--plain-http", "--backend", "replay:" + k_recordings + "h100x8.yaml"});
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("pulling the image 127.0.0.1:1/run/x:1"), std::string::npos) << r.err;
  // A name with no registry host is still a directory that is not there.
  const RunCliResult d = gpuenv({"validate", "--image", "no-such-dir", "--backend", "replay:" + k_recordings + "h100x8.yaml"});
  EXPECT_EQ(d.code, 2) << d.err;
  EXPECT_NE(d.err.find("run.no_image"), std::string::npos) << d.err;
}

TEST_F(CliRunRegistry, APulledImageIsUntrustedInputRefusedInBoundedTimeWithNothingHalfWrittenLeft) {
  const std::string digest = build();
  ASSERT_FALSE(digest.empty());
  struct Case {
    std::string mode, id;
  };
  for (const Case& c : {Case{"alter", "registry.digest_mismatch"}, Case{"short", "registry.truncated"}, Case{"stall", "http.too_slow"},
                        Case{"endless", "registry.digest_mismatch"}}) {
    SCOPED_TRACE(c.mode);
    FakeRegistry fake(c.mode);
    ASSERT_GT(fake.port(), 0);
    push(m_dir / "img", fake.host(), "run/bad");
    fs::remove_all(m_dir / "cache");
    const auto t0 = std::chrono::steady_clock::now();
    const RunCliResult r = gpuenv({"validate", "--image", "docker://" + fake.host() + "/run/bad:1", "--plain-http", "--backend", "replay:" + k_recordings + "h100x8.yaml"},
                               {{"GPUENV_RATE_WINDOW", "2s"}});
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(r.code, 4) << r.err;
    EXPECT_NE(r.err.find(c.id), std::string::npos) << r.err;
    EXPECT_LT(took, std::chrono::seconds(20));
    // What the cache holds afterwards: the layout's marker and an index that names no image, whole blobs that
    // were checked against their digests, and nothing else: no temporary file, nothing unpacked.
    for (const auto& f : cache_files()) {
      const std::string name = fs::path(f).filename().string();
      if (name == "oci-layout") continue;
      if (name == "index.json") {
        EXPECT_EQ(json::parse(gpuenv::testing::read_file((m_dir / "cache") + "/" + f), nullptr, false).value("manifests", json::array()).size(), 0u) << f;
        continue;
      }
      ASSERT_NE(f.find("/blobs/sha256/"), std::string::npos) << f;
      EXPECT_EQ(gpuenv::sha256_hex(gpuenv::testing::read_file((m_dir / "cache") + "/" + f)), name) << f;
    }
  }
}

}  // namespace
