// Health checks: ECC, row remapping, retired pages, the PCIe link and its replays, clock events and temperature.
// The first five read idle counters through GpuBackend::health(); pcie_link, clock_events and temperature (and
// pcie_replays' rate at standard and long) read the GPU under load, because an idle link downtrains to save power
// and idle clocks show no slowdown.
//
// Reading under load: the check opens a session and runs a load method on it while a HealthMonitor
// (check_support.hpp) reads GpuSession::health() every 50 ms on another thread, once before the load and once after
// it; the readings are folded into one (the best link seen, the union of clock event reasons, the peak temperature
// and power). A single read taken after the kernels ended would see a GPU going idle and prove little.
#include <utility>

#include "base/text.hpp"
#include "validate/checks/check_support.hpp"
#include "validate/checks/judge.hpp"

namespace gpuenv::validate::checks {
namespace {

// DCGM's limits (NVIDIA/DCGM 4.6.0, common/DcgmGPUHardwareLimits.h):
// DCGM_LIMIT_MAX_ROW_REMAP_UNCORRECTABLE = 512, "this number of uncorrectable row remaps indicates GPU is in a bad
// state"; DCGM's diagnostic fails at >= 512 (nvvs/src/Software.cpp, checkRowRemapping, DCGM_FR_UNCORRECTABLE_ROW_
// REMAP_LIMIT) and its health watch warns (modules/health/DcgmHealthWatch.cpp).
constexpr std::uint64_t k_dcgm_max_uncorrectable_row_remaps = 512;
// DCGM_LIMIT_MAX_RETIRED_PAGES = 63 (bug 1665722, "updated to match the field diag"): single- plus double-bit
// retired pages >= 63 fails (Software.cpp checkPageRetirement and DcgmHealthWatch MonitorMemSbeDbeRetiredPages,
// DCGM_FR_RETIRED_PAGES_LIMIT).
constexpr std::uint64_t k_dcgm_max_retired_pages = 63;
// DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT = 15 double-bit pages: DCGM fails beyond it when more than one further
// page was retired in the past week (DCGM_FR_RETIRED_PAGES_DBE_LIMIT). gpuenv keeps no history, so it warns.
constexpr std::uint64_t k_dcgm_retired_dbe_soft_limit = 15;
// The replay counter is cumulative since the driver loaded and gpuenv does not know for how long, so the idle
// reading is judged against a fixed count: a healthy link shows 0, link training at boot can add a few, and
// hundreds mean a marginal link. gpuenv's heuristic, not DCGM's (DCGM judges only the rate; see below).
constexpr std::uint64_t k_pcie_replays_warn_total = 100;

// Budgets. Idle reads: one NVML query per GPU. Under load: the load's run time plus the read.
constexpr Budget k_idle_read{100, 200};
constexpr Budget k_short_load{500, 3000};
constexpr Budget k_standard_load{500, 10000};

// GEMM samples that make the load for clock_events and temperature (about 2 s on a current GPU). The long level's
// sustained load is gemm_sustained's (kernels.cpp).
int load_samples(Level) { return 20; }


// What the health read under load found, or the outcome that says why there is no reading.
struct LoadReading {
  std::optional<GpuHealth> health;
  std::string load;  // what ran: "bf16 GEMM x20", "HBM copy x1", ...
  std::optional<GpuOutcome> failure;
};

enum class LoadKind { hbm, host_copy, gemm };

// How often health is read while a load runs.
constexpr std::chrono::milliseconds k_monitor_period{50};

LoadReading read_under_load(const CheckContext& context, const GpuInfo& gpu, LoadKind kind, int samples) {
  LoadReading out;
  auto session = context.backend.open(gpu.index);
  if (!session) {
    out.failure = failed(gpu.index, "creating a context for the load", session.error(), "context_failed");
    return out;
  }
  GpuSession& s = **session;
  HealthMonitor monitor(s, k_monitor_period, context.deadline);
  std::optional<Error> load_error;
  switch (kind) {
    case LoadKind::hbm: {
      auto r = s.hbm_bandwidth(samples);
      if (!r) load_error = r.error();
      out.load = "HBM copy x" + std::to_string(samples);
      break;
    }
    case LoadKind::host_copy: {
      auto r = s.copy_bandwidth(true, samples);
      if (!r) load_error = r.error();
      out.load = "host-to-device copy x" + std::to_string(samples);
      break;
    }
    case LoadKind::gemm: {
      // The most power-hungry work the GPU supports: bf16, then fp16 GEMM, else the memory copy.
      bool ran = false;
      for (const char* dtype : {"bf16", "fp16"}) {
        auto r = s.gemm_tflops(dtype, samples);
        if (!r) {
          load_error = r.error();
          ran = true;
          break;
        }
        if (r->has_value()) {
          out.load = std::string(dtype) + " GEMM x" + std::to_string(samples);
          ran = true;
          break;
        }
      }
      if (!ran) {
        auto r = s.hbm_bandwidth(samples);
        if (!r) load_error = r.error();
        out.load = "HBM copy x" + std::to_string(samples);
      }
      break;
    }
  }
  if (load_error) {
    out.failure = failed(gpu.index, "running the load (" + out.load + ")", *load_error);
    return out;
  }
  auto health = monitor.finish();
  if (!health) {
    out.failure = failed(gpu.index, "reading health under load", health.error());
    return out;
  }
  out.health = std::move(*health);
  return out;
}

Metric count_metric(std::string name, std::uint64_t value) {
  return Metric{std::move(name), static_cast<double>(value), "count"};
}

class EccMode final : public SpecCheck {
 public:
  EccMode()
      : SpecCheck({"ecc_mode", "health", "ECC is enabled and no mode change is pending", k_idle_read, k_idle_read,
                   k_idle_read}) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    return for_each_gpu(context, [&](const GpuInfo& gpu) {
      auto h = context.backend.health(gpu.index);
      if (!h) return failed(gpu.index, "reading the ECC mode", h.error());
      if (!h->ecc_enabled) return skipped(gpu.index, gpu_label(gpu) + " does not report an ECC mode (no ECC support)");
      const bool on = *h->ecc_enabled;
      if (h->ecc_pending_change.value_or(false))
        return outcome(gpu.index, CheckStatus::warn,
                       std::string("ECC is ") + (on ? "on" : "off") + " and a change to " + (on ? "off" : "on") +
                           " is pending until the next reboot",
                       "ecc_pending");
      if (!on) return outcome(gpu.index, CheckStatus::warn, "ECC is disabled on " + gpu_label(gpu), "ecc_disabled");
      return outcome(gpu.index, CheckStatus::pass, "ECC is enabled");
    });
  }
};

class EccErrors final : public SpecCheck {
 public:
  EccErrors()
      : SpecCheck({"ecc_errors", "health",
                   "No volatile uncorrectable ECC errors (fails); no lifetime uncorrectable errors (warns)", k_idle_read,
                   k_idle_read, k_idle_read}) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    return for_each_gpu(context, [&](const GpuInfo& gpu) {
      auto h = context.backend.health(gpu.index);
      if (!h) return failed(gpu.index, "reading ECC counters", h.error());
      if (h->ecc_enabled && !*h->ecc_enabled) return skipped(gpu.index, "ECC is disabled: the GPU keeps no ECC counts");
      if (!h->ecc_volatile_uncorrected && !h->ecc_aggregate_uncorrected)
        return skipped(gpu.index, gpu_label(gpu) + " does not report ECC error counts");
      std::vector<Metric> metrics;
      if (h->ecc_volatile_uncorrected) metrics.push_back(count_metric("volatile_uncorrected", *h->ecc_volatile_uncorrected));
      if (h->ecc_volatile_corrected) metrics.push_back(count_metric("volatile_corrected", *h->ecc_volatile_corrected));
      if (h->ecc_aggregate_uncorrected)
        metrics.push_back(count_metric("aggregate_uncorrected", *h->ecc_aggregate_uncorrected));
      const std::uint64_t vol = h->ecc_volatile_uncorrected.value_or(0);
      const std::uint64_t agg = h->ecc_aggregate_uncorrected.value_or(0);
      GpuOutcome out;
      if (vol > 0)
        out = outcome(gpu.index, CheckStatus::fail,
                      std::to_string(vol) + " uncorrectable ECC error(s) since the driver loaded", "ecc_uncorrectable");
      else if (agg > 0)
        out = outcome(gpu.index, CheckStatus::warn,
                      "no uncorrectable ECC errors since the driver loaded, " + std::to_string(agg) +
                          " in the GPU's lifetime",
                      "ecc_uncorrectable_aggregate");
      else
        out = outcome(gpu.index, CheckStatus::pass, "no uncorrectable ECC errors");
      out.metrics = std::move(metrics);
      return out;
    });
  }
};

class RowRemapCheck final : public SpecCheck {
 public:
  RowRemapCheck()
      : SpecCheck({"row_remap", "health",
                   "No row remap failure or pending remap, and fewer uncorrectable remaps than DCGM's limit (512)",
                   k_idle_read, k_idle_read, k_idle_read}) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    return for_each_gpu(context, [&](const GpuInfo& gpu) {
      auto h = context.backend.health(gpu.index);
      if (!h) return failed(gpu.index, "reading remapped rows", h.error());
      if (!h->row_remap)
        return skipped(gpu.index, gpu_label(gpu) +
                                      " does not report row remapping (before Ampere, or MIG with active instances)");
      const RowRemap& r = *h->row_remap;
      const std::string counts = std::to_string(r.uncorrected_rows) + " row(s) remapped for uncorrectable and " +
                                 std::to_string(r.corrected_rows) + " for correctable errors";
      GpuOutcome out;
      if (r.failure)
        out = outcome(gpu.index, CheckStatus::fail, "a row remap failed; " + counts, "row_remap_failure");
      else if (r.uncorrected_rows >= k_dcgm_max_uncorrectable_row_remaps)
        out = outcome(gpu.index, CheckStatus::fail,
                      counts + ", at or above DCGM's limit of " + std::to_string(k_dcgm_max_uncorrectable_row_remaps),
                      "row_remap_limit");
      else if (r.pending)
        out = outcome(gpu.index, CheckStatus::warn, "a row remap is pending until the next GPU reset; " + counts,
                      "row_remap_pending");
      else
        out = outcome(gpu.index, CheckStatus::pass, "no remap pending or failed; " + counts);
      out.metrics = {count_metric("uncorrected_rows", r.uncorrected_rows), count_metric("corrected_rows", r.corrected_rows),
                     {"pending", r.pending ? 1.0 : 0.0, "bool"}, {"failure", r.failure ? 1.0 : 0.0, "bool"}};
      return out;
    });
  }
};

class RetiredPagesCheck final : public SpecCheck {
 public:
  RetiredPagesCheck()
      : SpecCheck({"retired_pages", "health",
                   "No pending page retirement, and fewer retired pages than DCGM's limit (63)", k_idle_read,
                   k_idle_read, k_idle_read}) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    return for_each_gpu(context, [&](const GpuInfo& gpu) {
      auto h = context.backend.health(gpu.index);
      if (!h) return failed(gpu.index, "reading retired pages", h.error());
      if (!h->retired_pages)
        return skipped(gpu.index, gpu_label(gpu) + " does not report retired pages (Ampere and later remap rows instead)");
      const RetiredPages& p = *h->retired_pages;
      const std::uint64_t total = p.single_bit + p.double_bit;
      const std::string counts = std::to_string(total) + " page(s) retired (" + std::to_string(p.single_bit) +
                                 " single-bit, " + std::to_string(p.double_bit) + " double-bit)";
      GpuOutcome out;
      if (total >= k_dcgm_max_retired_pages)
        out = outcome(gpu.index, CheckStatus::fail,
                      counts + ", at or above DCGM's limit of " + std::to_string(k_dcgm_max_retired_pages),
                      "retired_pages_limit");
      else if (p.pending)
        out = outcome(gpu.index, CheckStatus::warn, "a page retirement is pending until the next GPU reset; " + counts,
                      "retired_pages_pending");
      else if (p.double_bit > k_dcgm_retired_dbe_soft_limit)
        out = outcome(gpu.index, CheckStatus::warn,
                      counts + "; double-bit pages above DCGM's soft limit of " +
                          std::to_string(k_dcgm_retired_dbe_soft_limit),
                      "retired_pages_limit");
      else
        out = outcome(gpu.index, CheckStatus::pass, "no retirement pending; " + counts);
      out.metrics = {count_metric("single_bit", p.single_bit), count_metric("double_bit", p.double_bit),
                     {"pending", p.pending ? 1.0 : 0.0, "bool"}};
      return out;
    });
  }
};

class PcieLinkCheck final : public SpecCheck {
 public:
  PcieLinkCheck()
      : SpecCheck({"pcie_link", "health",
                   "Under load, the PCIe link runs at its maximum width (fails) and generation (warns)", std::nullopt,
                   k_short_load, k_short_load, /*parallel=*/true}) {}
  // Its load needs the whole GPU, which CUDA cannot open while MIG is on: SKIP on a GPU with MIG instances.
  [[nodiscard]] MigScope mig_scope() const override { return MigScope::whole_gpu; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    return for_each_gpu_parallel(context, [&](const GpuInfo& gpu) {
      LoadReading reading = read_under_load(context, gpu, LoadKind::hbm, 1);
      if (reading.failure) return *reading.failure;
      if (!reading.health->pcie_link) return skipped(gpu.index, gpu_label(gpu) + " does not report its PCIe link");
      const PcieLink& l = *reading.health->pcie_link;
      const std::string state = "Gen" + std::to_string(l.current_gen) + " x" + std::to_string(l.current_width) +
                                " (maximum Gen" + std::to_string(l.max_gen) + " x" + std::to_string(l.max_width) +
                                ") under " + reading.load;
      GpuOutcome out;
      if (l.current_width < l.max_width)
        out = outcome(gpu.index, CheckStatus::fail, "link width below its maximum: " + state, "pcie_downtrained");
      else if (l.current_gen < l.max_gen)
        out = outcome(gpu.index, CheckStatus::warn, "link generation below its maximum: " + state, "pcie_downtrained");
      else
        out = outcome(gpu.index, CheckStatus::pass, state);
      out.metrics = {{"current_gen", static_cast<double>(l.current_gen), "gen"},
                     {"max_gen", static_cast<double>(l.max_gen), "gen"},
                     {"current_width", static_cast<double>(l.current_width), "lanes"},
                     {"max_width", static_cast<double>(l.max_width), "lanes"}};
      return out;
    });
  }
};

// Idle (every level): the cumulative counter against k_pcie_replays_warn_total. Standard and long also read the
// counter before and after a host-to-device copy: more replays during that copy (well under a minute) than DCGM
// allows per minute for the link (expected_pcie_replays_per_minute, DCGM_FR_PCI_REPLAY_RATE) warns.
class PcieReplays final : public SpecCheck {
 public:
  PcieReplays()
      : SpecCheck({"pcie_replays", "health",
                   "PCIe replays stay low: cumulative count, and the rate under a host copy (DCGM's per-minute limit)",
                   k_idle_read, k_short_load, k_short_load}) {}
  // Per GPU even with MIG on: the counter is the GPU's; where its load cannot run (MIG) the rate is left out, said so.
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const bool with_load = context.inputs.level != Level::quick;
    return for_each_gpu(context, [&](const GpuInfo& gpu) {
      auto h = context.backend.health(gpu.index);
      if (!h) return failed(gpu.index, "reading the PCIe replay counter", h.error());
      if (!h->pcie_replays) return skipped(gpu.index, gpu_label(gpu) + " does not report PCIe replays");
      const std::uint64_t before = *h->pcie_replays;
      std::vector<std::string> problems;
      std::vector<std::string> notes{std::to_string(before) + " replay(s) since the driver loaded"};
      std::vector<Metric> metrics{count_metric("replays_total", before)};
      if (before > k_pcie_replays_warn_total)
        problems.push_back(std::to_string(before) + " replays since the driver loaded (warns above " +
                           std::to_string(k_pcie_replays_warn_total) + ")");
      if (with_load) {
        LoadReading reading = read_under_load(context, gpu, LoadKind::host_copy, 3);
        if (reading.failure) {
          notes.push_back("no rate measured: " + reading.failure->message);
        } else if (reading.health->pcie_replays) {
          const std::uint64_t after = *reading.health->pcie_replays;
          const std::uint64_t during = after >= before ? after - before : 0;
          metrics.push_back(count_metric("replays_under_load", during));
          const PcieLink link = reading.health->pcie_link.value_or(h->pcie_link.value_or(PcieLink{}));
          const int limit = expected_pcie_replays_per_minute(link.current_gen, link.current_width);
          notes.push_back(std::to_string(during) + " during a " + reading.load);
          if (limit > 0) {
            metrics.push_back(count_metric("dcgm_limit_per_minute", static_cast<std::uint64_t>(limit)));
            if (during > static_cast<std::uint64_t>(limit))
              problems.push_back(std::to_string(during) + " replays during a " + reading.load +
                                 " (under a minute), above DCGM's " + std::to_string(limit) + " per minute for Gen" +
                                 std::to_string(link.current_gen) + " x" + std::to_string(link.current_width));
          }
        }
      }
      GpuOutcome out = problems.empty() ? outcome(gpu.index, CheckStatus::pass, join(notes, "; "))
                                        : outcome(gpu.index, CheckStatus::warn, join(problems, "; "), "pcie_replays");
      out.metrics = std::move(metrics);
      return out;
    });
  }
};

class ClockEvents final : public SpecCheck {
 public:
  ClockEvents()
      : SpecCheck({"clock_events", "health",
                   "Under load, no hardware slowdown, thermal slowdown or power brake slows the clocks", std::nullopt,
                   k_standard_load, k_standard_load, /*parallel=*/true}) {}
  // Its load needs the whole GPU, which CUDA cannot open while MIG is on: SKIP on a GPU with MIG instances.
  [[nodiscard]] MigScope mig_scope() const override { return MigScope::whole_gpu; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const int samples = load_samples(context.inputs.level);
    return for_each_gpu_parallel(context, [&](const GpuInfo& gpu) {
      LoadReading reading = read_under_load(context, gpu, LoadKind::gemm, samples);
      if (reading.failure) return *reading.failure;
      if (!reading.health->clock_event_reasons)
        return skipped(gpu.index, gpu_label(gpu) + " does not report clock event reasons");
      return judge_clock_events(gpu.index, *reading.health->clock_event_reasons, reading.load);
    });
  }
};

class Temperature final : public SpecCheck {
 public:
  Temperature()
      : SpecCheck({"temperature", "health",
                   "Under load, the temperature stays more than 5 C below the slowdown threshold; power is reported",
                   std::nullopt, k_standard_load, k_standard_load, /*parallel=*/true}) {}
  // Its load needs the whole GPU, which CUDA cannot open while MIG is on: SKIP on a GPU with MIG instances.
  [[nodiscard]] MigScope mig_scope() const override { return MigScope::whole_gpu; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const int samples = load_samples(context.inputs.level);
    return for_each_gpu_parallel(context, [&](const GpuInfo& gpu) {
      LoadReading reading = read_under_load(context, gpu, LoadKind::gemm, samples);
      if (reading.failure) return *reading.failure;
      const GpuHealth& h = *reading.health;
      if (!h.temperature_c) return skipped(gpu.index, gpu_label(gpu) + " does not report its temperature");
      return judge_temperature(gpu.index, h, reading.load);
    });
  }
};

}  // namespace

std::vector<std::unique_ptr<Check>> health_checks() {
  std::vector<std::unique_ptr<Check>> out;
  out.push_back(std::make_unique<EccMode>());
  out.push_back(std::make_unique<EccErrors>());
  out.push_back(std::make_unique<RowRemapCheck>());
  out.push_back(std::make_unique<RetiredPagesCheck>());
  out.push_back(std::make_unique<PcieLinkCheck>());
  out.push_back(std::make_unique<PcieReplays>());
  out.push_back(std::make_unique<ClockEvents>());
  out.push_back(std::make_unique<Temperature>());
  return out;
}

}  // namespace gpuenv::validate::checks
