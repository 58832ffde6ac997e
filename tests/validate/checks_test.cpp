// The built-in checks against the fake backend: recorded-style inventories (8x H100 SXM, 1x L4, A100 with MIG,
// H200) and one fault at a time, each of which must give the right check, status and code. Checks are run directly
// (Check::run with a CheckContext built here); the runner has its own tests.
#include "validate/check.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <set>
#include <tuple>

#include "fakes/fake_gpu_backend.hpp"
#include "validate/checks/check_support.hpp"
#include "validate/error_codes.hpp"
#include "validate/runner.hpp"

namespace {

using gpuenv::testing::FakeGpuBackend;
using gpuenv::validate::all_checks;
using gpuenv::validate::Check;
using gpuenv::validate::CheckContext;
using gpuenv::validate::CheckInputs;
using gpuenv::validate::GpuHealth;
using gpuenv::validate::GpuInfo;
using gpuenv::validate::GpuOutcome;
using gpuenv::validate::Level;
using gpuenv::validate::Samples;
using gpuenv::validate::CheckStatus;
using gpuenv::validate::ThresholdTable;

constexpr std::uint32_t k_h100 = 0x2330, k_l4 = 0x27b8, k_a100 = 0x20b2, k_h200 = 0x2335;
constexpr std::uint64_t k_gib = 1024ULL * 1024 * 1024;

// ---------------------------------------------------------------------------------------------------------------
// Inventories

// Figures a healthy GPU of a model measures (made up for the tests, in the range of the real parts).
struct Profile {
  const char* name;
  std::uint32_t pci;
  int cc_major, cc_minor;
  std::uint64_t memory;
  int nvlinks;
  double hbm, h2d, d2h;
  std::map<std::string, double> tflops;  // dtype -> TFLOPS; a missing dtype is unsupported
  bool row_remap;                        // Ampere and later
  int pcie_gen;
  int slowdown_c;
};

const Profile k_h100_sxm{"NVIDIA H100 80GB HBM3", k_h100, 9, 0, 80 * k_gib, 18, 3000, 55, 55,
                         {{"bf16", 700}, {"fp16", 700}, {"tf32", 350}, {"fp64", 55}}, true, 5, 87};
const Profile k_l4_pcie{"NVIDIA L4", k_l4, 8, 9, 24 * k_gib, 0, 250, 25, 25,
                        {{"bf16", 100}, {"fp16", 100}, {"tf32", 50}, {"fp64", 0.4}}, true, 4, 90};
const Profile k_a100_sxm{"NVIDIA A100-SXM4-80GB", k_a100, 8, 0, 80 * k_gib, 12, 1700, 25, 25,
                         {{"bf16", 250}, {"fp16", 250}, {"tf32", 130}, {"fp64", 18}}, true, 4, 88};
const Profile k_h200_sxm{"NVIDIA H200", k_h200, 9, 0, 141 * k_gib, 18, 4200, 55, 55,
                         {{"bf16", 700}, {"fp16", 700}, {"tf32", 350}, {"fp64", 55}}, true, 5, 87};

Samples samples_around(double value, const char* unit) {
  return Samples{{value * 0.99, value, value * 1.01, value * 0.995, value * 1.005}, unit, "gpuenv", true};
}

GpuHealth healthy_idle(const Profile& p) {
  GpuHealth h;
  h.ecc_enabled = true;
  h.ecc_pending_change = false;
  h.ecc_volatile_uncorrected = 0;
  h.ecc_volatile_corrected = 0;
  h.ecc_aggregate_uncorrected = 0;
  if (p.row_remap) h.row_remap = gpuenv::validate::RowRemap{};
  // Idle links downtrain to Gen1 to save power; only the reading under load counts.
  h.pcie_link = gpuenv::validate::PcieLink{1, p.pcie_gen, 16, 16};
  h.pcie_replays = 0;
  h.clock_event_reasons = 0x1;  // GPU idle
  h.temperature_c = 35;
  h.slowdown_temperature_c = p.slowdown_c;
  h.power_w = 70;
  h.power_limit_w = 700;
  h.persistence_mode = true;
  h.mig_enabled = false;
  h.mig_pending_change = false;
  return h;
}

GpuHealth healthy_loaded(const Profile& p) {
  GpuHealth h = healthy_idle(p);
  h.pcie_link = gpuenv::validate::PcieLink{p.pcie_gen, p.pcie_gen, 16, 16};
  h.clock_event_reasons = gpuenv::validate::k_clock_event_sw_power_cap;
  h.temperature_c = 62;
  h.power_w = 650;
  return h;
}

void add_gpu(FakeGpuBackend& b, const Profile& p) {
  const int i = static_cast<int>(b.inventory.size());
  GpuInfo g;
  g.index = i;
  g.uuid = "GPU-0000000" + std::to_string(i);
  g.name = p.name;
  g.pci_bus_id = "00000000:" + std::to_string(10 + i) + ":00.0";
  g.pci_device_id = p.pci;
  g.cc_major = p.cc_major;
  g.cc_minor = p.cc_minor;
  g.memory_total_bytes = p.memory;
  g.numa_node = i < 4 ? 0 : 1;
  g.nvlink_links_active = p.nvlinks;
  b.inventory.push_back(g);
  b.healths[i] = healthy_idle(p);
  b.load_healths[i] = healthy_loaded(p);
  b.compute_mismatch_counts[i] = 0;
  gpuenv::validate::MemtestResult m;
  m.bytes_tested = p.memory / 4;
  m.patterns = {"walking_ones", "walking_zeros", "own_address", "moving_inversions", "random"};
  m.truncated_by_deadline = true;
  b.memtests[i] = m;
  b.gemm_consistencies[i] = gpuenv::validate::ConsistencyResult{{0xabcdef, 0xabcdef, 0xabcdef}, 0xabcdef, true, "gpuenv"};
  b.hbm[i] = samples_around(p.hbm, "GB/s");
  b.h2d[i] = samples_around(p.h2d, "GB/s");
  b.d2h[i] = samples_around(p.d2h, "GB/s");
  for (const auto& [dtype, tflops] : p.tflops) b.gemm[{i, dtype}] = samples_around(tflops, "TFLOPS");
}

void add_peers(FakeGpuBackend& b, double gbs) {
  for (const auto& src : b.inventory)
    for (const auto& dst : b.inventory)
      if (src.index != dst.index) b.p2p[{src.index, dst.index}] = samples_around(gbs, "GB/s");
}

gpuenv::validate::DriverState driver(const char* version = "550.54.15", int cuda = 12040) {
  gpuenv::validate::DriverState d;
  d.loaded = true;
  d.version = version;
  d.cuda_driver_version = cuda;
  d.cc_state = "off";
  return d;
}

void h100x8(FakeGpuBackend& b) {
  b.driver_state = driver();
  b.driver_state.nvswitch_present = true;
  b.driver_state.fabric_manager_running = true;
  for (int i = 0; i < 8; ++i) add_gpu(b, k_h100_sxm);
  add_peers(b, 370);
  b.nccl = samples_around(360, "GB/s");
}

void l4x1(FakeGpuBackend& b) {
  b.driver_state = driver("535.183.01", 12020);
  add_gpu(b, k_l4_pcie);
}

void a100_mig(FakeGpuBackend& b) {
  b.driver_state = driver("535.183.01", 12020);
  add_gpu(b, k_a100_sxm);
  b.healths[0].mig_enabled = true;
  b.healths[0].row_remap.reset();  // NVML does not report remapped rows with MIG instances
  b.load_healths[0] = b.healths[0];
}

void h200x1(FakeGpuBackend& b) {
  b.driver_state = driver("560.35.03", 12060);
  add_gpu(b, k_h200_sxm);
}

// References in the table the tests load (the real table is recipes/gpus/thresholds.yaml): H100, A100 and H200
// are known, the L4 is not.
ThresholdTable thresholds() {
  ThresholdTable t;
  auto model = [](const char* name, std::uint32_t pci, double hbm, double h2d, double bf16, double fp64) {
    gpuenv::validate::GpuThresholds g;
    g.model = name;
    g.pci_device_ids = {pci};
    g.references["hbm_bandwidth"] = {hbm, "GB/s", "test"};
    g.references["h2d_bandwidth"] = {h2d, "GB/s", "test"};
    g.references["d2h_bandwidth"] = {h2d, "GB/s", "test"};
    g.references["gemm_tflops.bf16"] = {bf16, "TFLOPS", "test"};
    g.references["gemm_tflops.fp16"] = {bf16, "TFLOPS", "test"};
    g.references["gemm_tflops.tf32"] = {bf16 / 2, "TFLOPS", "test"};
    g.references["gemm_tflops.fp64"] = {fp64, "TFLOPS", "test"};
    return g;
  };
  t.gpus.push_back(model("H100 SXM5 80GB", k_h100, 3000, 55, 700, 55));
  t.gpus.back().references["p2p_bandwidth"] = {370, "GB/s", "test"};
  t.gpus.back().references["nccl_allreduce"] = {360, "GB/s", "test"};
  t.gpus.push_back(model("A100 SXM4 80GB", k_a100, 1700, 25, 250, 18));
  t.gpus.push_back(model("H200 SXM 141GB", k_h200, 4200, 55, 700, 55));
  return t;
}

// ---------------------------------------------------------------------------------------------------------------
// Running one check

std::unique_ptr<Check> check(const std::string& key) {
  for (auto& c : all_checks())
    if (c->key() == key) return std::move(c);
  ADD_FAILURE() << "no check " << key;
  return nullptr;
}

struct Ran {
  std::optional<std::string> not_applicable;
  std::vector<GpuOutcome> outcomes;

  const GpuOutcome& gpu(int index) const {
    for (const auto& o : outcomes)
      if (o.gpu == index) return o;
    static const GpuOutcome k_none{-99, CheckStatus::skip, "no outcome", "", "", {}};
    ADD_FAILURE() << "no outcome for GPU " << index;
    return k_none;
  }
  const GpuOutcome& host() const { return gpu(-1); }
};

// Every outcome keeps the contract: WARN and FAIL carry a catalogued code and a hint; a SKIP says why.
void expect_well_formed(const std::string& key, const GpuOutcome& o) {
  EXPECT_FALSE(o.message.empty()) << key;
  if (o.status == CheckStatus::warn || o.status == CheckStatus::fail) {
    EXPECT_FALSE(o.code.empty()) << key << ": " << o.message;
    EXPECT_FALSE(o.hint.empty()) << key << ": " << o.message;
  }
  if (!o.code.empty()) {
    EXPECT_NE(gpuenv::validate::find_error_code(o.code), nullptr) << key << ": " << o.code;
  }
}

Ran run_check(const std::string& key, FakeGpuBackend& backend, const CheckInputs& inputs,
              std::chrono::milliseconds extra_deadline = std::chrono::milliseconds(0)) {
  Ran ran;
  auto c = check(key);
  if (!c) return ran;
  EXPECT_TRUE(c->runs_at(inputs.level)) << key << " does not run at " << gpuenv::validate::to_string(inputs.level);
  const auto state = *backend.driver();
  std::vector<GpuInfo> gpus;
  const std::vector<GpuInfo> inventory = *backend.gpus();
  for (const auto& g : inventory)
    if (inputs.gpus.empty() || std::count(inputs.gpus.begin(), inputs.gpus.end(), g.index) > 0) gpus.push_back(g);
  CheckContext context{backend, inputs, state, gpus,
                       std::chrono::steady_clock::now() + c->deadline(inputs.level, gpus.size()) + extra_deadline};
  ran.not_applicable = c->not_applicable(context);
  if (ran.not_applicable) return ran;
  ran.outcomes = c->run(context);
  for (const auto& o : ran.outcomes) expect_well_formed(key, o);
  return ran;
}

class Checks : public ::testing::Test {
 protected:
  FakeGpuBackend backend;
  ThresholdTable table = thresholds();
  CheckInputs inputs;
  void SetUp() override {
    inputs.level = Level::standard;
    inputs.thresholds = &table;
  }
  Ran run(const std::string& key) { return run_check(key, backend, inputs); }
};

// ---------------------------------------------------------------------------------------------------------------
// The registry, levels and deadlines

std::vector<std::string> keys_at(Level level) {
  std::vector<std::string> out;
  for (const auto& c : all_checks())
    if (c->runs_at(level)) out.push_back(c->key());
  return out;
}

TEST(AllChecks, ListsEveryIssueCheckInCategoryOrder) {
  std::vector<std::string> keys, categories;
  for (const auto& c : all_checks()) {
    keys.push_back(c->key());
    categories.push_back(c->category());
    EXPECT_FALSE(c->description().empty()) << c->key();
  }
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "driver_loaded", "driver_meets_lock", "nouveau_absent", "device_nodes", "persistence_mode",
                      "fabric_manager", "mig_state", "cc_mode", "cc_attestation", "env_vars", "cdi_spec", "ecc_mode", "ecc_errors", "row_remap",
                      "retired_pages", "pcie_link", "pcie_replays", "clock_events", "temperature", "context_create",
                      "compute_correctness", "memtest", "gemm_consistency", "gemm_sustained", "hbm_bandwidth", "h2d_bandwidth",
                      "d2h_bandwidth", "gemm_tflops", "p2p_bandwidth", "nccl_allreduce", "libraries_load",
                      "framework_smoke", "cudnn_smoke", "data_read"}));
  const std::vector<std::string> order{"software", "health", "kernels", "throughput", "image", "data"};
  std::size_t at = 0;
  for (const auto& cat : categories) {
    while (at < order.size() && order[at] != cat) ++at;
    ASSERT_LT(at, order.size()) << "category " << cat << " out of order";
  }
}

TEST(AllChecks, KeysAreUniqueSnakeCase) {
  std::set<std::string> seen;
  for (const auto& c : all_checks()) {
    const std::string k = c->key();
    EXPECT_TRUE(seen.insert(k).second) << k;
    EXPECT_TRUE(std::all_of(k.begin(), k.end(), [](char ch) { return std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) || ch == '_'; })) << k;
  }
}

TEST(Levels, QuickIsTheBootPreflight) {
  EXPECT_EQ(keys_at(Level::quick),
            (std::vector<std::string>{"driver_loaded", "driver_meets_lock", "nouveau_absent", "device_nodes",
                                      "persistence_mode", "fabric_manager", "mig_state", "cc_mode", "cc_attestation", "env_vars", "cdi_spec", "ecc_mode",
                                      "ecc_errors", "row_remap", "retired_pages", "pcie_replays", "context_create",
                                      "compute_correctness", "memtest", "hbm_bandwidth", "data_read"}));  // data_read: only with --data
}

TEST(Levels, StandardRunsEveryCheckButTheSustainedLoadAndLongRunsEveryCheck) {
  EXPECT_EQ(keys_at(Level::standard).size(), all_checks().size() - 1);
  auto standard = keys_at(Level::standard);
  EXPECT_EQ(std::count(standard.begin(), standard.end(), "gemm_sustained"), 0);
  EXPECT_EQ(keys_at(Level::long_).size(), all_checks().size());
}

// The sum of the deadlines of the checks that run at `level` on one GPU (p2p_bandwidth and nccl_allreduce need two;
// the image checks run only with --image, and their time comes on top of the level's: image_checks_test.cpp; so
// does data_read's, which runs only with --data: data_read_test.cpp).
std::chrono::milliseconds total_deadline(Level level, std::size_t gpus = 1) {
  std::chrono::milliseconds sum{0};
  for (const auto& c : all_checks()) {
    if (c->key() == "p2p_bandwidth" || c->key() == "nccl_allreduce" || c->category() == "image" || c->category() == "data") continue;
    if (c->runs_at(level)) sum += c->deadline(level, gpus);
  }
  return sum;
}
std::chrono::milliseconds total_deadline_one_gpu(Level level) { return total_deadline(level, 1); }

TEST(Levels, EveryLevelFitsItsTimeOnOneGpuEvenIfEveryCheckUsesItsWholeDeadline) {
  EXPECT_LE(total_deadline_one_gpu(Level::quick), std::chrono::seconds(15));
  EXPECT_LE(total_deadline_one_gpu(Level::standard), std::chrono::minutes(2));
  EXPECT_LE(total_deadline_one_gpu(Level::long_), std::chrono::minutes(15));
}

TEST(Levels, EightGpusTakeLittleMoreThanOneBecauseDeviceLocalWorkRunsAtOnce) {
  // Only the host-shared copies (h2d, d2h, replays) and the idle reads go one GPU after another.
  std::cout << "sum of deadlines, 1 / 8 GPUs: quick " << total_deadline(Level::quick, 1).count() << " / "
            << total_deadline(Level::quick, 8).count() << " ms, standard " << total_deadline(Level::standard, 1).count()
            << " / " << total_deadline(Level::standard, 8).count() << " ms, long " << total_deadline(Level::long_, 1).count()
            << " / " << total_deadline(Level::long_, 8).count() << " ms\n";
  // Deadlines are the watchdog's bounds, not expected times; visited one GPU after another, the device-local checks
  // alone would take eight times theirs.
  for (const auto& c : all_checks()) {
    if (c->category() == "kernels" || c->key() == "hbm_bandwidth" || c->key() == "gemm_tflops" ||
        c->key() == "clock_events" || c->key() == "temperature" || c->key() == "pcie_link") {
      for (Level level : {Level::quick, Level::standard, Level::long_}) {
        if (!c->runs_at(level)) continue;
        EXPECT_LE(c->deadline(level, 8), c->deadline(level, 1) * 2) << c->key();
      }
    }
  }
  EXPECT_LE(total_deadline(Level::standard, 8), std::chrono::seconds(270));
  EXPECT_LE(total_deadline(Level::long_, 8), std::chrono::minutes(20));
}

TEST(Levels, DeadlinesGrowWithGpusAndPairs) {
  auto memtest = check("memtest");
  EXPECT_GT(memtest->deadline(Level::standard, 8), memtest->deadline(Level::standard, 1));
  EXPECT_GT(memtest->deadline(Level::long_, 1), memtest->deadline(Level::standard, 1));
  // GPUs are tested at once: eight take barely longer than one.
  EXPECT_LE(memtest->deadline(Level::long_, 8), std::chrono::minutes(12));
  EXPECT_LE(memtest->deadline(Level::standard, 8), memtest->deadline(Level::standard, 1) * 5 / 4);
  auto p2p = check("p2p_bandwidth");
  EXPECT_EQ(p2p->deadline(Level::standard, 8), std::chrono::milliseconds(500 + 2000 * 56));  // 56 ordered pairs
}

TEST(ErrorCodes, AreUniqueSnakeCaseWithSummaryAndHint) {
  std::set<std::string> seen;
  for (const auto& e : gpuenv::validate::error_codes()) {
    const std::string code = e.code;
    EXPECT_TRUE(seen.insert(code).second) << code;
    EXPECT_TRUE(std::all_of(code.begin(), code.end(), [](char ch) { return std::islower(static_cast<unsigned char>(ch)) || ch == '_'; })) << code;
    EXPECT_GT(std::string(e.summary).size(), 10u) << code;
    EXPECT_GT(std::string(e.hint).size(), 10u) << code;
  }
}

TEST(ErrorCodes, FindKnownCodesAndNothingElse) {
  for (const char* code : {"no_driver", "driver_too_old", "driver_cuda_too_old", "nouveau_loaded", "device_node_missing",
                           "persistence_off", "fabric_manager_down", "mig_mismatch", "env_debug_var", "cdi_stale", "cdi_driver_mismatch",
                           "cdi_mig_stale", "cdi_malformed", "cdi_unreadable", "ecc_disabled",
                           "ecc_uncorrectable", "row_remap_pending", "row_remap_failure", "retired_pages_pending",
                           "retired_pages_limit", "pcie_downtrained", "pcie_replays", "clock_throttled",
                           "temperature_high", "context_failed", "compute_mismatch", "memtest_error", "gemm_mismatch",
                           "bandwidth_low", "tflops_low", "node_outlier", "hang", "internal", "no_threshold"}) {
    ASSERT_NE(gpuenv::validate::find_error_code(code), nullptr) << code;
    EXPECT_STREQ(gpuenv::validate::find_error_code(code)->code, code);
  }
  EXPECT_EQ(gpuenv::validate::find_error_code("no_such_code"), nullptr);
  EXPECT_EQ(gpuenv::validate::find_error_code(""), nullptr);
}

// ---------------------------------------------------------------------------------------------------------------
// Healthy inventories

// Every check of the level passes, except those in `may_skip`, which may be not applicable or SKIP (never FAIL).
// The image checks are not applicable here (no --image); image_checks_test.cpp covers them.
// Every check of the level passes, except those in `may_skip` (not applicable or SKIP) and those in `measured`,
// which must be MEASURED: their figures have no reference.
void expect_all_pass(FakeGpuBackend& backend, CheckInputs& inputs, const std::set<std::string>& may_skip = {},
                     const std::set<std::string>& measured = {}) {
  for (const auto& c : all_checks()) {
    if (!c->runs_at(inputs.level)) continue;
    Ran ran = run_check(c->key(), backend, inputs);
    // cc_attestation is not applicable where confidential computing is off, as in every healthy inventory here;
    // cdi_spec where no CDI directories are given (cdi_test.cpp runs it on fixture trees).
    const bool skip_ok = may_skip.count(c->key()) > 0 || c->category() == "image" || c->category() == "data" ||
                         c->key() == "cc_attestation" || c->key() == "cdi_spec";
    if (ran.not_applicable) {
      EXPECT_TRUE(skip_ok) << c->key() << " not applicable: " << *ran.not_applicable;
      continue;
    }
    ASSERT_FALSE(ran.outcomes.empty()) << c->key();
    for (const auto& o : ran.outcomes) {
      if (skip_ok && o.status == CheckStatus::skip) continue;
      const CheckStatus expected = measured.count(c->key()) ? CheckStatus::measured : CheckStatus::pass;
      EXPECT_EQ(o.status, expected) << c->key() << " GPU " << o.gpu << ": " << o.message << " [" << o.code << "]";
    }
  }
}

TEST_F(Checks, HealthyH100NodePassesEveryCheckAtStandard) {
  h100x8(backend);
  inputs.lock_driver_floor = "535.104.05";
  inputs.lock_cuda = "12.4";
  inputs.spec_mig = false;
  expect_all_pass(backend, inputs, {"retired_pages"});  // Hopper remaps rows instead of retiring pages
}

TEST_F(Checks, HealthyH200PassesAtQuickWithTheOthersNotApplicable) {
  h200x1(backend);
  inputs.level = Level::quick;
  expect_all_pass(backend, inputs, {"driver_meets_lock", "fabric_manager", "mig_state", "retired_pages"});
}

TEST_F(Checks, HealthyL4IsMeasuredWhereNoReferenceJudgesIt) {
  l4x1(backend);
  expect_all_pass(backend, inputs,
                  {"driver_meets_lock", "fabric_manager", "mig_state", "retired_pages", "p2p_bandwidth",
                   "nccl_allreduce"},
                  {"hbm_bandwidth", "h2d_bandwidth", "d2h_bandwidth", "gemm_tflops"});
  Ran hbm = run("hbm_bandwidth");
  EXPECT_EQ(hbm.gpu(0).status, CheckStatus::measured);
  EXPECT_EQ(hbm.gpu(0).code, "no_threshold");
  EXPECT_NE(hbm.gpu(0).message.find("not judged"), std::string::npos) << hbm.gpu(0).message;
}

TEST_F(Checks, SingleGpuHasNoPeerOrCollectiveChecks) {
  l4x1(backend);
  EXPECT_TRUE(run("p2p_bandwidth").not_applicable);
  EXPECT_TRUE(run("nccl_allreduce").not_applicable);
  EXPECT_TRUE(run("fabric_manager").not_applicable);
}

TEST_F(Checks, HbmMetricsCarryMedianRangeReferenceAndFraction) {
  h200x1(backend);
  Ran r = run("hbm_bandwidth");
  const GpuOutcome& o = r.gpu(0);
  EXPECT_EQ(o.status, CheckStatus::pass);
  std::map<std::string, double> m;
  for (const auto& metric : o.metrics) m[metric.name] = metric.value;
  EXPECT_DOUBLE_EQ(m["median_gbs"], 4200);
  EXPECT_DOUBLE_EQ(m["min_gbs"], 4200 * 0.99);
  EXPECT_DOUBLE_EQ(m["max_gbs"], 4200 * 1.01);
  EXPECT_DOUBLE_EQ(m["reference_gbs"], 4200);
  EXPECT_DOUBLE_EQ(m["fraction_of_reference"], 1.0);
}

// ---------------------------------------------------------------------------------------------------------------
// Software faults

TEST_F(Checks, NoDriverFailsDriverLoadedAndLeavesTheRestNotApplicable) {
  backend.driver_state = gpuenv::validate::DriverState{};
  Ran r = run("driver_loaded");
  EXPECT_EQ(r.host().status, CheckStatus::fail);
  EXPECT_EQ(r.host().code, "no_driver");
  inputs.lock_driver_floor = "535.104.05";
  for (const char* key : {"driver_meets_lock", "device_nodes", "persistence_mode", "ecc_errors", "memtest",
                          "hbm_bandwidth"})
    EXPECT_TRUE(run(key).not_applicable) << key;
  EXPECT_FALSE(run("nouveau_absent").not_applicable);
  EXPECT_FALSE(run("env_vars").not_applicable);
}

TEST_F(Checks, DriverOlderThanTheLockFails) {
  h100x8(backend);
  backend.driver_state.version = "470.182.03";
  backend.driver_state.cuda_driver_version = 11040;
  inputs.lock_driver_floor = "525.60.13";
  Ran r = run("driver_meets_lock");
  EXPECT_EQ(r.host().status, CheckStatus::fail);
  EXPECT_EQ(r.host().code, "driver_too_old");
  EXPECT_NE(r.host().message.find("470.182.03"), std::string::npos);
}

TEST_F(Checks, DriverTooOldForTheImagesCudaFails) {
  l4x1(backend);  // driver CUDA 12.2
  inputs.lock_driver_floor = "525.60.13";
  inputs.lock_cuda = "12.4";
  Ran r = run("driver_meets_lock");
  EXPECT_EQ(r.host().status, CheckStatus::fail);
  EXPECT_EQ(r.host().code, "driver_cuda_too_old");
}

TEST_F(Checks, DriverMeetsLockNeedsALock) {
  h200x1(backend);
  EXPECT_TRUE(run("driver_meets_lock").not_applicable);
}

// A lock without CUDA (a CPU-only or driver-only image, Spec::wants_cuda): the driver's CUDA is not judged, and
// with no floor either the check does not apply, saying why, rather than failing an old driver or passing blind.
TEST_F(Checks, ALockWithoutCudaJudgesOnlyTheFloorAndSaysSo) {
  h100x8(backend);
  backend.driver_state.version = "550.54.15";
  backend.driver_state.cuda_driver_version = 12040;
  inputs.lock_given = true;
  inputs.lock_driver_floor = "525.60.13";
  Ran r = run("driver_meets_lock");
  EXPECT_EQ(r.host().status, CheckStatus::pass);
  EXPECT_NE(r.host().message.find("the lock has no CUDA, so the driver's CUDA version is not judged"), std::string::npos) << r.host().message;
  inputs.lock_driver_floor.reset();
  Ran none = run("driver_meets_lock");
  ASSERT_TRUE(none.not_applicable);
  EXPECT_NE(none.not_applicable->find("any driver runs it"), std::string::npos) << *none.not_applicable;
}

TEST_F(Checks, NouveauLoadedFails) {
  l4x1(backend);
  backend.driver_state.nouveau_loaded = true;
  Ran r = run("nouveau_absent");
  EXPECT_EQ(r.host().status, CheckStatus::fail);
  EXPECT_EQ(r.host().code, "nouveau_loaded");
}

TEST_F(Checks, MissingDeviceNodeFailsAndNamesIt) {
  l4x1(backend);
  backend.driver_state.device_nodes_missing = {"/dev/nvidia-uvm"};
  Ran r = run("device_nodes");
  EXPECT_EQ(r.host().code, "device_node_missing");
  EXPECT_NE(r.host().message.find("/dev/nvidia-uvm"), std::string::npos);
}

TEST_F(Checks, PersistenceOffWarnsPerGpu) {
  h100x8(backend);
  backend.healths[2].persistence_mode = false;
  Ran r = run("persistence_mode");
  EXPECT_EQ(r.gpu(2).status, CheckStatus::warn);
  EXPECT_EQ(r.gpu(2).code, "persistence_off");
  EXPECT_EQ(r.gpu(1).status, CheckStatus::pass);
}

TEST_F(Checks, FabricManagerDownFailsOnNvswitchSystems) {
  h100x8(backend);
  backend.driver_state.fabric_manager_running = false;
  EXPECT_EQ(run("fabric_manager").host().code, "fabric_manager_down");
  backend.driver_state.fabric_manager_running.reset();
  EXPECT_EQ(run("fabric_manager").host().status, CheckStatus::skip);
}

TEST_F(Checks, MigStateIsComparedWithTheSpec) {
  a100_mig(backend);
  EXPECT_TRUE(run("mig_state").not_applicable);  // the spec does not ask
  inputs.spec_mig = true;
  EXPECT_EQ(run("mig_state").gpu(0).status, CheckStatus::pass);
  inputs.spec_mig = false;
  Ran off = run("mig_state");
  EXPECT_EQ(off.gpu(0).status, CheckStatus::fail);
  EXPECT_EQ(off.gpu(0).code, "mig_mismatch");
  inputs.spec_mig = true;
  backend.healths[0].mig_pending_change = true;
  EXPECT_EQ(run("mig_state").gpu(0).code, "mig_pending");
}

TEST_F(Checks, MigOnWantedButUnsupportedFails) {
  l4x1(backend);
  backend.healths[0].mig_enabled.reset();
  inputs.spec_mig = true;
  EXPECT_EQ(run("mig_state").gpu(0).code, "mig_mismatch");
  inputs.spec_mig = false;
  EXPECT_EQ(run("mig_state").gpu(0).status, CheckStatus::pass);
}

TEST_F(Checks, InjectionAndDebugVariablesWarn) {
  l4x1(backend);
  inputs.environment = {{"CUDA_INJECTION64_PATH", "/opt/tool/libinject.so"}, {"CUDA_LAUNCH_BLOCKING", "1"}};
  Ran r = run("env_vars");
  EXPECT_EQ(r.host().status, CheckStatus::warn);
  EXPECT_EQ(r.host().code, "env_debug_var");
  EXPECT_NE(r.host().message.find("CUDA_INJECTION64_PATH"), std::string::npos);
  EXPECT_NE(r.host().message.find("CUDA_LAUNCH_BLOCKING=1"), std::string::npos);
}

TEST_F(Checks, HarmlessValuesAndVisibleDevicesAreOnlyNoted) {
  l4x1(backend);
  inputs.environment = {{"CUDA_LAUNCH_BLOCKING", "0"}, {"NCCL_DEBUG", "WARN"}, {"CUDA_VISIBLE_DEVICES", "0"}};
  Ran r = run("env_vars");
  EXPECT_EQ(r.host().status, CheckStatus::pass);
  EXPECT_NE(r.host().message.find("CUDA_VISIBLE_DEVICES=0"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------------
// Health faults

TEST_F(Checks, UncorrectableEccFailsOnlyThatGpu) {
  h100x8(backend);
  backend.healths[5].ecc_volatile_uncorrected = 2;
  Ran r = run("ecc_errors");
  EXPECT_EQ(r.gpu(5).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(5).code, "ecc_uncorrectable");
  for (int i : {0, 1, 2, 3, 4, 6, 7}) EXPECT_EQ(r.gpu(i).status, CheckStatus::pass) << i;
}

TEST_F(Checks, LifetimeUncorrectableEccWarns) {
  h200x1(backend);
  backend.healths[0].ecc_aggregate_uncorrected = 1;
  Ran r = run("ecc_errors");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::warn);
  EXPECT_EQ(r.gpu(0).code, "ecc_uncorrectable_aggregate");
}

TEST_F(Checks, EccDisabledWarnsAndItsCountersAreSkipped) {
  l4x1(backend);
  backend.healths[0].ecc_enabled = false;
  EXPECT_EQ(run("ecc_mode").gpu(0).code, "ecc_disabled");
  EXPECT_EQ(run("ecc_errors").gpu(0).status, CheckStatus::skip);
}

TEST_F(Checks, PendingRowRemapWarnsToResetTheGpu) {
  h100x8(backend);
  backend.healths[3].row_remap = gpuenv::validate::RowRemap{0, 1, true, false};
  Ran r = run("row_remap");
  EXPECT_EQ(r.gpu(3).status, CheckStatus::warn);
  EXPECT_EQ(r.gpu(3).code, "row_remap_pending");
  EXPECT_NE(r.gpu(3).hint.find("reset"), std::string::npos) << r.gpu(3).hint;
}

TEST_F(Checks, RowRemapFailureAndDcgmsLimitFail) {
  h200x1(backend);
  backend.healths[0].row_remap = gpuenv::validate::RowRemap{0, 3, false, true};
  EXPECT_EQ(run("row_remap").gpu(0).code, "row_remap_failure");
  backend.healths[0].row_remap = gpuenv::validate::RowRemap{0, 512, false, false};
  EXPECT_EQ(run("row_remap").gpu(0).code, "row_remap_limit");
  backend.healths[0].row_remap = gpuenv::validate::RowRemap{0, 511, false, false};
  EXPECT_EQ(run("row_remap").gpu(0).status, CheckStatus::pass);
}

TEST_F(Checks, RowRemapUnderMigIsSkippedWithTheReason) {
  a100_mig(backend);
  Ran r = run("row_remap");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::skip);
  EXPECT_NE(r.gpu(0).message.find("MIG"), std::string::npos);
}

TEST_F(Checks, RetiredPagesPendingWarnsAndDcgmsLimitFails) {
  l4x1(backend);
  EXPECT_EQ(run("retired_pages").gpu(0).status, CheckStatus::skip);  // Ampere and later report remapped rows instead
  backend.healths[0].retired_pages = gpuenv::validate::RetiredPages{2, 1, true};
  EXPECT_EQ(run("retired_pages").gpu(0).code, "retired_pages_pending");
  backend.healths[0].retired_pages = gpuenv::validate::RetiredPages{40, 23, false};
  Ran r = run("retired_pages");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(0).code, "retired_pages_limit");
  backend.healths[0].retired_pages = gpuenv::validate::RetiredPages{40, 22, false};
  EXPECT_EQ(run("retired_pages").gpu(0).status, CheckStatus::warn);  // 22 double-bit pages: above the soft limit of 15
}

TEST_F(Checks, PcieAtX8UnderLoadFails) {
  h100x8(backend);
  backend.load_healths[6].pcie_link = gpuenv::validate::PcieLink{5, 5, 8, 16};
  Ran r = run("pcie_link");
  EXPECT_EQ(r.gpu(6).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(6).code, "pcie_downtrained");
  EXPECT_NE(r.gpu(6).message.find("x8"), std::string::npos);
  EXPECT_EQ(r.gpu(0).status, CheckStatus::pass);
}

TEST_F(Checks, PcieLinkIsJudgedUnderLoadNotIdle) {
  h200x1(backend);  // idle reading is Gen1 (power saving), the loaded one Gen5
  EXPECT_EQ(run("pcie_link").gpu(0).status, CheckStatus::pass);
  backend.load_healths[0].pcie_link = gpuenv::validate::PcieLink{4, 5, 16, 16};
  Ran r = run("pcie_link");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::warn);
  EXPECT_EQ(r.gpu(0).code, "pcie_downtrained");
}

TEST_F(Checks, PcieReplaysWarnOnTotalAndOnRateUnderLoad) {
  h200x1(backend);
  backend.healths[0].pcie_replays = 500;
  backend.load_healths[0].pcie_replays = 500;
  Ran total = run("pcie_replays");
  EXPECT_EQ(total.gpu(0).status, CheckStatus::warn);
  EXPECT_EQ(total.gpu(0).code, "pcie_replays");
  backend.healths[0].pcie_replays = 10;
  backend.load_healths[0].pcie_replays = 10 + 40;  // 40 during the copy > DCGM's 31 per minute at Gen5 x16
  Ran rate = run("pcie_replays");
  EXPECT_EQ(rate.gpu(0).status, CheckStatus::warn);
  EXPECT_NE(rate.gpu(0).message.find("31 per minute"), std::string::npos) << rate.gpu(0).message;
  backend.load_healths[0].pcie_replays = 10 + 5;
  EXPECT_EQ(run("pcie_replays").gpu(0).status, CheckStatus::pass);
}

TEST_F(Checks, HardwareSlowdownUnderLoadFailsAndPowerCapIsNormal) {
  h100x8(backend);
  backend.load_healths[1].clock_event_reasons = gpuenv::validate::k_clock_event_hw_slowdown;
  backend.load_healths[2].clock_event_reasons = gpuenv::validate::k_clock_event_hw_power_brake;
  backend.load_healths[3].clock_event_reasons = gpuenv::validate::k_clock_event_sw_thermal;
  Ran r = run("clock_events");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::pass);  // software power cap only
  EXPECT_EQ(r.gpu(1).code, "clock_throttled");
  EXPECT_EQ(r.gpu(1).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(2).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(3).status, CheckStatus::warn);
}

// Health under load is read while the load runs, not only after it: a slowdown seen mid-load and gone by the end
// still fails, the peak temperature counts, and the link is judged by the best state it reached.
TEST_F(Checks, SlowdownSeenOnlyWhileTheLoadRunsStillFails) {
  h200x1(backend);
  gpuenv::validate::GpuHealth before = *backend.health(0), during = before, after = before;
  during.clock_event_reasons = gpuenv::validate::k_clock_event_hw_slowdown;
  during.temperature_c = 86;
  after.clock_event_reasons = 0x1;  // GPU idle
  after.temperature_c = 60;
  backend.load_health_sequences[0] = {before, during, after};
  backend.load_waits_for_health_reads = 2;  // the load ends only after a reading taken while it ran
  Ran clocks = run("clock_events");
  EXPECT_EQ(clocks.gpu(0).status, CheckStatus::fail) << clocks.gpu(0).message;
  EXPECT_EQ(clocks.gpu(0).code, "clock_throttled");
  Ran temperature = run("temperature");
  EXPECT_EQ(temperature.gpu(0).status, CheckStatus::warn) << "86 C mid-load is within 5 C of the 87 C slowdown: "
                                                     << temperature.gpu(0).message;
}

TEST_F(Checks, PcieLinkCountsTheBestStateReachedUnderLoad) {
  h200x1(backend);
  gpuenv::validate::GpuHealth idle = *backend.health(0), loaded = idle;
  idle.pcie_link = gpuenv::validate::PcieLink{1, 5, 16, 16};    // power saving before the load
  loaded.pcie_link = gpuenv::validate::PcieLink{5, 5, 16, 16};
  backend.load_health_sequences[0] = {idle, loaded, idle};
  backend.load_waits_for_health_reads = 2;
  EXPECT_EQ(run("pcie_link").gpu(0).status, CheckStatus::pass);
  gpuenv::validate::GpuHealth narrow = loaded;
  narrow.pcie_link = gpuenv::validate::PcieLink{5, 5, 8, 16};
  backend.load_health_sequences[0] = {narrow, narrow, narrow};
  EXPECT_EQ(run("pcie_link").gpu(0).code, "pcie_downtrained");
}

TEST(FoldHealth, KeepsPeaksUnionOfReasonsBestLinkAndLatestCounters) {
  gpuenv::validate::GpuHealth a, b;
  a.temperature_c = 80;
  a.power_w = 650;
  a.clock_event_reasons = gpuenv::validate::k_clock_event_hw_thermal;
  a.pcie_link = gpuenv::validate::PcieLink{5, 5, 8, 16};
  a.pcie_replays = 3;
  b.temperature_c = 70;
  b.power_w = 700;
  b.clock_event_reasons = gpuenv::validate::k_clock_event_sw_power_cap;
  b.pcie_link = gpuenv::validate::PcieLink{4, 5, 16, 16};
  b.pcie_replays = 9;
  gpuenv::validate::checks::fold_health(a, b);
  EXPECT_EQ(a.temperature_c, 80);
  EXPECT_EQ(a.power_w, 700);
  EXPECT_EQ(*a.clock_event_reasons,
            gpuenv::validate::k_clock_event_hw_thermal | gpuenv::validate::k_clock_event_sw_power_cap);
  EXPECT_EQ(a.pcie_link->current_gen, 5);
  EXPECT_EQ(a.pcie_link->current_width, 16);
  EXPECT_EQ(a.pcie_replays, 9u);
  gpuenv::validate::GpuHealth empty;
  gpuenv::validate::checks::fold_health(a, empty);
  EXPECT_EQ(a.temperature_c, 80) << "a reading without a field keeps the earlier value";
  EXPECT_EQ(a.pcie_replays, 9u);
}

TEST_F(Checks, TemperatureNearOrAtSlowdownUnderLoad) {
  h200x1(backend);
  backend.load_healths[0].temperature_c = 83;  // slowdown at 87: within 5 C
  EXPECT_EQ(run("temperature").gpu(0).status, CheckStatus::warn);
  backend.load_healths[0].temperature_c = 87;
  Ran hot = run("temperature");
  EXPECT_EQ(hot.gpu(0).status, CheckStatus::fail);
  EXPECT_EQ(hot.gpu(0).code, "temperature_high");
  backend.load_healths[0].temperature_c = 70;
  Ran ok = run("temperature");
  EXPECT_EQ(ok.gpu(0).status, CheckStatus::pass);
  bool has_power = false;
  for (const auto& m : ok.gpu(0).metrics) has_power = has_power || m.name == "power_w";
  EXPECT_TRUE(has_power);
}

// ---------------------------------------------------------------------------------------------------------------
// Kernel faults

TEST_F(Checks, ContextFailureFailsContextCreate) {
  h100x8(backend);
  backend.open_fails = {4};
  Ran r = run("context_create");
  EXPECT_EQ(r.gpu(4).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(4).code, "context_failed");
  EXPECT_EQ(r.gpu(3).status, CheckStatus::pass);
  EXPECT_EQ(run("hbm_bandwidth").gpu(4).code, "context_failed");
}

TEST_F(Checks, ConfidentialComputingIsJudgedAgainstTheLock) {
  h200x1(backend);
  struct Case {
    std::optional<std::string> asked;
    std::string state;
    std::optional<bool> ready;
    CheckStatus status;
    std::string code;
  };
  const std::vector<Case> cases = {
      {std::nullopt, "off", std::nullopt, CheckStatus::pass, ""},
      {std::nullopt, "on", true, CheckStatus::pass, ""},
      {std::nullopt, "on", false, CheckStatus::fail, "cc_not_ready"},
      {"required", "on", true, CheckStatus::pass, ""},
      {"required", "on", std::nullopt, CheckStatus::pass, ""},
      {"required", "on", false, CheckStatus::fail, "cc_not_ready"},
      {"required", "off", std::nullopt, CheckStatus::fail, "cc_mismatch"},
      {"required", "devtools", true, CheckStatus::fail, "cc_devtools"},
      {"required", "unknown", std::nullopt, CheckStatus::fail, "cc_unknown"},
      {"allowed", "on", true, CheckStatus::pass, ""},
      {"allowed", "off", std::nullopt, CheckStatus::pass, ""},
      {"off", "off", std::nullopt, CheckStatus::pass, ""},
      {"off", "unknown", std::nullopt, CheckStatus::pass, ""},
      {"off", "on", true, CheckStatus::warn, "cc_mismatch"},
      {"off", "devtools", true, CheckStatus::warn, "cc_mismatch"},
  };
  for (const auto& c : cases) {
    inputs.lock_confidential = c.asked;
    backend.driver_state.cc_state = c.state;
    backend.driver_state.cc_gpus_ready = c.ready;
    Ran r = run("cc_mode");
    const std::string what = c.asked.value_or("(no lock)") + " vs " + c.state;
    EXPECT_EQ(r.host().status, c.status) << what << ": " << r.host().message;
    EXPECT_EQ(r.host().code, c.code) << what;
  }
  backend.driver_state.loaded = false;
  EXPECT_TRUE(run("cc_mode").not_applicable.has_value());
}

// ---------------------------------------------------------------------------------------------------------------
// Sustained load (long level), on every GPU at once

TEST_F(Checks, SustainedGemmPassesOnEveryGpuWithVerifiedRounds) {
  h100x8(backend);
  inputs.level = Level::long_;
  Ran r = run("gemm_sustained");
  ASSERT_EQ(r.outcomes.size(), 8u);
  for (const auto& o : r.outcomes) {
    EXPECT_EQ(o.status, CheckStatus::pass) << o.message;
    EXPECT_NE(o.message.find("every result verified"), std::string::npos) << o.message;
    bool has_rounds = false;
    for (const auto& m : o.metrics) has_rounds = has_rounds || (m.name == "rounds" && m.value >= 4);
    EXPECT_TRUE(has_rounds);
  }
}

TEST_F(Checks, SustainedGemmWarnsWhenThroughputFallsAndFailsOnAWrongRound) {
  h200x1(backend);
  inputs.level = Level::long_;
  std::vector<Samples> rounds;
  for (int i = 0; i < 2000; ++i) rounds.push_back(samples_around(i < 500 ? 700 : 560, "TFLOPS"));
  backend.gemm_bf16_sequence[0] = rounds;
  Ran slow = run("gemm_sustained");
  EXPECT_EQ(slow.gpu(0).status, CheckStatus::warn) << slow.gpu(0).message;
  EXPECT_EQ(slow.gpu(0).code, "throughput_degraded");
  EXPECT_NE(slow.gpu(0).message.find("80%"), std::string::npos) << slow.gpu(0).message;

  backend.gemm_bf16_sequence.clear();
  backend.gemm_fails_at_call[0] = {
      7, gpuenv::make_error(gpuenv::ErrorKind::environment, "validate.data_mismatch", "bf16 GEMM gave a different result")};
  Ran wrong = run("gemm_sustained");
  EXPECT_EQ(wrong.gpu(0).status, CheckStatus::fail);
  EXPECT_EQ(wrong.gpu(0).code, "gemm_mismatch");
  EXPECT_NE(wrong.gpu(0).message.find("round 7"), std::string::npos) << wrong.gpu(0).message;
}

TEST_F(Checks, SustainedGemmNeverCallsUnverifiedRoundsVerified) {
  h200x1(backend);
  inputs.level = Level::long_;
  Samples unchecked = samples_around(700, "TFLOPS");
  unchecked.data_verified = false;
  backend.gemm_bf16_sequence[0] = {samples_around(700, "TFLOPS"), samples_around(700, "TFLOPS"), unchecked};
  Ran r = run("gemm_sustained");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(0).code, "unverified");
  EXPECT_NE(r.gpu(0).message.find("round 3"), std::string::npos) << r.gpu(0).message;
}

TEST_F(Checks, SustainedGemmFailsOnHardwareSlowdownSeenDuringTheLoad) {
  h200x1(backend);
  inputs.level = Level::long_;
  backend.load_healths[0].clock_event_reasons = gpuenv::validate::k_clock_event_hw_power_brake;
  Ran r = run("gemm_sustained");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(0).code, "clock_throttled");
  EXPECT_NE(r.gpu(0).message.find("power brake"), std::string::npos) << r.gpu(0).message;
}

// A check that runs a built-in check under a short deadline, so the watchdog's handling of a hung GPU is tested on
// real check code.
class Hurried final : public Check {
 public:
  Hurried(std::unique_ptr<Check> inner, std::chrono::milliseconds limit) : m_inner(std::move(inner)), m_limit(limit) {}
  [[nodiscard]] std::string key() const override { return m_inner->key(); }
  [[nodiscard]] std::string category() const override { return m_inner->category(); }
  [[nodiscard]] std::string description() const override { return m_inner->description(); }
  [[nodiscard]] bool runs_at(Level level) const override { return m_inner->runs_at(level); }
  [[nodiscard]] std::chrono::milliseconds deadline(Level, std::size_t) const override { return m_limit; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return m_inner->not_applicable(c);
  }
  std::vector<GpuOutcome> run(CheckContext& c) override { return m_inner->run(c); }

 private:
  std::unique_ptr<Check> m_inner;
  std::chrono::milliseconds m_limit;
};

TEST(ParallelChecks, OneHungGpuFailsAloneAndTheOthersKeepTheirVerdicts) {
  auto owner = std::make_unique<FakeGpuBackend>();  // outlives the abandoned thread until the end of the test
  FakeGpuBackend& backend = *owner;
  h100x8(backend);
  backend.hang_in = {"memtest"};
  backend.hang_only_on = {3};
  ThresholdTable table = thresholds();
  CheckInputs inputs;
  inputs.thresholds = &table;
  std::vector<std::unique_ptr<Check>> list;
  list.push_back(std::make_unique<Hurried>(check("memtest"), std::chrono::milliseconds(1500)));
  list.push_back(check("compute_correctness"));
  auto report = gpuenv::validate::run_validation(backend, inputs, std::move(list), {});
  ASSERT_TRUE(report.ok()) << report.error().to_string();
  const auto& memtest = report->checks[0];
  ASSERT_EQ(memtest.results.size(), 8u);
  for (const auto& o : memtest.results) {
    if (o.gpu == 3) {
      EXPECT_EQ(o.status, CheckStatus::fail);
      EXPECT_EQ(o.code, "hang");
    } else {
      EXPECT_EQ(o.status, CheckStatus::pass) << "GPU " << o.gpu << ": " << o.message;
    }
  }
  const auto& compute = report->checks[1];
  for (const auto& o : compute.results) {
    if (o.gpu == 3) {
      EXPECT_EQ(o.status, CheckStatus::skip);
      EXPECT_NE(o.message.find("hung in memtest"), std::string::npos) << o.message;
    } else {
      EXPECT_EQ(o.status, CheckStatus::pass) << "GPU " << o.gpu;
    }
  }
}

TEST_F(Checks, ComputeMismatchFails) {
  h200x1(backend);
  backend.compute_mismatch_counts[0] = 3;
  Ran r = run("compute_correctness");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(0).code, "compute_mismatch");
}

TEST_F(Checks, MemtestBitFlipFailsWithOffsetExpectedAndActual) {
  h100x8(backend);
  auto& m = backend.memtests[7];
  m.errors = 1;
  m.first_error_offset = 0x12345678;
  m.expected = 0xffffffffffffffffULL;
  m.actual = 0xfffffffffffffffeULL;
  Ran r = run("memtest");
  EXPECT_EQ(r.gpu(7).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(7).code, "memtest_error");
  EXPECT_NE(r.gpu(7).message.find("0x0000000012345678"), std::string::npos) << r.gpu(7).message;
  EXPECT_NE(r.gpu(7).message.find("expected 0xffffffffffffffff"), std::string::npos);
  EXPECT_NE(r.gpu(7).message.find("read 0xfffffffffffffffe"), std::string::npos);
  EXPECT_EQ(r.gpu(0).status, CheckStatus::pass);
}

TEST_F(Checks, MemtestStoppedByItsDeadlineWarnsOnlyAtLong) {
  h200x1(backend);
  inputs.level = Level::quick;
  EXPECT_EQ(run("memtest").gpu(0).status, CheckStatus::pass);
  inputs.level = Level::long_;
  Ran r = run("memtest");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::warn);
  EXPECT_EQ(r.gpu(0).code, "memtest_truncated");
}

TEST_F(Checks, MemtestThatTestedNothingIsNotAPass) {
  h200x1(backend);
  backend.memtests[0].bytes_tested = 0;
  EXPECT_EQ(run("memtest").gpu(0).code, "unverified");
}

// Records what the checks ask the session for, passing everything else to the fake.
class RecordingBackend final : public gpuenv::validate::GpuBackend {
 public:
  explicit RecordingBackend(FakeGpuBackend& inner) : m_inner(inner) {}
  std::vector<gpuenv::validate::MemtestRequest> memtests;
  [[nodiscard]] std::string name() const override { return m_inner.name(); }
  gpuenv::Result<gpuenv::validate::DriverState> driver() override { return m_inner.driver(); }
  gpuenv::Result<std::vector<GpuInfo>> gpus() override { return m_inner.gpus(); }
  gpuenv::Result<GpuHealth> health(int gpu) override { return m_inner.health(gpu); }
  gpuenv::Result<std::unique_ptr<gpuenv::validate::GpuSession>> open(int gpu) override;
  gpuenv::Result<std::optional<Samples>> p2p_bandwidth(int s, int d, int n) override { return m_inner.p2p_bandwidth(s, d, n); }
  gpuenv::Result<std::optional<Samples>> nccl_allreduce(const std::vector<int>& g, int n) override {
    return m_inner.nccl_allreduce(g, n);
  }

 private:
  FakeGpuBackend& m_inner;
};

class RecordingSession final : public gpuenv::validate::GpuSession {
 public:
  RecordingSession(std::unique_ptr<gpuenv::validate::GpuSession> inner, RecordingBackend& owner)
      : m_inner(std::move(inner)), m_owner(owner) {}
  gpuenv::Result<std::uint64_t> compute_mismatches() override { return m_inner->compute_mismatches(); }
  gpuenv::Result<gpuenv::validate::MemtestResult> memtest(const gpuenv::validate::MemtestRequest& r) override {
    m_owner.memtests.push_back(r);
    return m_inner->memtest(r);
  }
  gpuenv::Result<gpuenv::validate::ConsistencyResult> gemm_consistency(int n) override { return m_inner->gemm_consistency(n); }
  gpuenv::Result<Samples> hbm_bandwidth(int n) override { return m_inner->hbm_bandwidth(n); }
  gpuenv::Result<Samples> copy_bandwidth(bool to_device, int n) override { return m_inner->copy_bandwidth(to_device, n); }
  gpuenv::Result<std::optional<Samples>> gemm_tflops(const std::string& d, int n) override { return m_inner->gemm_tflops(d, n); }
  gpuenv::Result<GpuHealth> health() override { return m_inner->health(); }

 private:
  std::unique_ptr<gpuenv::validate::GpuSession> m_inner;
  RecordingBackend& m_owner;
};

gpuenv::Result<std::unique_ptr<gpuenv::validate::GpuSession>> RecordingBackend::open(int gpu) {
  auto inner = m_inner.open(gpu);
  if (!inner) return std::move(inner).error();
  return std::unique_ptr<gpuenv::validate::GpuSession>(std::make_unique<RecordingSession>(std::move(*inner), *this));
}

TEST(MemtestLevels, SizeAndTimeFollowTheLevel) {
  FakeGpuBackend fake;
  h200x1(fake);
  RecordingBackend backend(fake);
  const auto state = *backend.driver();
  const auto gpus = *backend.gpus();
  auto memtest = check("memtest");
  for (auto [level, fraction, ms] : {std::tuple{Level::quick, 0.25, 3000}, std::tuple{Level::standard, 0.5, 30000},
                                     std::tuple{Level::long_, 0.9, 600000}}) {
    CheckInputs in;
    in.level = level;
    CheckContext context{backend, in, state, gpus, std::chrono::steady_clock::now() + std::chrono::seconds(60)};
    backend.memtests.clear();
    memtest->run(context);
    ASSERT_EQ(backend.memtests.size(), 1u);
    EXPECT_DOUBLE_EQ(backend.memtests[0].fraction_of_free, fraction);
    EXPECT_EQ(backend.memtests[0].deadline_ms, ms);
  }
}

TEST_F(Checks, GemmMismatchFails) {
  h100x8(backend);
  backend.gemm_consistencies[2].result_digests = {0xabcdef, 0xabcdef, 0xabcdee};
  Ran r = run("gemm_consistency");
  EXPECT_EQ(r.gpu(2).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(2).code, "gemm_mismatch");
  EXPECT_NE(r.gpu(2).message.find("1 of 3"), std::string::npos) << r.gpu(2).message;
  EXPECT_EQ(r.gpu(1).status, CheckStatus::pass);
}

TEST_F(Checks, GemmResultsThatAgreeButDifferFromTheReferenceFail) {
  h200x1(backend);
  backend.gemm_consistencies[0] = {{7, 7, 7}, 8, true, "cublasLt"};
  EXPECT_EQ(run("gemm_consistency").gpu(0).code, "gemm_mismatch");
  backend.gemm_consistencies[0] = {{7, 7, 7}, 0, false, "cublasLt"};
  EXPECT_EQ(run("gemm_consistency").gpu(0).status, CheckStatus::pass);
}

// ---------------------------------------------------------------------------------------------------------------
// Throughput faults

TEST_F(Checks, LowHbmBandwidthFails) {
  h100x8(backend);
  backend.hbm[3] = samples_around(2000, "GB/s");  // 67% of 3000, below 75%
  Ran r = run("hbm_bandwidth");
  EXPECT_EQ(r.gpu(3).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(3).code, "bandwidth_low");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::pass);
}

TEST_F(Checks, GpuWellBelowItsPeersFailsTheNodeRule) {
  h100x8(backend);
  backend.hbm[6] = samples_around(2600, "GB/s");  // above 75% of the reference, below 90% of the node's mean
  Ran r = run("hbm_bandwidth");
  EXPECT_EQ(r.gpu(6).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(6).code, "node_outlier");
  EXPECT_EQ(r.gpu(5).status, CheckStatus::pass);
}

TEST_F(Checks, NodeRuleAppliesWithoutAReference) {
  h100x8(backend);
  ThresholdTable empty;
  inputs.thresholds = &empty;
  backend.hbm[1] = samples_around(1000, "GB/s");
  Ran r = run("hbm_bandwidth");
  EXPECT_EQ(r.gpu(1).code, "node_outlier");
  EXPECT_EQ(r.gpu(0).code, "no_threshold");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::measured);
}

TEST_F(Checks, WithConfidentialComputingHostCopiesAreJudgedAgainstTheCcFigureNotTheModelsOwn) {
  h200x1(backend);
  backend.driver_state.cc_state = "on";
  backend.h2d[0] = samples_around(5.0, "GB/s");  // a healthy CC copy: a tenth of the H200's non-CC 55 GB/s
  Ran without = run("h2d_bandwidth");
  EXPECT_EQ(without.gpu(0).status, CheckStatus::measured) << "no CC figure in the table: measured, never failed against 55 GB/s";
  table.derived.host_device_confidential = gpuenv::validate::Reference{4.0, "GB/s", "test CC figure", ""};
  Ran healthy = run("h2d_bandwidth");
  EXPECT_EQ(healthy.gpu(0).status, CheckStatus::pass) << healthy.gpu(0).message;
  EXPECT_NE(healthy.gpu(0).message.find("bounce buffers"), std::string::npos) << healthy.gpu(0).message;
  backend.d2h[0] = samples_around(2.0, "GB/s");
  EXPECT_EQ(run("d2h_bandwidth").gpu(0).status, CheckStatus::fail);
}

TEST_F(Checks, TooFewOrUnverifiedSamplesAreNeverAPass) {
  h200x1(backend);
  backend.hbm[0].values = {4200, 4200};
  EXPECT_EQ(run("hbm_bandwidth").gpu(0).code, "unverified");
  backend.h2d[0].data_verified = false;
  EXPECT_EQ(run("h2d_bandwidth").gpu(0).code, "unverified");
}

TEST_F(Checks, TypesLeftUnmeasuredByAGemmLibraryThatCouldNotStartAreNotBlamedOnTheGpu) {
  h200x1(backend);
  backend.gemm.erase({0, "fp64"});
  backend.gemm_library_notes[0] = "libcublasLt.so.13: cublasLtCreate failed with CUBLAS_STATUS_NOT_INITIALIZED (1)";
  Ran r = run("gemm_tflops");
  EXPECT_EQ(r.gpu(0).message.find("not supported by this GPU"), std::string::npos) << r.gpu(0).message;
  EXPECT_NE(r.gpu(0).message.find("not measured: fp64 (GEMM libraries: libcublasLt.so.13: cublasLtCreate failed"),
            std::string::npos)
      << r.gpu(0).message;
}

TEST_F(Checks, LowGemmTypeFailsWithTflopsLowAndUnsupportedTypesAreNoted) {
  h200x1(backend);
  backend.gemm[{0, "bf16"}] = samples_around(300, "TFLOPS");
  backend.gemm.erase({0, "fp64"});
  Ran r = run("gemm_tflops");
  EXPECT_EQ(r.gpu(0).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(0).code, "tflops_low");
  EXPECT_NE(r.gpu(0).message.find("not supported by this GPU: fp64"), std::string::npos) << r.gpu(0).message;
  bool bf16_metric = false;
  for (const auto& m : r.gpu(0).metrics) bf16_metric = bf16_metric || m.name == "bf16.median_tflops";
  EXPECT_TRUE(bf16_metric);
}

TEST_F(Checks, GpuWithoutAnyGemmTypeIsSkippedNotPassed) {
  h200x1(backend);
  backend.gemm.clear();
  EXPECT_EQ(run("gemm_tflops").gpu(0).status, CheckStatus::skip);
}

TEST_F(Checks, PeerBandwidthIsJudgedPerPair) {
  h100x8(backend);
  backend.p2p[{2, 5}] = samples_around(150, "GB/s");
  Ran r = run("p2p_bandwidth");
  EXPECT_EQ(r.gpu(2).status, CheckStatus::fail);
  EXPECT_EQ(r.gpu(2).code, "bandwidth_low");
  EXPECT_NE(r.gpu(2).message.find("to GPU 5"), std::string::npos);
  EXPECT_EQ(r.gpu(5).status, CheckStatus::pass);
}

TEST_F(Checks, NoPeerAccessAnywhereIsSkipped) {
  h100x8(backend);
  backend.p2p.clear();
  EXPECT_EQ(run("p2p_bandwidth").gpu(0).status, CheckStatus::skip);
}

TEST_F(Checks, NcclAbsentIsSkippedAndPresentIsJudged) {
  h100x8(backend);
  EXPECT_EQ(run("nccl_allreduce").host().status, CheckStatus::pass);
  backend.nccl = samples_around(100, "GB/s");
  EXPECT_EQ(run("nccl_allreduce").host().code, "bandwidth_low");
  backend.nccl.reset();
  EXPECT_EQ(run("nccl_allreduce").host().status, CheckStatus::skip);
}

TEST_F(Checks, ACheckPastItsDeadlineStopsAndFailsTheRemainingGpus) {
  h100x8(backend);
  Ran r = run_check("ecc_errors", backend, inputs, -std::chrono::hours(1));
  ASSERT_EQ(r.outcomes.size(), 8u);
  EXPECT_EQ(r.gpu(0).code, "hang");
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// nccl_allreduce --multi-node (CheckInputs::multi_node): each rank judged against its NICs' rate, or MEASURED

namespace {

gpuenv::validate::multinode::RankReport multi_node_rank(int rank, double gbs, int active_400g_ports) {
  gpuenv::validate::multinode::RankReport r;
  r.rank = rank;
  r.host = "node0" + std::to_string(rank + 1);
  r.gpus = 8;
  Samples s;
  s.values = {gbs, gbs, gbs};
  s.unit = "GB/s";
  s.engine = "nccl";
  s.data_verified = true;
  r.samples = s;
  for (int p = 0; p < active_400g_ports; ++p)
    r.nics.ports.push_back({"mlx5_" + std::to_string(p), "1", 400, "400 Gb/sec (4X NDR)", true, "InfiniBand"});
  return r;
}

TEST_F(Checks, MultiNodeAllReduceIsJudgedPerRankAgainstTheNics) {
  h100x8(backend);
  table.derived.rdma_nic = gpuenv::validate::SourcedFraction{0.8, "test"};
  std::vector<std::string> seen;
  inputs.multi_node = [&seen](const std::vector<std::string>& bus_ids, int samples) {
    seen = bus_ids;
    EXPECT_EQ(samples, 5);
    return gpuenv::Result<gpuenv::validate::multinode::MultiNodeResult>(
        gpuenv::validate::multinode::MultiNodeResult{0, 2, {multi_node_rank(0, 375, 8), multi_node_rank(1, 330, 8)}});
  };
  auto ran = run("nccl_allreduce");
  ASSERT_FALSE(ran.not_applicable);
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_EQ(ran.host().status, CheckStatus::pass) << ran.host().message;
  EXPECT_NE(ran.host().message.find("rank 1 (node02)"), std::string::npos);
  EXPECT_NE(ran.host().message.find("320.0"), std::string::npos) << ran.host().message;  // 0.8 x 8 x 400 Gb/s

  // Rank 1 at 300 GB/s: below the line of 0.8 x 400 GB/s itself (fail_fraction does not lower it).
  inputs.multi_node = [](const std::vector<std::string>&, int) {
    return gpuenv::Result<gpuenv::validate::multinode::MultiNodeResult>(
        gpuenv::validate::multinode::MultiNodeResult{0, 2, {multi_node_rank(0, 375, 8), multi_node_rank(1, 300, 8)}});
  };
  auto slow = run("nccl_allreduce");
  EXPECT_EQ(slow.host().status, CheckStatus::fail);
  EXPECT_EQ(slow.host().code, "bandwidth_low");

  // One GPU a node drives one of its 8 NICs: 0.8 x 400 Gb/s = 40 GB/s.
  inputs.multi_node = [](const std::vector<std::string>&, int) {
    auto one = multi_node_rank(0, 45, 8);
    one.gpus = 1;
    auto other = multi_node_rank(1, 35, 8);
    other.gpus = 1;
    return gpuenv::Result<gpuenv::validate::multinode::MultiNodeResult>(
        gpuenv::validate::multinode::MultiNodeResult{0, 2, {one, other}});
  };
  auto single = run("nccl_allreduce");
  EXPECT_EQ(single.host().status, CheckStatus::fail) << single.host().message;  // rank 1's 35 < 40
  EXPECT_NE(single.host().message.find("40.0"), std::string::npos) << single.host().message;

  // No RDMA port: measured, never a pass.
  inputs.multi_node = [](const std::vector<std::string>&, int) {
    return gpuenv::Result<gpuenv::validate::multinode::MultiNodeResult>(
        gpuenv::validate::multinode::MultiNodeResult{1, 2, {multi_node_rank(1, 5, 0)}});
  };
  auto measured = run("nccl_allreduce");
  EXPECT_EQ(measured.host().status, CheckStatus::measured);
  EXPECT_NE(measured.host().message.find("this is rank 1"), std::string::npos);
}

TEST_F(Checks, MultiNodeRankWithAPortDownWarnsNamingIt) {
  h100x8(backend);
  table.derived.rdma_nic = gpuenv::validate::SourcedFraction{0.8, "test"};
  // Rank 1: 7 of its 8 ports active, 8 GPUs: its line is 0.8 x 7 x 50 = 280 GB/s, which it passes, yet a GPU has
  // no NIC of its own.
  inputs.multi_node = [](const std::vector<std::string>&, int) {
    auto down = multi_node_rank(1, 300, 8);
    down.nics.ports[3].active = false;
    return gpuenv::Result<gpuenv::validate::multinode::MultiNodeResult>(
        gpuenv::validate::multinode::MultiNodeResult{0, 2, {multi_node_rank(0, 375, 8), down}});
  };
  auto ran = run("nccl_allreduce");
  EXPECT_EQ(ran.host().status, CheckStatus::warn) << ran.host().message;
  EXPECT_EQ(ran.host().code, "rdma_port_down");
  EXPECT_NE(gpuenv::validate::find_error_code("rdma_port_down"), nullptr);  // catalogued, with its hint
  EXPECT_NE(ran.host().message.find("mlx5_3/1"), std::string::npos) << ran.host().message;
  EXPECT_NE(ran.host().message.find("280.0"), std::string::npos) << ran.host().message;

  // A spare port down while every GPU still has an active NIC of its own: no warning.
  inputs.multi_node = [](const std::vector<std::string>&, int) {
    auto spare = multi_node_rank(1, 330, 9);
    spare.nics.ports[8].active = false;
    return gpuenv::Result<gpuenv::validate::multinode::MultiNodeResult>(
        gpuenv::validate::multinode::MultiNodeResult{0, 2, {multi_node_rank(0, 375, 8), spare}});
  };
  EXPECT_EQ(run("nccl_allreduce").host().status, CheckStatus::pass);
}

TEST_F(Checks, MultiNodeRankWithoutAMeasurementFails) {
  h100x8(backend);
  table.derived.rdma_nic = gpuenv::validate::SourcedFraction{0.8, "test"};
  inputs.multi_node = [](const std::vector<std::string>&, int) {
    auto empty = multi_node_rank(1, 375, 8);
    empty.samples.reset();
    return gpuenv::Result<gpuenv::validate::multinode::MultiNodeResult>(
        gpuenv::validate::multinode::MultiNodeResult{0, 2, {multi_node_rank(0, 375, 8), empty}});
  };
  auto ran = run("nccl_allreduce");
  EXPECT_EQ(ran.host().status, CheckStatus::fail) << ran.host().message;
  EXPECT_EQ(ran.host().code, "rendezvous_failed");
  EXPECT_NE(ran.host().message.find("rank 1 (node02): no measurement"), std::string::npos) << ran.host().message;
  // Not even with every rank empty: never a pass, never a skip.
  inputs.multi_node = [](const std::vector<std::string>&, int) {
    auto empty = multi_node_rank(0, 1, 8);
    empty.samples.reset();
    empty.error_id = "multinode.peer_lost";
    return gpuenv::Result<gpuenv::validate::multinode::MultiNodeResult>(
        gpuenv::validate::multinode::MultiNodeResult{0, 1, {empty}});
  };
  auto none = run("nccl_allreduce");
  EXPECT_EQ(none.host().status, CheckStatus::fail);
  EXPECT_EQ(none.host().code, "peer_lost");
}

TEST_F(Checks, MultiNodeFailuresNameTheirCode) {
  l4x1(backend);  // one GPU is enough across nodes
  for (const auto& [id, code] : std::vector<std::pair<std::string, std::string>>{
           {"multinode.peer_missing", "peer_missing"}, {"multinode.peer_lost", "peer_lost"},
           {"multinode.refused", "rendezvous_failed"}, {"cuda.timeout", "backend_error"}}) {
    inputs.multi_node = [id = id](const std::vector<std::string>&, int) {
      return gpuenv::Result<gpuenv::validate::multinode::MultiNodeResult>(
          gpuenv::make_error(gpuenv::ErrorKind::environment, id, "rank 1 (node02) is gone"));
    };
    auto ran = run("nccl_allreduce");
    ASSERT_FALSE(ran.not_applicable) << *ran.not_applicable;
    EXPECT_EQ(ran.host().status, CheckStatus::fail) << id;
    EXPECT_EQ(ran.host().code, code) << id;
    EXPECT_NE(ran.host().message.find("rank 1 (node02)"), std::string::npos);
  }
  inputs.multi_node = [](const std::vector<std::string>&, int) {
    return gpuenv::Result<gpuenv::validate::multinode::MultiNodeResult>(
        gpuenv::make_error(gpuenv::ErrorKind::environment, "nccl.missing", "no NCCL"));
  };
  EXPECT_EQ(run("nccl_allreduce").host().status, CheckStatus::skip);
}

}  // namespace
