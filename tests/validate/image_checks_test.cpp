// The image checks (libraries_load, framework_smoke, cudnn_smoke) against a fake run_in_image that answers with
// canned probe reports, and the probe script itself run by this machine's python3 (no framework, no GPU here).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fakes/fake_gpu_backend.hpp"
#include "validate/check.hpp"
#include "validate/checks/check_support.hpp"
#include "validate/error_codes.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::testing::FakeGpuBackend;
using gpuenv::validate::Check;
using gpuenv::validate::CheckContext;
using gpuenv::validate::CheckInputs;
using gpuenv::validate::GpuInfo;
using gpuenv::validate::GpuOutcome;
using gpuenv::validate::ImageRun;
using gpuenv::validate::Level;
using gpuenv::validate::CheckStatus;
using nlohmann::json;

/// The report a healthy image with torch 2.5.1 for CUDA 12.4 and cuDNN 9.1 gives on one H200.
json good_report() {
  json lib = {{"loaded", true}, {"error", nullptr}};
  json r = {{"schema", "gpuenv-image-probe-v1"},
            {"python", "3.11.2"},
            {"error", nullptr},
            {"devices", {"/dev/nvidia0", "/dev/nvidia-uvm", "/dev/nvidiactl"}}};
  r["libraries"] = {{"error", nullptr}, {"timed_out", false}};
  r["libraries"]["driver"] = lib;
  r["libraries"]["driver"].update({{"path", "/run/gpuenv/driver/libcuda.so.1"}, {"version", 12060}, {"version_text", "12.6"}});
  r["libraries"]["cudart"] = lib;
  r["libraries"]["cudart"].update({{"path", "/usr/lib/x86_64-linux-gnu/libcudart.so.12.4.127"},
                                   {"version", 12040},
                                   {"version_text", "12.4"},
                                   {"device_count", 1},
                                   {"device_error", nullptr}});
  r["libraries"]["cublas"] = lib;
  r["libraries"]["cublas"].update({{"path", "/usr/lib/x86_64-linux-gnu/libcublas.so.12.4.5.8"}, {"version_text", "12.4.5"}});
  r["libraries"]["cudnn"] = lib;
  r["libraries"]["cudnn"].update({{"path", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0"}, {"version", 90100}, {"version_text", "9.1.0"}});
  r["frameworks"]["torch"] = {{"module", "torch"},
                              {"imported", true},
                              {"error", nullptr},
                              {"timed_out", false},
                              {"version", "2.5.1+cu124"},
                              {"cuda", "12.4"},
                              {"cudnn", "9.1.0"},
                              {"gpu_visible", true},
                              {"device_count", 1},
                              {"device_name", "NVIDIA H200"},
                              {"matmul", {{"max_abs_err", 3.8e-6}, {"max_abs_ref", 31.2}, {"error", nullptr}}},
                              {"conv", {{"max_abs_err", 1.9e-6}, {"max_abs_ref", 14.7}, {"error", nullptr}, {"cudnn_enabled", true}}}};
  return r;
}

/// Stands in for the sandbox: records each command and answers with a canned run.
struct FakeImage {
  ImageRun answer;
  std::optional<gpuenv::Error> error;
  int calls = 0;
  std::vector<std::string> last_command;
  std::chrono::milliseconds last_timeout{0};

  void reply(const json& report) { answer.out = report.dump() + "\n"; }
};

class ImageChecks : public ::testing::Test {
 protected:
  FakeGpuBackend backend;
  CheckInputs inputs;
  std::shared_ptr<FakeImage> image = std::make_shared<FakeImage>();
  std::vector<std::unique_ptr<Check>> checks = gpuenv::validate::checks::image_checks();
  std::vector<GpuInfo> gpus;

  void SetUp() override {
    backend.driver_state.loaded = true;
    backend.driver_state.version = "560.35.03";
    backend.driver_state.cuda_driver_version = 12060;
    GpuInfo g;
    g.index = 0;
    g.uuid = "GPU-11111111-2222-3333-4444-555555555555";
    g.name = "NVIDIA H200";
    backend.inventory.push_back(g);
    gpus = backend.inventory;
    inputs.level = Level::standard;
    inputs.lock_cuda = "12.4";
    inputs.lock_cudnn = "9.1.0";
    inputs.lock_frameworks = {{"torch", "2.5.1"}};
    inputs.image = "gpuenv-out/torch";
    image->reply(good_report());
    auto fake = image;
    inputs.run_in_image = [fake](const std::vector<std::string>& command, std::chrono::milliseconds timeout) -> gpuenv::Result<ImageRun> {
      ++fake->calls;
      fake->last_command = command;
      fake->last_timeout = timeout;
      if (fake->error) return *fake->error;
      return fake->answer;
    };
  }

  Check& check(const std::string& key) {
    for (auto& c : checks)
      if (c->key() == key) return *c;
    ADD_FAILURE() << "no check " << key;
    return *checks.front();
  }

  std::optional<std::string> not_applicable(const std::string& key) {
    const auto state = backend.driver_state;
    CheckContext context{backend, inputs, state, gpus, std::chrono::steady_clock::now()};
    return check(key).not_applicable(context);
  }

  /// Runs one check as the runner would and returns its single host-wide outcome.
  GpuOutcome run(const std::string& key) {
    Check& c = check(key);
    const auto state = backend.driver_state;
    CheckContext context{backend, inputs, state, gpus, std::chrono::steady_clock::now() + c.deadline(inputs.level, gpus.size())};
    EXPECT_EQ(c.not_applicable(context), std::nullopt) << key;
    auto outcomes = c.run(context);
    EXPECT_EQ(outcomes.size(), 1u) << key;
    if (outcomes.empty()) return GpuOutcome{};
    const GpuOutcome& o = outcomes.front();
    EXPECT_FALSE(o.message.empty()) << key;
    if (o.status == CheckStatus::fail || o.status == CheckStatus::warn) {
      EXPECT_NE(gpuenv::validate::find_error_code(o.code), nullptr) << key << ": '" << o.code << "' " << o.message;
      EXPECT_FALSE(o.hint.empty()) << key;
    }
    return o;
  }
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(ImageChecks, AHealthyImagePassesAllThreeWithOneRunOfThePython) {
  for (const char* key : {"libraries_load", "framework_smoke", "cudnn_smoke"}) {
    const GpuOutcome o = run(key);
    EXPECT_EQ(o.status, CheckStatus::pass) << key << ": " << o.message << " [" << o.code << "]";
  }
  EXPECT_EQ(image->calls, 1);
  EXPECT_TRUE(contains(run("libraries_load").message, "libcudart 12.4, libcublas 12.4.5, libcudnn 9.1.0 load"));
  EXPECT_TRUE(contains(run("framework_smoke").message, "torch 2.5.1+cu124 imports, sees 1 GPU(s) (NVIDIA H200)"));
}

TEST_F(ImageChecks, TheProbeIsTheImagesPython3WithTheLocksVersionsAndATimeoutBelowTheDeadline) {
  (void)run("framework_smoke");
  ASSERT_EQ(image->last_command.size(), 4u);
  EXPECT_EQ(image->last_command[0], "python3");
  EXPECT_EQ(image->last_command[1], "-c");
  EXPECT_EQ(image->last_command[2], std::string(gpuenv::validate::checks::image_probe_script()));
  const json args = json::parse(image->last_command[3]);
  EXPECT_EQ(args["cuda"], "12.4");
  EXPECT_EQ(args["cudnn"], "9.1.0");
  EXPECT_EQ(args["frameworks"], json({"torch"}));
  EXPECT_FALSE(args.contains("visible_devices"));  // every GPU: no restriction
  EXPECT_LT(image->last_timeout, check("framework_smoke").deadline(Level::standard, 1));
  EXPECT_LT(args["timeout_s"].get<long long>() * 1000, image->last_timeout.count());
}

TEST_F(ImageChecks, ChosenGpusAreMadeVisibleByUuid) {
  inputs.gpus = {0};
  (void)run("framework_smoke");
  const json args = json::parse(image->last_command.at(3));
  EXPECT_EQ(args["visible_devices"], "GPU-11111111-2222-3333-4444-555555555555");
}

TEST_F(ImageChecks, RunAtStandardAndLongOnlyAndTouchTheGpu) {
  for (auto& c : checks) {
    EXPECT_EQ(c->category(), "image");
    EXPECT_TRUE(c->uses_gpu()) << c->key();
    EXPECT_FALSE(c->runs_at(Level::quick)) << c->key();
    EXPECT_TRUE(c->runs_at(Level::standard)) << c->key();
    EXPECT_TRUE(c->runs_at(Level::long_)) << c->key();
    EXPECT_GT(c->deadline(Level::long_, 1), c->deadline(Level::standard, 1));
  }
}

// Last of the checks that use a GPU: only checks that read none (data_read) come after them.
TEST_F(ImageChecks, TheyAreRegisteredLastInAllChecks) {
  auto all = gpuenv::validate::all_checks();
  while (!all.empty() && !all.back()->uses_gpu()) all.pop_back();
  ASSERT_GE(all.size(), 3u);
  EXPECT_EQ(all[all.size() - 3]->key(), "libraries_load");
  EXPECT_EQ(all[all.size() - 2]->key(), "framework_smoke");
  EXPECT_EQ(all[all.size() - 1]->key(), "cudnn_smoke");
}

TEST_F(ImageChecks, WithoutAnImageTheySkipSayingSo) {
  inputs.run_in_image = nullptr;
  for (const char* key : {"libraries_load", "framework_smoke", "cudnn_smoke"})
    EXPECT_EQ(not_applicable(key), std::optional<std::string>("no --image given")) << key;
  EXPECT_EQ(image->calls, 0);
}

TEST_F(ImageChecks, TheReplayBackendSkipsThem) {
  backend.backend_name = "replay";
  for (const char* key : {"libraries_load", "framework_smoke", "cudnn_smoke"})
    EXPECT_EQ(not_applicable(key), std::optional<std::string>("the replay backend does not run the image's framework")) << key;
  EXPECT_EQ(image->calls, 0);
}

TEST_F(ImageChecks, WithoutADriverOrALockedFrameworkTheySkip) {
  inputs.lock_frameworks.clear();
  EXPECT_TRUE(not_applicable("framework_smoke"));
  EXPECT_TRUE(not_applicable("cudnn_smoke"));
  EXPECT_EQ(not_applicable("libraries_load"), std::nullopt);
  inputs.lock_frameworks = {{"torch", "2.5.1"}};
  inputs.lock_cudnn.reset();
  EXPECT_EQ(not_applicable("cudnn_smoke"), std::optional<std::string>("the lock has no cuDNN"));
  backend.driver_state.loaded = false;
  EXPECT_EQ(not_applicable("libraries_load"), std::optional<std::string>("no NVIDIA driver is loaded"));
}

TEST_F(ImageChecks, ATorchVersionOtherThanTheLocksFailsWithBothVersions) {
  json r = good_report();
  r["frameworks"]["torch"]["version"] = "2.4.0+cu121";
  image->reply(r);
  const GpuOutcome o = run("framework_smoke");
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "image_framework_mismatch");
  EXPECT_TRUE(contains(o.message, "2.4.0+cu121")) << o.message;
  EXPECT_TRUE(contains(o.message, "2.5.1")) << o.message;
}

TEST_F(ImageChecks, ALocalVersionSuffixIsNotAMismatch) {
  inputs.lock_frameworks = {{"torch", "2.5.1+cu124"}};
  EXPECT_EQ(run("framework_smoke").status, CheckStatus::pass);
}

TEST_F(ImageChecks, ACudaRuntimeOtherThanTheLocksFails) {
  json r = good_report();
  r["libraries"]["cudart"]["version_text"] = "12.1";
  r["frameworks"]["torch"]["cuda"] = "12.1";
  image->reply(r);
  const GpuOutcome libs = run("libraries_load");
  EXPECT_EQ(libs.status, CheckStatus::fail);
  EXPECT_EQ(libs.code, "image_cuda_mismatch");
  EXPECT_TRUE(contains(libs.message, "libcudart 12.1")) << libs.message;
  EXPECT_TRUE(contains(libs.message, "12.4")) << libs.message;
  const GpuOutcome fw = run("framework_smoke");
  EXPECT_EQ(fw.status, CheckStatus::fail);
  EXPECT_EQ(fw.code, "image_cuda_mismatch");
  EXPECT_TRUE(contains(fw.message, "CUDA 12.1")) << fw.message;
}

TEST_F(ImageChecks, ACudnnMajorOtherThanTheLocksFailsButAPatchLevelDoesNot) {
  json r = good_report();
  r["libraries"]["cudnn"]["version_text"] = "9.1.1";
  image->reply(r);
  EXPECT_EQ(run("libraries_load").status, CheckStatus::pass);
  checks = gpuenv::validate::checks::image_checks();  // a new validation: the probe runs again
  r["libraries"]["cudnn"]["version_text"] = "8.9.7";
  image->reply(r);
  const GpuOutcome o = run("libraries_load");
  EXPECT_EQ(o.code, "image_cuda_mismatch");
  EXPECT_TRUE(contains(o.message, "libcudnn 8.9.7")) << o.message;
}

TEST_F(ImageChecks, AMissingLibraryTheLockNamesFails) {
  json r = good_report();
  r["libraries"]["cudnn"] = {{"loaded", false}, {"path", nullptr}, {"error", "OSError: libcudnn.so.9: cannot open shared object file"}};
  image->reply(r);
  const GpuOutcome o = run("libraries_load");
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "image_library_load_failed");
  EXPECT_TRUE(contains(o.message, "libcudnn.so.9: cannot open shared object file")) << o.message;
}

TEST_F(ImageChecks, ARuntimeTooNewForTheHostDriverFailsAsSuch) {
  json r = good_report();
  r["libraries"]["cudart"]["device_count"] = 0;
  r["libraries"]["cudart"]["device_error_code"] = 35;
  r["libraries"]["cudart"]["device_error"] = "cudaGetDeviceCount returned 35 (cudaErrorInsufficientDriver: ...)";
  image->reply(r);
  const GpuOutcome o = run("libraries_load");
  EXPECT_EQ(o.code, "driver_cuda_too_old");
  EXPECT_TRUE(contains(o.message, "cudaErrorInsufficientDriver")) << o.message;
}

TEST_F(ImageChecks, AnImportErrorFailsWithThePythonErrorText) {
  json r = good_report();
  r["frameworks"]["torch"] = {{"module", "torch"}, {"imported", false}, {"timed_out", false},
                              {"error", "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"}};
  image->reply(r);
  for (const char* key : {"framework_smoke", "cudnn_smoke"}) {
    const GpuOutcome o = run(key);
    EXPECT_EQ(o.status, CheckStatus::fail) << key;
    EXPECT_EQ(o.code, "image_import_failed") << key;
    EXPECT_TRUE(contains(o.message, "import torch failed")) << o.message;
    EXPECT_TRUE(contains(o.message, "ImportError: libcudnn.so.9: cannot open shared object file")) << o.message;
  }
}

/// The report of an image that holds vllm beside the torch it pins (the probe runs once per fixture).
json serving_report(const json& vllm) {
  json r = good_report();
  r["frameworks"]["vllm"] = vllm;
  return r;
}

TEST_F(ImageChecks, AServingFrameworkIsJudgedOnItsImportAndVersionItsTorchOnEverything) {
  // vllm computes through the torch it pins: the lock lists both; vllm only has to import at the lock's version.
  inputs.lock_frameworks = {{"vllm", "0.33.0"}, {"torch", "2.5.1"}};
  image->reply(serving_report({{"module", "vllm"}, {"imported", true}, {"error", nullptr}, {"timed_out", false},
                               {"version", "0.33.0"}, {"import_only", true}}));
  const GpuOutcome o = run("framework_smoke");
  EXPECT_EQ(o.status, CheckStatus::pass) << o.message;
  EXPECT_TRUE(contains(o.message, "vllm 0.33.0 imports")) << o.message;
  EXPECT_EQ(run("cudnn_smoke").status, CheckStatus::pass);
}

TEST_F(ImageChecks, AServingFrameworkOfAnotherVersionFails) {
  inputs.lock_frameworks = {{"vllm", "0.33.0"}, {"torch", "2.5.1"}};
  image->reply(serving_report({{"module", "vllm"}, {"imported", true}, {"error", nullptr}, {"timed_out", false},
                               {"version", "0.32.0"}, {"import_only", true}}));
  const GpuOutcome o = run("framework_smoke");
  EXPECT_EQ(o.code, "image_framework_mismatch");
  EXPECT_TRUE(contains(o.message, "vllm 0.32.0 in the image, but the lock has 0.33.0")) << o.message;
}

TEST_F(ImageChecks, AServingFrameworkThatDoesNotImportFailsWithTheError) {
  inputs.lock_frameworks = {{"vllm", "0.33.0"}, {"torch", "2.5.1"}};
  image->reply(serving_report({{"module", "vllm"}, {"imported", false}, {"timed_out", false},
                               {"error", "ImportError: libcuda.so.1: cannot open shared object file"}}));
  const GpuOutcome o = run("framework_smoke");
  EXPECT_EQ(o.code, "image_import_failed");
  EXPECT_TRUE(contains(o.message, "import vllm failed in the image: ImportError: libcuda.so.1")) << o.message;
}

TEST_F(ImageChecks, NoGpuVisibleInsideTheImageFailsWithWhatTheImageSees) {
  json r = good_report();
  r["devices"] = json::array();
  r["libraries"]["driver"] = {{"loaded", false}, {"error", "OSError: libcuda.so.1: cannot open shared object file"}};
  r["frameworks"]["torch"]["gpu_visible"] = false;
  r["frameworks"]["torch"]["device_count"] = 0;
  r["frameworks"]["torch"]["gpu_error"] = "RuntimeError: Found no NVIDIA driver on your system";
  image->reply(r);
  const GpuOutcome o = run("framework_smoke");
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "image_no_gpu");
  EXPECT_TRUE(contains(o.message, "no /dev/nvidia* device nodes")) << o.message;
  EXPECT_TRUE(contains(o.message, "libcuda.so.1 does not load")) << o.message;
  EXPECT_TRUE(contains(o.hint, "/dev/nvidia")) << o.hint;
  EXPECT_TRUE(contains(o.hint, "driver libraries")) << o.hint;
}

TEST_F(ImageChecks, AMatmulThatDiffersFromTheCpuFails) {
  json r = good_report();
  r["frameworks"]["torch"]["matmul"] = {{"max_abs_err", 2.5}, {"max_abs_ref", 31.2}, {"error", nullptr}};
  image->reply(r);
  const GpuOutcome o = run("framework_smoke");
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "image_matmul_mismatch");
  EXPECT_TRUE(contains(o.message, "differs from the CPU result")) << o.message;
}

TEST_F(ImageChecks, AnAllZeroReferenceIsNotTrusted) {
  json r = good_report();
  r["frameworks"]["torch"]["matmul"] = {{"max_abs_err", 0.0}, {"max_abs_ref", 0.0}, {"error", nullptr}};
  image->reply(r);
  EXPECT_EQ(run("framework_smoke").code, "image_matmul_mismatch");
}

TEST_F(ImageChecks, AConvolutionThatDiffersFromTheCpuFailsCudnnSmokeOnly) {
  json r = good_report();
  r["frameworks"]["torch"]["conv"]["max_abs_err"] = 0.75;
  image->reply(r);
  EXPECT_EQ(run("framework_smoke").status, CheckStatus::pass);
  const GpuOutcome o = run("cudnn_smoke");
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "image_conv_mismatch");
}

TEST_F(ImageChecks, CudnnDisabledInTheFrameworkFails) {
  json r = good_report();
  r["frameworks"]["torch"]["conv"]["cudnn_enabled"] = false;
  image->reply(r);
  EXPECT_EQ(run("cudnn_smoke").code, "image_cudnn_unavailable");
}

TEST_F(ImageChecks, AnErrorOnTheGpuIsAFrameworkError) {
  json r = good_report();
  r["frameworks"]["torch"]["conv"] = {{"error", "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"}};
  image->reply(r);
  const GpuOutcome o = run("cudnn_smoke");
  EXPECT_EQ(o.code, "image_framework_error");
  EXPECT_TRUE(contains(o.message, "CUDNN_STATUS_NOT_INITIALIZED")) << o.message;
}

TEST_F(ImageChecks, APythonThatTimesOutFailsEveryImageCheckAndRunsOnce) {
  image->answer = ImageRun{137, "", "", true};
  for (const char* key : {"libraries_load", "framework_smoke", "cudnn_smoke"}) {
    const GpuOutcome o = run(key);
    EXPECT_EQ(o.status, CheckStatus::fail) << key;
    EXPECT_EQ(o.code, "image_timeout") << key;
    EXPECT_TRUE(contains(o.message, "did not finish within")) << o.message;
  }
  EXPECT_EQ(image->calls, 1);
}

TEST_F(ImageChecks, AFrameworkThatHangsInsideTheProbeIsATimeout) {
  json r = good_report();
  r["frameworks"]["torch"] = {{"module", "torch"}, {"imported", true}, {"timed_out", true}, {"error", "timed out during matmul"}};
  image->reply(r);
  const GpuOutcome o = run("framework_smoke");
  EXPECT_EQ(o.code, "image_timeout");
  EXPECT_TRUE(contains(o.message, "timed out during matmul")) << o.message;
}

TEST_F(ImageChecks, OutputThatIsNotTheProbesJsonFailsClearly) {
  image->answer = ImageRun{1, "Segmentation fault\n", "Traceback (most recent call last):\n  boom\n", false};
  const GpuOutcome o = run("framework_smoke");
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "image_probe_failed");
  EXPECT_TRUE(contains(o.message, "printed no report (exit status 1)")) << o.message;
  EXPECT_TRUE(contains(o.message, "Segmentation fault")) << o.message;
  EXPECT_TRUE(contains(o.message, "boom")) << o.message;
}

TEST_F(ImageChecks, AReportAfterOtherOutputIsStillRead) {
  image->answer.out = "a framework's banner\n" + good_report().dump() + "\n";
  EXPECT_EQ(run("framework_smoke").status, CheckStatus::pass);
}

TEST_F(ImageChecks, ASandboxThatCannotStartFails) {
  image->error = gpuenv::Error{};
  image->error->id = "run.no_sandbox";
  image->error->message = "bubblewrap (bwrap) is missing and chroot needs root";
  const GpuOutcome o = run("libraries_load");
  EXPECT_EQ(o.code, "image_probe_failed");
  EXPECT_TRUE(contains(o.message, "bubblewrap")) << o.message;
}

TEST_F(ImageChecks, EveryCodeTheyUseIsCatalogued) {
  for (const char* code : {"image_probe_failed", "image_timeout", "image_library_load_failed", "image_cuda_mismatch",
                           "image_import_failed", "image_framework_mismatch", "image_no_gpu", "image_framework_error",
                           "image_matmul_mismatch", "image_conv_mismatch", "image_cudnn_unavailable"})
    EXPECT_NE(gpuenv::validate::find_error_code(code), nullptr) << code;
}

// ---------------------------------------------------------------------------------------------------------------
// The probe script on this machine's python3: no framework is installed here and no GPU is present, so it must
// report the import failures and the libraries it could not load as strings, in one JSON object.

struct Python {
  int status = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool have_python3() { return std::system("python3 -c 'pass' >/dev/null 2>&1") == 0; }

/// Runs the probe with `args` (no single quotes in it) under a 60 s limit.
Python run_probe(const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("gpuenv-probe-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream script(dir / "probe.py");
    script << gpuenv::validate::checks::image_probe_script();
  }
  const std::string command = "cd '" + dir.string() + "' && timeout 60 python3 probe.py '" + args + "' >out.txt 2>err.txt";
  Python p;
  p.status = std::system(command.c_str());
  p.out = slurp(dir / "out.txt");
  p.err = slurp(dir / "err.txt");
  fs::remove_all(dir);
  return p;
}

TEST(ImageProbe, ReportsMissingFrameworksAndLibrariesAsJsonWithoutATraceback) {
  if (!have_python3()) GTEST_SKIP() << "no python3 on this machine";
  if (std::system("python3 -c 'import torch' >/dev/null 2>&1") == 0) GTEST_SKIP() << "torch is installed here";
  const Python p = run_probe(R"({"cuda": "12.4", "cudnn": "9.1.0", "frameworks": ["torch", "mxnet", "vllm"], "timeout_s": 40})");
  EXPECT_EQ(p.status, 0) << p.err;
  EXPECT_FALSE(contains(p.err, "Traceback")) << p.err;
  const json r = json::parse(p.out, nullptr, false);
  ASSERT_FALSE(r.is_discarded()) << "not JSON: " << p.out;
  EXPECT_EQ(r["schema"], "gpuenv-image-probe-v1");
  EXPECT_TRUE(r["error"].is_null()) << r.dump(1);
  const json& torch = r["frameworks"]["torch"];
  EXPECT_EQ(torch["imported"], false);
  EXPECT_TRUE(contains(torch["error"].get<std::string>(), "No module named 'torch'")) << torch.dump();
  EXPECT_TRUE(contains(r["frameworks"]["mxnet"]["error"].get<std::string>(), "does not know the framework")) << r.dump(1);
  if (std::system("python3 -c 'import vllm' >/dev/null 2>&1") != 0) {  // a serving framework is imported, no more
    EXPECT_EQ(r["frameworks"]["vllm"]["imported"], false);
    EXPECT_TRUE(contains(r["frameworks"]["vllm"]["error"].get<std::string>(), "No module named 'vllm'")) << r.dump(1);
  }
  for (const char* lib : {"driver", "cudart", "cublas", "cudnn"}) {
    const json& entry = r["libraries"][lib];
    ASSERT_TRUE(entry.is_object()) << lib << ": " << r.dump(1);
    ASSERT_TRUE(entry["loaded"].is_boolean()) << lib;
    if (!entry["loaded"].get<bool>()) {
      EXPECT_TRUE(entry["error"].is_string() && !entry["error"].get<std::string>().empty()) << lib << ": " << entry.dump();
    }
  }
  // Without a GPU driver here, libcuda.so.1 cannot load, and the probe says why.
  if (!r["libraries"]["driver"]["loaded"].get<bool>())
    EXPECT_TRUE(contains(r["libraries"]["driver"]["error"].get<std::string>(), "libcuda.so.1")) << r.dump(1);
}

TEST(ImageProbe, BadArgumentsAreReportedNotRaised) {
  if (!have_python3()) GTEST_SKIP() << "no python3 on this machine";
  const Python p = run_probe("not json");
  EXPECT_EQ(p.status, 0) << p.err;
  EXPECT_FALSE(contains(p.err, "Traceback")) << p.err;
  const json r = json::parse(p.out, nullptr, false);
  ASSERT_FALSE(r.is_discarded()) << p.out;
  EXPECT_TRUE(contains(r["error"].get<std::string>(), "bad probe arguments")) << r.dump(1);
}

// The whole path with this machine's python3 standing in for the image's: the checks read the real probe's report.
TEST_F(ImageChecks, TheRealProbeOnAMachineWithoutTorchFailsTheImport) {
  if (!have_python3()) GTEST_SKIP() << "no python3 on this machine";
  if (std::system("python3 -c 'import torch' >/dev/null 2>&1") == 0) GTEST_SKIP() << "torch is installed here";
  inputs.run_in_image = [](const std::vector<std::string>& command, std::chrono::milliseconds) -> gpuenv::Result<ImageRun> {
    if (command.size() != 4 || command[0] != "python3" || command[1] != "-c") return ImageRun{2, "", "unexpected command", false};
    const fs::path dir = fs::temp_directory_path() / ("gpuenv-probe-run-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    {
      std::ofstream script(dir / "probe.py");
      script << command[2];
    }
    const std::string shell = "cd '" + dir.string() + "' && timeout 60 python3 probe.py '" + command[3] + "' >out.txt 2>err.txt";
    const int status = std::system(shell.c_str());
    ImageRun run{WEXITSTATUS(status), slurp(dir / "out.txt"), slurp(dir / "err.txt"), false};
    fs::remove_all(dir);
    return run;
  };
  const GpuOutcome o = run("framework_smoke");
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "image_import_failed");
  EXPECT_TRUE(contains(o.message, "No module named 'torch'")) << o.message;
  const GpuOutcome libs = run("libraries_load");
  EXPECT_NE(libs.status, CheckStatus::skip);
  EXPECT_NE(libs.code, "image_probe_failed") << libs.message;
}

}  // namespace
