// `validate --record` (validate/replay/recorder.cpp, recording.cpp): a run recorded from one backend and replayed
// from the file judges as the run did, check by check and figure by figure; errors come back as error faults and a
// call that never returned as a hang; text and numbers read back exactly; a p2p pair not measured stays unrecorded.
#include "validate/replay/recorder.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "fakes/fake_gpu_backend.hpp"
#include "recipes/embedded.hpp"
#include "validate/check.hpp"
#include "validate/replay/recording.hpp"
#include "validate/replay/replay_backend.hpp"
#include "validate/report.hpp"
#include "validate/runner.hpp"
#include "validate/thresholds.hpp"

namespace {

namespace v = gpuenv::validate;
using gpuenv::testing::FakeGpuBackend;

const v::ThresholdTable& shipped_thresholds() {
  static const v::ThresholdTable table = [] {
    auto parsed = v::parse_thresholds(gpuenv::recipes::thresholds_yaml(), "recipes/gpus/thresholds.yaml (built in)");
    EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().to_string());
    return parsed.ok() ? *parsed : v::ThresholdTable{};
  }();
  return table;
}

v::Report run(v::GpuBackend& backend, v::Level level) {
  v::CheckInputs inputs;
  inputs.level = level;
  inputs.thresholds = &shipped_thresholds();
  auto report = v::run_validation(backend, inputs, v::all_checks(), v::RunOptions{});
  EXPECT_TRUE(report.ok()) << (report.ok() ? "" : report.error().to_string());
  return report.ok() ? std::move(*report) : v::Report{};
}

/// Every outcome as one line: check, GPU, MIG instance, status, code, figures (but the times the checks clock
/// themselves: a context's opening, the sustained load's length, and those checks' messages, which say them), and the
/// message (minus the note a replayed error fault adds to it).
std::vector<std::string> outcomes(const v::Report& r) {
  std::vector<std::string> out;
  for (const auto& c : r.checks) {
    for (const auto& g : c.results) {
      std::ostringstream line;
      line.precision(17);
      line << c.key << " gpu " << g.gpu << (g.mig ? " mig " + g.mig->uuid : std::string()) << " " << v::to_string(g.status)
           << " [" << g.code << "]";
      for (const auto& m : g.metrics)
        if (m.name != "open_ms" && m.name != "seconds") line << " " << m.name << "=" << m.value << m.unit;
      static const std::regex injected(R"( \([a-z0-9_]+ on GPU [0-9]+, injected\))");
      // Their messages carry those times too ("context created in 1 ms", "bf16 GEMM for 0 s").
      if (c.key != "context_create" && c.key != "gemm_sustained") line << " | " << std::regex_replace(g.message, injected, "");
      out.push_back(line.str());
    }
  }
  return out;
}

std::unique_ptr<v::GpuBackend> load(const std::string& text) {
  auto b = v::load_replay_backend(text, "recorded.yaml");
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().to_string()) << "\n" << text;
  return b.ok() ? std::move(*b) : nullptr;
}

struct Case {
  std::string file;
  v::Level level;
};

class RecordAndReplay : public ::testing::TestWithParam<Case> {};

TEST_P(RecordAndReplay, JudgesAsTheRunDid) {
  const Case& c = GetParam();
  auto source = v::load_replay_backend_file(std::filesystem::path(GPUENV_SOURCE_DIR) / "tests/data/validate" / c.file);
  ASSERT_TRUE(source.ok()) << source.error().to_string();
  auto [recording_backend, recorder] = v::record_backend(std::move(*source));
  const v::Report first = run(*recording_backend, c.level);
  auto recording = recorder.recording();
  ASSERT_TRUE(recording.ok()) << recording.error().to_string();
  const std::string text = v::render_replay(*recording, "test recording of " + c.file);
  EXPECT_EQ(text.rfind("# test recording of " + c.file + "\nschema: gpuenv-replay-v1\n", 0), 0u) << text.substr(0, 200);
  auto replayed = load(text);
  ASSERT_TRUE(replayed);
  const v::Report second = run(*replayed, c.level);
  EXPECT_EQ(v::to_string(second.status), v::to_string(first.status));
  EXPECT_EQ(second.could_not_run, first.could_not_run);
  const auto a = outcomes(first), b = outcomes(second);
  ASSERT_EQ(b.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b[i], a[i]) << "outcome " << i;
  // Recording the replay of the recording gives the same file: nothing is lost or added on the way round (an
  // error's message gains the replay's "injected" note each time, so only where none was recorded).
  if (!recording->faults.empty()) return;
  auto [again_backend, again] = v::record_backend(std::move(replayed));
  (void)run(*again_backend, c.level);
  auto second_recording = again.recording();
  ASSERT_TRUE(second_recording.ok());
  EXPECT_EQ(v::render_replay(*second_recording, "test recording of " + c.file), text);
}

INSTANTIATE_TEST_SUITE_P(
    Inventories, RecordAndReplay,
    ::testing::Values(Case{"h100x8.yaml", v::Level::standard}, Case{"h100x8.yaml", v::Level::long_}, Case{"h200x1.yaml", v::Level::standard},
                      Case{"l4x1.yaml", v::Level::quick}, Case{"a100_mig.yaml", v::Level::standard},
                      Case{"h100_mig_mixed.yaml", v::Level::standard}, Case{"faults/ecc_uncorrectable.yaml", v::Level::standard},
                      Case{"faults/pcie_x8.yaml", v::Level::standard}, Case{"faults/hbm_low.yaml", v::Level::standard},
                      Case{"faults/memtest_bitflip.yaml", v::Level::quick}, Case{"faults/gemm_mismatch.yaml", v::Level::standard},
                      Case{"faults/cc_not_ready.yaml", v::Level::quick}, Case{"faults/no_driver.yaml", v::Level::quick},
                      Case{"faults/row_remap_pending.yaml", v::Level::quick}, Case{"faults/mig_ci_hbm_low.yaml", v::Level::standard}),
    [](const auto& info) {
      std::string name = info.param.file.substr(0, info.param.file.find('.')) + "_" + v::to_string(info.param.level);
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

v::GpuInfo gpu_info(int index) {
  v::GpuInfo g;
  g.index = index;
  g.uuid = "GPU-0000000" + std::to_string(index) + "-1111-2222-3333-444444444444";
  g.name = "NVIDIA H200";
  g.pci_bus_id = "00000000:1" + std::to_string(index) + ":00.0";
  g.pci_device_id = 0x2335;
  g.cc_major = 9;
  g.memory_total_bytes = 150754820096ull;
  return g;
}

FakeGpuBackend& two_gpus(FakeGpuBackend& fake) {
  fake.driver_state.loaded = true;
  fake.driver_state.version = "580.159.03";
  fake.driver_state.cuda_driver_version = 13000;
  fake.driver_state.cc_state = "off";
  fake.inventory = {gpu_info(0), gpu_info(1)};
  return fake;
}

TEST(Recorder, ErrorsBecomeErrorFaultsAndACallStillRunningAHang) {
  auto fake = std::make_unique<FakeGpuBackend>();
  two_gpus(*fake).open_fails = {1};
  fake->hang_in = {"memtest"};
  auto [backend, recorder] = v::record_backend(std::move(fake));
  ASSERT_TRUE(backend->driver().ok());
  ASSERT_TRUE(backend->gpus().ok());
  EXPECT_FALSE(backend->open(1).ok());
  auto session = backend->open(0);
  ASSERT_TRUE(session.ok());
  EXPECT_FALSE((*session)->hbm_bandwidth(3).ok()) << "the fake has no figure: fake.unset";
  std::thread stuck([&] { (void)(*session)->memtest(v::MemtestRequest{}); });
  std::map<std::pair<int, std::string>, v::ReplayFault> faults;
  for (int i = 0; i < 5000 && !faults.count({0, "memtest"}); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    faults = recorder.recording()->faults;
  }
  ASSERT_TRUE(faults.count({0, "memtest"})) << "the memtest still running is recorded as a hang";
  EXPECT_TRUE(faults.at({0, "memtest"}).hang);
  ASSERT_TRUE(faults.count({1, "open"}));
  EXPECT_EQ(faults.at({1, "open"}).id, "cuda.context");
  EXPECT_EQ(faults.at({1, "open"}).message, "cuCtxCreate failed on GPU 1 (fake)");
  EXPECT_EQ(faults.at({0, "hbm_bandwidth"}).id, "fake.unset");
  const std::string text = v::render_replay(*recorder.recording(), "");
  EXPECT_NE(text.find("    hang:\n      - {gpu: 0, method: memtest}\n"), std::string::npos) << text;
  auto replayed = load(text);
  ASSERT_TRUE(replayed);
  auto reopened = replayed->open(1);
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.error().id, "cuda.context");
  backend.reset();  // releases the hung memtest
  stuck.join();
}

TEST(Recorder, HealthUnderLoadIsEveryReadingFoldedAsTheChecksFoldThem) {
  auto fake = std::make_unique<FakeGpuBackend>();
  two_gpus(*fake);
  v::GpuHealth idle;
  idle.pcie_link = v::PcieLink{1, 5, 16, 16};
  idle.clock_event_reasons = 0x1;
  idle.temperature_c = 30;
  v::GpuHealth busy = idle;
  busy.pcie_link = v::PcieLink{5, 5, 16, 16};
  busy.clock_event_reasons = 0x4;
  busy.temperature_c = 71;
  v::GpuHealth cooling = idle;
  cooling.temperature_c = 60;
  fake->load_health_sequences[0] = {idle, busy, cooling};
  auto [backend, recorder] = v::record_backend(std::move(fake));
  ASSERT_TRUE(backend->driver().ok());
  ASSERT_TRUE(backend->gpus().ok());
  auto session = backend->open(0);
  ASSERT_TRUE(session.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*session)->health().ok());
  auto r = recorder.recording();
  ASSERT_TRUE(r.ok());
  const auto& folded = r->gpus.at(0).health_under_load;
  ASSERT_TRUE(folded);
  EXPECT_EQ(folded->pcie_link->current_gen, 5) << "the best link seen";
  EXPECT_EQ(*folded->clock_event_reasons, 0x5u) << "the union of the reasons";
  EXPECT_EQ(*folded->temperature_c, 71) << "the peak";
  EXPECT_FALSE(r->gpus.at(1).health_under_load) << "GPU 1 was never read under load";
}

TEST(Recorder, NothingToRecordBeforeTheDriverWasRead) {
  auto fake = std::make_unique<FakeGpuBackend>();
  auto [backend, recorder] = v::record_backend(std::move(fake));
  auto r = recorder.recording();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "validate.record_empty");
}

TEST(Recording, TextAndNumbersReadBackExactly) {
  v::ReplayRecording rec;
  rec.driver.loaded = true;
  rec.driver.version = "580.159.03";
  rec.driver.cuda_driver_version = 13000;
  rec.driver.cc_state = "on";
  rec.driver.cc_gpus_ready = false;
  rec.driver.cc_environment = "production";
  rec.driver.fabric_manager_running = true;
  rec.driver.device_nodes_missing = {"/dev/nvidia-uvm"};
  v::ReplayGpu g;
  g.info = gpu_info(0);
  g.info.name = "NVIDIA \"H200\"\n# not a comment: \xff and \\";
  rec.gpus.push_back(g);
  v::ReplayMeasurements m;
  v::Samples s;
  s.values = {0.1, 4812.123456789012, 1e-300, 0, 123456789012345.67};
  s.unit = "GB/s";
  s.engine = "gpuenv";
  s.data_verified = true;
  m.hbm_bandwidth = s;
  m.has_gemm_tflops = true;
  m.gemm_tflops["fp64"] = std::nullopt;
  v::Samples t = s;
  t.unit = "TFLOPS";
  t.engine = "cublasLt";
  m.gemm_tflops["bf16"] = t;
  v::MemtestResult mt;
  mt.bytes_tested = 1u << 30;
  mt.errors = 2;
  mt.first_error_offset = 4096;
  mt.expected = 0xffffffffffffffffull;
  mt.actual = 0xfffffffffffffffeull;
  mt.patterns = {"walking_ones", "own_address"};
  m.memtest = mt;
  v::CcEvidence e;
  e.report = std::string("\x11\x00\xe1", 3);
  e.cert_chain = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  e.nonce = std::string(32, '\x5a');
  m.cc_evidence = e;
  rec.measurements[{0, ""}] = m;
  rec.faults[{0, "gemm_consistency"}] = v::ReplayFault{false, "cublas.status", "said \"no\"\r\nthen: {x: 1}", {}};
  const std::string text = v::render_replay(rec, "line one\nline two\rthree");
  EXPECT_EQ(text.rfind("# line one\n# line two?three\nschema:", 0), 0u) << text.substr(0, 120);
  auto b = load(text);
  ASSERT_TRUE(b);
  auto gpus = b->gpus();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(gpus->at(0).name, "NVIDIA \"H200\"\n# not a comment: \xef\xbf\xbd and \\") << "bytes that are not UTF-8 become U+FFFD";
  auto d = b->driver();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->fabric_manager_running, std::optional<bool>(true));
  EXPECT_EQ(d->cc_gpus_ready, std::optional<bool>(false));
  EXPECT_EQ(d->device_nodes_missing, rec.driver.device_nodes_missing);
  auto session = b->open(0);
  ASSERT_TRUE(session.ok());
  auto hbm = (*session)->hbm_bandwidth(5);
  ASSERT_TRUE(hbm.ok());
  EXPECT_EQ(hbm->values, s.values) << "every double exactly";
  auto bf16 = (*session)->gemm_tflops("bf16", 5);
  ASSERT_TRUE(bf16.ok() && *bf16);
  EXPECT_EQ((*bf16)->engine, "cublasLt");
  auto fp64 = (*session)->gemm_tflops("fp64", 5);
  ASSERT_TRUE(fp64.ok());
  EXPECT_FALSE(*fp64) << "unsupported stays unsupported";
  auto memtest = (*session)->memtest(v::MemtestRequest{});
  ASSERT_TRUE(memtest.ok());
  EXPECT_EQ(memtest->expected, mt.expected);
  EXPECT_EQ(memtest->actual, mt.actual);
  EXPECT_EQ(memtest->patterns, mt.patterns);
  auto consistency = (*session)->gemm_consistency(5);
  ASSERT_FALSE(consistency.ok());
  EXPECT_EQ(consistency.error().id, "cublas.status");
  EXPECT_EQ(consistency.error().message.rfind("said \"no\"\r\nthen: {x: 1}", 0), 0u) << consistency.error().message;
  auto evidence = b->cc_evidence(0, std::string(32, 'n'));
  ASSERT_TRUE(evidence.ok() && *evidence);
  EXPECT_EQ((*evidence)->report, e.report);
  EXPECT_EQ((*evidence)->cert_chain, e.cert_chain);
  EXPECT_EQ((*evidence)->nonce, e.nonce) << "the nonce it was asked with";
}

TEST(Recording, EveryShippedRecordingRendersAndReadsBackTheSame) {
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(std::filesystem::path(GPUENV_SOURCE_DIR) / "tests/data/validate")) {
    if (entry.path().extension() != ".yaml") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    auto parsed = v::parse_replay_recording(text, entry.path().string());
    ASSERT_TRUE(parsed.ok()) << entry.path() << ": " << parsed.error().to_string();
    const std::string once = v::render_replay(*parsed, "");
    auto again = v::parse_replay_recording(once, "rendered.yaml");
    ASSERT_TRUE(again.ok()) << entry.path() << ": " << again.error().to_string() << "\n" << once;
    EXPECT_EQ(v::render_replay(*again, ""), once) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 20) << "the recordings and fault overlays of tests/data/validate";
}

TEST(Recording, APeerPairNotMeasuredStaysUnrecorded) {
  v::ReplayRecording rec;
  rec.driver.loaded = true;
  rec.driver.version = "580.159.03";
  rec.driver.cc_state = "off";
  for (int i = 0; i < 3; ++i) rec.gpus.push_back(v::ReplayGpu{gpu_info(i), {}, {}, {}});
  v::Samples s;
  s.values = {389.5};
  s.unit = "GB/s";
  s.engine = "gpuenv";
  s.data_verified = true;
  rec.has_p2p = true;
  rec.p2p[{0, 1}] = s;
  rec.p2p[{1, 2}] = std::nullopt;
  const std::string text = v::render_replay(rec, "");
  EXPECT_NE(text.find("      - [~, [389.5], ~]\n      - [~, ~, unsupported]\n      - [~, ~, ~]\n"), std::string::npos) << text;
  auto b = load(text);
  ASSERT_TRUE(b);
  auto measured = b->p2p_bandwidth(0, 1, 3);
  ASSERT_TRUE(measured.ok() && *measured);
  EXPECT_EQ((*measured)->values, s.values);
  auto none = b->p2p_bandwidth(1, 2, 3);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
  auto unrecorded = b->p2p_bandwidth(1, 0, 3);
  ASSERT_FALSE(unrecorded.ok());
  EXPECT_EQ(unrecorded.error().id, "replay.no_measurement");
}

}  // namespace
