// Contract tests of the real GpuBackend (validate/adapters/real_backend.cpp) against fake libnvidia-ml builds
// (tests/contract/fake_nvml_full.cpp, current and -DFAKE_NVML_OLD), the fake libcuda builds, and /proc, /dev and
// /sys fixture trees in a temporary directory.
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fakes/scoped_env.hpp"
#include "fakes/temp_dir.hpp"
#include "validate/adapters/cuda_session.hpp"
#include "validate/adapters/mig_child.hpp"
#include "validate/adapters/multi_gpu.hpp"
#include "validate/adapters/real_backend.hpp"
#include "validate/check.hpp"
#include "validate/runner.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using gpuenv::Result;
using gpuenv::validate::GpuHealth;
using gpuenv::validate::GpuSession;
using gpuenv::validate::make_real_backend;
using gpuenv::validate::RealBackendOptions;
using gpuenv::validate::Samples;
using gpuenv::validate::SessionTarget;

using gpuenv::testing::ScopedEnv;

/// A /proc, /dev and /sys tree under a fresh temporary directory: by default an NVIDIA host with nouveau listed in
/// /proc/modules, /dev/nvidiactl, /dev/nvidia0 and /dev/nvidia3 (the fake GPUs' minor numbers) but no
/// /dev/nvidia-uvm, and the NUMA nodes of both fake GPUs.
class HostTree {
 public:
  HostTree() {
    write("proc/modules", "nouveau 2306048 0 - Live 0x0000000000000000\nnvidia_uvm 1523712 0 - Live 0x0000000000000000\n");
    write("dev/nvidiactl", "");
    write("dev/nvidia0", "");
    write("dev/nvidia3", "");
    write("sys/bus/pci/devices/0000:19:00.0/numa_node", "0\n");
    write("sys/bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
  }
  void write(const std::string& relative, const std::string& text) const {
    const fs::path p = m_root / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void remove(const std::string& relative) const { fs::remove_all(m_root / relative); }
  [[nodiscard]] std::string path(const std::string& relative) const { return (m_root / relative).string(); }

  /// Options pointing every host path at this tree.
  [[nodiscard]] RealBackendOptions options(std::string nvml_library = FAKE_NVML_FULL_PATH) const {
    RealBackendOptions o;
    o.nvml_library = std::move(nvml_library);
    o.cuda_library = FAKE_CUDA_OK_PATH;
    o.cuinit_timeout = 5000ms;
    o.proc_root = path("proc");
    o.dev_root = path("dev");
    o.sys_root = path("sys");
    return o;
  }

 private:
  gpuenv::testing::TempDir m_dir{"gpuenv-real-backend"};
  const fs::path& m_root = m_dir.path();
};

/// A session that only answers health() through the reader the backend handed to the factory.
class ReaderSession final : public GpuSession {
 public:
  explicit ReaderSession(std::function<Result<GpuHealth>()> reader) : m_reader(std::move(reader)) {}
  Result<std::uint64_t> compute_mismatches() override { return unset(); }
  Result<gpuenv::validate::MemtestResult> memtest(const gpuenv::validate::MemtestRequest&) override { return unset(); }
  Result<gpuenv::validate::ConsistencyResult> gemm_consistency(int) override { return unset(); }
  Result<gpuenv::validate::Samples> hbm_bandwidth(int) override { return unset(); }
  Result<gpuenv::validate::Samples> copy_bandwidth(bool, int) override { return unset(); }
  Result<std::optional<gpuenv::validate::Samples>> gemm_tflops(const std::string&, int) override { return unset(); }
  Result<GpuHealth> health() override { return m_reader(); }

 private:
  static gpuenv::Error unset() { return gpuenv::make_error(gpuenv::ErrorKind::internal, "test.unset", "not in this test"); }
  std::function<Result<GpuHealth>()> m_reader;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RealBackend, IsNamedNvmlPlusCuda) {
  HostTree tree;
  EXPECT_EQ(make_real_backend(tree.options())->name(), "nvml+cuda");
}

TEST(RealBackend, ReadsTheConfidentialComputingReadyStateOnlyWhenTheFeatureIsOn) {
  HostTree tree;
  auto off = make_real_backend(tree.options())->driver();
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->cc_state, "off");
  EXPECT_FALSE(off->cc_gpus_ready.has_value());
  ScopedEnv on("FAKE_NVML_CC", "1");
  {
    ScopedEnv not_ready("FAKE_NVML_CC_READY", "0");
    auto d = make_real_backend(tree.options())->driver();
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->cc_state, "on");
    ASSERT_TRUE(d->cc_gpus_ready.has_value());
    EXPECT_FALSE(*d->cc_gpus_ready);
  }
  ScopedEnv ready("FAKE_NVML_CC_READY", "1");
  auto d = make_real_backend(tree.options())->driver();
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->cc_gpus_ready.value_or(false));
}

TEST(RealBackend, ReadsCcEvidenceWithTheCallersNonceAndNeverSetsTheReadyStateUnasked) {
  HostTree tree;
  const std::string log = tree.path("calls.log");
  ScopedEnv calls("FAKE_NVML_CALL_LOG", log);
  auto none = make_real_backend(tree.options())->cc_evidence(0, std::string(32, 'n'));
  ASSERT_TRUE(none.ok()) << none.error().to_string();
  EXPECT_FALSE(none->has_value()) << "no evidence where NVML answers not supported";

  const std::string report_path = tree.path("report.bin"), chain_path = tree.path("chain.pem");
  std::string report(4129, '\x11');
  std::ofstream(report_path, std::ios::binary) << report;
  std::ofstream(chain_path, std::ios::binary) << "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  ScopedEnv on("FAKE_NVML_CC", "1");
  ScopedEnv r("FAKE_NVML_CC_REPORT", report_path);
  ScopedEnv c("FAKE_NVML_CC_CHAIN", chain_path);
  auto backend = make_real_backend(tree.options());
  const std::string nonce = "0123456789abcdef0123456789ABCDEF";
  auto e = backend->cc_evidence(1, nonce);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  ASSERT_TRUE(e->has_value());
  EXPECT_EQ((*e)->report.size(), 4129u);
  EXPECT_EQ((*e)->report.substr(4, 32), nonce);
  EXPECT_EQ((*e)->nonce, nonce);
  EXPECT_EQ((*e)->cert_chain, read_all(chain_path));
  EXPECT_EQ((*e)->vbios_version, "96.00.9F.00.04");
  auto d = backend->driver();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->cc_environment, "production");
  EXPECT_FALSE(std::filesystem::exists(log)) << "reading evidence wrote nothing";
  ASSERT_TRUE(backend->set_cc_gpus_ready().ok());  // the one write, asked for explicitly
  EXPECT_EQ(read_all(log), "nvmlSystemSetConfComputeGpusReadyState\n");
}

TEST(RealBackend, ReadsDriverStateFromNvmlAndHostFiles) {
  HostTree tree;
  auto backend = make_real_backend(tree.options());
  auto d = backend->driver();
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  EXPECT_TRUE(d->loaded);
  EXPECT_EQ(d->version, "550.54.15");
  EXPECT_EQ(d->cuda_driver_version, 12040);
  EXPECT_EQ(d->cc_state, "off");
  EXPECT_TRUE(d->nouveau_loaded);
  EXPECT_FALSE(d->nvswitch_present);
  ASSERT_EQ(d->device_nodes_missing.size(), 1u);
  EXPECT_EQ(d->device_nodes_missing[0], tree.path("dev/nvidia-uvm"));
}

TEST(RealBackend, ChecksTheDeviceNodeOfEachGpuByItsMinorNumber) {
  HostTree tree;
  tree.write("dev/nvidia-uvm", "");
  tree.remove("dev/nvidia3");  // GPU 1 has minor number 3: /dev/nvidia1 is not the node to look for
  tree.write("proc/modules", "nvidia 56487936 2 nvidia_uvm, Live 0x0000000000000000\n");
  auto d = make_real_backend(tree.options())->driver();
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->nouveau_loaded);
  ASSERT_EQ(d->device_nodes_missing.size(), 1u);
  EXPECT_EQ(d->device_nodes_missing[0], tree.path("dev/nvidia3"));
}

TEST(RealBackend, FabricManagerFollowsTheGpusFabricRegistration) {
  HostTree tree;
  tree.write("proc/driver/nvidia-nvswitch/devices/0000:05:00.0", "");
  {
    auto d = make_real_backend(tree.options())->driver();
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->nvswitch_present);
    EXPECT_EQ(d->fabric_manager_running, std::optional<bool>(true));
  }
  for (const char* mode : {"in_progress", "failed"}) {
    ScopedEnv fabric("FAKE_NVML_FABRIC", mode);
    auto d = make_real_backend(tree.options())->driver();
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->fabric_manager_running, std::optional<bool>(false)) << mode;
  }
}

TEST(RealBackend, FabricManagerProcessIsLookedForWhenNvmlCannotTell) {
  HostTree tree;
  ScopedEnv fabric("FAKE_NVML_FABRIC", "unsupported");
  {
    auto d = make_real_backend(tree.options())->driver();
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->nvswitch_present);
    EXPECT_FALSE(d->fabric_manager_running.has_value()) << "not asked without NVSwitches";
  }
  tree.write("dev/nvidia-nvswitchctl", "");
  EXPECT_FALSE(make_real_backend(tree.options())->driver()->nvswitch_present) << "the control node alone is no switch";
  tree.write("dev/nvidia-nvswitch0", "");
  tree.write("proc/1/comm", "systemd\n");
  {
    auto d = make_real_backend(tree.options())->driver();
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->nvswitch_present);
    EXPECT_EQ(d->fabric_manager_running, std::optional<bool>(false));
  }
  tree.write("proc/4242/comm", "nv-fabricmanage\n");
  EXPECT_EQ(make_real_backend(tree.options())->driver()->fabric_manager_running, std::optional<bool>(true));
}

TEST(RealBackend, EnumeratesGpusWithEveryField) {
  HostTree tree;
  auto g = make_real_backend(tree.options())->gpus();
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  ASSERT_EQ(g->size(), 2u);
  const auto& a = (*g)[0];
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(a.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(a.pci_bus_id, "00000000:19:00.0");
  EXPECT_EQ(a.pci_device_id, 0x2330u);
  EXPECT_EQ(a.cc_major, 9);
  EXPECT_EQ(a.cc_minor, 0);
  EXPECT_EQ(a.memory_total_bytes, 85520809984ull);
  EXPECT_EQ(a.numa_node, 0);
  EXPECT_EQ(a.nvlink_links_active, 18);
  const auto& b = (*g)[1];
  EXPECT_EQ(b.index, 1);
  EXPECT_EQ(b.name, "NVIDIA H200");
  EXPECT_EQ(b.pci_bus_id, "00000000:3B:00.0");
  EXPECT_EQ(b.pci_device_id, 0x2335u);
  EXPECT_EQ(b.memory_total_bytes, 150754820096ull);
  EXPECT_EQ(b.numa_node, 1) << "sysfs names the device 0000:3b:00.0";
  EXPECT_EQ(b.nvlink_links_active, 4) << "links 0, 1, 3 and 4: a disabled link 2 does not end the count";
}

TEST(RealBackend, NumaNodeIsUnknownWithoutSysfs) {
  HostTree tree;
  tree.remove("sys");
  auto g = make_real_backend(tree.options())->gpus();
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)[0].numa_node, -1);
}

TEST(RealBackend, ReadsEveryHealthFieldOfAHealthyGpu) {
  HostTree tree;
  auto h = make_real_backend(tree.options())->health(0);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(h->ecc_enabled, std::optional<bool>(true));
  EXPECT_EQ(h->ecc_pending_change, std::optional<bool>(false));
  EXPECT_EQ(h->ecc_volatile_corrected, std::optional<std::uint64_t>(7));
  EXPECT_EQ(h->ecc_volatile_uncorrected, std::optional<std::uint64_t>(0));
  EXPECT_EQ(h->ecc_aggregate_uncorrected, std::optional<std::uint64_t>(0));
  ASSERT_TRUE(h->row_remap.has_value());
  EXPECT_EQ(h->row_remap->corrected_rows, 0u);
  EXPECT_FALSE(h->row_remap->pending);
  EXPECT_FALSE(h->retired_pages.has_value()) << "NOT_SUPPORTED on this GPU";
  ASSERT_TRUE(h->pcie_link.has_value());
  EXPECT_EQ(h->pcie_link->current_gen, 5);
  EXPECT_EQ(h->pcie_link->current_width, 16);
  EXPECT_EQ(h->pcie_link->max_gen, 5);
  EXPECT_EQ(h->pcie_link->max_width, 16);
  EXPECT_EQ(h->pcie_replays, std::optional<std::uint64_t>(0));
  EXPECT_EQ(h->clock_event_reasons, std::optional<std::uint64_t>(0x1));
  EXPECT_EQ(h->temperature_c, std::optional<int>(45));
  EXPECT_EQ(h->slowdown_temperature_c, std::optional<int>(87));
  ASSERT_TRUE(h->power_w.has_value());
  EXPECT_DOUBLE_EQ(*h->power_w, 650.123);
  EXPECT_DOUBLE_EQ(h->power_limit_w.value_or(0), 700.0);
  EXPECT_EQ(h->persistence_mode, std::optional<bool>(true));
  EXPECT_EQ(h->mig_enabled, std::optional<bool>(false));
  EXPECT_EQ(h->mig_pending_change, std::optional<bool>(false));
}

TEST(RealBackend, ReadsPendingRowRemapAndDowntrainedLink) {
  HostTree tree;
  auto h = make_real_backend(tree.options())->health(1);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(h->ecc_enabled, std::optional<bool>(true));
  EXPECT_EQ(h->ecc_pending_change, std::optional<bool>(true));
  // Distinct counts per NVML_MEMORY_ERROR_TYPE_* x NVML_VOLATILE_ECC/NVML_AGGREGATE_ECC pin the enum values.
  EXPECT_EQ(h->ecc_volatile_corrected, std::optional<std::uint64_t>(12));
  EXPECT_EQ(h->ecc_volatile_uncorrected, std::optional<std::uint64_t>(2));
  EXPECT_EQ(h->ecc_aggregate_uncorrected, std::optional<std::uint64_t>(9));
  ASSERT_TRUE(h->row_remap.has_value());
  EXPECT_EQ(h->row_remap->corrected_rows, 1u);
  EXPECT_EQ(h->row_remap->uncorrected_rows, 2u);
  EXPECT_TRUE(h->row_remap->pending);
  EXPECT_FALSE(h->row_remap->failure);
  ASSERT_TRUE(h->retired_pages.has_value());
  EXPECT_EQ(h->retired_pages->single_bit, 4u);
  EXPECT_EQ(h->retired_pages->double_bit, 1u);
  EXPECT_TRUE(h->retired_pages->pending);
  ASSERT_TRUE(h->pcie_link.has_value());
  EXPECT_EQ(h->pcie_link->current_width, 8);
  EXPECT_EQ(h->pcie_link->max_width, 16);
  EXPECT_EQ(h->pcie_replays, std::optional<std::uint64_t>(17));
  EXPECT_EQ(h->clock_event_reasons,
            std::optional<std::uint64_t>(gpuenv::validate::k_clock_event_sw_power_cap | gpuenv::validate::k_clock_event_hw_thermal));
  EXPECT_EQ(h->temperature_c, std::optional<int>(83));
  EXPECT_FALSE(h->slowdown_temperature_c.has_value()) << "NOT_SUPPORTED leaves the field empty";
  EXPECT_DOUBLE_EQ(h->power_w.value_or(0), 512.5);
  EXPECT_EQ(h->persistence_mode, std::optional<bool>(false));
  EXPECT_EQ(h->mig_enabled, std::optional<bool>(false));
  EXPECT_EQ(h->mig_pending_change, std::optional<bool>(true));
}

TEST(RealBackend, OlderDriverLeavesNewFieldsEmptyAndFallsBack) {
  HostTree tree;
  tree.write("dev/nvidia-nvswitch0", "");
  tree.write("proc/77/comm", "nv-fabricmanage\n");
  auto backend = make_real_backend(tree.options(FAKE_NVML_FULL_OLD_PATH));
  auto h = backend->health(1);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_FALSE(h->row_remap.has_value()) << "no nvmlDeviceGetRemappedRows";
  EXPECT_EQ(h->clock_event_reasons,
            std::optional<std::uint64_t>(gpuenv::validate::k_clock_event_sw_power_cap | gpuenv::validate::k_clock_event_hw_thermal))
      << "from nvmlDeviceGetCurrentClocksThrottleReasons";
  EXPECT_EQ(h->temperature_c, std::optional<int>(83)) << "from nvmlDeviceGetTemperature";
  ASSERT_TRUE(h->retired_pages.has_value());
  EXPECT_EQ(h->retired_pages->single_bit, 4u);
  auto d = backend->driver();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->cc_state, "unknown") << "no nvmlSystemGetConfComputeState";
  EXPECT_EQ(d->fabric_manager_running, std::optional<bool>(true)) << "no fabric info: the process was found";
}

TEST(RealBackend, NoLibraryMeansNoDriverAndNoError) {
  HostTree tree;
  auto backend = make_real_backend(tree.options("libnvidia-ml-not-here.so.1"));
  auto d = backend->driver();
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  EXPECT_FALSE(d->loaded);
  EXPECT_TRUE(d->version.empty());
  EXPECT_TRUE(d->nouveau_loaded) << "host files are still read";
  auto g = backend->gpus();
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->empty());
  auto h = backend->health(0);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().id, "validate.no_driver");
}

TEST(RealBackend, KernelDriverNotLoadedMeansNoDriverAndNoError) {
  HostTree tree;
  ScopedEnv rc("FAKE_NVML_INIT_RC", "9");  // NVML_ERROR_DRIVER_NOT_LOADED
  auto backend = make_real_backend(tree.options());
  auto d = backend->driver();
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  EXPECT_FALSE(d->loaded);
  EXPECT_TRUE(backend->gpus()->empty());
}

TEST(RealBackend, ProcfsTellsTheDriverWhenNvmlIsAbsent) {
  HostTree tree;
  tree.write("proc/driver/nvidia/version",
             "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:55 UTC 2024\n");
  auto d = make_real_backend(tree.options("libnvidia-ml-not-here.so.1"))->driver();
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->loaded);
  EXPECT_EQ(d->version, "550.54.15");
}

TEST(RealBackend, FailedNvmlInitIsAnError) {
  HostTree tree;
  ScopedEnv rc("FAKE_NVML_INIT_RC", "18");  // NVML_ERROR_LIB_RM_VERSION_MISMATCH
  auto d = make_real_backend(tree.options())->driver();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().id, "validate.nvml_init");
}

TEST(RealBackend, LibraryWithoutNvmlIsAnError) {
  HostTree tree;
  auto d = make_real_backend(tree.options(FAKE_CUDA_OK_PATH))->driver();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().id, "validate.nvml_symbols");
}

TEST(RealBackend, LostGpuIsAnErrorOnlyForThatGpu) {
  HostTree tree;
  ScopedEnv lost("FAKE_NVML_LOST_GPU", "1");
  auto backend = make_real_backend(tree.options());
  EXPECT_TRUE(backend->health(0).ok());
  auto h = backend->health(1);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().id, "validate.gpu_lost");
  EXPECT_NE(h.error().message.find("GPU is lost"), std::string::npos) << h.error().message;
}

TEST(RealBackend, UnknownGpuIndexIsAnError) {
  HostTree tree;
  auto backend = make_real_backend(tree.options());
  for (int gpu : {2, -1}) {
    auto h = backend->health(gpu);
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.error().id, "validate.gpu_handle");
  }
}

TEST(RealBackend, OpenWithoutSessionFactoryFails) {
  HostTree tree;
  auto s = make_real_backend(tree.options())->open(0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().id, "validate.no_cuda_session");
  EXPECT_NE(s.error().message.find("built without the CUDA session"), std::string::npos);
}

TEST(RealBackend, OpenHandsTheFactoryTheBusIdNumaNodeAndAHealthReader) {
  HostTree tree;
  auto options = tree.options();
  std::string seen_bus_id;
  int seen_numa_node = -2;
  bool seen_confidential = true;
  options.session_factory = [&](SessionTarget target) -> Result<std::unique_ptr<GpuSession>> {
    seen_bus_id = target.pci_bus_id;
    seen_numa_node = target.numa_node;
    seen_confidential = target.confidential;
    return std::unique_ptr<GpuSession>(std::make_unique<ReaderSession>(std::move(target.health_reader)));
  };
  auto backend = make_real_backend(options);
  auto session = backend->open(1);
  ASSERT_TRUE(session.ok()) << session.error().to_string();
  EXPECT_EQ(seen_bus_id, "00000000:3B:00.0");
  EXPECT_EQ(seen_numa_node, 1) << "pinned host memory goes on the GPU's NUMA node (sysfs 0000:3b:00.0)";
  EXPECT_FALSE(seen_confidential);
  {
    ScopedEnv on("FAKE_NVML_CC", "1");
    ASSERT_TRUE(make_real_backend(options)->open(0).ok());
    EXPECT_TRUE(seen_confidential) << "the session is told confidential computing is on";
  }
  backend.reset();  // the reader keeps NVML alive on its own
  auto h = (*session)->health();
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  ASSERT_TRUE(h->row_remap.has_value());
  EXPECT_TRUE(h->row_remap->pending);
  EXPECT_EQ(h->pcie_link->current_width, 8);
}

TEST(RealBackend, EnumeratesMigDevicesThroughNvmlsMigHandlesReadOnly) {
  HostTree tree;
  const std::string calls = tree.path("calls.log"), mig_calls = tree.path("mig.log");
  ScopedEnv log("FAKE_NVML_CALL_LOG", calls);
  ScopedEnv mig_log("FAKE_NVML_MIG_LOG", mig_calls);
  ScopedEnv on("FAKE_NVML_MIG", "1");
  auto backend = make_real_backend(tree.options());
  auto devices = backend->mig_devices(0);
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  ASSERT_EQ(devices->size(), 2u) << "slots 0 and 2 hold devices; slot 1 answers NOT_FOUND and is skipped";
  const auto& a = (*devices)[0];
  EXPECT_EQ(a.uuid, "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee");
  EXPECT_EQ(a.parent, 0);
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.gpu_instance_id, 2);
  EXPECT_EQ(a.compute_instance_id, 0);
  EXPECT_EQ(a.profile, "3g.40gb") << "the profile from NVML's name \"... MIG 3g.40gb\"";
  EXPECT_EQ(a.memory_bytes, 42681237504ull);
  EXPECT_EQ(a.parent_memory_bytes, 85520809984ull);
  EXPECT_EQ(a.sm_count, 60);
  EXPECT_EQ(a.gpu_instance_slices, 3);
  const auto& b = (*devices)[1];
  EXPECT_EQ(b.index, 2);
  EXPECT_EQ(b.profile, "1g.10gb");
  EXPECT_EQ(b.gpu_instance_id, 9);
  EXPECT_EQ(b.sm_count, 16);
  auto none = backend->mig_devices(1);
  ASSERT_TRUE(none.ok()) << none.error().to_string();
  EXPECT_TRUE(none->empty()) << "GPU 1 has MIG off";
  std::ifstream in(calls);
  std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(written, "") << "reading the MIG layout changes nothing (no Create/Destroy/Set call)";
  std::ifstream mig_in(mig_calls);
  std::string read((std::istreambuf_iterator<char>(mig_in)), std::istreambuf_iterator<char>());
  EXPECT_NE(read.find("nvmlDeviceGetMigDeviceHandleByIndex"), std::string::npos) << read;
  EXPECT_NE(read.find("nvmlDeviceGetAttributes_v2"), std::string::npos) << read;
}

TEST(RealBackend, NoMigDevicesWithMigOffOrAnNvmlWithoutMig) {
  HostTree tree;
  auto off = make_real_backend(tree.options())->mig_devices(0);
  ASSERT_TRUE(off.ok()) << off.error().to_string();
  EXPECT_TRUE(off->empty()) << "MIG is off on GPU 0 unless FAKE_NVML_MIG=1";
  ScopedEnv on("FAKE_NVML_MIG", "1");
  auto old = make_real_backend(tree.options(FAKE_NVML_FULL_OLD_PATH))->mig_devices(0);
  ASSERT_TRUE(old.ok()) << old.error().to_string();
  EXPECT_TRUE(old->empty()) << "an NVML without nvmlDeviceGetMigDeviceHandleByIndex predates MIG";
  auto unknown = make_real_backend(tree.options())->mig_devices(7);
  EXPECT_FALSE(unknown.ok()) << "an unknown GPU is an error";
}

TEST(RealBackend, OpensOnlyTheMigDeviceCudaVisibleDevicesNames) {
  HostTree tree;
  ScopedEnv on("FAKE_NVML_MIG", "1");
  auto options = tree.options();
  std::string seen_bus_id;
  options.session_factory = [&](SessionTarget target) -> Result<std::unique_ptr<GpuSession>> {
    seen_bus_id = target.pci_bus_id;
    return std::unique_ptr<GpuSession>(std::make_unique<ReaderSession>(std::move(target.health_reader)));
  };
  auto devices = make_real_backend(options)->mig_devices(0);
  ASSERT_TRUE(devices.ok() && devices->size() == 2u);
  auto unset = make_real_backend(options)->open_mig((*devices)[1]);
  ASSERT_FALSE(unset.ok());
  EXPECT_EQ(unset.error().id, "validate.mig_not_visible");
  EXPECT_NE(unset.error().hint.find("CUDA_VISIBLE_DEVICES=MIG-12345678-9abc-def0-1234-56789abcdef0"), std::string::npos)
      << unset.error().hint;
  EXPECT_EQ(seen_bus_id, "") << "no session is made for an instance this process cannot reach";
  options.cuda_visible_devices = " MIG-12345678-9abc-def0-1234-56789abcdef0 ,GPU-11111111-2222-3333-4444-555555555555";
  auto named = make_real_backend(options)->open_mig((*devices)[1]);
  ASSERT_TRUE(named.ok()) << named.error().to_string();
  EXPECT_EQ(seen_bus_id, "00000000:19:00.0") << "CUDA enumerates the instance alone, under its GPU's address";
  auto other = make_real_backend(options)->open_mig((*devices)[0]);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().id, "validate.mig_not_visible");
}

TEST(RealBackend, TellsASessionHowManyComputeInstancesShareItsGpuInstancesMemory) {
  // FAKE_NVML_MIG=2: GI 2 has two compute instances (slots 0 and 1), GI 9 one. A session's work buffers are sized
  // from free memory, which each of GI 2's compute instances sees whole: the factory is told to halve it there.
  HostTree tree;
  ScopedEnv on("FAKE_NVML_MIG", "2");
  auto options = tree.options();
  int shared_by = 0;
  options.session_factory = [&](SessionTarget target) -> Result<std::unique_ptr<GpuSession>> {
    shared_by = target.memory_shared_by;
    return std::unique_ptr<GpuSession>(std::make_unique<ReaderSession>(std::move(target.health_reader)));
  };
  const std::vector<std::pair<std::string, int>> cases = {{"MIG-aaaaaaaa-bbbb-cccc-dddd-ffffffffffff", 2},
                                                           {"MIG-12345678-9abc-def0-1234-56789abcdef0", 1}};
  for (const auto& c : cases) {
    const std::string uuid = c.first;
    const int expected = c.second;
    options.cuda_visible_devices = uuid;
    auto backend = make_real_backend(options);
    auto devices = backend->mig_devices(0);
    ASSERT_TRUE(devices.ok() && devices->size() == 3u);
    const auto it = std::find_if(devices->begin(), devices->end(), [&uuid](const gpuenv::validate::MigDevice& d) { return d.uuid == uuid; });
    ASSERT_NE(it, devices->end()) << uuid;
    shared_by = 0;
    auto session = backend->open_mig(*it);
    ASSERT_TRUE(session.ok()) << session.error().to_string();
    EXPECT_EQ(shared_by, expected) << uuid;
  }
  options.cuda_visible_devices.clear();
  shared_by = 0;
  ASSERT_TRUE(make_real_backend(options)->open(1).ok());
  EXPECT_EQ(shared_by, 1) << "a whole GPU shares its memory with no sibling";
}

/// The real backend composed as the CLI composes it (cli/cmd_validate.cpp), over the CPU doubles of libcuda,
/// cuBLAS(Lt) and NCCL (tests/contract/cpu_*.cpp) and the fake NVML: every GPU check then runs through the real
/// session, peer and NCCL adapters. GEMMs are small, since the CPU computes them.
RealBackendOptions cpu_driver_options(const HostTree& tree) {
  auto o = tree.options();
  o.cuda_library = CPU_CUDA_PATH;
  o.session_factory = [](SessionTarget target) {
    gpuenv::validate::CudaSessionOptions so;
    so.library = CPU_CUDA_PATH;
    so.fatbin = gpuenv::validate::embedded_validation_fatbin();
    so.health_reader = std::move(target.health_reader);
    so.numa_node = target.numa_node;
    so.confidential = target.confidential;
    so.cublaslt_libraries = {CPU_CUBLAS_PATH};
    so.cublas_libraries = {CPU_CUBLAS_PATH};
    so.consistency_gemm_size = 96;
    so.tflops_gemm_size = 128;
    return gpuenv::validate::open_cuda_session(target.pci_bus_id, so);
  };
  o.p2p_measure = [](const std::string& src, const std::string& dst, int samples) {
    gpuenv::validate::MultiGpuOptions mo;
    mo.cuda_library = CPU_CUDA_PATH;
    mo.fatbin = gpuenv::validate::embedded_validation_fatbin();
    return gpuenv::validate::measure_p2p_bandwidth(mo, src, dst, samples);
  };
  o.nccl_measure = [](const std::vector<std::string>& bus_ids, int samples) {
    gpuenv::validate::MultiGpuOptions mo;
    mo.cuda_library = CPU_CUDA_PATH;
    mo.nccl_libraries = {CPU_NCCL_PATH};
    return gpuenv::validate::measure_nccl_allreduce(mo, bus_ids, samples);
  };
  return o;
}

/// Runs the checks `filter` selects at `level` through the real backend on the CPU doubles (cpu_driver_options), with
/// the GPU deadlines x8: a busy 2-core CI machine copying 128 MiB buffers is not an H100.
Result<gpuenv::validate::Report> run_on_cpu_driver(gpuenv::validate::Level level, std::vector<std::string> filter) {
  auto tree = std::make_unique<HostTree>();
  auto backend = make_real_backend(cpu_driver_options(*tree));
  gpuenv::validate::CheckInputs inputs;
  inputs.level = level;
  gpuenv::validate::RunOptions run;
  run.filter = std::move(filter);
  run.deadline_scale = 8;
  auto report = gpuenv::validate::run_validation(*backend, inputs, gpuenv::validate::all_checks(), run);
  // A check the watchdog abandoned still runs on the backend and reads the host tree: keep both for the process's
  // lifetime then, as the CLI does.
  bool hung = false;
  if (report.ok())
    for (const auto& check : report->checks)
      for (const auto& r : check.results) hung = hung || r.code == "hang";
  if (hung) {
    (void)backend.release();
    (void)tree.release();
  }
  return report;
}

TEST(RealBackend, EveryGpuCheckRunsThroughTheRealAdaptersOnTheCpuDriver) {
  if (gpuenv::validate::embedded_validation_fatbin().size == 0) GTEST_SKIP() << "built without CUDA: no kernels";
  ::unsetenv("CPU_CUDA_FAULTS");
  auto report = run_on_cpu_driver(gpuenv::validate::Level::standard, {"kernels", "throughput"});
  ASSERT_TRUE(report.ok()) << report.error().to_string();
  EXPECT_EQ(report->backend, "nvml+cuda");
  EXPECT_FALSE(report->could_not_run) << report->could_not_run_reason;
  std::map<std::string, gpuenv::validate::CheckReport> by_key;
  for (const auto& check : report->checks) {
    by_key[check.key] = check;
    for (const auto& r : check.results) {
      // Nothing the adapters do may fail on a healthy (CPU) GPU; a SKIP must say why.
      EXPECT_NE(r.status, gpuenv::validate::CheckStatus::fail) << check.key << " GPU " << r.gpu << ": " << r.code << " "
                                                          << r.message;
      if (r.status == gpuenv::validate::CheckStatus::skip) EXPECT_FALSE(r.message.empty()) << check.key;
    }
  }
  // The checks that measure or compute ran on both GPUs through the real adapters and passed.
  for (const char* key : {"context_create", "compute_correctness", "memtest", "gemm_consistency", "hbm_bandwidth",
                          "h2d_bandwidth", "d2h_bandwidth", "gemm_tflops"}) {
    ASSERT_TRUE(by_key.count(key)) << key << " did not run at standard";
    ASSERT_EQ(by_key[key].results.size(), 2u) << key;
    for (const auto& r : by_key[key].results) {
      EXPECT_NE(r.status, gpuenv::validate::CheckStatus::skip) << key << " GPU " << r.gpu << ": " << r.message;
    }
  }
  EXPECT_NE(by_key["gemm_tflops"].results[0].message.find("cublasLt"), std::string::npos)
      << by_key["gemm_tflops"].results[0].message;
  for (const char* key : {"p2p_bandwidth", "nccl_allreduce"}) {
    ASSERT_TRUE(by_key.count(key)) << key;
    for (const auto& r : by_key[key].results) {
      EXPECT_NE(r.status, gpuenv::validate::CheckStatus::skip) << key << ": " << r.message;
    }
  }
}

TEST(RealBackend, EveryMigInstanceRunsInAChildProcessThatSeesOnlyItsDevice) {
  if (gpuenv::validate::embedded_validation_fatbin().size == 0) GTEST_SKIP() << "built without CUDA: no kernels";
  ::unsetenv("CPU_CUDA_FAULTS");
  ScopedEnv on("FAKE_NVML_MIG", "1");
  HostTree tree;
  auto options = cpu_driver_options(tree);
  // The factory runs inside each child: it notes the CUDA_VISIBLE_DEVICES that child's CUDA starts with.
  const std::string seen = tree.path("visible.log");
  options.session_factory = [inner = options.session_factory, seen](SessionTarget target) {
    if (std::FILE* f = std::fopen(seen.c_str(), "a")) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      std::fprintf(f, "%d %s\n", static_cast<int>(::getpid()), visible ? visible : "(unset)");
      std::fclose(f);
    }
    return inner(std::move(target));
  };
  auto backend = make_real_backend(options);
  gpuenv::validate::CheckInputs inputs;
  inputs.level = gpuenv::validate::Level::quick;
  inputs.gpus = {0};
  gpuenv::validate::RunOptions run;
  run.filter = {"kernels", "hbm_bandwidth"};
  run.deadline_scale = 8;
  auto report = gpuenv::validate::run_validation(*backend, inputs, gpuenv::validate::all_checks(), run);
  ASSERT_TRUE(report.ok()) << report.error().to_string();
  ASSERT_EQ(report->mig_devices.size(), 2u);
  for (const auto& check : report->checks) {
    ASSERT_EQ(check.results.size(), 2u) << check.key << ": one outcome per instance";
    for (const auto& r : check.results) {
      ASSERT_TRUE(r.mig.has_value()) << check.key;
      // No thresholds are loaded here, so hbm_bandwidth's figure is MEASURED; every other check passes.
      const auto want = check.key == "hbm_bandwidth" ? gpuenv::validate::CheckStatus::measured : gpuenv::validate::CheckStatus::pass;
      EXPECT_EQ(r.status, want) << check.key << " " << r.mig->profile << ": " << r.message;
    }
  }
  std::ifstream in(seen);
  std::set<std::string> visible;
  for (std::string pid, uuid; in >> pid >> uuid;) {
    EXPECT_NE(pid, std::to_string(::getpid())) << "sessions on instances are made in child processes";
    visible.insert(uuid);
  }
  EXPECT_EQ(visible, (std::set<std::string>{"MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "MIG-12345678-9abc-def0-1234-56789abcdef0"}))
      << "each child's CUDA sees its own instance";
}

TEST(RealBackend, ReapingAChildIsBoundedInTime) {
  // A child that does not end (as one stuck in the driver cannot, even on SIGKILL) is given up after the bound.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(gpuenv::validate::reap_child_within(pid, 200ms));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 2s) << "not a blocking wait";
  ::kill(pid, SIGKILL);
  start = std::chrono::steady_clock::now();
  EXPECT_TRUE(gpuenv::validate::reap_child_within(pid, 5s)) << "a child that ends is reaped";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_FALSE(gpuenv::validate::reap_child_within(pid, 5s)) << "no longer a child: answered at once";
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
}

TEST(RealBackend, DestroyingAMigChildEndsAndReapsItPromptly) {
  HostTree tree;
  const std::string pid_file = tree.path("child.pid");
  auto child = gpuenv::validate::MigChild::start("MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", [pid_file]() -> Result<std::unique_ptr<GpuSession>> {
    if (std::FILE* f = std::fopen(pid_file.c_str(), "w")) {
      std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
      std::fclose(f);
    }
    return gpuenv::make_error(gpuenv::ErrorKind::environment, "test.no_session", "no session in this test");
  });
  ASSERT_TRUE(child.ok()) << child.error().to_string();
  auto opened = (*child)->open([]() -> Result<GpuHealth> { return GpuHealth{}; });
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().id, "test.no_session") << "the child's own error comes back";
  int pid = 0;
  std::ifstream(pid_file) >> pid;
  ASSERT_GT(pid, 0) << "the child ran its session factory";
  const auto start = std::chrono::steady_clock::now();
  child->reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, gpuenv::validate::k_mig_child_reap_bound);
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1) << "the child was reaped by the destructor";
  EXPECT_NE(::kill(pid, 0), 0) << "the child is gone";
}

TEST(RealBackend, AMemtestBitFlipOnTheCpuDriverFailsOnlyMemtest) {
  if (gpuenv::validate::embedded_validation_fatbin().size == 0) GTEST_SKIP() << "built without CUDA: no kernels";
  ScopedEnv fault("CPU_CUDA_FAULTS", "memtest_flip");
  auto report = run_on_cpu_driver(gpuenv::validate::Level::quick, {"memtest", "compute_correctness"});
  ASSERT_TRUE(report.ok()) << report.error().to_string();
  ASSERT_EQ(report->checks.size(), 2u);
  for (const auto& check : report->checks) {
    for (const auto& r : check.results) {
      if (check.key == "memtest") {
        EXPECT_EQ(r.status, gpuenv::validate::CheckStatus::fail) << r.message;
        EXPECT_EQ(r.code, "memtest_error") << r.message;
      } else {
        EXPECT_EQ(r.status, gpuenv::validate::CheckStatus::pass) << check.key << ": " << r.message;
      }
    }
  }
}

TEST(RealBackend, HungCuInitFailsOpenWithoutCallingTheFactory) {
  HostTree tree;
  auto options = tree.options();
  options.cuda_library = FAKE_CUDA_HANG_PATH;
  options.cuinit_timeout = 300ms;
  int calls = 0;
  options.session_factory = [&](SessionTarget) -> Result<std::unique_ptr<GpuSession>> {
    ++calls;
    return gpuenv::make_error(gpuenv::ErrorKind::internal, "test.unexpected", "factory called");
  };
  auto backend = make_real_backend(options);
  const auto start = std::chrono::steady_clock::now();
  auto first = backend->open(0);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.error().id, "detect.cuinit_timeout");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  const auto again = std::chrono::steady_clock::now();
  auto second = backend->open(1);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().id, "detect.cuinit_timeout");
  EXPECT_LT(std::chrono::steady_clock::now() - again, 250ms) << "the hung driver is not waited for twice";
  EXPECT_EQ(calls, 0);
}

TEST(RealBackend, PrepareRunsTheCuInitProbeOnceForEveryLaterOpen) {
  HostTree tree;
  auto options = tree.options();
  options.cuda_library = FAKE_CUDA_HANG_PATH;
  options.cuinit_timeout = 300ms;
  options.session_factory = [](SessionTarget) -> Result<std::unique_ptr<GpuSession>> {
    return gpuenv::make_error(gpuenv::ErrorKind::internal, "test.unexpected", "factory called");
  };
  auto backend = make_real_backend(options);
  auto prepared = backend->prepare();
  ASSERT_FALSE(prepared.ok());
  EXPECT_EQ(prepared.error().id, "detect.cuinit_timeout");
  const auto start = std::chrono::steady_clock::now();
  auto opened = backend->open(0);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().id, "detect.cuinit_timeout");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 250ms) << "open() reuses what prepare() found";
}

TEST(RealBackend, OpenWithoutLibcudaFails) {
  HostTree tree;
  auto options = tree.options();
  options.cuda_library = "libcuda-not-here.so.1";
  options.session_factory = [](SessionTarget) -> Result<std::unique_ptr<GpuSession>> {
    return gpuenv::make_error(gpuenv::ErrorKind::internal, "test.unexpected", "factory called");
  };
  auto s = make_real_backend(options)->open(0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().id, "validate.no_libcuda");
}

TEST(RealBackend, PeerAndNcclAreNotMeasuredWithoutInjectedFunctions) {
  HostTree tree;
  auto backend = make_real_backend(tree.options());
  auto p2p = backend->p2p_bandwidth(0, 1, 3);
  ASSERT_TRUE(p2p.ok()) << p2p.error().to_string();
  EXPECT_FALSE(p2p->has_value());
  auto nccl = backend->nccl_allreduce({0, 1}, 3);
  ASSERT_TRUE(nccl.ok()) << nccl.error().to_string();
  EXPECT_FALSE(nccl->has_value());
}

/// Samples as a measurement would return them.
Samples measured(double value, const std::string& engine) {
  Samples s;
  s.values = {value, value + 1};
  s.unit = "GB/s";
  s.engine = engine;
  s.data_verified = true;
  return s;
}

TEST(RealBackend, PeerMeasurementGetsNvmlBusIdsAndItsAnswerPassesThrough) {
  HostTree tree;
  auto options = tree.options();
  std::vector<std::string> seen;
  int seen_samples = 0;
  Result<std::optional<Samples>> answer = std::optional<Samples>(measured(41.5, "gpuenv"));
  options.p2p_measure = [&](const std::string& src, const std::string& dst, int samples) {
    seen = {src, dst};
    seen_samples = samples;
    return answer;
  };
  auto backend = make_real_backend(options);
  auto r = backend->p2p_bandwidth(1, 0, 5);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(seen, (std::vector<std::string>{"00000000:3B:00.0", "00000000:19:00.0"}));
  EXPECT_EQ(seen_samples, 5);
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->values, (std::vector<double>{41.5, 42.5}));
  EXPECT_EQ((*r)->engine, "gpuenv");
  EXPECT_TRUE((*r)->data_verified);

  answer = std::optional<Samples>{};  // no peer access between the two
  auto none = backend->p2p_bandwidth(0, 1, 5);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  answer = gpuenv::make_error(gpuenv::ErrorKind::environment, "validate.data_mismatch", "3 of 100 words differ");
  auto bad = backend->p2p_bandwidth(0, 1, 5);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().id, "validate.data_mismatch");
  EXPECT_EQ(bad.error().message, "3 of 100 words differ");
}

TEST(RealBackend, NcclMeasurementGetsNvmlBusIdsInOrderAndItsAnswerPassesThrough) {
  HostTree tree;
  auto options = tree.options();
  std::vector<std::string> seen;
  int seen_samples = 0;
  Result<std::optional<Samples>> answer = std::optional<Samples>(measured(180, "nccl"));
  options.nccl_measure = [&](const std::vector<std::string>& bus_ids, int samples) {
    seen = bus_ids;
    seen_samples = samples;
    return answer;
  };
  auto backend = make_real_backend(options);
  auto r = backend->nccl_allreduce({1, 0}, 4);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(seen, (std::vector<std::string>{"00000000:3B:00.0", "00000000:19:00.0"}));
  EXPECT_EQ(seen_samples, 4);
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->engine, "nccl");
  EXPECT_EQ((*r)->values, (std::vector<double>{180, 181}));

  auto single = backend->nccl_allreduce({0}, 2);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"00000000:19:00.0"}));

  answer = std::optional<Samples>{};  // NCCL not present
  auto none = backend->nccl_allreduce({0, 1}, 4);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  answer = gpuenv::make_error(gpuenv::ErrorKind::environment, "nccl.call", "ncclCommInitAll failed");
  auto bad = backend->nccl_allreduce({0, 1}, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().id, "nccl.call");
}

TEST(RealBackend, MultiGpuMeasurementOfAnUnknownGpuIsAnErrorWithoutMeasuring) {
  HostTree tree;
  auto options = tree.options();
  int calls = 0;
  options.p2p_measure = [&](const std::string&, const std::string&, int) -> Result<std::optional<Samples>> {
    ++calls;
    return std::optional<Samples>{};
  };
  options.nccl_measure = [&](const std::vector<std::string>&, int) -> Result<std::optional<Samples>> {
    ++calls;
    return std::optional<Samples>{};
  };
  auto backend = make_real_backend(options);
  for (auto [src, dst] : {std::pair{0, 2}, std::pair{-1, 1}}) {
    auto r = backend->p2p_bandwidth(src, dst, 3);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().id, "validate.gpu_handle");
  }
  auto r = backend->nccl_allreduce({0, 1, 7}, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "validate.gpu_handle");
  EXPECT_NE(r.error().message.find("GPU 7"), std::string::npos) << r.error().message;
  EXPECT_EQ(calls, 0);
}

TEST(RealBackend, MultiGpuMeasurementNeedsTheCuInitProbeAndADriver) {
  HostTree tree;
  auto options = tree.options();
  options.cuda_library = FAKE_CUDA_HANG_PATH;
  options.cuinit_timeout = 300ms;
  int calls = 0;
  options.p2p_measure = [&](const std::string&, const std::string&, int) -> Result<std::optional<Samples>> {
    ++calls;
    return std::optional<Samples>{};
  };
  options.nccl_measure = [&](const std::vector<std::string>&, int) -> Result<std::optional<Samples>> {
    ++calls;
    return std::optional<Samples>{};
  };
  {
    auto backend = make_real_backend(options);
    auto p2p = backend->p2p_bandwidth(0, 1, 3);
    ASSERT_FALSE(p2p.ok());
    EXPECT_EQ(p2p.error().id, "detect.cuinit_timeout");
    auto nccl = backend->nccl_allreduce({0, 1}, 3);
    ASSERT_FALSE(nccl.ok());
    EXPECT_EQ(nccl.error().id, "detect.cuinit_timeout");
  }
  auto no_nvml = options;
  no_nvml.nvml_library = "libnvidia-ml-not-here.so.1";
  auto r = make_real_backend(no_nvml)->nccl_allreduce({0}, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "validate.no_driver");
  EXPECT_EQ(calls, 0);
}

TEST(RealBackend, MultiGpuMeasurementThatThrowsIsAnError) {
  HostTree tree;
  auto options = tree.options();
  options.p2p_measure = [](const std::string&, const std::string&, int) -> Result<std::optional<Samples>> {
    throw std::runtime_error("boom");
  };
  options.nccl_measure = [](const std::vector<std::string>&, int) -> Result<std::optional<Samples>> {
    throw std::bad_alloc();
  };
  auto backend = make_real_backend(options);
  auto p2p = backend->p2p_bandwidth(0, 1, 3);
  ASSERT_FALSE(p2p.ok());
  EXPECT_EQ(p2p.error().id, "validate.multi_gpu");
  EXPECT_NE(p2p.error().message.find("boom"), std::string::npos);
  auto nccl = backend->nccl_allreduce({0, 1}, 3);
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.error().id, "validate.multi_gpu");
}

TEST(RealBackend, NeverCallsAStateChangingNvmlFunction) {
  HostTree tree;
  const std::string log = tree.path("nvml-writes.log");
  ScopedEnv env("FAKE_NVML_CALL_LOG", log);
  // The log works: a writer called directly is recorded.
  void* lib = dlopen(FAKE_NVML_FULL_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr);
  auto set_persistence = reinterpret_cast<int (*)(void*, int)>(dlsym(lib, "nvmlDeviceSetPersistenceMode"));
  ASSERT_NE(set_persistence, nullptr);
  set_persistence(nullptr, 1);
  EXPECT_EQ(read_all(log), "nvmlDeviceSetPersistenceMode\n");
  fs::remove(log);

  for (const char* library : {FAKE_NVML_FULL_PATH, FAKE_NVML_FULL_OLD_PATH}) {
    auto options = tree.options(library);
    options.session_factory = [](SessionTarget target) -> Result<std::unique_ptr<GpuSession>> {
      return std::unique_ptr<GpuSession>(std::make_unique<ReaderSession>(std::move(target.health_reader)));
    };
    auto backend = make_real_backend(options);
    ASSERT_TRUE(backend->driver().ok());
    ASSERT_TRUE(backend->gpus().ok());
    for (int gpu : {0, 1}) {
      ASSERT_TRUE(backend->health(gpu).ok());
      auto session = backend->open(gpu);
      ASSERT_TRUE(session.ok()) << session.error().to_string();
      ASSERT_TRUE((*session)->health().ok());
    }
  }
  EXPECT_FALSE(fs::exists(log)) << "state-changing NVML calls: " << read_all(log);
  dlclose(lib);
}

#ifdef GPUENV_SOURCE_DIR
TEST(RealBackend, SourceResolvesNoStateChangingNvmlSymbol) {
  const std::string source = read_all(std::string(GPUENV_SOURCE_DIR) + "/validate/adapters/real_backend.cpp");
  ASSERT_FALSE(source.empty());
  // The one documented write, the CC ready state (`attest --set-ready`), is bound once and nothing else is.
  const std::string ready = "\"nvmlSystemSetConfComputeGpusReadyState\"";
  const auto at = source.find(ready);
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(source.find(ready, at + 1), std::string::npos);
  std::string rest = source;
  rest.erase(at, ready.size());
  for (const char* writer : {"\"nvmlDeviceSet", "\"nvmlDeviceReset", "\"nvmlDeviceClear", "\"nvmlSystemSet", "\"nvmlDeviceModify",
                             "\"nvmlDeviceRemove", "\"nvmlGpuInstance", "\"nvmlDeviceCreate"})
    EXPECT_EQ(rest.find(writer), std::string::npos) << writer;
  // ... and called only from set_cc_gpus_ready.
  const auto call = source.find("conf_compute_set_gpus_ready(1)");
  ASSERT_NE(call, std::string::npos);
  EXPECT_EQ(source.find("conf_compute_set_gpus_ready(", call + 1), std::string::npos);
  EXPECT_LT(source.rfind("set_cc_gpus_ready() override", call), call);
}
#endif

TEST(ProcModules, FindsNouveauOnlyAsAWholeModuleName) {
  EXPECT_TRUE(gpuenv::validate::proc_modules_list_nouveau("nouveau 2306048 0 - Live 0x0\n"));
  EXPECT_TRUE(gpuenv::validate::proc_modules_list_nouveau("nvidia 1 0 - Live 0x0\nnouveau 2306048 0 - Live 0x0"));
  EXPECT_FALSE(gpuenv::validate::proc_modules_list_nouveau("nvidia 1 0 - Live 0x0\ndrm_nouveau_helper 1 0 - Live 0x0\n"));
  EXPECT_FALSE(gpuenv::validate::proc_modules_list_nouveau("nouveau_x 1 0 - Live 0x0\n"));
  EXPECT_FALSE(gpuenv::validate::proc_modules_list_nouveau(""));
}

TEST(SysfsPciAddress, ShortensTheDomainAndLowersTheCase) {
  using gpuenv::validate::sysfs_pci_address;
  EXPECT_EQ(sysfs_pci_address("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(sysfs_pci_address("0000:19:00.0"), "0000:19:00.0");
  EXPECT_EQ(sysfs_pci_address("00000001:C1:1F.0"), "0001:c1:1f.0");
  EXPECT_EQ(sysfs_pci_address("0001A2B3:01:00.0"), "1a2b3:01:00.0") << "a domain above 0xffff keeps its digits";
  for (const char* bad : {"", "3B:00.0", "000000000:3B:00.0", "0000:3B:00", "0000:3B-00.0", "zz:3B:00.0", "0000:3G:00.0"})
    EXPECT_EQ(sysfs_pci_address(bad), "") << bad;
}

TEST(FabricManagerComm, MatchesTheTruncatedProcessName) {
  EXPECT_TRUE(gpuenv::validate::comm_is_fabric_manager("nv-fabricmanage\n"));
  EXPECT_TRUE(gpuenv::validate::comm_is_fabric_manager("nv-fabricmanager"));
  EXPECT_FALSE(gpuenv::validate::comm_is_fabric_manager("nvidia-persiste\n"));
  EXPECT_FALSE(gpuenv::validate::comm_is_fabric_manager(""));
}

}  // namespace
