#include "validate/runner.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "fakes/fake_gpu_backend.hpp"

namespace {

using gpuenv::ErrorKind;
using gpuenv::testing::FakeGpuBackend;
using gpuenv::validate::Check;
using gpuenv::validate::CheckContext;
using gpuenv::validate::CheckInputs;
using gpuenv::validate::CheckReport;
using gpuenv::validate::GpuInfo;
using gpuenv::validate::GpuOutcome;
using gpuenv::validate::Level;
using gpuenv::validate::Report;
using gpuenv::validate::RunOptions;
using gpuenv::validate::CheckStatus;
using std::chrono::milliseconds;

// What a check saw; shared so the test can read it after the runner has destroyed the check.
struct Seen {
  bool ran = false;
  std::vector<int> gpus;
};

// A check whose verdict is fixed: one outcome per GPU it is given (or one host-wide outcome for software checks).
class FixedCheck : public Check {
 public:
  FixedCheck(std::string key, std::string category, CheckStatus status, std::string code = {})
      : m_key(std::move(key)), m_category(std::move(category)), m_status(status), m_code(std::move(code)) {}
  [[nodiscard]] std::string key() const override { return m_key; }
  [[nodiscard]] std::string category() const override { return m_category; }
  [[nodiscard]] std::string description() const override { return "test check " + m_key; }
  [[nodiscard]] bool runs_at(Level level) const override { return level != Level::quick || m_quick; }
  [[nodiscard]] milliseconds deadline(Level, std::size_t) const override { return milliseconds(5000); }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext&) const override { return {}; }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    seen->gpus.clear();
    for (const auto& g : context.gpus) seen->gpus.push_back(g.index);
    seen->ran = true;
    if (m_category == "software") return {GpuOutcome{-1, m_status, m_key + " says " + to_string(m_status), m_code, {}, {}}};
    std::vector<GpuOutcome> out;
    for (const auto& g : context.gpus)
      out.push_back(GpuOutcome{g.index, m_status, m_key + " on GPU " + std::to_string(g.index), m_code, {},
                               {{"value", 1.5, "GB/s"}}});
    return out;
  }
  FixedCheck& only_above_quick() {
    m_quick = false;
    return *this;
  }

  std::shared_ptr<Seen> seen = std::make_shared<Seen>();

 private:
  std::string m_key, m_category;
  CheckStatus m_status;
  std::string m_code;
  bool m_quick = true;
};

// Released by the test, and told when the abandoned check object is finally destroyed.
struct HangGate {
  std::atomic<bool> release{false};
  std::atomic<bool> destroyed{false};
};

// A check that spins until the test releases it: a hung kernel as the watchdog sees it.
class HangingCheck : public Check {
 public:
  explicit HangingCheck(std::shared_ptr<HangGate> gate) : m_gate(std::move(gate)) {}
  ~HangingCheck() override { m_gate->destroyed = true; }
  [[nodiscard]] std::string key() const override { return "hang_check"; }
  [[nodiscard]] std::string category() const override { return "kernels"; }
  [[nodiscard]] std::string description() const override { return "never finishes"; }
  [[nodiscard]] bool runs_at(Level) const override { return true; }
  [[nodiscard]] milliseconds deadline(Level, std::size_t) const override { return milliseconds(200); }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext&) const override { return {}; }
  std::vector<GpuOutcome> run(CheckContext&) override {
    while (!m_gate->release) std::this_thread::sleep_for(milliseconds(5));
    return {GpuOutcome{0, CheckStatus::pass, "too late", {}, {}, {}}};
  }

 private:
  std::shared_ptr<HangGate> m_gate;
};

class ThrowingCheck : public FixedCheck {
 public:
  ThrowingCheck() : FixedCheck("throw_check", "kernels", CheckStatus::pass) {}
  std::vector<GpuOutcome> run(CheckContext&) override { throw std::runtime_error("cuBLAS said no"); }
};

class NotApplicableCheck : public FixedCheck {
 public:
  NotApplicableCheck() : FixedCheck("nccl_check", "throughput", CheckStatus::pass) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext&) const override {
    return "NCCL is not in the image";
  }
};

// A check going through the backend port the way the real kernel checks do.
class SessionCheck : public FixedCheck {
 public:
  SessionCheck() : FixedCheck("compute_check", "kernels", CheckStatus::pass) {}
  std::vector<GpuOutcome> run(CheckContext& context) override {
    std::vector<GpuOutcome> out;
    for (const auto& g : context.gpus) {
      auto session = context.backend.open(g.index);
      if (!session) {
        out.push_back({g.index, CheckStatus::fail, session.error().message, "context_create", {}, {}});
        continue;
      }
      auto mismatches = (*session)->compute_mismatches();
      const bool good = mismatches.ok() && *mismatches == 0;
      out.push_back({g.index, good ? CheckStatus::pass : CheckStatus::fail, good ? "ok" : "mismatches", good ? "" : "compute", {}, {}});
    }
    return out;
  }
};

GpuInfo h200(int index) {
  GpuInfo g;
  g.index = index;
  g.name = "NVIDIA H200";
  g.uuid = "GPU-" + std::to_string(index);
  g.pci_bus_id = "00000000:1" + std::to_string(index) + ":00.0";
  g.pci_device_id = 0x2335;
  g.cc_major = 9;
  g.memory_total_bytes = 150754820096ULL;
  return g;
}

// A machine with a loaded driver and `gpu_count` H200s (the fake owns a mutex, so it lives on the heap).
std::unique_ptr<FakeGpuBackend> machine(int gpu_count) {
  auto b = std::make_unique<FakeGpuBackend>();
  b->driver_state.loaded = true;
  b->driver_state.version = "550.54.15";
  b->driver_state.cuda_driver_version = 12040;
  for (int i = 0; i < gpu_count; ++i) b->inventory.push_back(h200(i));
  return b;
}

using CheckList = std::vector<std::unique_ptr<Check>>;

template <class... C>
CheckList list(std::unique_ptr<C>... checks) {
  CheckList out;
  (out.push_back(std::move(checks)), ...);
  return out;
}

std::unique_ptr<FixedCheck> fixed(const std::string& key, const std::string& category, CheckStatus s = CheckStatus::pass) {
  return std::make_unique<FixedCheck>(key, category, s);
}

const CheckReport* find(const Report& r, const std::string& key) {
  for (const auto& c : r.checks)
    if (c.key == key) return &c;
  return nullptr;
}

std::vector<std::string> keys(const Report& r) {
  std::vector<std::string> out;
  for (const auto& c : r.checks) out.push_back(c.key);
  return out;
}

Report run(FakeGpuBackend& backend, CheckList checks, RunOptions options = {}, CheckInputs inputs = {}) {
  auto r = gpuenv::validate::run_validation(backend, inputs, std::move(checks), options);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? std::move(r).value() : Report{};
}

TEST(RunValidation, AllPassingChecksPassWithOneOutcomePerGpu) {
  auto owner = machine(2);
  FakeGpuBackend& backend = *owner;
  backend.backend_name = "replay";
  RunOptions options;
  options.started_at = "2025-01-02T03:04:05Z";
  Report r = run(backend, list(fixed("driver_loaded", "software"), fixed("memtest", "kernels")), options);
  EXPECT_EQ(r.status, CheckStatus::pass);
  EXPECT_EQ(r.backend, "replay");
  EXPECT_EQ(r.started_at, "2025-01-02T03:04:05Z");
  EXPECT_EQ(r.level, Level::standard);
  EXPECT_FALSE(r.could_not_run);
  ASSERT_EQ(r.gpus.size(), 2u);
  ASSERT_EQ(r.checks.size(), 2u);
  EXPECT_EQ(r.checks[0].results.size(), 1u);
  EXPECT_EQ(r.checks[0].results[0].gpu, -1);
  ASSERT_EQ(r.checks[1].results.size(), 2u);
  EXPECT_EQ(r.checks[1].results[1].gpu, 1);
  EXPECT_EQ(r.checks[1].description, "test check memtest");
  EXPECT_EQ(gpuenv::validate::exit_code(r), 0);
}

TEST(RunValidation, HangBecomesFailWithinTheDeadlineAndLaterGpuChecksSkip) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  auto gate = std::make_shared<HangGate>();
  auto later = std::make_unique<FixedCheck>("hbm_check", "throughput", CheckStatus::pass);
  auto later_seen = later->seen;
  const auto t0 = std::chrono::steady_clock::now();
  Report r = run(backend, list(fixed("driver_loaded", "software"), std::make_unique<HangingCheck>(gate),
                               std::move(later), fixed("env_vars", "software")));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(waited, milliseconds(3000));  // deadline 200 ms; generous for sanitizers

  const CheckReport* hang = find(r, "hang_check");
  ASSERT_NE(hang, nullptr);
  EXPECT_EQ(hang->status, CheckStatus::fail);
  ASSERT_EQ(hang->results.size(), 1u);
  EXPECT_EQ(hang->results[0].gpu, 0);
  EXPECT_EQ(hang->results[0].code, "hang");
  EXPECT_FALSE(hang->results[0].hint.empty());
  EXPECT_NE(hang->results[0].message.find("200 ms"), std::string::npos);

  const CheckReport* skipped = find(r, "hbm_check");
  ASSERT_NE(skipped, nullptr);
  EXPECT_EQ(skipped->status, CheckStatus::skip);
  EXPECT_EQ(skipped->results[0].message, "GPU hung in hang_check");
  EXPECT_FALSE(later_seen->ran);  // the check was never started on the hung GPU
  EXPECT_EQ(find(r, "env_vars")->status, CheckStatus::pass);  // host-only checks still run
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_EQ(gpuenv::validate::exit_code(r), 1);

  // The abandoned check is still alive (its thread uses it) until it returns.
  EXPECT_FALSE(gate->destroyed);
  gate->release = true;
  for (int i = 0; i < 2000 && !gate->destroyed; ++i) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_TRUE(gate->destroyed);
}

TEST(RunValidation, DeadlineScaleMultipliesEveryDeadline) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  auto gate = std::make_shared<HangGate>();
  RunOptions options;
  options.deadline_scale = 2.5;
  Report r = run(backend, list(std::make_unique<HangingCheck>(gate)), options);
  const CheckReport* hang = find(r, "hang_check");
  ASSERT_NE(hang, nullptr);
  ASSERT_EQ(hang->results.size(), 1u);
  EXPECT_EQ(hang->results[0].code, "hang");
  EXPECT_NE(hang->results[0].message.find("deadline of 500 ms"), std::string::npos) << hang->results[0].message;
  gate->release = true;
  for (int i = 0; i < 2000 && !gate->destroyed; ++i) std::this_thread::sleep_for(milliseconds(1));
}

TEST(RunValidation, ThrowingCheckFailsAsInternal) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  Report r = run(backend, list(std::make_unique<ThrowingCheck>(), fixed("after", "kernels")));
  const CheckReport* c = find(r, "throw_check");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, CheckStatus::fail);
  EXPECT_EQ(c->results[0].code, "internal");
  EXPECT_NE(c->results[0].message.find("cuBLAS said no"), std::string::npos);
  EXPECT_EQ(find(r, "after")->status, CheckStatus::pass);  // a throw is not a hang: the GPU stays usable
}

TEST(RunValidation, NotApplicableIsSkipWithTheReasonNeverPass) {
  auto owner = machine(2);
  FakeGpuBackend& backend = *owner;
  Report r = run(backend, list(std::make_unique<NotApplicableCheck>()));
  const CheckReport* c = find(r, "nccl_check");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, CheckStatus::skip);
  ASSERT_EQ(c->results.size(), 2u);
  for (const auto& o : c->results) {
    EXPECT_EQ(o.status, CheckStatus::skip);
    EXPECT_EQ(o.message, "NCCL is not in the image");
  }
  EXPECT_EQ(r.status, CheckStatus::skip);
  EXPECT_EQ(gpuenv::validate::exit_code(r), 4);  // nothing ran: not a pass
}

TEST(RunValidation, SkipsBesideAPassLeaveThePass) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  Report r = run(backend, list(fixed("a", "kernels"), std::make_unique<NotApplicableCheck>()));
  EXPECT_EQ(r.status, CheckStatus::pass);
  EXPECT_EQ(gpuenv::validate::exit_code(r), 0);
}

TEST(RunValidation, WarnWithoutFailIsWarnAndExitsZero) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  Report r = run(backend, list(fixed("a", "kernels"), fixed("persistence_mode", "software", CheckStatus::warn)));
  EXPECT_EQ(r.status, CheckStatus::warn);
  EXPECT_EQ(gpuenv::validate::exit_code(r), 0);
}

CheckList catalogue() {
  return list(fixed("driver_loaded", "software"), fixed("ecc_errors", "health"), fixed("memtest", "kernels"),
              fixed("gemm_consistency", "kernels"), fixed("gemm_tflops", "throughput"),
              fixed("hbm_bandwidth", "throughput"));
}

TEST(RunValidation, FilterByExactKey) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  RunOptions o;
  o.filter = {"memtest"};
  EXPECT_EQ(keys(run(backend, catalogue(), o)), (std::vector<std::string>{"memtest"}));
}

TEST(RunValidation, FilterByKeyPrefix) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  RunOptions o;
  o.filter = {"gemm_"};
  EXPECT_EQ(keys(run(backend, catalogue(), o)), (std::vector<std::string>{"gemm_consistency", "gemm_tflops"}));
}

TEST(RunValidation, FilterByCategoryAndKeyTogetherKeepsCatalogueOrder) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  RunOptions o;
  o.filter = {"hbm_bandwidth", "kernels"};
  EXPECT_EQ(keys(run(backend, catalogue(), o)),
            (std::vector<std::string>{"memtest", "gemm_consistency", "hbm_bandwidth"}));
}

TEST(RunValidation, UnknownCheckIsAUsageErrorListingKnownKeys) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  RunOptions o;
  o.filter = {"memtset"};
  auto r = gpuenv::validate::run_validation(backend, {}, catalogue(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::usage);
  EXPECT_EQ(r.error().id, "validate.unknown_check");
  EXPECT_NE(r.error().message.find("memtset"), std::string::npos);
  EXPECT_NE(r.error().message.find("memtest"), std::string::npos);
  EXPECT_NE(r.error().message.find("hbm_bandwidth"), std::string::npos);
  EXPECT_NE(r.error().message.find("throughput"), std::string::npos);
}

TEST(RunValidation, EmptyFilterEntryIsAUsageError) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  RunOptions o;
  o.filter = {""};
  EXPECT_FALSE(gpuenv::validate::run_validation(backend, {}, catalogue(), o).ok());
}

TEST(RunValidation, ExactKeyOutsideTheLevelIsListedAsSkip) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  auto long_only = fixed("sustained_gemm", "kernels");
  long_only->only_above_quick();
  auto seen = long_only->seen;
  RunOptions o;
  o.filter = {"sustained_gemm"};
  CheckInputs in;
  in.level = Level::quick;
  Report r = run(backend, list(std::move(long_only)), o, in);
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].status, CheckStatus::skip);
  EXPECT_NE(r.checks[0].results[0].message.find("not part of level quick"), std::string::npos);
  EXPECT_FALSE(seen->ran);
}

TEST(RunValidation, ChecksOutsideTheLevelAreLeftOutWithoutAFilter) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  auto long_only = fixed("sustained_gemm", "kernels");
  long_only->only_above_quick();
  CheckInputs in;
  in.level = Level::quick;
  Report r = run(backend, list(fixed("memtest", "kernels"), std::move(long_only)), {}, in);
  EXPECT_EQ(keys(r), (std::vector<std::string>{"memtest"}));
  EXPECT_EQ(r.level, Level::quick);
}

TEST(RunValidation, NoDriverCouldNotRunGpuChecksSkipAndExitIsFour) {
  FakeGpuBackend backend;  // driver not loaded, no GPUs
  auto software = fixed("driver_loaded", "software", CheckStatus::fail);
  auto software_seen = software->seen;
  auto gpu_check = fixed("memtest", "kernels");
  auto gpu_seen = gpu_check->seen;
  Report r = run(backend, list(std::move(software), std::move(gpu_check)));
  EXPECT_TRUE(r.could_not_run);
  EXPECT_EQ(r.could_not_run_reason, "no NVIDIA driver loaded");
  EXPECT_TRUE(software_seen->ran);  // host checks still say what is wrong
  EXPECT_FALSE(gpu_seen->ran);
  const CheckReport* m = find(r, "memtest");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->status, CheckStatus::skip);
  EXPECT_NE(m->results[0].message.find("no NVIDIA driver loaded"), std::string::npos);
  EXPECT_FALSE(m->results[0].hint.empty());
  EXPECT_EQ(gpuenv::validate::exit_code(r), 4);
}

TEST(RunValidation, DriverWithoutGpusCouldNotRun) {
  auto owner = machine(0);
  FakeGpuBackend& backend = *owner;
  Report r = run(backend, list(fixed("memtest", "kernels")));
  EXPECT_TRUE(r.could_not_run);
  EXPECT_EQ(r.could_not_run_reason, "no NVIDIA GPU found");
  EXPECT_EQ(r.checks[0].status, CheckStatus::skip);
  EXPECT_EQ(gpuenv::validate::exit_code(r), 4);
}

TEST(RunValidation, NoDriverWinsOverAGpuSelection) {
  FakeGpuBackend backend;
  CheckInputs in;
  in.gpus = {3};
  Report r = run(backend, list(fixed("memtest", "kernels")), {}, in);
  EXPECT_TRUE(r.could_not_run);
}

TEST(RunValidation, UnknownGpuIndexIsAUsageError) {
  auto owner = machine(2);
  FakeGpuBackend& backend = *owner;
  CheckInputs in;
  in.gpus = {0, 5};
  auto r = gpuenv::validate::run_validation(backend, in, list(fixed("memtest", "kernels")), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::usage);
  EXPECT_EQ(r.error().id, "validate.unknown_gpu");
  EXPECT_NE(r.error().message.find("GPU 5"), std::string::npos);
}

TEST(RunValidation, SelectedGpusAreTheOnlyOnesChecked) {
  auto owner = machine(4);
  FakeGpuBackend& backend = *owner;
  auto c = fixed("memtest", "kernels");
  auto seen = c->seen;
  CheckInputs in;
  in.gpus = {2, 1, 2};
  Report r = run(backend, list(std::move(c)), {}, in);
  EXPECT_EQ(seen->gpus, (std::vector<int>{1, 2}));
  ASSERT_EQ(r.gpus.size(), 2u);
  EXPECT_EQ(r.gpus[0].index, 1);
  EXPECT_EQ(r.checks[0].results.size(), 2u);
}

TEST(RunValidation, ChecksUseTheBackendPort) {
  auto owner = machine(2);
  FakeGpuBackend& backend = *owner;
  backend.compute_mismatch_counts[1] = 7;
  Report r = run(backend, list(std::make_unique<SessionCheck>()));
  ASSERT_EQ(r.checks[0].results.size(), 2u);
  EXPECT_EQ(r.checks[0].results[0].status, CheckStatus::pass);
  EXPECT_EQ(r.checks[0].results[1].status, CheckStatus::fail);
  EXPECT_EQ(r.status, CheckStatus::fail);
}

TEST(RunValidation, DurationsComeFromTheInjectedClock) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  auto t = std::chrono::steady_clock::time_point{};
  RunOptions o;
  o.clock = [&t] { return t += milliseconds(10); };
  Report r = run(backend, list(fixed("a", "kernels"), fixed("b", "kernels")), o);
  EXPECT_EQ(r.checks[0].duration_ms, 10);
  EXPECT_EQ(r.checks[1].duration_ms, 10);
  EXPECT_EQ(r.duration_ms, 50);  // start, 2 x (start, end), end
}

TEST(RunValidation, ProgressIsReportedAfterEachCheck) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  std::vector<std::string> seen;
  RunOptions o;
  o.progress = [&](const std::string& key, CheckStatus s, int done, int total) {
    seen.push_back(key + ":" + to_string(s) + ":" + std::to_string(done) + "/" + std::to_string(total));
  };
  (void)run(backend, list(fixed("a", "kernels"), fixed("b", "kernels", CheckStatus::fail)), o);
  EXPECT_EQ(seen, (std::vector<std::string>{"a:pass:1/2", "b:fail:2/2"}));
}

TEST(RunValidation, BackendNameIsRecorded) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  backend.backend_name = "nvml+cuda";
  EXPECT_EQ(run(backend, list(fixed("a", "kernels"))).backend, "nvml+cuda");
}

TEST(RunValidation, PrepareRunsOnceOnTheCallingThreadBeforeAnySession) {
  auto owner = machine(2);
  FakeGpuBackend& backend = *owner;
  Report r = run(backend, list(fixed("driver_loaded", "software"), std::make_unique<SessionCheck>(),
                               std::make_unique<SessionCheck>()));
  EXPECT_EQ(r.status, CheckStatus::pass);
  EXPECT_EQ(backend.prepare_calls, 1);
  EXPECT_EQ(backend.prepare_thread, std::this_thread::get_id()) << "fork-safe: before any worker thread";
  EXPECT_EQ(backend.opens_before_prepare, 0);
  EXPECT_TRUE(r.notes.empty());
}

TEST(RunValidation, PrepareIsSkippedWithoutGpuWork) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  (void)run(backend, list(fixed("driver_loaded", "software")));
  EXPECT_EQ(backend.prepare_calls, 0);
  owner->driver_state.loaded = false;
  (void)run(backend, list(std::make_unique<SessionCheck>()));
  EXPECT_EQ(backend.prepare_calls, 0) << "no driver: nothing to prepare";
}

TEST(RunValidation, PrepareFailureIsANoteAndTheChecksStillReport) {
  auto owner = machine(1);
  FakeGpuBackend& backend = *owner;
  backend.prepare_error = gpuenv::make_error(ErrorKind::environment, "detect.cuinit_timeout", "cuInit did not return within 15000 ms");
  backend.open_fails.insert(0);
  Report r = run(backend, list(std::make_unique<SessionCheck>()));
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("cuInit did not return"), std::string::npos);
  EXPECT_EQ(r.status, CheckStatus::fail);
}

}  // namespace
