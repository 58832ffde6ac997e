// A project file's framework pin under gpuenv's rules (issue 37, item 2), in process and without a network: the pin
// is the spec's framework, a pin that breaks a rule is exit 3 with the reason and the nearest pins that fit, and a
// spec that asks another version than the project pins is refused.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/context.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Outcome {
  int code;
  std::string out, err;
};

class CliProject : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("gpuenv-cli-project-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  Outcome run(std::vector<std::string> args) {
    std::ostringstream out, err;
    gpuenv::cli::Context ctx;
    ctx.out = &out;
    ctx.err = &err;
    ctx.env = {{"GPUENV_GPUS", "none"}};
    const int code = gpuenv::cli::run(args, ctx);
    return {code, out.str(), err.str()};
  }
  std::string write(const std::string& name, const std::string& text) {
    const std::string p = (m_dir / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  fs::path m_dir;
};

TEST_F(CliProject, APinnedTorchIsTheFrameworkWithItsRules) {
  write("requirements.txt", "torch==2.5.1\nnumpy==2.1.3\n");
  const auto spec = write("spec.yaml", "name: x\npython: '3.11'\ngpu: {models: [H100], driver: '570.86.15'}\npackages: {python_project: requirements.txt}\n");
  auto r = run({"resolve", spec, "--json"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["frameworks"].size(), 1u) << r.out;
  EXPECT_EQ(j["frameworks"]["torch"]["version"], "2.5.1");
  EXPECT_EQ(j["frameworks"]["torch"]["default_variant"], true);
  EXPECT_EQ(j["cuda"]["version"].get<std::string>().rfind("12.4", 0), 0u) << r.out;  // the default variant's CUDA, as the index serves it
}

TEST_F(CliProject, AnOldTorchWithBlackwellGpusIsExitThreeWithTheNearestPins) {
  write("requirements.txt", "torch==2.5.1\n");
  const auto spec = write("spec.yaml", "name: x\npython: '3.11'\ngpu: {models: [B200], driver: '570.86.15'}\npackages: {python_project: requirements.txt}\n");
  auto r = run({"resolve", spec});
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("cannot run on B200 (sm_100)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the project pins torch==2.5.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the nearest pins that fit: torch==2.8.0"), std::string::npos) << r.out;
  auto j = run({"resolve", spec, "--json"});
  EXPECT_EQ(j.code, 3);
  EXPECT_EQ(json::parse(j.out)["status"], "unsatisfiable");
}

TEST_F(CliProject, ACuda11BuildWithACuda12SpecIsExitThreeWithTheIndexBuild) {
  write("requirements.txt", "--extra-index-url https://download.example/whl/cu118\ntorch==2.5.1+cu118\n");
  const auto spec = write("spec.yaml", "name: x\npython: '3.11'\ncuda: '12'\ngpu: {models: [H100], driver: '570.86.15'}\n"
                                       "packages: {python_project: requirements.txt}\n");
  auto r = run({"resolve", spec});
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("torch 2.5.1+cu118 is built for CUDA 11.8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("torch==2.5.1 (the cu124 build)"), std::string::npos) << r.out;
}

TEST_F(CliProject, ASpecAskingAnotherVersionIsRefused) {
  write("requirements.txt", "torch==2.5.1\n");
  const auto spec = write("spec.yaml", "name: x\nframeworks: {torch: '2.7'}\ngpu: {models: [H100], driver: '570.86.15'}\n"
                                       "packages: {python_project: requirements.txt}\n");
  auto r = run({"resolve", spec});
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("the spec asks torch 2.7 and"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("project.framework_conflict"), std::string::npos) << r.err;
}

TEST_F(CliProject, FromWithoutASpecAndItsUsageErrors) {
  const auto req = write("requirements.txt", "jax==0.4.30\n");
  auto r = run({"resolve", "--from", req, "--gpu", "H100", "--driver", "570.86.15", "--json"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(json::parse(r.out)["frameworks"]["jax"]["version"], "0.4.30");
  EXPECT_EQ(run({"resolve"}).code, 2);
  EXPECT_EQ(run({"resolve", write("s.yaml", "name: x\n"), "--extra", "cuda"}).code, 2);
  auto missing = run({"resolve", "--from", (m_dir / "nope.txt").string(), "--gpu", "H100"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("project.read"), std::string::npos) << missing.err;
}

}  // namespace
