#pragma once
// Shared pieces of gpuenv's built-in checks (internal to validate/checks/): the static description of a check with
// its time budget per level, outcome builders that take the hint from the error-code catalog, and the factories
// each category file provides to all_checks().
//
// Time budgets. A check's deadline at a level is fixed_ms + per_unit_ms x units, where units is the number of GPUs
// (GPU pairs for p2p_bandwidth): checks visit GPUs one after another so that measurements on one GPU are not
// disturbed by work on another. The budgets are chosen so that on one GPU the sum over a level stays within the
// level's promise (quick <= 15 s, standard <= 2 min, long <= 15 min; checks_test.cpp asserts it).
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "validate/check.hpp"

namespace gpuenv::validate::checks {

/// The time a check may take at one level: a fixed part plus a part per unit (GPU, or GPU pair).
struct Budget {
  int fixed_ms = 0;
  int per_unit_ms = 0;
};

/// What a built-in check is, without its behaviour. An empty budget means the check does not run at that level.
struct CheckSpec {
  std::string key;
  std::string category;  ///< software | health | kernels | throughput | image
  std::string description;
  std::optional<Budget> quick, standard, long_;
};

/// Base of the built-in checks: key, category, description, levels and deadlines come from a CheckSpec.
class SpecCheck : public Check {
 public:
  explicit SpecCheck(CheckSpec spec) : m_spec(std::move(spec)) {}
  [[nodiscard]] std::string key() const override { return m_spec.key; }
  [[nodiscard]] std::string category() const override { return m_spec.category; }
  [[nodiscard]] std::string description() const override { return m_spec.description; }
  [[nodiscard]] bool runs_at(Level level) const override { return budget(level).has_value(); }
  /// fixed + per_unit x budget_units(gpu_count); a level the check does not run at uses its largest budget.
  [[nodiscard]] std::chrono::milliseconds deadline(Level level, std::size_t gpu_count) const override;

 protected:
  /// The units the per-unit budget multiplies; the GPU count unless a check says otherwise.
  [[nodiscard]] virtual std::size_t budget_units(std::size_t gpu_count) const { return gpu_count; }
  /// The budget at `level`, empty when the check does not run there.
  [[nodiscard]] const std::optional<Budget>& budget(Level level) const;

 private:
  CheckSpec m_spec;
};

/// An outcome; a non-empty `code` brings its hint from the catalog (error_codes.hpp).
GpuOutcome outcome(int gpu, Status status, std::string message, std::string_view code = {});
/// A SKIP outcome with the reason, and what to do about it when there is something to do.
GpuOutcome skipped(int gpu, std::string reason, std::string hint = {});
/// FAIL with `code` for a port call that returned an Error: "<what>: <message> [<id>]".
GpuOutcome failed(int gpu, std::string_view what, const Error& error, std::string_view code = "backend_error");
/// FAIL `hang` for a GPU the check had no time left for.
GpuOutcome out_of_time(int gpu);

/// "GPU 3 (NVIDIA H100 80GB HBM3)".
std::string gpu_label(const GpuInfo& gpu);
/// "0x2330".
std::string pci_id_text(std::uint32_t pci_device_id);
/// A number with `decimals` decimals.
std::string fixed(double value, int decimals);
/// Whether the check's deadline has passed (a check stops visiting GPUs then; the runner has already failed it).
bool past_deadline(const CheckContext& context);
/// The reason a GPU check cannot run (no driver, no GPU selected), or empty.
std::optional<std::string> needs_driver_and_gpus(const CheckContext& context);
/// Timed samples per measurement at `level`: 3 (quick), 5 (standard), 10 (long).
int samples_at(Level level);

/// Calls `visit(gpu)` for each selected GPU in order and collects its outcome; a GPU reached after the deadline gets
/// out_of_time() instead, so a check whose runner already gave up stops touching the GPUs soon.
template <class Visit>
std::vector<GpuOutcome> for_each_gpu(const CheckContext& context, Visit&& visit) {
  std::vector<GpuOutcome> out;
  for (const auto& gpu : context.gpus) {
    if (past_deadline(context)) {
      out.push_back(out_of_time(gpu.index));
      continue;
    }
    out.push_back(visit(gpu));
  }
  return out;
}

/// The checks of each category, in the order they run.
std::vector<std::unique_ptr<Check>> software_checks();
std::vector<std::unique_ptr<Check>> health_checks();
std::vector<std::unique_ptr<Check>> kernel_checks();
std::vector<std::unique_ptr<Check>> throughput_checks();
/// libraries_load, framework_smoke and cudnn_smoke: they share one run of the image probe (image.cpp).
std::vector<std::unique_ptr<Check>> image_checks();

/// The Python script run inside the image by the image checks (image_probe.cpp): prints one
/// gpuenv-image-probe-v1 JSON object and never raises.
std::string_view image_probe_script();

}  // namespace gpuenv::validate::checks
