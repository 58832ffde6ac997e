#pragma once
// Shared pieces of gpuenv's built-in checks (internal to validate/checks/): the static description of a check with
// its time budget per level, outcome builders that take the hint from the error-code catalog, and the factories
// each category file provides to all_checks().
//
// Time budgets. A check's deadline at a level is fixed_ms + per_unit_ms x units. Checks that share the host's
// links (host copies, peer copies) visit GPUs (or GPU pairs, for p2p_bandwidth) one after another, so units is
// their count; device-local checks (CheckSpec::parallel) visit every GPU at once, so units is 1 plus an eighth per
// further GPU. The budgets are chosen so that on one GPU the sum over a level stays within the level's promise
// (quick <= 15 s, standard <= 2 min, long <= 15 min; checks_test.cpp asserts it).
#include <chrono>
#include <exception>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "validate/check.hpp"
#include "validate/checks/judge.hpp"  // fixed(), measured()

namespace gpuenv::validate::checks {

/// The time a check may take at one level: a fixed part plus a part per unit (GPU, or GPU pair).
struct Budget {
  int fixed_ms = 0;
  int per_unit_ms = 0;
};

/// What a built-in check is, without its behaviour. An empty budget means the check does not run at that level.
struct CheckSpec {
  std::string key;
  std::string category;  ///< software | health | kernels | throughput | image | data
  std::string description;
  std::optional<Budget> quick, standard, long_;
  /// Visits GPUs at once (for_each_gpu_parallel): the per-unit budget then counts once, plus an eighth of it for
  /// each further GPU as slack for the host's share of the work.
  bool parallel = false;
};

/// Base of the built-in checks: key, category, description, levels and deadlines come from a CheckSpec.
class SpecCheck : public Check {
 public:
  explicit SpecCheck(CheckSpec spec) : m_spec(std::move(spec)) {}
  [[nodiscard]] std::string key() const override { return m_spec.key; }
  [[nodiscard]] std::string category() const override { return m_spec.category; }
  [[nodiscard]] std::string description() const override { return m_spec.description; }
  [[nodiscard]] bool runs_at(Level level) const override { return budget(level).has_value(); }
  /// fixed + per_unit x budget_eighths(gpu_count) / 8; a level the check does not run at uses its largest budget.
  [[nodiscard]] std::chrono::milliseconds deadline(Level level, std::size_t gpu_count) const override;

 protected:
  /// The units the per-unit budget multiplies, in eighths: 8 x the GPU count, or for a parallel check 8 for the
  /// first GPU and 1 for each further one.
  [[nodiscard]] virtual std::size_t budget_eighths(std::size_t gpu_count) const {
    if (!m_spec.parallel) return 8 * gpu_count;
    return gpu_count == 0 ? 0 : 8 + (gpu_count - 1);
  }
  [[nodiscard]] bool parallel() const { return m_spec.parallel; }
  /// The budget at `level`, empty when the check does not run there.
  [[nodiscard]] const std::optional<Budget>& budget(Level level) const;

 private:
  CheckSpec m_spec;
};

/// An outcome; a non-empty `code` brings its hint from the catalog (error_codes.hpp).
GpuOutcome outcome(int gpu, CheckStatus status, std::string message, std::string_view code = {});
/// A SKIP outcome with the reason, and what to do about it when there is something to do.
GpuOutcome skipped(int gpu, std::string reason, std::string hint = {});
/// FAIL with `code` for a port call that returned an Error: "<what>: <message> [<id>]".
GpuOutcome failed(int gpu, std::string_view what, const Error& error, std::string_view code = "backend_error");
/// FAIL `hang` for a GPU the check had no time left for.
GpuOutcome out_of_time(int gpu);

/// "GPU 3 (NVIDIA H100 80GB HBM3)"; for a MIG device "GPU 0 / MIG 1g.10gb (GI 7, CI 0)".
std::string gpu_label(const GpuInfo& gpu);
/// Opens a session on `gpu`: on its MIG device when the entry stands for one (GpuBackend::open_mig), else on the
/// whole GPU (GpuBackend::open).
Result<std::unique_ptr<GpuSession>> open_session(GpuBackend& backend, const GpuInfo& gpu);
/// The outcome when open_session failed: SKIP with the backend's hint when the MIG device cannot be reached from
/// this process (`validate.mig_not_visible`), else FAIL `context_failed`.
GpuOutcome open_failed(const GpuInfo& gpu, const Error& error);
/// For a MIG device: the compute instances of its GPU instance among the check's units (`context.gpus`), which
/// for_each_gpu_parallel visits at once and which share that GPU instance's memory and memory bandwidth; 1 for a
/// whole GPU.
int gpu_instance_sharers(const CheckContext& context, const GpuInfo& gpu);
/// For a MIG device: the first of those compute instances in `context.gpus` (the one memtest tests the GPU
/// instance's memory from); `gpu` itself for a whole GPU or when it is the first.
const GpuInfo& gpu_instance_first(const CheckContext& context, const GpuInfo& gpu);
/// "0x2330".
std::string pci_id_text(std::uint32_t pci_device_id);
/// Whether the check's deadline has passed (a check stops visiting GPUs then; the runner has already failed it).
bool past_deadline(const CheckContext& context);
/// The reason a GPU check cannot run (no driver, no GPU selected), or empty.
std::optional<std::string> needs_driver_and_gpus(const CheckContext& context);
/// Timed samples per measurement at `level`: 3 (quick), 5 (standard), 10 (long).
int samples_at(Level level);

/// Folds one health reading into the readings taken so far during a load: the best PCIe link seen (a link may
/// still be training up when the load starts; one at its maximum under load is healthy), the union of clock event
/// reasons (one slowdown is enough), the peak temperature and power, and the latest value of every other field.
void fold_health(GpuHealth& folded, const GpuHealth& next);

/// Reads a session's health on its own thread, every `period`, while the caller runs a load on the same session,
/// so that link state, clock event reasons, temperature and power are seen while the kernels run rather than
/// after they ended. Stops by `deadline` at the latest (a hung load leaves no reader behind for long). The session
/// must outlive the monitor; GpuSession::health() is called concurrently with the load (the port allows it).
class HealthMonitor {
 public:
  HealthMonitor(GpuSession& session, std::chrono::milliseconds period, std::chrono::steady_clock::time_point deadline);
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;
  /// Stops the reader, takes one last reading, and returns the fold of every successful reading; the last error
  /// when none succeeded.
  Result<GpuHealth> finish();
  /// Readings folded so far (successful ones).
  [[nodiscard]] int readings() const;

 private:
  void read_once();
  GpuSession& m_session;
  std::chrono::milliseconds m_period;
  std::chrono::steady_clock::time_point m_deadline;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;
  int m_readings = 0;
  GpuHealth m_folded;
  std::optional<Error> m_last_error;
  std::thread m_thread;
};

/// The verdict on the clock event reasons (nvmlClocksEventReason* bits) seen under `load` ("bf16 GEMM x20"):
/// hardware slowdown, hardware thermal slowdown or a power brake FAIL and software thermal slowdown WARNs (code
/// `clock_throttled`); a software power cap (normal at full load) or nothing PASS. Metric clock_event_reasons.
GpuOutcome judge_clock_events(int gpu, std::uint64_t reasons, const std::string& load);

/// The verdict on the temperature read under `load` (health.temperature_c must be set): at or above the slowdown
/// threshold FAIL, within 5 C of it WARN (code `temperature_high`: the next hot day throttles it), else PASS; not
/// judged (PASS, said so) without a threshold. Metrics: temperature, power and its limit, slowdown, margin.
GpuOutcome judge_temperature(int gpu, const GpuHealth& health, const std::string& load);

/// Tells the runner one GPU's outcome early (CheckContext::partial), when it listens.
inline void tell(const CheckContext& context, const GpuOutcome& out) {
  if (context.partial) context.partial(out);
}

/// Calls `visit(gpu)` for each selected GPU in order and collects its outcome; a GPU reached after the deadline gets
/// out_of_time() instead, so a check whose runner already gave up stops touching the GPUs soon. Each outcome is
/// told to the runner as it is known.
template <class Visit>
std::vector<GpuOutcome> for_each_gpu(const CheckContext& context, Visit&& visit) {
  std::vector<GpuOutcome> out;
  for (const auto& gpu : context.gpus) {
    if (past_deadline(context)) {
      out.push_back(out_of_time(gpu.index));
    } else {
      out.push_back(visit(gpu));
    }
    out.back().mig = gpu.mig;
    tell(context, out.back());
  }
  return out;
}

/// Calls `task(i)` for i in [0, n), each on its own thread (on this one when n is 1 or no thread can be had), and
/// returns when all have returned. `task` must not throw.
template <class Task>
void run_concurrently(std::size_t n, Task&& task) {
  if (n == 1) {
    task(std::size_t{0});
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    try {
      threads.emplace_back([&task, i] {
        try {
          task(i);
        } catch (...) {
          // Nothing may leave a thread (std::terminate); the task's slot stays as it was, which its caller reports.
        }
      });
    } catch (const std::exception&) {
      task(i);  // no thread to be had: this one runs here
    }
  }
  for (auto& t : threads) t.join();
}

/// Like for_each_gpu, but visits every GPU at once, one thread each, as DCGM's diagnostics and gpu-burn load a
/// node: work that stays on one GPU (kernels, memory tests, GEMMs, device-local bandwidth) then takes one GPU's time
/// on eight, and the node is stressed as a whole. Returns when every GPU's visit has returned; a hung GPU keeps the
/// check waiting, and the runner's watchdog then keeps the outcomes already told. `visit` must not throw (an
/// exception becomes FAIL `internal` for that GPU) and must be safe to call concurrently for different GPUs.
template <class Visit>
std::vector<GpuOutcome> for_each_gpu_parallel(const CheckContext& context, Visit&& visit) {
  const std::size_t n = context.gpus.size();
  if (n <= 1) return for_each_gpu(context, visit);
  std::vector<GpuOutcome> out(n);
  run_concurrently(n, [&](std::size_t i) {
    const GpuInfo& gpu = context.gpus[i];
    try {
      out[i] = visit(gpu);
    } catch (const std::exception& e) {
      out[i] = outcome(gpu.index, CheckStatus::fail, std::string("the check threw: ") + e.what(), "internal");
    } catch (...) {
      out[i] = outcome(gpu.index, CheckStatus::fail, "the check threw", "internal");
    }
    out[i].mig = gpu.mig;
    tell(context, out[i]);
  });
  return out;
}

/// The checks of each category, in the order they run.
std::vector<std::unique_ptr<Check>> software_checks();
std::vector<std::unique_ptr<Check>> health_checks();
std::vector<std::unique_ptr<Check>> kernel_checks();
std::vector<std::unique_ptr<Check>> throughput_checks();
/// cdi_spec (cdi.cpp): the NVIDIA CDI specs against the host; runs last among the software checks.
std::unique_ptr<Check> cdi_spec_check();
/// libraries_load, framework_smoke and cudnn_smoke: they share one run of the image probe (image.cpp).
std::vector<std::unique_ptr<Check>> image_checks();
/// data_read (data.cpp): the data path's read rate, with --data only; reads no GPU.
std::vector<std::unique_ptr<Check>> data_checks();

/// The Python script run inside the image by the image checks (image_probe.cpp): prints one
/// gpuenv-image-probe-v1 JSON object and never raises.
std::string_view image_probe_script();

}  // namespace gpuenv::validate::checks
