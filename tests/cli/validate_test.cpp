// `gpuenv validate`, `checks` and `preflight` in process, on the replay backend: every recorded fault scenario
// gives the right check, status, code and exit code, and reports say they came from recorded answers.
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/context.hpp"

namespace {

namespace fs = std::filesystem;

const std::string k_data = std::string(GPUENV_SOURCE_DIR) + "/tests/data/validate/";

struct ValidateOutcome {
  int code = -1;
  std::string out, err;
  bool exit_now = false;
};

ValidateOutcome gpuenv(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  std::ostringstream o, e;
  gpuenv::cli::Context ctx;
  ctx.out = &o;
  ctx.err = &e;
  ctx.env = std::move(env);
  ValidateOutcome r;
  r.code = gpuenv::cli::run(args, ctx);
  r.out = o.str();
  r.err = e.str();
  r.exit_now = ctx.exit_now;
  return r;
}

nlohmann::json validate_json(const std::string& replay, std::vector<std::string> extra, int* code = nullptr) {
  std::vector<std::string> args = {"validate", "--backend", "replay:" + k_data + replay, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const ValidateOutcome r = gpuenv(args);
  if (code) *code = r.code;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
  return j;
}

/// The results of `key` with `status`, as "gpu:code".
std::vector<std::string> results(const nlohmann::json& report, const std::string& key, const std::string& status) {
  std::vector<std::string> out;
  for (const auto& c : report["checks"])
    if (c["key"] == key)
      for (const auto& g : c["results"])
        if (g["status"] == status) out.push_back((g["gpu"].is_null() ? std::string("-") : std::to_string(g["gpu"].get<int>())) + ":" + (g["code"].is_null() ? "" : g["code"].get<std::string>()));
  return out;
}

struct Fault {
  std::string file;
  std::vector<std::string> extra;
  std::string key, status;
  std::vector<std::string> expected;
  int exit_code;
};

class ValidateFault : public ::testing::TestWithParam<Fault> {};

TEST_P(ValidateFault, GivesTheRightCheckStatusCodeAndExitCode) {
  const Fault& f = GetParam();
  int code = -1;
  const auto report = validate_json("faults/" + f.file, f.extra, &code);
  EXPECT_EQ(report["backend"], "replay");
  EXPECT_EQ(report["schema"], "gpuenv-validation-v1");
  EXPECT_EQ(results(report, f.key, f.status), f.expected) << report.dump(1).substr(0, 4000);
  EXPECT_EQ(code, f.exit_code);
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, ValidateFault,
    ::testing::Values(Fault{"ecc_uncorrectable.yaml", {}, "ecc_errors", "fail", {"3:ecc_uncorrectable"}, 1},
                      Fault{"row_remap_pending.yaml", {}, "row_remap", "warn", {"5:row_remap_pending"}, 0},
                      Fault{"pcie_x8.yaml", {}, "pcie_link", "fail", {"2:pcie_downtrained"}, 1},
                      Fault{"hbm_low.yaml", {}, "hbm_bandwidth", "fail", {"6:node_outlier"}, 1},
                      Fault{"memtest_bitflip.yaml", {}, "memtest", "fail", {"4:memtest_error"}, 1},
                      Fault{"gemm_mismatch.yaml", {}, "gemm_consistency", "fail", {"1:gemm_mismatch"}, 1},
                      Fault{"kernel_hang.yaml", {"--level", "quick", "--gpus", "0"}, "memtest", "fail", {"0:hang"}, 1},
                      Fault{"driver_old.yaml", {"--lock", std::string(GPUENV_SOURCE_DIR) + "/tests/data/golden/torch-h100.lock"}, "driver_meets_lock", "fail",
                            {"-:driver_too_old"}, 1},
                      Fault{"cc_not_ready.yaml", {}, "cc_mode", "fail", {"-:cc_not_ready"}, 1},
                      Fault{"nouveau.yaml", {}, "nouveau_absent", "fail", {"-:nouveau_loaded"}, 4},
                      Fault{"no_driver.yaml", {}, "driver_loaded", "fail", {"-:no_driver"}, 4}),
    [](const auto& info) { return info.param.file.substr(0, info.param.file.find('.')); });

TEST(Validate, AHungGpuFailsAloneWhileTheOtherSevenAreChecked) {
  int code = -1;
  const auto report = validate_json("faults/kernel_hang.yaml", {"--level", "quick"}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(results(report, "memtest", "fail"), (std::vector<std::string>{"0:hang"}));
  EXPECT_EQ(results(report, "memtest", "pass").size(), 7u) << "GPUs 1-7 are tested at the same time as GPU 0";
  const auto skipped = results(report, "hbm_bandwidth", "skip");
  EXPECT_EQ(skipped, (std::vector<std::string>{"0:"})) << "later checks skip only the hung GPU";
  EXPECT_EQ(results(report, "hbm_bandwidth", "pass").size() + results(report, "hbm_bandwidth", "warn").size(), 7u);
}

TEST(Validate, HealthyRecordingsPassEveryInventory) {
  for (const char* file : {"h100x8.yaml", "l4x1.yaml", "h200x1.yaml", "a100_mig.yaml", "a100_mig_7x1g.yaml",
                           "h100_mig_7x1g.yaml", "h100_mig_mixed.yaml"}) {
    int code = -1;
    const auto report = validate_json(file, {}, &code);
    EXPECT_EQ(code, 0) << file;
    EXPECT_NE(report["status"], "fail") << file;
  }
}

TEST(Validate, AHungCheckIsAFailureTheReportIsStillWrittenAndTheProcessMustExitAtOnce) {
  const fs::path junit = fs::temp_directory_path() / ("gpuenv-junit-" + std::to_string(::getpid()) + ".xml");
  const ValidateOutcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "faults/kernel_hang.yaml", "--level", "quick", "--gpus", "0", "--junit", junit.string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.exit_now);
  EXPECT_NE(r.out.find("hang"), std::string::npos) << r.out;
  std::ifstream in(junit);
  const std::string xml(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(xml.find("<failure"), std::string::npos) << xml;
  fs::remove(junit);
}

TEST(Validate, TextReportsSayTheyComeFromRecordedAnswers) {
  const ValidateOutcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "l4x1.yaml", "--level", "quick"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("backend: replay (recorded answers, not a real GPU)"), std::string::npos) << r.out;
}

TEST(Validate, TheBackendCanComeFromTheEnvironment) {
  const ValidateOutcome r = gpuenv({"validate", "--json", "--check", "driver_loaded"}, {{"GPUENV_BACKEND", "replay:" + k_data + "l4x1.yaml"}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["backend"], "replay");
}

TEST(Validate, OnlyTheRequestedChecksRunAndAnUnknownOneIsAUsageError) {
  int code = -1;
  const auto report = validate_json("h100x8.yaml", {"--check", "hbm_", "--check", "ecc_errors"}, &code);
  std::vector<std::string> keys;
  for (const auto& c : report["checks"]) keys.push_back(c["key"]);
  EXPECT_EQ(keys, (std::vector<std::string>{"ecc_errors", "hbm_bandwidth"}));
  const ValidateOutcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "h100x8.yaml", "--check", "no_such_check"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no_such_check"), std::string::npos) << r.err;
}

TEST(Validate, BadInputsAreUsageErrors) {
  EXPECT_EQ(gpuenv({"validate", "--backend", "replay:" + k_data + "h100x8.yaml", "--gpus", "0,x"}).code, 2);
  EXPECT_EQ(gpuenv({"validate", "--backend", "replay:" + k_data + "h100x8.yaml", "--gpus", "9"}).code, 2);
  EXPECT_EQ(gpuenv({"validate", "--backend", "quantum"}).code, 2);
  const ValidateOutcome missing = gpuenv({"validate", "--backend", "replay:/nonexistent/replay.yaml"});
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("/nonexistent/replay.yaml"), std::string::npos) << missing.err;
}

TEST(Validate, AnImageThatIsNotALayoutIsAUsageError) {
  const ValidateOutcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "h200x1.yaml", "--image", "/nonexistent/gpuenv-out/x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no OCI layout directory at '/nonexistent/gpuenv-out/x'"), std::string::npos) << r.err;
}

TEST(Validate, WithoutAnImageTheImageChecksSkipAndNeverPass) {
  int code = -1;
  const auto report = validate_json("h200x1.yaml", {"--check", "image"}, &code);
  EXPECT_EQ(code, 4);  // nothing ran, so nothing was validated
  for (const char* key : {"libraries_load", "framework_smoke", "cudnn_smoke"}) {
    EXPECT_TRUE(results(report, key, "pass").empty()) << key;
    EXPECT_FALSE(results(report, key, "skip").empty()) << key << ": " << report.dump(1).substr(0, 2000);
  }
}

TEST(Validate, PreflightWritesItsStatusAtomically) {
  const fs::path dir = fs::temp_directory_path() / ("gpuenv-preflight-" + std::to_string(::getpid()));
  const ValidateOutcome r = gpuenv({"preflight", "--backend", "replay:" + k_data + "h200x1.yaml", "--status-file", (dir / "run/status.json").string()});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  std::ifstream in(dir / "run/status.json");
  const auto status = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(status.is_discarded());
  EXPECT_EQ(status["level"], "quick");
  EXPECT_EQ(status["exit_code"], 0);
  EXPECT_EQ(status["backend"], "replay");
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir / "run")) ++files;
  EXPECT_EQ(files, 1u);  // no temporary left behind
  fs::remove_all(dir);
}

/// The checks of a JSON report without the times the run clocked itself (each check's, a context's opening).
nlohmann::json judged(nlohmann::json report) {
  for (auto& c : report["checks"]) {
    c.erase("duration_ms");
    for (auto& g : c["results"]) {
      if (c["key"] == "context_create") g.erase("message");  // "context created in 1 ms": the same clock
      auto& metrics = g["metrics"];
      metrics.erase(std::remove_if(metrics.begin(), metrics.end(), [](const nlohmann::json& m) { return m["name"] == "open_ms"; }), metrics.end());
    }
  }
  return report["checks"];
}

TEST(Validate, ARecordedRunReplaysToTheSameJudgement) {
  const fs::path dir = fs::temp_directory_path() / ("gpuenv-record-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string file = (dir / "h100x8-recorded.yaml").string();
  const ValidateOutcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "h100x8.yaml", "--json", "--record", file, "--gpus", "0,3"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("recorded what the replay backend answered in " + file), std::string::npos) << r.err;
  std::ifstream in(file);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  EXPECT_EQ(text.rfind("# gpuenv-replay-v1 recording: what the replay backend answered during `gpuenv validate --level standard --gpus 0,3`,\n", 0), 0u)
      << text.substr(0, 300);
  const auto first = nlohmann::json::parse(r.out);
  const ValidateOutcome replayed = gpuenv({"validate", "--backend", "replay:" + file, "--json", "--gpus", "0,3"});
  EXPECT_EQ(replayed.code, 0) << replayed.err;
  const auto second = nlohmann::json::parse(replayed.out);
  EXPECT_EQ(judged(second), judged(first));
  EXPECT_EQ(second["gpus"], first["gpus"]);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u) << "no temporary left beside the recording";
  fs::remove_all(dir);
}

TEST(Validate, ARecordingThatCannotBeWrittenLeavesTheReportStanding) {
  // /proc takes no new file, even from root: the run's report is still printed whole, then the error, and the
  // exit code is the error's since the validation itself passed.
  const ValidateOutcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "h200x1.yaml", "--json", "--record", "/proc/gpuenv-record-test.yaml"});
  EXPECT_NE(r.code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << r.out;
  EXPECT_EQ(report["status"], "pass");
  EXPECT_NE(r.err.find("/proc/gpuenv-record-test.yaml"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("recorded what"), std::string::npos) << r.err;
}

TEST(Validate, RecordingIntoAMissingDirectoryIsRefusedBeforeTheRun) {
  const ValidateOutcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "h200x1.yaml", "--record", "/nonexistent/gpuenv-record/h200.yaml"});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--record's directory does not exist"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("memtest"), std::string::npos) << "nothing ran: " << r.out;
  const ValidateOutcome dir = gpuenv({"validate", "--backend", "replay:" + k_data + "h200x1.yaml", "--record", fs::temp_directory_path().string()});
  EXPECT_EQ(dir.code, 2) << dir.out << dir.err;
  EXPECT_NE(dir.err.find("--record names a directory, not a file"), std::string::npos) << dir.err;
}

TEST(Validate, ChecksListsEveryCheckWithItsLevels) {
  const ValidateOutcome r = gpuenv({"checks", "--json"});
  ASSERT_EQ(r.code, 0);
  const auto j = nlohmann::json::parse(r.out);
  std::set<std::string> keys;
  for (const auto& c : j["checks"]) keys.insert(c["key"]);
  for (const char* k : {"driver_loaded", "ecc_errors", "row_remap", "pcie_link", "memtest", "gemm_consistency", "hbm_bandwidth", "gemm_tflops"})
    EXPECT_TRUE(keys.count(k)) << k;
}

// Issue 38, item 2: cdi_spec from the command line, on a fixture host tree (--cdi-root) with a spec directory
// (--cdi-dir); the replay's driver (h200x1.yaml: 550.90.07) is the version the spec's libraries must carry.
TEST(Validate, CdiSpecJudgesTheNamedDirectoriesAndNeverThisHostUnderAReplay) {
  const fs::path host = fs::temp_directory_path() / ("gpuenv-cli-cdi-" + std::to_string(::getpid()));
  fs::remove_all(host);
  fs::create_directories(host / "etc/cdi");
  fs::create_directories(host / "usr/lib");
  fs::create_directories(host / "dev");
  std::ofstream(host / "dev/nvidia0") << "";
  std::ofstream(host / "usr/lib/libcuda.so.550.90.07") << "";
  auto spec = [](const std::string& version) {
    return "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
           "containerEdits:\n  mounts:\n  - {hostPath: /usr/lib/libcuda.so." + version + ", containerPath: /usr/lib/libcuda.so." + version + "}\n";
  };
  std::ofstream(host / "etc/cdi/nvidia.yaml") << spec("550.90.07");
  const std::vector<std::string> base = {"validate", "--backend", "replay:" + k_data + "h200x1.yaml", "--check", "cdi_spec", "--json"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return gpuenv(args);
  };
  // A replay stands for a recorded machine: this host's /etc/cdi is not judged against it.
  ValidateOutcome r = with({});
  EXPECT_EQ(results(nlohmann::json::parse(r.out), "cdi_spec", "skip"), (std::vector<std::string>{"-:"})) << r.out;
  r = with({"--cdi-dir", (host / "etc/cdi").string(), "--cdi-root", host.string()});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(results(nlohmann::json::parse(r.out), "cdi_spec", "pass"), (std::vector<std::string>{"-:"})) << r.out;
  std::ofstream(host / "etc/cdi/nvidia.yaml") << spec("535.104.05");
  r = with({"--cdi-dir", (host / "etc/cdi").string(), "--cdi-root", host.string()});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(results(nlohmann::json::parse(r.out), "cdi_spec", "fail"), (std::vector<std::string>{"-:cdi_driver_mismatch"})) << r.out;
  EXPECT_NE(r.out.find("nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"), std::string::npos) << r.out;
  r = with({"--cdi-root", (host / "no-such-dir").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("validate.cdi_root"), std::string::npos) << r.err;
  fs::remove_all(host);
}

// Issue 14, broken case 7: reports must be honest and readable.

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) ++n;
  return n;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// The throughput figures of `report` that no reference judged, as "gpu:key:metric".
std::vector<std::string> unjudged_figures(const nlohmann::json& report) {
  std::vector<std::string> out;
  for (const auto& c : report["checks"]) {
    if (c["category"] != "throughput") continue;
    for (const auto& r : c["results"]) {
      std::set<std::string> names;
      for (const auto& m : r["metrics"]) names.insert(m["name"].get<std::string>());
      for (const auto& name : names) {
        const auto at = name.find("median_");
        if (at == std::string::npos) continue;
        const std::string reference = name.substr(0, at) + "reference_" + name.substr(at + 7);
        if (!names.count(reference))
          out.push_back((r["gpu"].is_null() ? std::string("-") : std::to_string(r["gpu"].get<int>())) + ":" +
                        c["key"].get<std::string>() + ":" + name);
      }
    }
  }
  return out;
}

TEST(ValidateReport, AFigureNoReferenceJudgesIsMeasuredNeverPass) {
  for (const char* file : {"h100x8.yaml", "l4x1.yaml", "h200x1.yaml", "a100_mig.yaml", "a100_mig_7x1g.yaml",
                           "h100_mig_7x1g.yaml", "h100_mig_mixed.yaml"}) {
    const auto report = validate_json(file, {});
    for (const auto& c : report["checks"])
      for (const auto& r : c["results"]) {
        EXPECT_FALSE(r["status"] == "pass" && r["code"] == "no_threshold") << file << " " << c["key"] << ": " << r["message"];
        if (r["code"] == "no_threshold") EXPECT_EQ(r["status"], "measured") << file << " " << c["key"];
      }
  }
}

TEST(ValidateReport, EveryThroughputFigureOfTheRecordedGpusIsJudged) {
  // The L4's FP64 rate is not on its datasheet, so that one figure stays measured (recipes/gpus/thresholds.yaml).
  const std::map<std::string, std::vector<std::string>> expected = {
      {"h100x8.yaml", {}}, {"h200x1.yaml", {}}, {"a100_mig.yaml", {}}, {"l4x1.yaml", {"0:gemm_tflops:fp64.median_tflops"}},
      {"a100_mig_7x1g.yaml", {}}, {"h100_mig_7x1g.yaml", {}}, {"h100_mig_mixed.yaml", {}}};
  for (const auto& [file, unjudged] : expected) {
    const auto report = validate_json(file, {});
    EXPECT_EQ(unjudged_figures(report), unjudged) << file;
  }
}

TEST(ValidateReport, HostDeviceReferencesFollowTheLinkWidth) {
  // The same H100 on a Gen5 x8 link (max width 8) gets half the x16 reference, and passes at x8 speed (the node
  // rule compares it with GPUs on the same kind of link only).
  const auto x16 = validate_json("h100x8.yaml", {"--check", "h2d_bandwidth"});
  const auto x8 = validate_json("faults/pcie_x8_slot.yaml", {"--check", "h2d_bandwidth"});
  auto reference = [](const nlohmann::json& report, int gpu) {
    for (const auto& r : report["checks"][0]["results"])
      if (r["gpu"] == gpu)
        for (const auto& m : r["metrics"])
          if (m["name"] == "reference_gbs") return m["value"].get<double>();
    return -1.0;
  };
  ASSERT_GT(reference(x16, 2), 0) << x16.dump(1).substr(0, 3000);
  EXPECT_DOUBLE_EQ(reference(x8, 2), reference(x16, 2) / 2) << x8.dump(1).substr(0, 3000);
  EXPECT_EQ(results(x8, "h2d_bandwidth", "pass").size(), 8u);
}

TEST(ValidateReport, WithoutReferencesAFigureIsMeasuredAndTheRunStillPasses) {
  const fs::path file = fs::temp_directory_path() / ("gpuenv-empty-thresholds-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(file) << "schema: gpuenv-thresholds-v1\ngpus: []\n";
  int code = -1;
  const auto report = validate_json("h200x1.yaml", {"--check", "hbm_bandwidth", "--thresholds", file.string()}, &code);
  const ValidateOutcome text = gpuenv({"validate", "--backend", "replay:" + k_data + "h200x1.yaml", "--check", "hbm_bandwidth",
                               "--thresholds", file.string()});
  fs::remove(file);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(results(report, "hbm_bandwidth", "measured"), (std::vector<std::string>{"0:no_threshold"}));
  EXPECT_NE(text.out.find("MEASURED"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("PASS     hbm_bandwidth"), std::string::npos) << text.out;
}

TEST(ValidateReport, AHostWithoutADriverCouldNotRunOnceWithItsHint) {
  const ValidateOutcome text = gpuenv({"validate", "--backend", "replay:" + k_data + "faults/no_driver.yaml"});
  int code = -1;
  const auto report = validate_json("faults/no_driver.yaml", {}, &code);
  EXPECT_EQ(text.code, 4);
  EXPECT_EQ(code, 4);
  EXPECT_EQ(report["status"], "could_not_run");
  EXPECT_EQ(occurrences(text.out, "install or load the NVIDIA driver"), 1u) << text.out;
  EXPECT_EQ(occurrences(text.out, "could not run"), 2u) << "the header and the count of skipped GPU checks\n" << text.out;
  const auto lines = lines_of(text.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().rfind("result: COULD NOT RUN", 0), 0u) << text.out;
  EXPECT_LT(lines.size(), 20u) << text.out;
}

// data_read reads no GPU: alone on a host without a driver it is judged like any check, by --data-min or the spec.
TEST(ValidateData, DataReadRunsWithoutADriverAndTakesItsThresholdFromTheFlagOrTheSpec) {
  const fs::path dir = fs::temp_directory_path() / ("gpuenv-cli-data-read-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string replay = "faults/no_driver.yaml";
  int code = -1;
  auto pass = validate_json(replay, {"--level", "quick", "--check", "data_read", "--data", dir.string(), "--data-min", "1kB/s"}, &code);
  EXPECT_EQ(code, 0) << pass.dump(2);
  EXPECT_EQ(pass["status"], "pass");
  EXPECT_EQ(pass["could_not_run"], false);
  EXPECT_EQ(results(pass, "data_read", "pass"), (std::vector<std::string>{"-:"}));
  auto measured = validate_json(replay, {"--level", "quick", "--check", "data_read", "--data", dir.string()}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(results(measured, "data_read", "measured"), (std::vector<std::string>{"-:data_read_unjudged"}));
  const fs::path spec = dir / "spec.yaml";
  std::ofstream(spec) << "schema: gpuenv-spec-v1\nname: x\nbase: debian:12\nvalidate: {data_read_min: 900TB/s}\n";
  auto slow = validate_json(replay, {"--level", "quick", "--check", "data_read", "--data", dir.string(), "--spec", spec.string()}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(results(slow, "data_read", "fail"), (std::vector<std::string>{"-:data_read_slow"}));
  auto missing = validate_json(replay, {"--level", "quick", "--check", "data_read", "--data", (dir / "nope").string()}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(results(missing, "data_read", "fail"), (std::vector<std::string>{"-:data_path_unusable"}));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, (std::vector<std::string>{"spec.yaml"}));  // every directory of gpuenv's own was removed
  fs::remove_all(dir);
}

TEST(ValidateData, BadRatesAndAThresholdWithoutDataAreUsageErrors) {
  const std::string replay = "replay:" + k_data + "faults/no_driver.yaml";
  const auto bits = gpuenv({"validate", "--backend", replay, "--data", "/tmp", "--data-min", "5Gb/s"});
  EXPECT_EQ(bits.code, 2);
  EXPECT_NE(bits.err.find("config.bad_rate"), std::string::npos) << bits.err;
  const auto alone = gpuenv({"validate", "--backend", replay, "--data-min", "5GB/s"});
  EXPECT_EQ(alone.code, 2);
  EXPECT_NE(alone.err.find("without --data"), std::string::npos) << alone.err;
}

TEST(ValidateReport, EightGpusGetOneRowPerCheck) {
  const ValidateOutcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "h100x8.yaml"});
  EXPECT_EQ(r.code, 0);
  const auto lines = lines_of(r.out);
  EXPECT_LT(lines.size(), 75u) << r.out;
  for (const char* key : {"ecc_errors", "hbm_bandwidth", "gemm_tflops", "p2p_bandwidth"}) {
    std::size_t rows = 0;
    for (const auto& line : lines) rows += line.find(std::string(" ") + key + " ") != std::string::npos ? 1 : 0;
    EXPECT_EQ(rows, 1u) << key << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("PASS 0-7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("figures per GPU"), std::string::npos) << r.out;
}

TEST(ValidateReport, OnlyTheGpuThatDiffersGetsADetailLine) {
  const ValidateOutcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "faults/pcie_x8.yaml", "--check", "pcie_link"});
  EXPECT_EQ(r.code, 1);
  const auto lines = lines_of(r.out);
  std::vector<std::string> rows;
  for (const auto& line : lines)
    if (line.find("pcie_link") != std::string::npos || line.find("FAIL GPU") != std::string::npos) rows.push_back(line);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[0].rfind("PASS 0-1,3-7, FAIL 2", 0), 0u) << r.out;
  EXPECT_NE(rows[1].find("FAIL GPU 2:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[pcie_downtrained]"), std::string::npos) << r.out;
}

}  // namespace
