// `gpuenv validate`, `checks` and `preflight` in process, on the replay backend: every recorded fault scenario
// gives the right check, status, code and exit code, and reports say they came from recorded answers.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/context.hpp"

namespace {

namespace fs = std::filesystem;

const std::string k_data = std::string(GPUENV_SOURCE_DIR) + "/tests/data/validate/";

struct Outcome {
  int code = -1;
  std::string out, err;
  bool exit_now = false;
};

Outcome gpuenv(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  std::ostringstream o, e;
  gpuenv::cli::Context ctx;
  ctx.out = &o;
  ctx.err = &e;
  ctx.env = std::move(env);
  Outcome r;
  r.code = gpuenv::cli::run(args, ctx);
  r.out = o.str();
  r.err = e.str();
  r.exit_now = ctx.exit_now;
  return r;
}

nlohmann::json validate_json(const std::string& replay, std::vector<std::string> extra, int* code = nullptr) {
  std::vector<std::string> args = {"validate", "--backend", "replay:" + k_data + replay, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const Outcome r = gpuenv(args);
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
  for (const char* file : {"h100x8.yaml", "l4x1.yaml", "h200x1.yaml", "a100_mig.yaml"}) {
    int code = -1;
    const auto report = validate_json(file, {}, &code);
    EXPECT_EQ(code, 0) << file;
    EXPECT_NE(report["status"], "fail") << file;
  }
}

TEST(Validate, AHungCheckIsAFailureTheReportIsStillWrittenAndTheProcessMustExitAtOnce) {
  const fs::path junit = fs::temp_directory_path() / ("gpuenv-junit-" + std::to_string(::getpid()) + ".xml");
  const Outcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "faults/kernel_hang.yaml", "--level", "quick", "--gpus", "0", "--junit", junit.string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.exit_now);
  EXPECT_NE(r.out.find("hang"), std::string::npos) << r.out;
  std::ifstream in(junit);
  const std::string xml(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(xml.find("<failure"), std::string::npos) << xml;
  fs::remove(junit);
}

TEST(Validate, TextReportsSayTheyComeFromRecordedAnswers) {
  const Outcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "l4x1.yaml", "--level", "quick"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("backend: replay (recorded answers, not a real GPU)"), std::string::npos) << r.out;
}

TEST(Validate, TheBackendCanComeFromTheEnvironment) {
  const Outcome r = gpuenv({"validate", "--json", "--check", "driver_loaded"}, {{"GPUENV_BACKEND", "replay:" + k_data + "l4x1.yaml"}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["backend"], "replay");
}

TEST(Validate, OnlyTheRequestedChecksRunAndAnUnknownOneIsAUsageError) {
  int code = -1;
  const auto report = validate_json("h100x8.yaml", {"--check", "hbm_", "--check", "ecc_errors"}, &code);
  std::vector<std::string> keys;
  for (const auto& c : report["checks"]) keys.push_back(c["key"]);
  EXPECT_EQ(keys, (std::vector<std::string>{"ecc_errors", "hbm_bandwidth"}));
  const Outcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "h100x8.yaml", "--check", "no_such_check"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no_such_check"), std::string::npos) << r.err;
}

TEST(Validate, BadInputsAreUsageErrors) {
  EXPECT_EQ(gpuenv({"validate", "--backend", "replay:" + k_data + "h100x8.yaml", "--gpus", "0,x"}).code, 2);
  EXPECT_EQ(gpuenv({"validate", "--backend", "replay:" + k_data + "h100x8.yaml", "--gpus", "9"}).code, 2);
  EXPECT_EQ(gpuenv({"validate", "--backend", "quantum"}).code, 2);
  const Outcome missing = gpuenv({"validate", "--backend", "replay:/nonexistent/replay.yaml"});
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("/nonexistent/replay.yaml"), std::string::npos) << missing.err;
}

TEST(Validate, AnImageThatIsNotALayoutIsAUsageError) {
  const Outcome r = gpuenv({"validate", "--backend", "replay:" + k_data + "h200x1.yaml", "--image", "/nonexistent/gpuenv-out/x"});
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
  const Outcome r = gpuenv({"preflight", "--backend", "replay:" + k_data + "h200x1.yaml", "--status-file", (dir / "run/status.json").string()});
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

TEST(Validate, ChecksListsEveryCheckWithItsLevels) {
  const Outcome r = gpuenv({"checks", "--json"});
  ASSERT_EQ(r.code, 0);
  const auto j = nlohmann::json::parse(r.out);
  std::set<std::string> keys;
  for (const auto& c : j["checks"]) keys.insert(c["key"]);
  for (const char* k : {"driver_loaded", "ecc_errors", "row_remap", "pcie_link", "memtest", "gemm_consistency", "hbm_bandwidth", "gemm_tflops"})
    EXPECT_TRUE(keys.count(k)) << k;
}

}  // namespace
