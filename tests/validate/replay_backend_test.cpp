#include "validate/replay/replay_backend.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#ifndef GPUENV_SOURCE_DIR
#define GPUENV_SOURCE_DIR "."
#endif

using gpuenv::validate::GpuBackend;
using gpuenv::validate::load_replay_backend;
using gpuenv::validate::load_replay_backend_file;
using gpuenv::validate::MemtestRequest;

namespace {

std::filesystem::path data(const std::string& name) {
  return std::filesystem::path(GPUENV_SOURCE_DIR) / "tests/data/validate" / name;
}

std::unique_ptr<GpuBackend> load_file(const std::string& name) {
  auto backend = load_replay_backend_file(data(name));
  EXPECT_TRUE(backend.ok()) << name << ": " << (backend.ok() ? "" : backend.error().to_string());
  return backend.ok() ? std::move(backend).value() : nullptr;
}

// A complete one-GPU file. Line numbers matter to the tests below: `loaded` is on line 4, `pci_device_id` on 17,
// `memory_total_bytes` on 19, `ecc_enabled` on 23.
const char* const k_one_gpu = R"(schema: gpuenv-replay-v1
inventory:
  driver:
    loaded: true
    version: "550.54.15"
    cuda_driver_version: 12040
    nouveau_loaded: false
    nvswitch_present: false
    fabric_manager_running: unknown
    device_nodes_missing: []
    cc_state: off
  gpus:
    - index: 0
      uuid: GPU-00000000-1111-2222-3333-444444444444
      name: "NVIDIA H200"
      pci_bus_id: "00000000:19:00.0"
      pci_device_id: "0x2335"
      compute_capability: "9.0"
      memory_total_bytes: 150754820096
      numa_node: 0
      nvlink_links_active: 0
      health:
        ecc_enabled: true
        ecc_pending_change: false
        ecc_volatile_uncorrected: 0
        ecc_volatile_corrected: 0
        ecc_aggregate_uncorrected: 0
        row_remap: {corrected_rows: 0, uncorrected_rows: 0, pending: false, failure: false}
        retired_pages: unsupported
        pcie_link: {current_gen: 1, max_gen: 5, current_width: 16, max_width: 16}
        pcie_replays: 0
        clock_event_reasons: 0x1
        temperature_c: 33
        slowdown_temperature_c: 89
        power_w: 77.9
        power_limit_w: 700
        persistence_mode: true
        mig_enabled: false
        mig_pending_change: false
scenario:
  measurements:
    - gpu: 0
      compute_mismatches: 0
      hbm_bandwidth: {values: [4210.5, 4215.0, 4212.2], unit: GB/s, engine: gpuenv, data_verified: true}
      gemm_tflops:
        bf16: {values: [741.0, 742.5, 740.1], unit: TFLOPS, engine: cublasLt, data_verified: true}
        fp64: unsupported
)";

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

gpuenv::Error load_error(const std::string& text, const std::string& origin = "mem.yaml") {
  auto backend = load_replay_backend(text, origin);
  EXPECT_FALSE(backend.ok()) << "expected an error for:\n" << text;
  return backend.ok() ? gpuenv::Error{} : backend.error();
}

// An in-memory file system for `extends` tests.
gpuenv::validate::ReplayFileReader reader(std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::filesystem::path& p) -> gpuenv::Result<std::string> {
    auto it = files.find(p.string());
    if (it == files.end()) {
      return gpuenv::make_error(gpuenv::ErrorKind::environment, "test.missing", "no such file", p.string());
    }
    return it->second;
  };
}

}  // namespace

TEST(ReplayBackend, NameIsReplay) {
  auto backend = load_replay_backend(k_one_gpu, "mem.yaml");
  ASSERT_TRUE(backend.ok()) << backend.error().to_string();
  EXPECT_EQ((*backend)->name(), "replay");
}

TEST(ReplayBackend, LoadsEveryRecordedInventory) {
  const std::map<std::string, std::pair<std::size_t, std::uint32_t>> expected = {
      {"h100x8.yaml", {8, 0x2330}},
      {"l4x1.yaml", {1, 0x27b8}},
      {"a100_mig.yaml", {1, 0x20b2}},
      {"h200x1.yaml", {1, 0x2335}}};
  for (const auto& [file, want] : expected) {
    auto backend = load_file(file);
    ASSERT_NE(backend, nullptr) << file;
    auto gpus = backend->gpus();
    ASSERT_TRUE(gpus.ok()) << file;
    ASSERT_EQ(gpus->size(), want.first) << file;
    for (const auto& g : *gpus) {
      EXPECT_EQ(g.pci_device_id, want.second) << file;
      auto health = backend->health(g.index);
      EXPECT_TRUE(health.ok()) << file;
    }
    auto driver = backend->driver();
    ASSERT_TRUE(driver.ok());
    EXPECT_TRUE(driver->loaded) << file;
  }
}

TEST(ReplayBackend, LoadsEveryFaultOverlay) {
  for (const char* file : {"ecc_uncorrectable.yaml", "row_remap_pending.yaml", "pcie_x8.yaml", "hbm_low.yaml",
                           "memtest_bitflip.yaml", "gemm_mismatch.yaml", "kernel_hang.yaml", "driver_old.yaml",
                           "nouveau.yaml", "no_driver.yaml", "mig_1g_hbm_low.yaml"}) {
    EXPECT_NE(load_file(std::string("faults/") + file), nullptr) << file;
  }
}

TEST(ReplayBackend, H100InventoryAndMeasurementsComeBack) {
  auto backend = load_file("h100x8.yaml");
  ASSERT_NE(backend, nullptr);
  auto driver = backend->driver();
  ASSERT_TRUE(driver.ok());
  EXPECT_EQ(driver->version, "550.54.15");
  EXPECT_EQ(driver->cuda_driver_version, 12040);
  EXPECT_TRUE(driver->nvswitch_present);
  ASSERT_TRUE(driver->fabric_manager_running.has_value());
  EXPECT_TRUE(*driver->fabric_manager_running);
  EXPECT_EQ(driver->cc_state, "off");

  auto gpus = backend->gpus();
  ASSERT_TRUE(gpus.ok());
  const auto& g7 = (*gpus)[7];
  EXPECT_EQ(g7.index, 7);
  EXPECT_EQ(g7.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g7.pci_bus_id, "00000000:db:00.0");
  EXPECT_EQ(g7.cc_major, 9);
  EXPECT_EQ(g7.cc_minor, 0);
  EXPECT_EQ(g7.memory_total_bytes, 85520809984u);
  EXPECT_EQ(g7.numa_node, 1);
  EXPECT_EQ(g7.nvlink_links_active, 18);

  auto idle = backend->health(7);
  ASSERT_TRUE(idle.ok());
  EXPECT_EQ(idle->pcie_link->current_gen, 1);
  EXPECT_FALSE(idle->retired_pages.has_value());
  EXPECT_EQ(*idle->clock_event_reasons, 0x1u);
  EXPECT_EQ(*idle->ecc_volatile_uncorrected, 0u);

  auto session = backend->open(7);
  ASSERT_TRUE(session.ok());
  auto load = (*session)->health();
  ASSERT_TRUE(load.ok());
  EXPECT_EQ(load->pcie_link->current_gen, 5);
  EXPECT_EQ(load->pcie_link->current_width, 16);
  auto hbm = (*session)->hbm_bandwidth(3);
  ASSERT_TRUE(hbm.ok());
  EXPECT_EQ(hbm->unit, "GB/s");
  EXPECT_EQ(hbm->values.size(), 3u);
  EXPECT_TRUE(hbm->data_verified);
  EXPECT_GT(hbm->values[0], 2800);
  auto bf16 = (*session)->gemm_tflops("bf16", 3);
  ASSERT_TRUE(bf16.ok());
  ASSERT_TRUE(bf16->has_value());
  EXPECT_EQ((*bf16)->unit, "TFLOPS");
  auto memtest = (*session)->memtest(MemtestRequest{});
  ASSERT_TRUE(memtest.ok());
  EXPECT_EQ(memtest->errors, 0u);
  EXPECT_FALSE(memtest->patterns.empty());
  auto consistency = (*session)->gemm_consistency(5);
  ASSERT_TRUE(consistency.ok());
  EXPECT_EQ(consistency->result_digests.size(), 5u);
  EXPECT_FALSE(consistency->has_reference);

  auto p2p = backend->p2p_bandwidth(0, 5, 3);
  ASSERT_TRUE(p2p.ok());
  ASSERT_TRUE(p2p->has_value());
  EXPECT_GT((*p2p)->values[0], 300);
  auto nccl = backend->nccl_allreduce({0, 1, 2, 3, 4, 5, 6, 7}, 3);
  ASSERT_TRUE(nccl.ok());
  ASSERT_TRUE(nccl->has_value());
  EXPECT_EQ((*nccl)->engine, "nccl");
}

TEST(ReplayBackend, MigFixtureReportsMigEnabled) {
  auto backend = load_file("a100_mig.yaml");
  ASSERT_NE(backend, nullptr);
  auto health = backend->health(0);
  ASSERT_TRUE(health.ok());
  EXPECT_TRUE(*health->mig_enabled);
  EXPECT_FALSE(*health->mig_pending_change);
}

TEST(ReplayBackend, UnrecordedMeasurementIsAnErrorNeverAValue) {
  auto backend = load_replay_backend(k_one_gpu, "mem.yaml");
  ASSERT_TRUE(backend.ok());
  auto session = (*backend)->open(0);
  ASSERT_TRUE(session.ok());
  auto memtest = (*session)->memtest(MemtestRequest{});
  ASSERT_FALSE(memtest.ok());
  EXPECT_EQ(memtest.error().id, "replay.no_measurement");
  EXPECT_EQ(memtest.error().message, "replay file has no memtest for GPU 0");
  auto tf32 = (*session)->gemm_tflops("tf32", 3);
  ASSERT_FALSE(tf32.ok());
  EXPECT_EQ(tf32.error().message, "replay file has no gemm_tflops.tf32 for GPU 0");
  auto load = (*session)->health();
  ASSERT_FALSE(load.ok());
  EXPECT_EQ(load.error().message, "replay file has no health_under_load for GPU 0");
  auto nccl = (*backend)->nccl_allreduce({0}, 3);
  EXPECT_FALSE(nccl.ok());
  auto p2p = (*backend)->p2p_bandwidth(0, 1, 3);
  ASSERT_FALSE(p2p.ok());
  EXPECT_EQ(p2p.error().id, "replay.no_gpu");
}

TEST(ReplayBackend, UnsupportedIsAnEmptyAnswer) {
  auto backend = load_replay_backend(k_one_gpu, "mem.yaml");
  ASSERT_TRUE(backend.ok());
  auto session = (*backend)->open(0);
  ASSERT_TRUE(session.ok());
  auto fp64 = (*session)->gemm_tflops("fp64", 3);
  ASSERT_TRUE(fp64.ok());
  EXPECT_FALSE(fp64->has_value());
  auto health = (*backend)->health(0);
  ASSERT_TRUE(health.ok());
  EXPECT_FALSE(health->retired_pages.has_value());
  EXPECT_TRUE(health->row_remap.has_value());
}

TEST(ReplayBackend, OverlayOverridesOnlyTheFieldsItNames) {
  auto ecc = load_file("faults/ecc_uncorrectable.yaml");
  ASSERT_NE(ecc, nullptr);
  auto bad = ecc->health(3);
  auto good = ecc->health(2);
  ASSERT_TRUE(bad.ok() && good.ok());
  EXPECT_EQ(*bad->ecc_volatile_uncorrected, 2u);
  EXPECT_EQ(*bad->ecc_aggregate_uncorrected, 2u);
  EXPECT_EQ(*good->ecc_volatile_uncorrected, 0u);
  EXPECT_TRUE(*bad->ecc_enabled);                 // kept from the inventory
  EXPECT_EQ(bad->pcie_link->max_width, 16);       // kept from the inventory
  EXPECT_EQ(ecc->gpus()->size(), 8u);

  auto pcie = load_file("faults/pcie_x8.yaml");
  ASSERT_NE(pcie, nullptr);
  auto session = pcie->open(2);
  ASSERT_TRUE(session.ok());
  auto load = (*session)->health();
  ASSERT_TRUE(load.ok());
  EXPECT_EQ(load->pcie_link->current_width, 8);
  EXPECT_EQ(load->pcie_link->current_gen, 5);
  EXPECT_EQ(*load->temperature_c, 61);  // GPU 2's own figure from h100x8.yaml

  auto flip = load_file("faults/memtest_bitflip.yaml");
  ASSERT_NE(flip, nullptr);
  auto s4 = flip->open(4);
  ASSERT_TRUE(s4.ok());
  auto memtest = (*s4)->memtest(MemtestRequest{});
  ASSERT_TRUE(memtest.ok());
  EXPECT_EQ(memtest->errors, 1u);
  EXPECT_EQ(memtest->expected ^ memtest->actual, 1u << 18);
  EXPECT_EQ(memtest->bytes_tested, 76042534912u);  // kept from the inventory
  EXPECT_FALSE(memtest->patterns.empty());

  auto gemm = load_file("faults/gemm_mismatch.yaml");
  ASSERT_NE(gemm, nullptr);
  auto s1 = gemm->open(1);
  ASSERT_TRUE(s1.ok());
  auto consistency = (*s1)->gemm_consistency(5);
  ASSERT_TRUE(consistency.ok());
  EXPECT_NE(consistency->result_digests[0], consistency->result_digests[3]);
  EXPECT_EQ(consistency->engine, "cublasLt");

  auto old = load_file("faults/driver_old.yaml");
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->driver()->version, "470.239.06");
  EXPECT_EQ(old->driver()->cuda_driver_version, 11040);
  EXPECT_TRUE(*old->health(0)->mig_enabled);
}

TEST(ReplayBackend, DriverlessFilesListNoGpus) {
  auto nouveau = load_file("faults/nouveau.yaml");
  ASSERT_NE(nouveau, nullptr);
  EXPECT_TRUE(nouveau->driver()->nouveau_loaded);
  EXPECT_FALSE(nouveau->driver()->loaded);
  EXPECT_TRUE(nouveau->gpus()->empty());
  auto none = load_file("faults/no_driver.yaml");
  ASSERT_NE(none, nullptr);
  EXPECT_FALSE(none->driver()->loaded);
  EXPECT_FALSE(none->driver()->device_nodes_missing.empty());
}

TEST(ReplayBackend, ExtendsMergesGpusByIndexReplacesListsAndAppendsFaults) {
  const std::string base =
      replace(k_one_gpu, "scenario:\n",
              "scenario:\n  faults:\n    error: [{gpu: 0, method: compute_mismatches, message: base}]\n");
  const std::string overlay = R"(schema: gpuenv-replay-v1
extends: base.yaml
inventory:
  driver: {device_nodes_missing: [/dev/nvidia-uvm]}
  gpus:
    - index: 0
      health: {temperature_c: 91}
scenario:
  measurements:
    - gpu: 0
      hbm_bandwidth: {values: [100.0]}
  faults:
    error: [{gpu: 0, method: health_under_load, message: "NVML_ERROR_GPU_IS_LOST"}]
)";
  auto backend = load_replay_backend(overlay, "dir/over.yaml", reader({{"dir/base.yaml", base}}));
  ASSERT_TRUE(backend.ok()) << backend.error().to_string();
  EXPECT_EQ((*backend)->driver()->device_nodes_missing, std::vector<std::string>{"/dev/nvidia-uvm"});
  auto health = (*backend)->health(0);
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(*health->temperature_c, 91);
  EXPECT_EQ(*health->slowdown_temperature_c, 89);
  auto session = (*backend)->open(0);
  ASSERT_TRUE(session.ok());
  auto hbm = (*session)->hbm_bandwidth(3);
  ASSERT_TRUE(hbm.ok());
  EXPECT_EQ(hbm->values, std::vector<double>{100.0});  // the list is replaced
  EXPECT_EQ(hbm->unit, "GB/s");                          // the rest of the mapping is kept
  auto mismatches = (*session)->compute_mismatches();   // the base's fault is kept ...
  ASSERT_FALSE(mismatches.ok());
  EXPECT_EQ(mismatches.error().id, "replay.injected");
  auto load = (*session)->health();                      // ... and the overlay's is added
  ASSERT_FALSE(load.ok());
  EXPECT_NE(load.error().message.find("NVML_ERROR_GPU_IS_LOST"), std::string::npos);
}

TEST(ReplayBackend, ErrorInAnOverlayNamesTheOverlayFile) {
  const std::string overlay = "schema: gpuenv-replay-v1\nextends: base.yaml\ninventory:\n  gpus:\n"
                              "    - index: 0\n      pci_device_id: \"0x23\"\n";
  auto backend = load_replay_backend(overlay, "over.yaml", reader({{"base.yaml", k_one_gpu}}));
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.error().id, "replay.bad_value");
  EXPECT_EQ(backend.error().where, "over.yaml:6:22");
}

TEST(ReplayBackend, RejectsUnknownKeyWithLineAndSuggestion) {
  const auto e = load_error(replace(k_one_gpu, "        ecc_enabled: true", "        ecc_enabeld: true"));
  EXPECT_EQ(e.id, "replay.unknown_key");
  EXPECT_EQ(e.where, "mem.yaml:23:9");
  EXPECT_NE(e.message.find("ecc_enabeld"), std::string::npos);
  EXPECT_NE(e.hint.find("did you mean 'ecc_enabled'"), std::string::npos);
}

TEST(ReplayBackend, RejectsUnknownTopLevelKey) {
  const auto e = load_error(std::string(k_one_gpu) + "scenaro: {}\n");
  EXPECT_EQ(e.id, "replay.unknown_key");
  EXPECT_NE(e.hint.find("did you mean 'scenario'"), std::string::npos);
}

TEST(ReplayBackend, RejectsWrongTypeWithLine) {
  const auto e = load_error(replace(k_one_gpu, "memory_total_bytes: 150754820096", "memory_total_bytes: 141 GiB"));
  EXPECT_EQ(e.id, "replay.wrong_type");
  EXPECT_EQ(e.where, "mem.yaml:19:27");
  EXPECT_NE(e.message.find("inventory.gpus[0].memory_total_bytes"), std::string::npos);
  const auto b = load_error(replace(k_one_gpu, "loaded: true", "loaded: yes"));
  EXPECT_EQ(b.id, "replay.wrong_type");
  EXPECT_EQ(b.where, "mem.yaml:4:13");
}

TEST(ReplayBackend, RejectsBadPciDeviceId) {
  for (const char* bad : {"\"2335\"", "\"0x233\"", "\"0x2335a\"", "\"0xzz35\"", "[0x2335]"}) {
    const auto e = load_error(replace(k_one_gpu, "\"0x2335\"", bad));
    EXPECT_TRUE(e.id == "replay.bad_value" || e.id == "replay.wrong_type") << bad << " " << e.id;
    EXPECT_EQ(e.where.rfind("mem.yaml:17:", 0), 0u) << bad << " " << e.where;
  }
}

TEST(ReplayBackend, RejectsMissingFieldNamingIt) {
  const auto e = load_error(replace(k_one_gpu, "        pcie_replays: 0\n", ""));
  EXPECT_EQ(e.id, "replay.missing_field");
  EXPECT_NE(e.message.find("'pcie_replays'"), std::string::npos);
  EXPECT_EQ(e.where.rfind("mem.yaml:", 0), 0u);
}

TEST(ReplayBackend, RejectsUnitOfTheWrongQuantityOrScale) {
  const auto e = load_error(replace(k_one_gpu, "unit: GB/s", "unit: TB/s"));
  EXPECT_EQ(e.id, "replay.bad_value");
  EXPECT_NE(e.message.find("GB/s"), std::string::npos);
}

TEST(ReplayBackend, RejectsWrongSchemaAndBadYaml) {
  EXPECT_EQ(load_error(replace(k_one_gpu, "gpuenv-replay-v1", "gpuenv-replay-v2")).id, "replay.schema");
  const auto syntax = load_error("schema: gpuenv-replay-v1\ninventory: [\n");
  EXPECT_EQ(syntax.id, "replay.yaml_syntax");
  EXPECT_EQ(syntax.where.rfind("mem.yaml:", 0), 0u);
  const auto twice = load_error(replace(k_one_gpu, "    cc_state: off\n", "    cc_state: off\n    cc_state: on\n"));
  EXPECT_EQ(twice.id, "replay.duplicate_key");
}

TEST(ReplayBackend, ConfidentialComputingReadyStateOnlyWithTheFeatureOn) {
  auto backend = load_replay_backend(
      replace(k_one_gpu, "    cc_state: off\n", "    cc_state: on\n    cc_gpus_ready: false\n"), "mem.yaml");
  ASSERT_TRUE(backend.ok()) << backend.error().to_string();
  auto driver = (*backend)->driver();
  ASSERT_TRUE(driver.ok());
  EXPECT_EQ(driver->cc_state, "on");
  ASSERT_TRUE(driver->cc_gpus_ready.has_value());
  EXPECT_FALSE(*driver->cc_gpus_ready);
  const auto e = load_error(replace(k_one_gpu, "    cc_state: off\n", "    cc_state: off\n    cc_gpus_ready: true\n"));
  EXPECT_EQ(e.id, "replay.bad_value");
  EXPECT_NE(e.message.find("cc_gpus_ready"), std::string::npos) << e.message;
}

TEST(ReplayBackend, RejectsGpusWithoutADriver) {
  std::string text = replace(k_one_gpu, "loaded: true\n    version: \"550.54.15\"\n    cuda_driver_version: 12040",
                             "loaded: false\n    version: \"\"\n    cuda_driver_version: 0");
  EXPECT_EQ(load_error(text).id, "replay.bad_value");
}

TEST(ReplayBackend, MissingFileIsAClearError) {
  auto backend = load_replay_backend_file("/nonexistent/gpuenv/replay.yaml");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.error().id, "replay.file");
  EXPECT_NE(backend.error().message.find("/nonexistent/gpuenv/replay.yaml"), std::string::npos);
}

TEST(ReplayBackend, MissingExtendedFileNamesTheExtendsLine) {
  const std::string overlay = "schema: gpuenv-replay-v1\nextends: nothere.yaml\n";
  auto backend = load_replay_backend(overlay, "dir/over.yaml", reader({}));
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.error().id, "replay.extends_missing");
  EXPECT_EQ(backend.error().where, "dir/over.yaml:2:10");
  EXPECT_NE(backend.error().message.find("dir/nothere.yaml"), std::string::npos);
}

TEST(ReplayBackend, ExtendsCycleIsAnError) {
  auto files = reader({{"a.yaml", "schema: gpuenv-replay-v1\nextends: b.yaml\n"},
                       {"b.yaml", "schema: gpuenv-replay-v1\nextends: ./a.yaml\n"}});
  auto backend = load_replay_backend("schema: gpuenv-replay-v1\nextends: b.yaml\n", "a.yaml", files);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.error().id, "replay.extends_cycle");
  EXPECT_EQ(backend.error().where, "b.yaml:2:10");
  auto self = load_replay_backend("schema: gpuenv-replay-v1\nextends: s.yaml\n", "s.yaml", files);
  ASSERT_FALSE(self.ok());
  EXPECT_EQ(self.error().id, "replay.extends_cycle");
}

TEST(ReplayBackend, ExtendsDepthIsLimited) {
  std::map<std::string, std::string> files;
  for (int i = 0; i < 20; ++i) {
    files["f" + std::to_string(i) + ".yaml"] =
        "schema: gpuenv-replay-v1\nextends: f" + std::to_string(i + 1) + ".yaml\n";
  }
  auto backend = load_replay_backend(files["f0.yaml"], "f0.yaml", reader(files));
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.error().id, "replay.extends_too_deep");
}

TEST(ReplayBackend, FaultOnUnknownGpuOrMethodIsRejected) {
  const auto gpu = load_error(std::string(k_one_gpu) + "  faults: {hang: [{gpu: 3, method: memtest}]}\n");
  EXPECT_EQ(gpu.id, "replay.bad_value");
  const auto method = load_error(std::string(k_one_gpu) + "  faults: {hang: [{gpu: 0, method: memtset}]}\n");
  EXPECT_EQ(method.id, "replay.bad_value");
  const auto driver = load_error(std::string(k_one_gpu) + "  faults: {hang: [{method: driver}]}\n");
  EXPECT_EQ(driver.id, "replay.bad_value");
}

TEST(ReplayBackend, InjectedErrorFailsOnlyThatGpuAndMethod) {
  auto backend = load_replay_backend(
      std::string(k_one_gpu) +
          "  faults:\n    error: [{method: driver, message: \"NVML_ERROR_DRIVER_NOT_LOADED\", id: nvml.init}]\n",
      "mem.yaml");
  ASSERT_TRUE(backend.ok()) << backend.error().to_string();
  auto driver = (*backend)->driver();
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.error().id, "nvml.init");
  EXPECT_TRUE((*backend)->gpus().ok());
  EXPECT_TRUE((*backend)->open(0).ok());
}

TEST(ReplayBackend, HangBlocksUntilTheBackendIsDestroyed) {
  auto backend_or =
      load_replay_backend(std::string(k_one_gpu) + "  faults: {hang: [{gpu: 0, method: hbm_bandwidth}]}\n", "mem.yaml");
  ASSERT_TRUE(backend_or.ok()) << backend_or.error().to_string();
  std::unique_ptr<GpuBackend> backend = std::move(backend_or).value();
  auto session_or = backend->open(0);
  ASSERT_TRUE(session_or.ok());
  std::unique_ptr<gpuenv::validate::GpuSession> session = std::move(session_or).value();

  std::atomic<bool> done{false};
  std::string id;
  std::thread caller([&] {
    auto r = session->hbm_bandwidth(3);
    if (!r.ok()) id = r.error().id;
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(done.load());
  // Other methods still answer while one call hangs.
  EXPECT_TRUE(backend->health(0).ok());

  backend.reset();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(done.load());
  caller.join();
  EXPECT_EQ(id, "replay.hang_released");
}

TEST(ReplayBackend, KernelHangFixtureHangsMemtestOnGpuZero) {
  auto backend = load_file("faults/kernel_hang.yaml");
  ASSERT_NE(backend, nullptr);
  auto s0 = backend->open(0);
  ASSERT_TRUE(s0.ok());
  std::atomic<bool> done{false};
  std::thread caller([&] {
    (void)(*s0)->memtest(MemtestRequest{});
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done.load());
  auto s1 = backend->open(1);
  ASSERT_TRUE(s1.ok());
  EXPECT_TRUE((*s1)->memtest(MemtestRequest{}).ok());
  backend.reset();
  caller.join();
  EXPECT_TRUE(done.load());
}

TEST(ReplayBackend, AliasExpansionIsBounded) {
  std::string bomb = "schema: gpuenv-replay-v1\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 8; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) bomb += std::string(j ? ", " : "") + "*a" + std::to_string(i - 1);
    bomb += "]\n";
  }
  const auto e = load_error(bomb);
  EXPECT_EQ(e.id, "replay.too_large");
  EXPECT_NE(e.message.find("aliases"), std::string::npos) << e.message;
  // A document that is merely large (no alias in it) is not blamed on aliases.
  std::string big = "schema: gpuenv-replay-v1\nvalues: [";
  for (int i = 0; i < 100001; ++i) big += (i ? ",1" : "1");
  big += "]\n";
  const auto large = load_error(big);
  EXPECT_EQ(large.id, "replay.too_large");
  EXPECT_EQ(large.message.find("aliases"), std::string::npos) << large.message;
  EXPECT_NE(large.message.find("more than 100000 values"), std::string::npos) << large.message;
}

// ---------------------------------------------------------------------------------------------------------------
// MIG devices (docs/replay.md, "MIG devices").

namespace {

// k_one_gpu with MIG on and two MIG devices, the second measured.
std::string mig_text() {
  std::string text = replace(k_one_gpu, "        mig_enabled: false", "        mig_enabled: true");
  text = replace(text, "scenario:\n", R"(      mig_devices:
        - {uuid: MIG-aaaaaaaa-0000-1111-2222-333333333333, gpu_instance_id: 1, compute_instance_id: 0, profile: 4g.71gb, memory_bytes: 74625056768, sm_count: 64, gpu_instance_slices: 4}
        - {uuid: MIG-bbbbbbbb-0000-1111-2222-333333333333, gpu_instance_id: 5, compute_instance_id: 0, profile: 1g.18gb, memory_bytes: 17179869184, sm_count: 16, gpu_instance_slices: 1}
scenario:
)");
  return text + R"(    - gpu: 0
      mig: MIG-bbbbbbbb-0000-1111-2222-333333333333
      compute_mismatches: 0
      hbm_bandwidth: {values: [598.1, 597.4, 599.0], unit: GB/s, engine: gpuenv, data_verified: true}
)";
}

}  // namespace

TEST(ReplayBackend, LoadsTheMigRecordings) {
  const std::map<std::string, std::vector<std::string>> expected = {
      {"a100_mig_7x1g.yaml", std::vector<std::string>(7, "1g.10gb")},
      {"h100_mig_7x1g.yaml", std::vector<std::string>(7, "1g.10gb")},
      {"h100_mig_mixed.yaml", {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}}};
  for (const auto& [file, profiles] : expected) {
    auto backend = load_file(file);
    ASSERT_NE(backend, nullptr) << file;
    auto devices = backend->mig_devices(0);
    ASSERT_TRUE(devices.ok()) << file;
    ASSERT_EQ(devices->size(), profiles.size()) << file;
    for (std::size_t i = 0; i < profiles.size(); ++i) {
      const auto& d = (*devices)[i];
      EXPECT_EQ(d.profile, profiles[i]) << file;
      EXPECT_EQ(d.parent, 0);
      EXPECT_EQ(d.index, static_cast<int>(i));
      EXPECT_GT(d.sm_count, 0);
      EXPECT_GT(d.parent_memory_bytes, d.memory_bytes);
      auto session = backend->open_mig(d);
      ASSERT_TRUE(session.ok()) << file << ": " << session.error().to_string();
      auto hbm = (*session)->hbm_bandwidth(3);
      ASSERT_TRUE(hbm.ok()) << file << ": " << hbm.error().to_string();
      EXPECT_EQ(hbm->values.size(), 3u);
      auto memtest = (*session)->memtest(MemtestRequest{});
      ASSERT_TRUE(memtest.ok()) << file;
      EXPECT_LT(memtest->bytes_tested, d.memory_bytes) << "an instance tests its own memory";
    }
    auto whole = backend->open(0);
    ASSERT_TRUE(whole.ok());
    auto none = (*whole)->hbm_bandwidth(3);
    ASSERT_FALSE(none.ok()) << file << ": the recordings measure the instances, not the whole GPU";
    EXPECT_EQ(none.error().id, "replay.no_measurement");
  }
  auto plain = load_file("h100x8.yaml");
  ASSERT_NE(plain, nullptr);
  auto none = plain->mig_devices(3);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty()) << "MIG off: no devices";
}

TEST(ReplayBackend, InstanceMeasurementsAreTheirOwnAndMissingOnesAreErrors) {
  auto backend = load_replay_backend(mig_text(), "mem.yaml");
  ASSERT_TRUE(backend.ok()) << backend.error().to_string();
  auto devices = (*backend)->mig_devices(0);
  ASSERT_TRUE(devices.ok() && devices->size() == 2u);
  EXPECT_EQ((*devices)[0].parent_memory_bytes, 150754820096ull);
  auto second = (*backend)->open_mig((*devices)[1]);
  ASSERT_TRUE(second.ok());
  auto hbm = (*second)->hbm_bandwidth(3);
  ASSERT_TRUE(hbm.ok());
  EXPECT_DOUBLE_EQ(hbm->values[0], 598.1) << "the instance's figure, not the GPU's 4210.5";
  auto first = (*backend)->open_mig((*devices)[0]);
  ASSERT_TRUE(first.ok());
  auto missing = (*first)->compute_mismatches();
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().id, "replay.no_measurement");
  EXPECT_NE(missing.error().message.find("MIG-aaaaaaaa-0000-1111-2222-333333333333"), std::string::npos)
      << missing.error().message;
  gpuenv::validate::MigDevice stranger = (*devices)[0];
  stranger.uuid = "MIG-cccccccc-0000-1111-2222-333333333333";
  auto unknown = (*backend)->open_mig(stranger);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().id, "replay.no_mig");
}

TEST(ReplayBackend, RejectsMalformedMigRecordings) {
  const std::string good = mig_text();
  struct Case {
    std::string from, to, says;
  };
  const std::vector<Case> cases = {
      {"uuid: MIG-aaaaaaaa-0000", "uuid: GPU-aaaaaaaa-0000", "not a MIG device uuid"},
      {"uuid: MIG-bbbbbbbb-0000-1111-2222-333333333333, gpu", "uuid: MIG-aaaaaaaa-0000-1111-2222-333333333333, gpu",
       "appears twice"},
      {"gpu_instance_id: 5,", "gpu_instance_id: 1,", "listed twice"},
      {"memory_bytes: 17179869184", "memory_bytes: 160000000000", "not within the GPU's"},
      {"profile: 1g.18gb", "profile: \"1g 18gb; rm\"", "not a MIG profile name"},
      {"sm_count: 16", "sm_count: 0", "sm_count"},
      {"gpu_instance_slices: 1}", "gpu_instance_slices: 1, placement: 3}", "placement"},
      {"        mig_enabled: true", "        mig_enabled: false", "MIG is not enabled"},
      {"      mig: MIG-bbbbbbbb-0000-1111-2222-333333333333", "      mig: MIG-dddddddd-0000-1111-2222-333333333333",
       "is not a MIG device of GPU 0"},
  };
  for (const auto& c : cases) {
    const auto e = load_error(replace(good, c.from, c.to));
    EXPECT_TRUE(e.id == "replay.bad_value" || e.id == "replay.unknown_key" || e.id == "replay.wrong_type")
        << c.to << ": " << e.id;
    EXPECT_NE(e.to_string().find(c.says), std::string::npos) << c.to << ": " << e.to_string();
    EXPECT_EQ(e.where.rfind("mem.yaml:", 0), 0u) << c.to << ": " << e.where;
  }
  const auto whole = load_error(good + "      h2d_bandwidth: {values: [55.1, 55.2, 55.3], unit: GB/s, engine: gpuenv, data_verified: true}\n");
  EXPECT_NE(whole.message.find("measured on the whole GPU"), std::string::npos) << whole.to_string();
  const auto twice = load_error(good + R"(    - gpu: 0
      mig: MIG-bbbbbbbb-0000-1111-2222-333333333333
      compute_mismatches: 0
)");
  EXPECT_NE(twice.message.find("listed twice"), std::string::npos) << twice.to_string();
}

TEST(ReplayBackend, AnOverlayChangesOneInstancesMeasurementOnly) {
  auto base = load_file("h100_mig_7x1g.yaml");
  auto overlay = load_file("faults/mig_1g_hbm_low.yaml");
  ASSERT_NE(base, nullptr);
  ASSERT_NE(overlay, nullptr);
  auto devices = overlay->mig_devices(0);
  ASSERT_TRUE(devices.ok() && devices->size() == 7u) << "the inventory comes from the extended file";
  for (const auto& d : *devices) {
    auto before = (*base->open_mig(d))->hbm_bandwidth(3);
    auto after = (*overlay->open_mig(d))->hbm_bandwidth(3);
    ASSERT_TRUE(before.ok() && after.ok()) << d.uuid;
    if (d.gpu_instance_id == 10) {
      EXPECT_LT(after->values[0], 250) << "the overlaid instance";
    } else {
      EXPECT_EQ(after->values, before->values) << "GI " << d.gpu_instance_id << " keeps its recorded figure";
    }
    auto gemm = (*overlay->open_mig(d))->compute_mismatches();
    EXPECT_TRUE(gemm.ok()) << "the overlay merges into the instance's entry; the other fields stay";
  }
}
