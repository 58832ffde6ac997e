// Kernel checks: a context can be created, validation kernels compute what the host reference computes, memory
// holds what is written, and repeated GEMMs agree bit for bit (as gpu-burn checks). cudnn_smoke needs the image's
// cuDNN and is added by the CLI when --image is given.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <set>
#include <chrono>

#include "base/text.hpp"
#include "validate/checks/check_support.hpp"
#include "validate/checks/judge.hpp"

namespace gpuenv::validate::checks {
namespace {

// Context creation includes the real adapter's first cuInit in a child process on a cold driver.
constexpr Budget k_context{500, 4000};
constexpr Budget k_compute{300, 1200};

std::string hex(std::uint64_t value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "0x%016" PRIx64, value);
  return buffer;
}


class ContextCreate final : public SpecCheck {
 public:
  ContextCreate()
      : SpecCheck({"context_create", "kernels", "A CUDA context can be created on each GPU", k_context, k_context,
                   k_context, /*parallel=*/true}) {}
  [[nodiscard]] MigScope mig_scope() const override { return MigScope::instance; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    return for_each_gpu_parallel(context, [&](const GpuInfo& gpu) {
      const auto start = std::chrono::steady_clock::now();
      auto session = open_session(context.backend, gpu);
      const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (!session) return open_failed(gpu, session.error());
      GpuOutcome out = outcome(gpu.index, CheckStatus::pass, "context created in " + fixed(ms, 0) + " ms");
      out.metrics = {{"open_ms", ms, "ms"}};
      return out;
    });
  }
};

class ComputeCorrectness final : public SpecCheck {
 public:
  ComputeCorrectness()
      : SpecCheck({"compute_correctness", "kernels",
                   "Integer and floating-point validation kernels match the host reference", k_compute, k_compute,
                   k_compute, /*parallel=*/true}) {}
  [[nodiscard]] MigScope mig_scope() const override { return MigScope::instance; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    return for_each_gpu_parallel(context, [&](const GpuInfo& gpu) {
      auto session = open_session(context.backend, gpu);
      if (!session) return open_failed(gpu, session.error());
      auto mismatches = (*session)->compute_mismatches();
      if (!mismatches) return failed(gpu.index, "running the validation kernels", mismatches.error());
      GpuOutcome out =
          *mismatches > 0
              ? outcome(gpu.index, CheckStatus::fail,
                        std::to_string(*mismatches) + " result(s) differ from the host reference", "compute_mismatch")
              : outcome(gpu.index, CheckStatus::pass, "every result matches the host reference");
      out.metrics = {{"mismatches", static_cast<double>(*mismatches), "count"}};
      return out;
    });
  }
};

// The memory test's size and time per level. GPUs are tested at once, so each gets the level's whole time.
struct MemtestPlan {
  double fraction_of_free;
  int budget_ms;    // the test's own time limit on each GPU
  int overhead_ms;  // allocation, context, teardown
};

MemtestPlan memtest_plan(Level level) {
  switch (level) {
    case Level::quick: return {0.25, 3000, 400};  // 400: 100 ms of quick's 15 s went to cdi_spec
    case Level::standard: return {0.5, 30000, 5000};
    case Level::long_: return {0.9, 600000, 30000};
  }
  return {0.5, 30000, 5000};
}

class Memtest final : public SpecCheck {
 public:
  Memtest()
      : SpecCheck({"memtest", "kernels",
                   "Walking ones and zeros, own address, moving inversions and seeded random patterns read back as "
                   "written (25% of free memory for 3 s at quick, 50% for 30 s at standard, 90% for 10 min at long)",
                   Budget{500, 3500}, Budget{500, 35000}, Budget{500, 630000}, /*parallel=*/true}) {}
  // The test's time plus its overhead, and a quarter of the overhead again for each further GPU (host work).
  [[nodiscard]] std::chrono::milliseconds deadline(Level level, std::size_t gpu_count) const override {
    const std::size_t n = std::max<std::size_t>(gpu_count, 1);
    const MemtestPlan plan = memtest_plan(level);
    const auto slack = static_cast<long long>(plan.overhead_ms) * static_cast<long long>(n - 1) / 4;
    return std::chrono::milliseconds(500 + plan.budget_ms + plan.overhead_ms + slack);
  }
  [[nodiscard]] MigScope mig_scope() const override { return MigScope::instance; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const Level level = context.inputs.level;
    const MemtestPlan plan = memtest_plan(level);
    MemtestRequest request;
    request.fraction_of_free = plan.fraction_of_free;
    request.deadline_ms = plan.budget_ms;
    return for_each_gpu_parallel(context, [&](const GpuInfo& gpu) {
      if (auto other = tested_from_sibling(context, gpu)) return *other;
      auto session = open_session(context.backend, gpu);
      if (!session) return open_failed(gpu, session.error());
      MemtestRequest r = request;
      // Fixed per GPU (and MIG device): a rerun repeats the same test.
      r.seed = 0x5eedULL + static_cast<std::uint64_t>(gpu.index) * 64 + (gpu.mig ? static_cast<std::uint64_t>(gpu.mig->index) + 1 : 0);
      auto result = (*session)->memtest(r);
      if (!result) return failed(gpu.index, "running the memory test", result.error());
      return judge(gpu, *result, level, r);
    });
  }

 private:
  // The memory belongs to the GPU instance: its compute instances all see (and would each allocate a fraction of)
  // the same free memory at once, so it is tested from the first of them here and the others SKIP naming it.
  static std::optional<GpuOutcome> tested_from_sibling(const CheckContext& context, const GpuInfo& gpu) {
    const GpuInfo& first = gpu_instance_first(context, gpu);
    if (!gpu.mig || !first.mig || first.mig->uuid == gpu.mig->uuid) return std::nullopt;
    return skipped(gpu.index,
                   "GPU instance " + std::to_string(gpu.mig->gpu_instance_id) + "'s memory is tested once, from " +
                       gpu_label(first) + ": its " + std::to_string(gpu_instance_sharers(context, gpu)) +
                       " compute instances share that memory, so testing it from each at once would split it");
  }

  static GpuOutcome judge(const GpuInfo& gpu, const MemtestResult& m, Level level, const MemtestRequest& request) {
    const double gib = static_cast<double>(m.bytes_tested) / (1024.0 * 1024.0 * 1024.0);
    const std::string patterns = m.patterns.empty() ? std::string("none listed") : join(m.patterns, ", ");
    std::vector<Metric> metrics{{"bytes_tested", static_cast<double>(m.bytes_tested), "B"},
                                {"errors", static_cast<double>(m.errors), "count"}};
    if (gpu.memory_total_bytes > 0)
      metrics.push_back({"fraction_of_memory",
                         static_cast<double>(m.bytes_tested) / static_cast<double>(gpu.memory_total_bytes), "ratio"});
    GpuOutcome out;
    if (m.errors > 0) {
      out = outcome(gpu.index, CheckStatus::fail,
                    std::to_string(m.errors) + " bad word(s) in " + fixed(gib, 1) + " GiB; first at offset " +
                        hex(m.first_error_offset) + ": expected " + hex(m.expected) + ", read " + hex(m.actual) +
                        " (patterns: " + patterns + ")",
                    "memtest_error");
    } else if (m.bytes_tested == 0) {
      out = outcome(gpu.index, CheckStatus::fail, "the memory test tested no memory", "unverified");
    } else {
      std::string message = fixed(gib, 1) + " GiB read back as written (patterns: " + patterns + ")";
      if (m.truncated_by_deadline && level == Level::long_) {
        out = outcome(gpu.index, CheckStatus::warn,
                      message + "; stopped at its " + std::to_string(request.deadline_ms / 1000) +
                          " s deadline before covering " + fixed(request.fraction_of_free * 100, 0) + "% of free memory",
                      "memtest_truncated");
      } else {
        if (m.truncated_by_deadline)
          message += "; time-bounded at " + std::to_string(request.deadline_ms) + " ms, as this level intends";
        out = outcome(gpu.index, CheckStatus::pass, message);
      }
    }
    out.metrics = std::move(metrics);
    return out;
  }
};

int gemm_repetitions(Level level) { return level == Level::long_ ? 100 : 10; }

class GemmConsistency final : public SpecCheck {
 public:
  GemmConsistency()
      : SpecCheck({"gemm_consistency", "kernels",
                   "Repeated GEMMs on the same inputs give bit-identical results (and match the host reference when "
                   "one is computed)",
                   std::nullopt, Budget{500, 10000}, Budget{500, 60000}, /*parallel=*/true}) {}
  [[nodiscard]] MigScope mig_scope() const override { return MigScope::instance; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const int repetitions = gemm_repetitions(context.inputs.level);
    return for_each_gpu_parallel(context, [&](const GpuInfo& gpu) {
      auto session = open_session(context.backend, gpu);
      if (!session) return open_failed(gpu, session.error());
      auto result = (*session)->gemm_consistency(repetitions);
      if (!result) return failed(gpu.index, "running repeated GEMMs", result.error());
      return judge(gpu, *result);
    });
  }

 private:
  static GpuOutcome judge(const GpuInfo& gpu, const ConsistencyResult& r) {
    const auto& d = r.result_digests;
    const std::string engine = engine_text(r.engine, r.library, "unknown engine", r.passed_over);
    if (d.empty()) return outcome(gpu.index, CheckStatus::fail, "no GEMM result was returned (" + engine + ")", "unverified");
    const std::set<std::uint64_t> distinct(d.begin(), d.end());
    const std::size_t differing =
        static_cast<std::size_t>(std::count_if(d.begin(), d.end(), [&](std::uint64_t x) { return x != d.front(); }));
    std::vector<Metric> metrics{{"repetitions", static_cast<double>(d.size()), "count"},
                                {"distinct_results", static_cast<double>(distinct.size()), "count"}};
    GpuOutcome out;
    if (distinct.size() > 1) {
      out = outcome(gpu.index, CheckStatus::fail,
                    std::to_string(differing) + " of " + std::to_string(d.size()) +
                        " repetitions differ from the first; " + std::to_string(distinct.size()) +
                        " distinct results (" + engine + ")",
                    "gemm_mismatch");
    } else if (r.has_reference && d.front() != r.reference_digest) {
      out = outcome(gpu.index, CheckStatus::fail,
                    "all " + std::to_string(d.size()) + " repetitions agree, but differ from the host reference: " +
                        hex(d.front()) + " vs " + hex(r.reference_digest) + " (" + engine + ")",
                    "gemm_mismatch");
    } else {
      out = outcome(gpu.index, CheckStatus::pass,
                    std::to_string(d.size()) + " repetitions bit-identical" +
                        (r.has_reference ? std::string(" and equal to the host reference") : std::string()) + " (" +
                        engine + ")");
    }
    out.metrics = std::move(metrics);
    return out;
  }
};

// gpu-burn's test at the long level, on every GPU at once: GEMMs back to back for k_sustained_ms, each round's
// result checked by the adapter (against the exact host reference for the round's first sample, and every further
// sample against the first), health read all along by a HealthMonitor, and the throughput of the last rounds compared
// with the first: a GPU that heats up, throttles or computes wrongly after minutes of full load shows it here.
constexpr int k_sustained_ms = 60000;
constexpr int k_sustained_samples_per_round = 5;  // about half a second of GEMMs per round on a current GPU
constexpr int k_sustained_max_rounds = 1000;      // bounds the loop when rounds are instant (replay)
// The last quarter of the rounds below this fraction of the first quarter: throughput fell under sustained load.
constexpr double k_sustained_min_ratio = 0.9;
constexpr std::chrono::milliseconds k_sustained_monitor_period{250};

class GemmSustained final : public SpecCheck {
 public:
  GemmSustained()
      : SpecCheck({"gemm_sustained", "kernels",
                   "One minute of back-to-back bf16 GEMMs on every GPU at once, results verified every round: no "
                   "wrong result, no hardware or thermal slowdown, temperature below slowdown, throughput steady",
                   std::nullopt, std::nullopt, Budget{10000, k_sustained_ms + 10000}, /*parallel=*/true}) {}
  [[nodiscard]] MigScope mig_scope() const override { return MigScope::instance; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    return for_each_gpu_parallel(context, [&](const GpuInfo& gpu) { return burn(context, gpu); });
  }

 private:
  static GpuOutcome burn(const CheckContext& context, const GpuInfo& gpu) {
    auto session = open_session(context.backend, gpu);
    if (!session) return open_failed(gpu, session.error());
    GpuSession& s = **session;
    // Stop early enough to judge before the check's deadline.
    const auto start = std::chrono::steady_clock::now();
    const auto until = std::min(start + std::chrono::milliseconds(k_sustained_ms), context.deadline - std::chrono::seconds(5));
    HealthMonitor monitor(s, k_sustained_monitor_period, context.deadline);

    std::string dtype;
    std::vector<double> round_tflops;
    std::optional<GpuOutcome> failure;
    for (const char* candidate : {"bf16", "fp16", "tf32"}) {
      auto first = s.gemm_tflops(candidate, k_sustained_samples_per_round);
      if (!first) {
        failure = round_failure(gpu, candidate, 1, first.error());
        break;
      }
      if (!first->has_value()) continue;
      dtype = candidate;
      if (auto problem = samples_problem(**first)) failure = unverified(gpu, dtype, 1, *problem);
      round_tflops.push_back(median_of((*first)->values));
      break;
    }
    while (!failure && !dtype.empty() && static_cast<int>(round_tflops.size()) < k_sustained_max_rounds &&
           std::chrono::steady_clock::now() < until) {
      auto round = s.gemm_tflops(dtype, k_sustained_samples_per_round);
      if (!round) {
        failure = round_failure(gpu, dtype, static_cast<int>(round_tflops.size()) + 1, round.error());
      } else if (!round->has_value()) {
        failure = outcome(gpu.index, CheckStatus::fail,
                          dtype + " GEMM became unsupported after " + std::to_string(round_tflops.size()) + " round(s)",
                          "backend_error");
      } else if (auto problem = samples_problem(**round)) {
        failure = unverified(gpu, dtype, static_cast<int>(round_tflops.size()) + 1, *problem);
      } else {
        round_tflops.push_back(median_of((*round)->values));
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto health = monitor.finish();
    if (failure) return *failure;
    if (dtype.empty()) {
      const std::string libraries = s.gemm_library_notes();
      return skipped(gpu.index, gpu_label(gpu) + " runs no bf16, fp16 or tf32 GEMM here" +
                                    (libraries.empty() ? std::string() : " (GEMM libraries: " + libraries + ")"));
    }

    const std::string load = dtype + " GEMM for " + fixed(seconds, 0) + " s (" + std::to_string(round_tflops.size()) +
                             " rounds, every result verified)";
    std::vector<Metric> metrics{{"rounds", static_cast<double>(round_tflops.size()), "count"},
                                {"seconds", seconds, "s"}};
    // Throughput: the last quarter of the rounds against the first.
    std::optional<double> ratio;
    double first = 0, last = 0;
    if (round_tflops.size() >= 4) {
      const auto quarter = static_cast<std::ptrdiff_t>(round_tflops.size() / 4);
      first = median_of({round_tflops.begin(), round_tflops.begin() + quarter});
      last = median_of({round_tflops.end() - quarter, round_tflops.end()});
      metrics.push_back({"tflops_first", first, "TFLOPS"});
      metrics.push_back({"tflops_last", last, "TFLOPS"});
      if (first > 0) ratio = last / first;
    }
    GpuOutcome out = outcome(gpu.index, CheckStatus::pass, load);
    // The first WARN or FAIL found stands, unless a FAIL comes after a WARN.
    auto worse_of = [&](GpuOutcome candidate) {
      if (candidate.status == CheckStatus::pass) return;
      if (out.status == CheckStatus::pass || (candidate.status == CheckStatus::fail && out.status != CheckStatus::fail))
        out = std::move(candidate);
    };
    if (health) {
      if (health->clock_event_reasons) {
        GpuOutcome clocks = judge_clock_events(gpu.index, *health->clock_event_reasons, load);
        metrics.insert(metrics.end(), clocks.metrics.begin(), clocks.metrics.end());
        worse_of(std::move(clocks));
      }
      if (health->temperature_c) {
        GpuOutcome temperature = judge_temperature(gpu.index, *health, load);
        metrics.insert(metrics.end(), temperature.metrics.begin(), temperature.metrics.end());
        worse_of(std::move(temperature));
      }
    }
    if (ratio && *ratio < k_sustained_min_ratio) {
      worse_of(outcome(gpu.index, CheckStatus::warn,
                       "throughput fell to " + fixed(*ratio * 100, 0) + "% of its start (" + measured(last) + " of " +
                           measured(first) + " TFLOPS) under " + load,
                       "throughput_degraded"));
    }
    if (ratio) metrics.push_back({"tflops_ratio", *ratio, "ratio"});
    if (!health) out.message += "; health not read: " + health.error().message;
    out.metrics = std::move(metrics);
    return out;
  }

  static double median_of(std::vector<double> values) {
    auto stats = sample_stats(std::move(values));
    return stats ? stats->median : 0.0;
  }

  static GpuOutcome unverified(const GpuInfo& gpu, const std::string& dtype, int round, const std::string& problem) {
    return outcome(gpu.index, CheckStatus::fail, dtype + " GEMM round " + std::to_string(round) + " not trusted: " + problem,
                   "unverified");
  }

  static GpuOutcome round_failure(const GpuInfo& gpu, const std::string& dtype, int round, const Error& error) {
    const bool wrong = error.id == "validate.data_mismatch";
    return failed(gpu.index, dtype + " GEMM round " + std::to_string(round) + (wrong ? " computed wrong results" : ""),
                  error, wrong ? "gemm_mismatch" : "backend_error");
  }
};

}  // namespace

std::vector<std::unique_ptr<Check>> kernel_checks() {
  std::vector<std::unique_ptr<Check>> out;
  out.push_back(std::make_unique<ContextCreate>());
  out.push_back(std::make_unique<ComputeCorrectness>());
  out.push_back(std::make_unique<Memtest>());
  out.push_back(std::make_unique<GemmConsistency>());
  out.push_back(std::make_unique<GemmSustained>());
  return out;
}

}  // namespace gpuenv::validate::checks
