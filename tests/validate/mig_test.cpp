// Checks per MIG instance, end to end over the replay recordings (tests/data/validate/*_mig_*.yaml) and the
// shipped thresholds: which checks run per instance, per GPU or not at all on a GPU with MIG on, the references
// scaled to an instance's share (with their basis), the runner's deadlines for instances, and the report's
// grouping of instances in text, JSON and JUnit.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "validate/check.hpp"
#include "validate/checks/check_support.hpp"
#include "validate/replay/replay_backend.hpp"
#include "validate/report.hpp"
#include "validate/runner.hpp"
#include "validate/thresholds.hpp"

#ifndef GPUENV_SOURCE_DIR
#define GPUENV_SOURCE_DIR "."
#endif

namespace mig_test {

using gpuenv::validate::all_checks;
using gpuenv::validate::CheckInputs;
using gpuenv::validate::CheckReport;
using gpuenv::validate::CheckStatus;
using gpuenv::validate::GpuOutcome;
using gpuenv::validate::Level;
using gpuenv::validate::Report;
using gpuenv::validate::RunOptions;
using gpuenv::validate::ThresholdTable;

const ThresholdTable& shipped_thresholds() {
  static const ThresholdTable table = [] {
    std::ifstream in(std::string(GPUENV_SOURCE_DIR) + "/recipes/gpus/thresholds.yaml", std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = gpuenv::validate::parse_thresholds(text.str(), "recipes/gpus/thresholds.yaml");
    EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().to_string());
    return parsed.ok() ? *parsed : ThresholdTable{};
  }();
  return table;
}

Report run(const std::string& file, Level level, std::vector<std::string> filter = {}) {
  auto backend = gpuenv::validate::load_replay_backend_file(std::filesystem::path(GPUENV_SOURCE_DIR) / "tests/data/validate" / file);
  EXPECT_TRUE(backend.ok()) << file << ": " << (backend.ok() ? "" : backend.error().to_string());
  if (!backend.ok()) return Report{};
  CheckInputs inputs;
  inputs.level = level;
  inputs.thresholds = &shipped_thresholds();
  RunOptions options;
  options.filter = std::move(filter);
  auto report = gpuenv::validate::run_validation(**backend, inputs, all_checks(), options);
  EXPECT_TRUE(report.ok()) << (report.ok() ? "" : report.error().to_string());
  return report.ok() ? std::move(report).value() : Report{};
}

const CheckReport* check_of(const Report& report, const std::string& key) {
  for (const auto& c : report.checks)
    if (c.key == key) return &c;
  return nullptr;
}

double metric(const GpuOutcome& o, const std::string& name) {
  for (const auto& m : o.metrics)
    if (m.name == name) return m.value;
  return -1;
}

const std::set<std::string>& instance_checks() {
  static const std::set<std::string> keys = {"context_create", "compute_correctness", "memtest", "gemm_consistency",
                                             "gemm_sustained", "hbm_bandwidth", "gemm_tflops"};
  return keys;
}

}  // namespace mig_test

using namespace mig_test;

TEST(MigInstances, SevenInstancesPassQuickOncePerInstanceAndHealthOncePerGpu) {
  for (const char* file : {"a100_mig_7x1g.yaml", "h100_mig_7x1g.yaml"}) {
    const Report report = run(file, Level::quick);
    ASSERT_EQ(report.mig_devices.size(), 7u) << file;
    EXPECT_EQ(report.gpus.size(), 1u);
    EXPECT_NE(report.status, CheckStatus::fail) << file << "\n" << gpuenv::validate::report_text(report, false);
    for (const auto& c : report.checks) {
      if (instance_checks().count(c.key)) {
        ASSERT_EQ(c.results.size(), 7u) << file << " " << c.key;
        std::set<int> gis;
        for (const auto& o : c.results) {
          ASSERT_TRUE(o.mig.has_value()) << file << " " << c.key;
          EXPECT_EQ(o.gpu, 0);
          EXPECT_EQ(o.mig->profile, "1g.10gb");
          EXPECT_EQ(o.status, CheckStatus::pass) << file << " " << c.key << ": " << o.message;
          gis.insert(o.mig->gpu_instance_id);
        }
        EXPECT_EQ(gis.size(), 7u) << "one outcome per instance";
      } else {
        for (const auto& o : c.results) EXPECT_FALSE(o.mig.has_value()) << file << " " << c.key << ": per GPU or host";
      }
    }
    const CheckReport* ecc = check_of(report, "ecc_mode");
    ASSERT_NE(ecc, nullptr);
    EXPECT_EQ(ecc->results.size(), 1u) << "health counters stay per physical GPU";
  }
}

TEST(MigInstances, MemtestFractionIsOfTheInstancesMemory) {
  const Report report = run("h100_mig_7x1g.yaml", Level::quick, {"memtest"});
  const CheckReport* memtest = check_of(report, "memtest");
  ASSERT_NE(memtest, nullptr);
  for (const auto& o : memtest->results) {
    const double fraction = metric(o, "fraction_of_memory");
    EXPECT_GT(fraction, 0.2) << o.message;
    EXPECT_LT(fraction, 0.3) << "a quarter of the instance's 9.75 GiB, not of the GPU's 80 GiB";
  }
}

TEST(MigInstances, ReferencesAreScaledToEachInstancesShareAndSayTheirBasis) {
  const Report report = run("h100_mig_mixed.yaml", Level::standard, {"hbm_bandwidth", "gemm_tflops"});
  const CheckReport* hbm = check_of(report, "hbm_bandwidth");
  const CheckReport* gemm = check_of(report, "gemm_tflops");
  ASSERT_NE(hbm, nullptr);
  ASSERT_NE(gemm, nullptr);
  ASSERT_EQ(hbm->results.size(), 4u);
  const std::map<std::string, double> hbm_reference = {{"3g.40gb", 2540.0 * 4 / 8}, {"2g.20gb", 2540.0 * 2 / 8}, {"1g.10gb", 2540.0 / 8}};
  const std::map<std::string, double> sms = {{"3g.40gb", 60}, {"2g.20gb", 32}, {"1g.10gb", 16}};
  for (const auto& o : hbm->results) {
    ASSERT_TRUE(o.mig.has_value());
    EXPECT_EQ(o.status, CheckStatus::pass) << o.message;
    EXPECT_DOUBLE_EQ(metric(o, "reference_gbs"), hbm_reference.at(o.mig->profile)) << o.message;
    EXPECT_NE(o.message.find("of H100 SXM5 80GB hbm_bandwidth 2540.0 GB/s"), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("memory slices"), std::string::npos) << o.message;
  }
  for (const auto& o : gemm->results) {
    ASSERT_TRUE(o.mig.has_value());
    EXPECT_EQ(o.status, CheckStatus::pass) << o.message;
    EXPECT_NEAR(metric(o, "bf16.reference_tflops"), 0.6 * 989.5 * sms.at(o.mig->profile) / 132, 1e-9) << o.message;
    EXPECT_NE(o.message.find("of the GPU's 132 SMs"), std::string::npos) << o.message;
  }
}

TEST(MigInstances, ADegradedInstanceFailsAloneAgainstItsShare) {
  const Report report = run("faults/mig_1g_hbm_low.yaml", Level::quick, {"hbm_bandwidth"});
  const CheckReport* hbm = check_of(report, "hbm_bandwidth");
  ASSERT_NE(hbm, nullptr);
  ASSERT_EQ(hbm->results.size(), 7u);
  for (const auto& o : hbm->results) {
    ASSERT_TRUE(o.mig.has_value());
    if (o.mig->gpu_instance_id == 10) {
      EXPECT_EQ(o.status, CheckStatus::fail) << o.message;
      EXPECT_EQ(o.code, "bandwidth_low") << o.message;
      EXPECT_NE(o.message.find("1/8 of H100"), std::string::npos) << o.message;
    } else {
      EXPECT_EQ(o.status, CheckStatus::pass) << "GI " << o.mig->gpu_instance_id << ": " << o.message;
    }
  }
}

TEST(MigInstances, ComputeInstancesSharingAGpuInstanceShareItsBandwidthReference) {
  // GI 2 (3g.40gb, 4 of 8 memory slices) split into three 1c.3g.40gb compute instances, measured at once: each is
  // judged against a third of the GI's share, GEMM by its own SMs; the other GPU instances keep their whole share.
  const Report report = run("h100_mig_3g_split.yaml", Level::standard, {"hbm_bandwidth", "gemm_tflops"});
  const CheckReport* hbm = check_of(report, "hbm_bandwidth");
  const CheckReport* gemm = check_of(report, "gemm_tflops");
  ASSERT_NE(hbm, nullptr);
  ASSERT_NE(gemm, nullptr);
  ASSERT_EQ(hbm->results.size(), 6u);
  int shared = 0;
  for (const auto& o : hbm->results) {
    ASSERT_TRUE(o.mig.has_value());
    EXPECT_EQ(o.status, CheckStatus::pass) << o.mig->profile << ": " << o.message;
    if (o.mig->gpu_instance_id == 2) {
      ++shared;
      EXPECT_NEAR(metric(o, "reference_gbs"), 2540.0 * 4 / 8 / 3, 1e-9) << o.message;
      EXPECT_NE(o.message.find("4/8 of H100 SXM5 80GB hbm_bandwidth 2540.0 GB/s"), std::string::npos) << o.message;
      EXPECT_NE(o.message.find("shared by 3 compute instances of GI 2"), std::string::npos) << o.message;
    } else {
      EXPECT_EQ(o.message.find("shared by"), std::string::npos) << o.message;
      EXPECT_DOUBLE_EQ(metric(o, "reference_gbs"), 2540.0 * (o.mig->profile == "2g.20gb" ? 2 : 1) / 8) << o.message;
    }
  }
  EXPECT_EQ(shared, 3);
  for (const auto& o : gemm->results) {
    ASSERT_TRUE(o.mig.has_value());
    EXPECT_EQ(o.status, CheckStatus::pass) << o.message;
    if (o.mig->gpu_instance_id == 2) {
      EXPECT_NEAR(metric(o, "bf16.reference_tflops"), 0.6 * 989.5 * 20 / 132, 1e-9) << "the CI's own SMs: " << o.message;
    }
  }
}

TEST(MigInstances, ADegradedGpuInstanceFailsEachOfItsComputeInstances) {
  const Report report = run("faults/mig_ci_hbm_low.yaml", Level::quick, {"hbm_bandwidth"});
  const CheckReport* hbm = check_of(report, "hbm_bandwidth");
  ASSERT_NE(hbm, nullptr);
  ASSERT_EQ(hbm->results.size(), 6u);
  for (const auto& o : hbm->results) {
    ASSERT_TRUE(o.mig.has_value());
    if (o.mig->gpu_instance_id == 2) {
      EXPECT_EQ(o.status, CheckStatus::fail) << o.message;
      EXPECT_EQ(o.code, "bandwidth_low") << o.message;
      EXPECT_NE(o.message.find("shared by 3 compute instances of GI 2"), std::string::npos) << o.message;
    } else {
      EXPECT_EQ(o.status, CheckStatus::pass) << "GI " << o.mig->gpu_instance_id << ": " << o.message;
    }
  }
}

TEST(MigInstances, WholeBoardChecksSkipAGpuWithInstancesAndSaySo) {
  const Report report = run("h100_mig_mixed.yaml", Level::standard, {"h2d_bandwidth", "d2h_bandwidth", "pcie_link", "clock_events"});
  ASSERT_EQ(report.checks.size(), 4u);
  for (const auto& c : report.checks) {
    ASSERT_EQ(c.results.size(), 1u) << c.key;
    const GpuOutcome& o = c.results.front();
    EXPECT_EQ(o.status, CheckStatus::skip) << c.key;
    EXPECT_EQ(o.gpu, 0);
    EXPECT_FALSE(o.mig.has_value());
    EXPECT_NE(o.message.find("MIG is on with 4 instance(s)"), std::string::npos) << c.key << ": " << o.message;
    EXPECT_NE(o.hint.find("never changes the MIG mode"), std::string::npos) << o.hint;
  }
}

TEST(MigInstances, AGpuWithMigOnButNoInstancesIsCheckedAsBefore) {
  // a100_mig.yaml records MIG on but no MIG device: nothing to run per instance, the GPU's entries stand.
  const Report report = run("a100_mig.yaml", Level::quick);
  EXPECT_TRUE(report.mig_devices.empty());
  for (const auto& c : report.checks)
    for (const auto& o : c.results) EXPECT_FALSE(o.mig.has_value()) << c.key;
}

namespace mig_test {

// A check that runs per instance and records what the runner gave it: the units and the time to its deadline.
class Recorder final : public gpuenv::validate::checks::SpecCheck {
 public:
  Recorder(std::vector<std::string>& units, std::chrono::milliseconds& left)
      : SpecCheck({"recorder", "kernels", "records its units", gpuenv::validate::checks::Budget{500, 4000},
                   gpuenv::validate::checks::Budget{500, 4000}, gpuenv::validate::checks::Budget{500, 4000}, true}),
        m_units(units), m_left(left) {}
  [[nodiscard]] gpuenv::validate::MigScope mig_scope() const override { return gpuenv::validate::MigScope::instance; }
  [[nodiscard]] std::optional<std::string> not_applicable(const gpuenv::validate::CheckContext&) const override {
    return std::nullopt;
  }
  std::vector<GpuOutcome> run(gpuenv::validate::CheckContext& context) override {
    m_left = std::chrono::duration_cast<std::chrono::milliseconds>(context.deadline - std::chrono::steady_clock::now());
    return gpuenv::validate::checks::for_each_gpu(context, [&](const gpuenv::validate::GpuInfo& g) {
      m_units.push_back(gpuenv::validate::checks::gpu_label(g) + " " + std::to_string(g.memory_total_bytes));
      return gpuenv::validate::checks::outcome(g.index, CheckStatus::pass, "ok");
    });
  }

 private:
  std::vector<std::string>& m_units;
  std::chrono::milliseconds& m_left;
};

}  // namespace mig_test

TEST(MigInstances, InstancesShareTheirGpusDeadlineAndGetTheirOwnMemory) {
  auto backend = gpuenv::validate::load_replay_backend_file(std::filesystem::path(GPUENV_SOURCE_DIR) /
                                                            "tests/data/validate/h100_mig_7x1g.yaml");
  ASSERT_TRUE(backend.ok());
  std::vector<std::string> units;
  std::chrono::milliseconds left{0};
  std::vector<std::unique_ptr<gpuenv::validate::Check>> checks;
  checks.push_back(std::make_unique<Recorder>(units, left));
  CheckInputs inputs;
  inputs.level = Level::quick;
  auto report = gpuenv::validate::run_validation(**backend, inputs, std::move(checks), RunOptions{});
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(units.size(), 7u);
  EXPECT_EQ(units.front(), "GPU 0 / MIG 1g.10gb (GI 7, CI 0) 10468982784") << "the entry carries the instance's memory";
  // One GPU's deadline (500 + 4000 ms), not seven instances' (500 + 4000 x 14/8): the instances run at once, each
  // on its share, so their work together is one GPU's.
  EXPECT_LE(left.count(), 4500);
  EXPECT_GT(left.count(), 4000);
  const auto& results = report->checks.front().results;
  ASSERT_EQ(results.size(), 7u);
  for (const auto& o : results) EXPECT_TRUE(o.mig.has_value()) << "the runner's helpers stamp the instance";
}

TEST(MigInstances, ReportsGroupInstancesAsTheyGroupGpus) {
  const Report report = run("h100_mig_7x1g.yaml", Level::quick);
  const std::string text = gpuenv::validate::report_text(report, false);
  EXPECT_NE(text.find("PASS 0[GI 7-13]"), std::string::npos) << text;
  EXPECT_NE(text.find("  MIG 1g.10gb (GI 7, CI 0): MIG-"), std::string::npos) << "the inventory lists the instances\n" << text;
  EXPECT_NE(text.find("0/GI 7"), std::string::npos) << "the figures table has a row per instance\n" << text;
  const std::string json = gpuenv::validate::report_bytes(report);
  EXPECT_NE(json.find("\"mig_devices\""), std::string::npos);
  EXPECT_NE(json.find("\"mig\": {"), std::string::npos) << json.substr(0, 2000);
  EXPECT_NE(json.find("\"profile\": \"1g.10gb\""), std::string::npos);
  const std::string junit = gpuenv::validate::report_junit(report);
  EXPECT_NE(junit.find("name=\"memtest[gpu0/mig-gi7-ci0]\""), std::string::npos) << junit.substr(0, 3000);
  EXPECT_NE(junit.find("name=\"ecc_mode[gpu0]\""), std::string::npos) << "health stays per GPU";

  const Report mixed = run("faults/mig_1g_hbm_low.yaml", Level::quick);
  const std::string mixed_text = gpuenv::validate::report_text(mixed, false);
  EXPECT_NE(mixed_text.find("PASS 0[GI 7-9,11-13], FAIL 0[GI 10]"), std::string::npos) << mixed_text;
  EXPECT_NE(mixed_text.find("FAIL GPU 0[GI 10]: "), std::string::npos) << mixed_text;
}

namespace mig_test {

// Records the memtest requests each MIG device's session receives, answering from the replay backend underneath.
class MemtestRequestLog final : public gpuenv::validate::GpuSession {
 public:
  MemtestRequestLog(std::unique_ptr<gpuenv::validate::GpuSession> inner, std::string uuid,
                    std::vector<std::pair<std::string, double>>& log, std::mutex& mutex)
      : m_inner(std::move(inner)), m_uuid(std::move(uuid)), m_log(log), m_mutex(mutex) {}
  gpuenv::Result<std::uint64_t> compute_mismatches() override { return m_inner->compute_mismatches(); }
  gpuenv::Result<gpuenv::validate::MemtestResult> memtest(const gpuenv::validate::MemtestRequest& request) override {
    {
      std::lock_guard lock(m_mutex);
      m_log.emplace_back(m_uuid, request.fraction_of_free);
    }
    return m_inner->memtest(request);
  }
  gpuenv::Result<gpuenv::validate::ConsistencyResult> gemm_consistency(int repetitions) override {
    return m_inner->gemm_consistency(repetitions);
  }
  gpuenv::Result<gpuenv::validate::Samples> hbm_bandwidth(int samples) override { return m_inner->hbm_bandwidth(samples); }
  gpuenv::Result<gpuenv::validate::Samples> copy_bandwidth(bool to_device, int samples) override {
    return m_inner->copy_bandwidth(to_device, samples);
  }
  gpuenv::Result<std::optional<gpuenv::validate::Samples>> gemm_tflops(const std::string& dtype, int samples) override {
    return m_inner->gemm_tflops(dtype, samples);
  }
  gpuenv::Result<gpuenv::validate::GpuHealth> health() override { return m_inner->health(); }

 private:
  std::unique_ptr<gpuenv::validate::GpuSession> m_inner;
  std::string m_uuid;
  std::vector<std::pair<std::string, double>>& m_log;
  std::mutex& m_mutex;
};

class MemtestLoggingBackend final : public gpuenv::validate::GpuBackend {
 public:
  explicit MemtestLoggingBackend(std::unique_ptr<gpuenv::validate::GpuBackend> inner) : m_inner(std::move(inner)) {}
  [[nodiscard]] std::string name() const override { return m_inner->name(); }
  gpuenv::Result<gpuenv::validate::DriverState> driver() override { return m_inner->driver(); }
  gpuenv::Result<std::vector<gpuenv::validate::GpuInfo>> gpus() override { return m_inner->gpus(); }
  gpuenv::Result<gpuenv::validate::GpuHealth> health(int gpu) override { return m_inner->health(gpu); }
  gpuenv::Result<std::unique_ptr<gpuenv::validate::GpuSession>> open(int gpu) override { return m_inner->open(gpu); }
  gpuenv::Result<std::vector<gpuenv::validate::MigDevice>> mig_devices(int gpu) override { return m_inner->mig_devices(gpu); }
  gpuenv::Result<std::unique_ptr<gpuenv::validate::GpuSession>> open_mig(const gpuenv::validate::MigDevice& device) override {
    auto session = m_inner->open_mig(device);
    if (!session) return session;
    return std::unique_ptr<gpuenv::validate::GpuSession>(
        std::make_unique<MemtestRequestLog>(std::move(*session), device.uuid, log, mutex));
  }
  gpuenv::Result<std::optional<gpuenv::validate::Samples>> p2p_bandwidth(int src, int dst, int samples) override {
    return m_inner->p2p_bandwidth(src, dst, samples);
  }
  gpuenv::Result<std::optional<gpuenv::validate::Samples>> nccl_allreduce(const std::vector<int>& gpus, int samples) override {
    return m_inner->nccl_allreduce(gpus, samples);
  }
  std::vector<std::pair<std::string, double>> log;  // (MIG uuid, fraction_of_free) per memtest call
  std::mutex mutex;

 private:
  std::unique_ptr<gpuenv::validate::GpuBackend> m_inner;
};

}  // namespace mig_test

TEST(MigInstances, MemtestRunsOncePerGpuInstanceAndItsOtherComputeInstancesSayWhere) {
  // GI 2 (3g.40gb) is split into three compute instances that all see its free memory: each allocating half of it at
  // once would crowd the others out, so the memory is tested once, from its first compute instance, at the level's
  // whole fraction; the other two SKIP naming that one. The other GPU instances (one CI each) are tested as before.
  auto replay = gpuenv::validate::load_replay_backend_file(std::filesystem::path(GPUENV_SOURCE_DIR) /
                                                           "tests/data/validate/h100_mig_3g_split.yaml");
  ASSERT_TRUE(replay.ok());
  MemtestLoggingBackend backend(std::move(*replay));
  CheckInputs inputs;
  inputs.level = Level::standard;
  inputs.thresholds = &shipped_thresholds();
  RunOptions options;
  options.filter = {"memtest"};
  auto report = gpuenv::validate::run_validation(backend, inputs, all_checks(), options);
  ASSERT_TRUE(report.ok());
  const CheckReport* memtest = check_of(*report, "memtest");
  ASSERT_NE(memtest, nullptr);
  ASSERT_EQ(memtest->results.size(), 6u);
  std::map<int, std::vector<const GpuOutcome*>> by_gi;
  for (const auto& o : memtest->results) {
    ASSERT_TRUE(o.mig.has_value());
    by_gi[o.mig->gpu_instance_id].push_back(&o);
  }
  ASSERT_EQ(by_gi.size(), 4u);
  ASSERT_EQ(backend.log.size(), 4u) << "one memory test per GPU instance";
  std::set<std::string> tested;
  for (const auto& [uuid, fraction] : backend.log) {
    EXPECT_DOUBLE_EQ(fraction, 0.5) << uuid << ": the level's whole fraction of the GPU instance's free memory";
    tested.insert(uuid);
  }
  for (const auto& entry : by_gi) {
    const auto& outcomes = entry.second;
    const GpuOutcome& first = *outcomes.front();
    EXPECT_EQ(first.status, CheckStatus::pass) << first.message;
    EXPECT_EQ(tested.count(first.mig->uuid), 1u) << first.mig->uuid;
    for (std::size_t i = 1; i < outcomes.size(); ++i) {
      const GpuOutcome& o = *outcomes[i];
      EXPECT_EQ(entry.first, 2) << "only GI 2 has several compute instances";
      EXPECT_EQ(o.status, CheckStatus::skip) << o.message;
      EXPECT_EQ(tested.count(o.mig->uuid), 0u) << o.mig->uuid;
      EXPECT_NE(o.message.find("GPU instance 2's memory is tested once, from GPU 0 / MIG 1c.3g.40gb (GI 2, CI " +
                               std::to_string(first.mig->compute_instance_id) + ")"),
                std::string::npos)
          << o.message;
      EXPECT_NE(o.message.find("its 3 compute instances share that memory"), std::string::npos) << o.message;
    }
  }
  EXPECT_EQ(by_gi.at(2).size(), 3u);
}
