// The command line, in process: arguments in, exit code and output out, with fake host probes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/context.hpp"
#include "fakes/fake_probe.hpp"
#include "base/cache/blob_store.hpp"
#include "base/cache/work_dir.hpp"
#include "base/time.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::testing::FakeProbe;
using nlohmann::json;

struct Outcome {
  int code;
  std::string out, err;
  json j() const { return json::parse(out); }
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("gpuenv-cli-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  /// Host answers: nullopt = no driver anywhere.
  Outcome run(std::vector<std::string> args, std::optional<gpuenv::resolver::HostFacts> host = std::nullopt,
          std::map<std::string, std::string> env = {}) {
    std::ostringstream out, err;
    gpuenv::cli::Context ctx;
    ctx.out = &out;
    ctx.err = &err;
    ctx.env = std::move(env);
    ctx.make_probes = [host, this] {
      ++probes_built;
      std::vector<std::unique_ptr<gpuenv::validate::HostProbe>> p;
      p.push_back(std::make_unique<FakeProbe>("nvml", host ? gpuenv::Result<std::optional<gpuenv::resolver::HostFacts>>(host)
                                                           : gpuenv::Result<std::optional<gpuenv::resolver::HostFacts>>(std::nullopt)));
      return p;
    };
    const int code = gpuenv::cli::run(args, ctx);
    return {code, out.str(), err.str()};
  }

  std::string write(const std::string& name, const std::string& text) {
    const std::string p = (m_dir / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::string example(const std::string& name) { return std::string(GPUENV_SOURCE_DIR) + "/recipes/examples/" + name; }

  fs::path m_dir;
  int probes_built = 0;
};

TEST_F(Cli, VersionAndHelp) {
  auto v = run({"--version"});
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("gpuenv ", 0), 0u);
  auto h = run({"--help"});
  EXPECT_EQ(h.code, 0);
  for (const char* cmd : {"resolve", "detect", "matrix", "Exit codes"}) EXPECT_NE(h.out.find(cmd), std::string::npos) << cmd;
  auto rh = run({"resolve", "--help"});
  EXPECT_EQ(rh.code, 0);
  EXPECT_NE(rh.out.find("--lock"), std::string::npos) << rh.out;
  EXPECT_NE(run({"matrix", "--help"}).out.find("--json"), std::string::npos);
}

TEST_F(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run({}).code, 2);
  EXPECT_EQ(run({"frobnicate"}).code, 2);
  EXPECT_EQ(run({"resolve"}).code, 2);
  EXPECT_EQ(run({"matrix", "caffe"}).code, 2);
  auto missing = run({"resolve", "/nonexistent/spec.yaml"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/spec.yaml"), std::string::npos);
}

TEST_F(Cli, ResolveJsonHasTheDocumentedFields) {
  auto r = run({"resolve", example("jax-h200.yaml"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const json j = r.j();
  EXPECT_EQ(j["schema"], "gpuenv-resolution-v1");
  EXPECT_EQ(j["status"], "ok");
  EXPECT_TRUE(j["cuda"]["version"].is_string());
  EXPECT_TRUE(j["cudnn"]["version"].is_string());
  EXPECT_TRUE(j["driver"]["min"].is_string());
  EXPECT_TRUE(j["python"]["version"].is_string());
  EXPECT_TRUE(j["frameworks"]["jax"]["version"].is_string());
  EXPECT_TRUE(j["frameworks"]["jax"]["variant"].is_string());
  EXPECT_EQ(j["gpu"]["archs"], json::array({"sm_90"}));
  EXPECT_EQ(j["forward_compat"], false);
  EXPECT_TRUE(j["conflicts"].empty());
}

TEST_F(Cli, SpecErrorsExitTwoWithPosition) {
  const std::string p = write("bad.yaml", "name: x\nframeworks:\n  pytorch: '2.5'\n");
  auto r = run({"resolve", p});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(p + ":3:3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'torch'"), std::string::npos) << r.err;
  auto j = run({"resolve", p, "--json"});
  EXPECT_EQ(j.code, 2);
  EXPECT_EQ(j.j()["error"]["id"], "spec.unknown_key");
}

TEST_F(Cli, UnsatisfiableExitsThreeWithConflicts) {
  const std::string p = write("v100.yaml", "name: x\ncuda: '13'\ngpu: {models: [V100], driver: '580.65.06'}\n");
  auto r = run({"resolve", p, "--json"});
  EXPECT_EQ(r.code, 3) << r.out;
  const json j = r.j();
  EXPECT_EQ(j["status"], "unsatisfiable");
  ASSERT_FALSE(j["conflicts"].empty());
  EXPECT_TRUE(j["conflicts"][0]["message"].is_string());
  auto text = run({"resolve", p});
  EXPECT_EQ(text.code, 3);
  EXPECT_NE(text.out.find("V100 is sm_70"), std::string::npos) << text.out;
}

TEST_F(Cli, FlagsOverrideTheSpec) {
  const std::string p = write("s.yaml", "name: x\nframeworks: {jax: latest}\ngpu: {models: [H100], driver: '580.65.06'}\n");
  auto r = run({"resolve", p, "--json", "--gpu", "sm_75", "--driver", "535.183.01"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_EQ(r.j()["gpu"]["archs"], json::array({"sm_75"}));
  EXPECT_EQ(r.j()["driver"]["fleet"], "535.183.01");
  EXPECT_EQ(r.j()["driver"]["origin"], "--driver");
  EXPECT_EQ(run({"resolve", p, "--gpu", "H1000"}).code, 2);
  EXPECT_EQ(run({"resolve", p, "--driver", "latest"}).code, 2);
  EXPECT_EQ(probes_built, 0);  // nothing was asked of the host
}

TEST_F(Cli, HostFactsFillWhatTheSpecLeavesOut) {
  const std::string p = write("s.yaml", "name: x\nframeworks: {jax: latest}\n");
  auto r = run({"resolve", p, "--json"}, gpuenv::testing::nvml_facts("550.90.07", "NVIDIA H200", "0x2335", 90, 8));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_EQ(r.j()["gpu"]["origin"], "host (nvml)");
  EXPECT_EQ(r.j()["driver"]["fleet"], "550.90.07");
  EXPECT_EQ(r.j()["gpu"]["archs"], json::array({"sm_90"}));
}

TEST_F(Cli, EnvironmentOverridesHostFacts) {
  const std::string p = write("s.yaml", "name: x\nframeworks: {jax: latest}\n");
  auto r = run({"resolve", p, "--json"}, std::nullopt, {{"GPUENV_DRIVER", "535.183.01"}, {"GPUENV_GPUS", "A100,sm_89"}});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_EQ(r.j()["driver"]["fleet"], "535.183.01");
  EXPECT_EQ(r.j()["gpu"]["archs"], json::array({"sm_80", "sm_89"}));
  EXPECT_EQ(probes_built, 0);
  EXPECT_EQ(run({"resolve", p}, std::nullopt, {{"GPUENV_DRIVER", "abc"}}).code, 2);
  EXPECT_EQ(run({"resolve", p}, std::nullopt, {{"GPUENV_GPUS", "Voodoo5"}}).code, 2);
}

TEST_F(Cli, LockIsWrittenAtomicallyAndByteIdentical) {
  const std::string lock1 = (m_dir / "a.lock").string(), lock2 = (m_dir / "b.lock").string();
  ASSERT_EQ(run({"resolve", example("jax-h200.yaml"), "--lock", lock1}).code, 0);
  ASSERT_EQ(run({"resolve", example("jax-h200.yaml"), "--lock", lock2}).code, 0);
  EXPECT_EQ(read(lock1), read(lock2));
  EXPECT_NE(read(lock1).find("schema: \"gpuenv-lock-v1\""), std::string::npos);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(m_dir)) ++files;
  EXPECT_EQ(files, 2u);  // no temporary files left behind
}

TEST_F(Cli, NoLockForUnsatisfiableOrUnwritable) {
  const std::string p = write("v100.yaml", "name: x\ncuda: '13'\ngpu: {models: [V100]}\n");
  const std::string lock = (m_dir / "x.lock").string();
  EXPECT_EQ(run({"resolve", p, "--lock", lock}).code, 3);
  EXPECT_FALSE(fs::exists(lock));
  auto r = run({"resolve", example("jax-h200.yaml"), "--lock", (m_dir / "no/such/dir/x.lock").string()});
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("while writing the lock"), std::string::npos) << r.err;
}

TEST_F(Cli, DetectWithoutDriverIsAPlainAnswer) {
  auto r = run({"detect"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("No NVIDIA driver"), std::string::npos) << r.out;
  auto j = run({"detect", "--json"});
  EXPECT_EQ(j.code, 0);
  EXPECT_EQ(j.j()["schema"], "gpuenv-host-v1");
  EXPECT_EQ(j.j()["driver"]["present"], false);
  EXPECT_TRUE(j.j()["gpus"].empty());
}

TEST_F(Cli, DetectReportsGpusAndMatchesCatalogModels) {
  auto j = run({"detect", "--json"}, gpuenv::testing::nvml_facts("550.54.15", "NVIDIA H100 80GB HBM3", "0x2330", 90, 2));
  ASSERT_EQ(j.code, 0);
  const json d = j.j();
  EXPECT_EQ(d["driver"]["version"], "550.54.15");
  ASSERT_EQ(d["gpus"].size(), 2u);
  EXPECT_EQ(d["gpus"][0]["model"], "H100");
  EXPECT_EQ(d["gpus"][0]["compute_capability"], "9.0");
  EXPECT_EQ(d["source"], "nvml");
}

TEST_F(Cli, MatrixListsRowsForEachFramework) {
  for (const char* fw : {"torch", "tensorflow", "jax", "cuda"}) {
    auto r = run({"matrix", fw, "--json"});
    ASSERT_EQ(r.code, 0) << fw;
    const json j = r.j();
    EXPECT_EQ(j["schema"], "gpuenv-matrix-v1");
    ASSERT_FALSE(j["rows"].empty()) << fw;
    EXPECT_EQ(j["rows"][0]["framework"], fw);
  }
  auto text = run({"matrix"});
  EXPECT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("driver>="), std::string::npos);
}

TEST_F(Cli, BrokenCatalogIsAnInternalError) {
  const std::string dir = (m_dir / "catalog").string();
  fs::create_directories(dir);
  std::ofstream(dir + "/cuda.yaml") << "schema: gpuenv-catalog-v1\nkind: cuda\nmajors: 3\n";
  auto r = run({"--catalog", dir, "matrix"});
  EXPECT_EQ(r.code, 5);
  EXPECT_NE(r.err.find("cuda.yaml:3:9"), std::string::npos) << r.err;
  auto mini = run({"--catalog", std::string(GPUENV_SOURCE_DIR) + "/tests/data/mini_catalog", "matrix", "torch", "--json"});
  EXPECT_EQ(mini.code, 0);
  EXPECT_EQ(mini.j()["rows"].size(), 6u);
}

}  // namespace

namespace {

TEST_F(Cli, CacheLsDuPrune) {
  const std::map<std::string, std::string> env = {{"GPUENV_CACHE_DIR", (m_dir / "cache").string()}};
  auto store = gpuenv::make_dir_blob_store((m_dir / "cache").string());
  ASSERT_TRUE(store->put("hello").ok());
  auto ls = run({"cache", "ls", "--json"}, std::nullopt, env);
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_EQ(ls.j()["blobs"], 1);
  EXPECT_EQ(ls.j()["entries"][0]["bytes"], 5);
  EXPECT_TRUE(gpuenv::parse_rfc3339_utc(ls.j()["entries"][0]["last_used"].get<std::string>())) << ls.out;  // "2026-01-02T03:04:05Z"
  auto du = run({"cache", "du"}, std::nullopt, env);
  EXPECT_NE(du.out.find("1 blobs, 5 B"), std::string::npos) << du.out;
  EXPECT_EQ(run({"cache", "prune"}, std::nullopt, env).code, 0);
  EXPECT_EQ(run({"cache", "du", "--json"}, std::nullopt, env).j()["blobs"], 1);  // used just now: kept
  auto all = run({"cache", "prune", "--all", "--json"}, std::nullopt, env);
  EXPECT_EQ(all.j()["freed_bytes"], 5);
  EXPECT_EQ(all.j()["abandoned_work_dirs_removed"], 0);
  EXPECT_EQ(run({"cache"}).code, 2);
}

TEST_F(Cli, CachePruneRemovesTheWorkDirectoryOfAKilledBuildButNotALiveOne) {
  const std::string cache = (m_dir / "cache").string();
  const std::map<std::string, std::string> env = {{"GPUENV_CACHE_DIR", cache}};
  // A work directory whose lock nobody holds (its build was killed), with a half-built root filesystem in it.
  const fs::path killed = fs::path(cache) / "tmp/4242-1-work";
  fs::create_directories(killed / "rootfs/usr/lib");
  std::ofstream(killed / "rootfs/usr/lib/libbig.so") << std::string(1 << 16, 'x');
  std::ofstream(killed / ".lock") << "";
  auto live = gpuenv::WorkDir::create(cache);
  ASSERT_TRUE(live.ok());
  auto pruned = run({"cache", "prune", "--json"}, std::nullopt, env);
  ASSERT_EQ(pruned.code, 0) << pruned.err;
  EXPECT_EQ(pruned.j()["abandoned_work_dirs_removed"], 1);
  EXPECT_FALSE(fs::exists(killed));
  EXPECT_TRUE(fs::exists((*live)->path()));
}

}  // namespace

namespace {

class CliSources : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    fs::create_directories(m_dir / "host/etc/apt/sources.list.d");
    std::ofstream(m_dir / "host/etc/apt/sources.list") << "deb [signed-by=/k.gpg] http://mirror.example/debian bookworm main contrib\n"
                                                          "deb-src http://mirror.example/debian bookworm main\n";
    std::ofstream(m_dir / "host/etc/pip.conf") << "[global]\nindex-url = http://pip.example/simple\nextra-index-url =\n  http://extra.example/simple\n";
  }
  Outcome sources(std::vector<std::string> extra, std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args = {"sources", "--json", "--host-root", (m_dir / "host").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    env.emplace("HOME", (m_dir / "home").string());
    return run(args, std::nullopt, env);
  }
};

TEST_F(CliSources, HostAptAndPipConfiguration) {
  auto r = sources({});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = r.j();
  EXPECT_EQ(j["schema"], "gpuenv-sources-v1");
  ASSERT_EQ(j["apt"]["sources"].size(), 2u);
  EXPECT_EQ(j["apt"]["sources"][0]["uri"], "http://mirror.example/debian/");
  EXPECT_EQ(j["apt"]["sources"][0]["components"], json::array({"main", "contrib"}));
  EXPECT_EQ(j["apt"]["sources"][1]["used"], false);  // deb-src is listed, not used
  EXPECT_EQ(j["pip"]["index_url"]["url"], "http://pip.example/simple");
  EXPECT_NE(j["pip"]["index_url"]["where"].get<std::string>().find("pip.conf:2"), std::string::npos) << j.dump();
  EXPECT_EQ(j["pip"]["extra_index_urls"][0]["url"], "http://extra.example/simple");
}

TEST_F(CliSources, EnvironmentBeatsPipConfigFiles) {
  auto r = sources({}, {{"PIP_INDEX_URL", "http://env.example/simple"}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.j()["pip"]["index_url"]["url"], "http://env.example/simple");
  EXPECT_EQ(r.j()["pip"]["index_url"]["where"], "PIP_INDEX_URL");
}

TEST_F(CliSources, SpecSourcesWinOverUserConfigWhichWinsOverTheHost) {
  const std::string cfg = write("config.yaml", "sources:\n  apt:\n    - {uri: http://config.example/debian, suite: bookworm, components: [main]}\n");
  auto c = sources({}, {{"GPUENV_CONFIG", cfg}});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.j()["apt"]["sources"][0]["uri"], "http://config.example/debian/");
  EXPECT_EQ(c.j()["apt"]["origin"], "user config " + cfg);
  const std::string spec = write("s.yaml", "name: x\nsources:\n  apt:\n    - {uri: 'file:///srv/repo', suite: /, trusted: true}\n  pip:\n    index_url: http://spec.example/simple\n");
  auto s = sources({spec}, {{"GPUENV_CONFIG", cfg}});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.j()["apt"]["sources"][0]["uri"], "file:///srv/repo/");
  EXPECT_EQ(s.j()["apt"]["sources"][0]["flat"], true);
  EXPECT_EQ(s.j()["apt"]["sources"][0]["trusted"], true);
  EXPECT_EQ(s.j()["pip"]["index_url"]["url"], "http://spec.example/simple");
  EXPECT_EQ(s.j()["pip"]["index_url"]["where"], spec + ":6:5");
}

TEST_F(CliSources, BadSourcesAreSpecErrors) {
  const std::string spec = write("s.yaml", "sources:\n  apt:\n    - {uri: 'ftp://x', suite: bookworm, components: [main]}\n");
  auto r = sources({spec});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(spec + ":3:13"), std::string::npos) << r.err;
  const std::string flat = write("f.yaml", "sources:\n  apt:\n    - {uri: 'http://x', suite: /, components: [main]}\n");
  EXPECT_EQ(sources({flat}).code, 2);
  const std::string cfg = write("c.yaml", "sourcez: {}\n");
  auto c = sources({}, {{"GPUENV_CONFIG", cfg}});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("did you mean 'sources'"), std::string::npos) << c.err;
}

TEST_F(CliSources, MalformedHostSourcesAreEnvironmentErrors) {
  std::ofstream(m_dir / "host/etc/apt/sources.list") << "deb http://mirror.example/debian\n";  // no suite
  auto r = sources({});
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("sources.list:1"), std::string::npos) << r.err;
}

}  // namespace
