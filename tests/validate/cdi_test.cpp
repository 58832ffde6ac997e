// The cdi_spec check and its pieces: the CDI spec reader (YAML and JSON, bounds, hostile text), the driver-version
// rule for file names, the toolkit's spec-dirs, and the check itself on fixture trees (a temporary directory with
// spec directories and a host root holding stand-ins for driver libraries, device nodes and hooks).
#include "validate/cdi_spec.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fakes/fake_gpu_backend.hpp"
#include "fakes/temp_dir.hpp"
#include "base/safe_text.hpp"
#include "validate/cdi_host.hpp"
#include "validate/check.hpp"
#include "validate/error_codes.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::testing::FakeGpuBackend;
using gpuenv::testing::TempDir;
using gpuenv::validate::CdiFormat;
using gpuenv::validate::CdiPathRole;
using gpuenv::validate::CheckContext;
using gpuenv::validate::CheckInputs;
using gpuenv::validate::CheckStatus;
using gpuenv::validate::GpuOutcome;
using gpuenv::validate::parse_cdi_spec;

constexpr const char* k_driver = "550.54.15";
constexpr const char* k_libdir = "/usr/lib/x86_64-linux-gnu";

// ---------------------------------------------------------------------------------------------------------------
// Specs as nvidia-ctk writes them (the shape: devices by index and UUID, spec-wide device nodes, library mounts and
// hooks), written here for the tests.

struct SpecText {
  std::string version = "0.5.0";
  std::string kind = "nvidia.com/gpu";
  std::string driver = k_driver;
  bool mig = false;  ///< adds a MIG device 0:1 with its /dev/nvidia-caps nodes
};

std::string yaml_spec(const SpecText& s) {
  std::string y = "---\ncdiVersion: " + s.version + "\nkind: " + s.kind + "\ndevices:\n";
  y += "- name: \"0\"\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n";
  y += "- name: GPU-8f6e1d2c-0000-4000-8000-000000000000\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n";
  if (s.mig) {
    y += "- name: \"0:1\"\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
         "    - path: /dev/nvidia-caps/nvidia-cap21\n    - path: /dev/nvidia-caps/nvidia-cap22\n";
  }
  y += "- name: all\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n";
  y += "containerEdits:\n  env:\n  - NVIDIA_VISIBLE_DEVICES=void\n  deviceNodes:\n  - path: /dev/nvidiactl\n  - path: /dev/nvidia-uvm\n";
  y += "  hooks:\n  - hookName: createContainer\n    path: /usr/bin/nvidia-cdi-hook\n    args: [nvidia-cdi-hook, update-ldcache]\n";
  y += "  mounts:\n";
  for (const char* lib : {"libcuda.so.", "libnvidia-ml.so.", "libnvidia-ptxjitcompiler.so."}) {
    const std::string p = std::string(k_libdir) + "/" + lib + s.driver;
    y += "  - hostPath: " + p + "\n    containerPath: " + p + "\n    options: [ro, nosuid, nodev, bind]\n";
  }
  y += "  - hostPath: /lib/firmware/nvidia/" + s.driver + "/gsp_ga10x.bin\n    containerPath: /lib/firmware/nvidia/" + s.driver +
       "/gsp_ga10x.bin\n    options: [ro, nosuid, nodev, bind]\n";
  y += "  - hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-egl-wayland.so.1.1.13\n"
       "    containerPath: /usr/lib/x86_64-linux-gnu/libnvidia-egl-wayland.so.1.1.13\n";
  return y;
}

std::string json_spec(const std::string& driver) {
  const std::string lib = std::string(k_libdir) + "/libcuda.so." + driver;
  return R"({"cdiVersion":"0.8.0","kind":"nvidia.com/gpu","devices":[{"name":"0","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]}}],)"
         R"("containerEdits":{"deviceNodes":[{"path":"/dev/nvidiactl"}],"mounts":[{"hostPath":")" + lib + R"(","containerPath":")" + lib +
         R"(","options":["ro"]}],"hooks":[{"hookName":"createContainer","path":"/usr/bin/nvidia-cdi-hook"}]}})";
}

// ---------------------------------------------------------------------------------------------------------------
// The reader

TEST(CdiSpec, ReadsTheHostPathsOfAYamlSpec) {
  const auto parsed = parse_cdi_spec(yaml_spec({}), "nvidia.yaml", CdiFormat::yaml);
  ASSERT_TRUE(parsed.spec) << parsed.problem;
  EXPECT_EQ(parsed.kind, "nvidia.com/gpu");
  EXPECT_EQ(parsed.spec->version, "0.5.0");
  EXPECT_EQ(parsed.spec->devices, (std::vector<std::string>{"0", "GPU-8f6e1d2c-0000-4000-8000-000000000000", "all"}));
  ASSERT_EQ(parsed.spec->paths.size(), 11u);
  EXPECT_EQ(parsed.spec->paths[0].device, "0");
  EXPECT_EQ(parsed.spec->paths[0].role, CdiPathRole::device_node);
  EXPECT_EQ(parsed.spec->paths[3].device, "");  // spec-wide
  EXPECT_EQ(parsed.spec->paths[3].host_path, "/dev/nvidiactl");
  EXPECT_EQ(parsed.spec->paths[5].role, CdiPathRole::mount);
  EXPECT_EQ(parsed.spec->paths[5].host_path, std::string(k_libdir) + "/libcuda.so.550.54.15");
  EXPECT_EQ(parsed.spec->paths.back().host_path, "/usr/bin/nvidia-cdi-hook");  // hooks after mounts
  EXPECT_EQ(parsed.spec->paths.back().role, CdiPathRole::hook);
}

TEST(CdiSpec, ReadsAJsonSpecTheSameWay) {
  const auto parsed = parse_cdi_spec(json_spec(k_driver), "nvidia.json", CdiFormat::json);
  ASSERT_TRUE(parsed.spec) << parsed.problem;
  ASSERT_EQ(parsed.spec->paths.size(), 4u);
  EXPECT_EQ(parsed.spec->paths[2].host_path, std::string(k_libdir) + "/libcuda.so.550.54.15");
}

TEST(CdiSpec, DeviceNodeHostPathWinsOverItsContainerPath) {
  const std::string y = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n  containerEdits:\n    deviceNodes:\n"
                        "    - path: /dev/nvidia0\n      hostPath: /host/dev/nvidia0\n";
  const auto parsed = parse_cdi_spec(y, "x.yaml", CdiFormat::yaml);
  ASSERT_TRUE(parsed.spec) << parsed.problem;
  EXPECT_EQ(parsed.spec->paths.at(0).host_path, "/host/dev/nvidia0");
}

TEST(CdiSpec, AcceptsEveryReleasedVersionFrom030AndNothingElse) {
  for (const char* v : {"0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0", "v0.6.0"})
    EXPECT_TRUE(gpuenv::validate::is_known_cdi_version(v)) << v;
  for (const char* v : {"0.1.0", "0.2.0", "0.5", "0.9.0", "2.0.0", "", "0.5.0 "}) EXPECT_FALSE(gpuenv::validate::is_known_cdi_version(v)) << v;
}

struct Malformed {
  const char* what;
  std::string text;
  CdiFormat format;
  const char* problem;  ///< a part of the problem's text
  const char* kind;     ///< the kind still read, or ""
};

TEST(CdiSpec, RefusesMalformedSpecsSayingWhere) {
  SpecText wrong_version;
  wrong_version.version = "0.2.0";
  const std::vector<Malformed> cases = {
      {"bad YAML", "cdiVersion: 0.5.0\nkind: [nvidia.com/gpu\n", CdiFormat::yaml, "YAML syntax error", ""},
      {"bad JSON", "{\"cdiVersion\": \"0.5.0\",", CdiFormat::json, "JSON syntax error", ""},
      {"wrong cdiVersion", yaml_spec(wrong_version), CdiFormat::yaml, "cdiVersion '0.2.0' is not a released", "nvidia.com/gpu"},
      {"missing kind", "cdiVersion: 0.5.0\ndevices:\n- name: a\n", CdiFormat::yaml, "kind is missing", ""},
      {"kind without class", "cdiVersion: 0.5.0\nkind: nvidia\ndevices:\n- name: a\n", CdiFormat::yaml, "vendor.com/class", "nvidia"},
      {"no devices", "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n", CdiFormat::yaml, "devices is not a list of at least one", "nvidia.com/gpu"},
      {"a list", "- 1\n- 2\n", CdiFormat::yaml, "is not a mapping", ""},
      {"relative path", "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: a\n  containerEdits:\n    mounts:\n"
                        "    - {hostPath: usr/lib/libcuda.so.1, containerPath: /usr/lib/libcuda.so.1}\n",
       CdiFormat::yaml, "devices[0].containerEdits.mounts[0].hostPath 'usr/lib/libcuda.so.1' is not an absolute path", "nvidia.com/gpu"},
      {"traversal", "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: a\n  containerEdits:\n    deviceNodes:\n"
                    "    - path: /dev/../../etc/shadow\n",
       CdiFormat::yaml, "names a parent directory", "nvidia.com/gpu"},
      {"hook without path", "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: a\ncontainerEdits:\n  hooks:\n  - hookName: x\n",
       CdiFormat::yaml, "containerEdits.hooks[0].path is missing", "nvidia.com/gpu"},
      {"mount without containerPath", "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: a\ncontainerEdits:\n  mounts:\n  - hostPath: /x\n",
       CdiFormat::yaml, "containerPath is missing", "nvidia.com/gpu"},
  };
  for (const auto& c : cases) {
    const auto parsed = parse_cdi_spec(c.text, "f", c.format);
    EXPECT_FALSE(parsed.spec) << c.what;
    EXPECT_NE(parsed.problem.find(c.problem), std::string::npos) << c.what << ": " << parsed.problem;
    EXPECT_EQ(parsed.kind, c.kind) << c.what;
  }
}

TEST(CdiSpec, HostileTextIsRefusedAndItsProblemIsSafeToPrint) {
  // A control character in a path (YAML and JSON escapes), an over-long path, bytes that are not UTF-8.
  const std::vector<std::pair<std::string, CdiFormat>> cases = {
      {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: a\n  containerEdits:\n    deviceNodes:\n    - path: \"/dev/\\e[2Jnvidia0\"\n", CdiFormat::yaml},
      {R"({"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[{"name":"a","containerEdits":{"deviceNodes":[{"path":"/dev/\u001b]0;x\u0007"}]}}]})", CdiFormat::json},
      {R"({"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[{"name":"a\u202e","containerEdits":{}}]})", CdiFormat::json},
      {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: a\n  containerEdits:\n    deviceNodes:\n    - path: /" + std::string(5000, 'x') + "\n", CdiFormat::yaml},
      {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"\xff\xfe\"\n", CdiFormat::yaml},
  };
  for (const auto& [text, format] : cases) {
    const auto parsed = parse_cdi_spec(text, "f", format);
    EXPECT_FALSE(parsed.spec) << text.substr(0, 120);
    EXPECT_FALSE(parsed.problem.empty());
    EXPECT_TRUE(gpuenv::is_safe_text(parsed.problem)) << parsed.problem;
    EXPECT_LE(parsed.problem.size(), 400u);
  }
}

TEST(CdiSpec, BoundsSizeDepthAndAliasBombs) {
  std::string huge = yaml_spec({});
  huge += "# " + std::string(5u << 20, 'x') + "\n";
  auto parsed = parse_cdi_spec(huge, "f", CdiFormat::yaml);
  EXPECT_FALSE(parsed.spec);
  EXPECT_NE(parsed.problem.find("limit"), std::string::npos) << parsed.problem;

  std::string deep = "{\"cdiVersion\":\"0.5.0\",\"kind\":\"nvidia.com/gpu\",\"devices\":" + std::string(10000, '[') + std::string(10000, ']') + "}";
  parsed = parse_cdi_spec(deep, "f", CdiFormat::json);
  EXPECT_FALSE(parsed.spec);
  EXPECT_NE(parsed.problem.find("deeper"), std::string::npos) << parsed.problem;

  // Nine levels of ten aliases each: a billion nodes if expanded.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string p = "*a" + std::to_string(i - 1);
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + p + "," + p + "," + p + "," + p + "," + p + "," + p + "," + p +
            "," + p + "," + p + "," + p + "]\n";
  }
  bomb += "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [{name: a}]\n";
  const auto start = std::chrono::steady_clock::now();
  parsed = parse_cdi_spec(bomb, "f", CdiFormat::yaml);
  EXPECT_FALSE(parsed.spec);
  EXPECT_NE(parsed.problem.find("too many nodes"), std::string::npos) << parsed.problem;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));  // a bound on the work, not a timing
}

TEST(CdiSpec, TellsDriverFilesByTheirVersion) {
  using gpuenv::validate::driver_version_in_path;
  EXPECT_EQ(driver_version_in_path("/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"), "550.54.15");
  EXPECT_EQ(driver_version_in_path("/usr/lib64/libnvidia-ml.so.570.86.10"), "570.86.10");
  EXPECT_EQ(driver_version_in_path("/usr/lib/libnvidia-ptxjitcompiler.so.535.104.05"), "535.104.05");
  EXPECT_EQ(driver_version_in_path("/usr/lib/libGLX_nvidia.so.550.54.15"), "550.54.15");
  EXPECT_EQ(driver_version_in_path("/usr/lib/libcudadebugger.so.560.35"), "560.35");
  EXPECT_EQ(driver_version_in_path("/lib/firmware/nvidia/550.54.15/gsp_tu10x.bin"), "550.54.15");
  EXPECT_EQ(driver_version_in_path("/usr/lib/libnvidia-egl-wayland.so.1.1.13"), std::nullopt);  // its own version
  EXPECT_EQ(driver_version_in_path("/usr/lib/libnvidia-egl-gbm.so.1.1.1"), std::nullopt);
  EXPECT_EQ(driver_version_in_path("/usr/lib/libcuda.so.1"), std::nullopt);
  EXPECT_EQ(driver_version_in_path("/usr/lib/libcudart.so.12.4.127"), std::nullopt);  // CUDA's, not the driver's
  EXPECT_EQ(driver_version_in_path("/usr/lib/libfoo.so.550.54.15"), std::nullopt);
  EXPECT_EQ(driver_version_in_path("/dev/nvidia0"), std::nullopt);
  EXPECT_TRUE(gpuenv::validate::is_mig_name("0:1"));
  EXPECT_TRUE(gpuenv::validate::is_mig_name("MIG-5c89852c-d268-5c9a-b2a6-0e4d2ba7b5a4"));
  EXPECT_FALSE(gpuenv::validate::is_mig_name("0"));
  EXPECT_TRUE(gpuenv::validate::is_mig_path("/dev/nvidia-caps/nvidia-cap21"));
}

TEST(CdiSpec, ReadsTheToolkitsSpecDirs) {
  using gpuenv::validate::toolkit_spec_dirs;
  const std::string config = "[nvidia-container-runtime]\nmode = \"auto\"\nruntimes = [\"runc\", \"crun\"]\n\n"
                             "[nvidia-container-runtime.modes.cdi]\nannotation-prefixes = [\"cdi.k8s.io/\"]\n"
                             "default-kind = \"nvidia.com/gpu\"\nspec-dirs = [\"/etc/cdi\", # static\n  '/opt/cdi',\n]\n"
                             "[nvidia-container-runtime.modes.csv]\nmount-spec-path = \"/etc/x\"\n";
  auto dirs = toolkit_spec_dirs(config, "config.toml");
  ASSERT_TRUE(dirs) << dirs.error().message;
  ASSERT_TRUE(*dirs);
  EXPECT_EQ(**dirs, (std::vector<std::string>{"/etc/cdi", "/opt/cdi"}));
  dirs = toolkit_spec_dirs("nvidia-container-runtime.modes.cdi.spec-dirs = [\"/a\"]\n", "c");
  ASSERT_TRUE(dirs && *dirs);
  EXPECT_EQ(**dirs, (std::vector<std::string>{"/a"}));
  dirs = toolkit_spec_dirs("[nvidia-container-runtime.modes.cdi]\ndefault-kind = \"nvidia.com/gpu\"\n", "c");
  ASSERT_TRUE(dirs);
  EXPECT_FALSE(*dirs);  // commented out or absent: the runtime's defaults
  EXPECT_FALSE(toolkit_spec_dirs("[nvidia-container-runtime.modes.cdi]\nspec-dirs = \"/etc/cdi\"\n", "c"));
  EXPECT_FALSE(toolkit_spec_dirs("[nvidia-container-runtime.modes.cdi]\nspec-dirs = [\"cdi\"]\n", "c"));
  EXPECT_FALSE(toolkit_spec_dirs("[nvidia-container-runtime.modes.cdi]\nspec-dirs = [\"/a\\u0041\"]\n", "c"));
  EXPECT_FALSE(toolkit_spec_dirs("[nvidia-container-runtime.modes.cdi]\nspec-dirs = [\"/a\x1b[2J\"]\n", "c"));
}

// ---------------------------------------------------------------------------------------------------------------
// The check on fixture trees

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

/// A temporary host: ROOT holds stand-ins (regular files) for the driver's files at DRIVER, the device nodes and
/// the hook; SPECS is one spec directory.
class CdiCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(specs);
    install_driver(k_driver);
    for (const char* node : {"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/usr/bin/nvidia-cdi-hook",
                             "/usr/lib/x86_64-linux-gnu/libnvidia-egl-wayland.so.1.1.13"})
      write(root / std::string(node).substr(1), "");
    backend.driver_state.loaded = true;
    backend.driver_state.version = k_driver;
    inputs.cdi.dirs = {specs.string()};
    inputs.cdi.host_root = root.string();
  }

  void install_driver(const std::string& version) {
    for (const char* lib : {"libcuda.so.", "libnvidia-ml.so.", "libnvidia-ptxjitcompiler.so."})
      write(root / ("usr/lib/x86_64-linux-gnu/" + std::string(lib) + version), "");
    write(root / ("lib/firmware/nvidia/" + version + "/gsp_ga10x.bin"), "");
  }
  void remove_driver(const std::string& version) {
    for (const char* lib : {"libcuda.so.", "libnvidia-ml.so.", "libnvidia-ptxjitcompiler.so."})
      fs::remove(root / ("usr/lib/x86_64-linux-gnu/" + std::string(lib) + version));
    fs::remove_all(root / ("lib/firmware/nvidia/" + version));
  }

  /// Runs the check with a generous deadline (the check stops reading at three quarters of it; FilesPast... tests that).
  GpuOutcome run(std::chrono::steady_clock::duration deadline = std::chrono::seconds(60)) {
    std::unique_ptr<gpuenv::validate::Check> check;
    for (auto& c : gpuenv::validate::all_checks())
      if (c->key() == "cdi_spec") check = std::move(c);
    EXPECT_TRUE(check);
    if (!check) return {};
    EXPECT_EQ(check->category(), "software");
    EXPECT_FALSE(check->uses_gpu());
    const auto driver = *backend.driver();
    const std::vector<gpuenv::validate::GpuInfo> gpus;
    CheckContext context{backend, inputs, driver, gpus, std::chrono::steady_clock::now() + deadline, {}};
    if (auto why = check->not_applicable(context)) {
      GpuOutcome skip;
      skip.status = CheckStatus::skip;
      skip.message = *why;
      return skip;
    }
    auto outcomes = check->run(context);
    EXPECT_EQ(outcomes.size(), 1u);
    if (outcomes.empty()) return {};
    const GpuOutcome& o = outcomes.front();
    EXPECT_EQ(o.gpu, -1);
    EXPECT_FALSE(o.message.empty());
    EXPECT_TRUE(gpuenv::is_safe_text(o.message)) << o.message;
    if (o.status == CheckStatus::warn || o.status == CheckStatus::fail) {
      EXPECT_NE(gpuenv::validate::find_error_code(o.code), nullptr) << o.code;
      EXPECT_FALSE(o.hint.empty());
    }
    return o;
  }

  TempDir tmp{"gpuenv-cdi"};
  fs::path root = tmp.path() / "host";
  fs::path specs = tmp.path() / "cdi";
  FakeGpuBackend backend;
  CheckInputs inputs;
};

TEST_F(CdiCheck, ACurrentSpecPasses) {
  write(specs / "nvidia.yaml", yaml_spec({}));
  const auto o = run();
  EXPECT_EQ(o.status, CheckStatus::pass) << o.message;
  EXPECT_NE(o.message.find("all 11 host paths exist, 4 at driver 550.54.15"), std::string::npos) << o.message;
}

TEST_F(CdiCheck, AJsonSpecIsJudgedLikeAYamlOne) {
  write(specs / "nvidia.json", json_spec(k_driver));
  EXPECT_EQ(run().status, CheckStatus::pass);
  write(specs / "nvidia.json", json_spec("535.104.05"));
  const auto o = run();
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "cdi_driver_mismatch");
}

TEST_F(CdiCheck, AfterADriverUpgradeTheOldLibrariesFailNamingTheFirstAndWhatToRun) {
  write(specs / "nvidia.yaml", yaml_spec({}));
  remove_driver(k_driver);
  install_driver("560.35.03");
  backend.driver_state.version = "560.35.03";
  const auto o = run();
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "cdi_driver_mismatch");
  EXPECT_NE(o.message.find((specs / "nvidia.yaml").string()), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("mount /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15 (spec-wide edits) is for driver 550.54.15, but driver "
                           "560.35.03 is loaded (and the file is missing); 3 more stale path(s)"),
            std::string::npos)
      << o.message;
  EXPECT_NE(o.hint.find("nvidia-ctk cdi generate --output=" + (specs / "nvidia.yaml").string()), std::string::npos) << o.hint;
  // A host's tree mounted elsewhere: the command runs on that host, so the hint names the file's path there.
  write(root / "var/run/cdi/nvidia.yaml", yaml_spec({}));
  inputs.cdi.dirs = {(root / "var/run/cdi").string()};
  const auto mounted = run();
  EXPECT_EQ(mounted.code, "cdi_driver_mismatch");
  EXPECT_NE(mounted.hint.find("`nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`, or `systemctl restart nvidia-cdi-refresh.service`"),
            std::string::npos)
      << mounted.hint;
}

TEST_F(CdiCheck, AMissingPathIsStaleEvenWithoutAVersion) {
  write(specs / "nvidia.yaml", yaml_spec({}));
  fs::remove(root / "usr/bin/nvidia-cdi-hook");
  const auto o = run();
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "cdi_stale");
  EXPECT_NE(o.message.find("hook /usr/bin/nvidia-cdi-hook (spec-wide edits) does not exist"), std::string::npos) << o.message;
}

TEST_F(CdiCheck, WithoutADriverVersionTheFilesAreCheckedButNotCompared) {
  write(specs / "nvidia.yaml", yaml_spec({}));
  backend.driver_state.loaded = false;
  backend.driver_state.version.clear();
  const auto o = run();
  EXPECT_EQ(o.status, CheckStatus::pass) << o.message;
  EXPECT_NE(o.message.find("4 driver file version(s) were not compared"), std::string::npos) << o.message;
}

TEST_F(CdiCheck, AMigSpecWhoseInstancesAreGoneIsMigStale) {
  SpecText mig;
  mig.mig = true;
  write(specs / "nvidia.yaml", yaml_spec(mig));
  write(root / "dev/nvidia-caps/nvidia-cap21", "");
  auto o = run();
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "cdi_mig_stale");
  EXPECT_NE(o.message.find("device node /dev/nvidia-caps/nvidia-cap22 (device 0:1) does not exist"), std::string::npos) << o.message;
  write(root / "dev/nvidia-caps/nvidia-cap22", "");
  o = run();
  EXPECT_EQ(o.status, CheckStatus::pass) << o.message;
}

TEST_F(CdiCheck, MalformedSpecsFail) {
  write(specs / "nvidia.yaml", "cdiVersion: 0.5.0\nkind: [nvidia.com/gpu\n");
  auto o = run();
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "cdi_malformed");
  EXPECT_NE(o.message.find("YAML syntax error"), std::string::npos) << o.message;
  SpecText old;
  old.version = "0.2.0";
  write(specs / "nvidia.yaml", yaml_spec(old));
  o = run();
  EXPECT_EQ(o.code, "cdi_malformed");
  EXPECT_NE(o.hint.find("nvidia-ctk cdi generate"), std::string::npos) << o.hint;
}

TEST_F(CdiCheck, NoSpecIsASkipSayingWhereItLooked) {
  auto o = run();
  EXPECT_EQ(o.status, CheckStatus::skip);
  EXPECT_NE(o.message.find("no CDI spec for nvidia.com/gpu in " + specs.string()), std::string::npos) << o.message;
  inputs.cdi.dirs = {(tmp.path() / "absent").string()};
  o = run();
  EXPECT_EQ(o.status, CheckStatus::skip);
  EXPECT_NE(o.message.find("(absent: " + (tmp.path() / "absent").string() + ")"), std::string::npos) << o.message;
  inputs.cdi.dirs.clear();
  EXPECT_EQ(run().status, CheckStatus::skip);
}

TEST_F(CdiCheck, SpecsOfOtherKindsAreLeftAloneWhateverTheirState) {
  write(specs / "vendor.yaml", "cdiVersion: 0.2.0\nkind: vendor.com/fpga\ndevices:\n- name: a\n  containerEdits:\n    deviceNodes:\n    - path: /dev/fpga0\n");
  write(specs / "notes.txt", "not a spec");
  auto o = run();
  EXPECT_EQ(o.status, CheckStatus::skip);
  EXPECT_NE(o.message.find("1 spec(s) of other kinds left alone"), std::string::npos) << o.message;
  write(specs / "nvidia.yaml", yaml_spec({}));
  o = run();
  EXPECT_EQ(o.status, CheckStatus::pass) << o.message;
}

TEST_F(CdiCheck, EveryDirectoryIsReadAndTheWorstFileDecides) {
  const fs::path run_dir = tmp.path() / "run-cdi";
  write(specs / "nvidia.yaml", yaml_spec({}));
  SpecText old;
  old.driver = "535.104.05";
  write(run_dir / "nvidia.yaml", yaml_spec(old));
  inputs.cdi.dirs = {specs.string(), run_dir.string(), specs.string()};  // a directory named twice is read once
  const auto o = run();
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "cdi_driver_mismatch");
  EXPECT_NE(o.message.find((run_dir / "nvidia.yaml").string()), std::string::npos) << o.message;
  EXPECT_EQ(o.message.find((specs / "nvidia.yaml").string()), std::string::npos) << "passing files are not listed: " << o.message;
}

TEST_F(CdiCheck, HostileFilesGetClearOutcomes) {
  // A symlinked spec is read through its link; a dangling one, a FIFO and a directory named *.yaml are not specs.
  write(tmp.path() / "elsewhere/real.yaml", yaml_spec({}));
  fs::create_symlink(tmp.path() / "elsewhere/real.yaml", specs / "a-link.yaml");
  auto o = run();
  EXPECT_EQ(o.status, CheckStatus::pass) << o.message;
  fs::create_directories(specs / "b-dir.yaml");
  EXPECT_EQ(run().status, CheckStatus::pass);  // runtimes skip directories too
  fs::create_symlink(tmp.path() / "gone.yaml", specs / "c-dangling.yaml");
  o = run();
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "cdi_unreadable");
  EXPECT_NE(o.message.find("c-dangling.yaml (a symlink): a dangling symlink"), std::string::npos) << o.message;
  fs::remove(specs / "c-dangling.yaml");
  ASSERT_EQ(::mkfifo((specs / "d-fifo.yaml").c_str(), 0600), 0);
  o = run();  // never opened: a FIFO would block the reader
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_NE(o.message.find("a FIFO, not a regular file"), std::string::npos) << o.message;
  fs::remove(specs / "d-fifo.yaml");
  // A name with control characters is escaped in the message.
  write(specs / "e-\x1b[2J\xff.yaml", "cdiVersion: [\n");
  o = run();
  EXPECT_EQ(o.code, "cdi_malformed");
  EXPECT_NE(o.message.find("e-\\x1b[2J\\xff.yaml"), std::string::npos) << o.message;
}

TEST_F(CdiCheck, OversizedAndTooManyFilesAreBounded) {
  write(specs / "big.yaml", std::string((4u << 20) + 1, '#'));
  auto o = run();
  EXPECT_EQ(o.status, CheckStatus::fail);
  EXPECT_EQ(o.code, "cdi_unreadable");
  EXPECT_NE(o.message.find("larger than the 4 MiB"), std::string::npos) << o.message;
  fs::remove(specs / "big.yaml");
  for (int i = 0; i < 300; ++i) write(specs / ("s" + std::to_string(1000 + i) + ".json"), json_spec(k_driver));
  o = run();
  EXPECT_EQ(o.status, CheckStatus::warn) << o.message;
  EXPECT_EQ(o.code, "cdi_unreadable");
  EXPECT_NE(o.message.find("44 spec file(s) past the first 256 were not read"), std::string::npos) << o.message;
}

TEST_F(CdiCheck, FilesPastTheWorkDeadlineAreReportedAsNotJudged) {
  write(specs / "nvidia.yaml", yaml_spec({}));
  const auto o = run(std::chrono::seconds(0));
  EXPECT_EQ(o.status, CheckStatus::warn) << o.message;
  EXPECT_EQ(o.code, "cdi_unreadable");
  EXPECT_NE(o.message.find("1 spec file(s) were not judged in the time the check has"), std::string::npos) << o.message;
}

TEST_F(CdiCheck, AFileTooLargeToReadInTheTimeLeftIsNotStarted) {
  // 100 ms (quick's budget) leaves 75 ms of work, weighed at 1 MB/s: a 300 KiB spec is not parsed at all.
  std::string big = yaml_spec({});
  while (big.size() < (300u << 10)) big += "# padding to make the spec large, as a hostile or generated file may be\n";
  write(specs / "nvidia.yaml", big);
  const auto o = run(std::chrono::milliseconds(100));
  EXPECT_EQ(o.status, CheckStatus::warn) << o.message;
  EXPECT_EQ(o.code, "cdi_unreadable");
  EXPECT_NE(o.message.find("was not judged: its 300 KiB cannot be read in the time the check has left"), std::string::npos) << o.message;
  EXPECT_EQ(run().status, CheckStatus::pass);  // with time enough, the same file passes
}

TEST_F(CdiCheck, PathsAreLookedUpInsideTheRootOnly) {
  // An absolute symlink inside the host tree resolves inside it, never to this machine's own file.
  write(root / "real/libcuda.so.550.54.15", "");
  fs::create_symlink("/real/libcuda.so.550.54.15", root / "usr/lib/x86_64-linux-gnu/libcuda-link.so.550.54.15");
  fs::create_symlink("/etc/hostname", root / "usr/bin/escape");
  const std::string y = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\ncontainerEdits:\n  mounts:\n"
                        "  - {hostPath: /usr/lib/x86_64-linux-gnu/libcuda-link.so.550.54.15, containerPath: /x}\n"
                        "  hooks:\n  - {hookName: createContainer, path: /usr/bin/escape}\n";
  write(specs / "nvidia.yaml", y);
  const auto o = run();
  EXPECT_EQ(o.status, CheckStatus::fail) << o.message;
  EXPECT_EQ(o.code, "cdi_stale");
  EXPECT_NE(o.message.find("hook /usr/bin/escape (spec-wide edits) does not exist"), std::string::npos) << o.message;
}

TEST_F(CdiCheck, AnUnreadableSpecIsNotJudgedRatherThanFailed) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  write(specs / "nvidia.yaml", yaml_spec({}));
  fs::permissions(specs / "nvidia.yaml", fs::perms::none);
  const auto o = run();
  EXPECT_EQ(o.status, CheckStatus::warn) << o.message;
  EXPECT_EQ(o.code, "cdi_unreadable");
  EXPECT_NE(o.message.find("was not judged: cannot be read"), std::string::npos) << o.message;
}

}  // namespace
