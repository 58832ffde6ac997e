#pragma once
// Runs validation checks against a GpuBackend and builds the Report. Each check runs on a worker thread under a
// watchdog: past its deadline it is FAIL `hang`, its thread is abandoned (it keeps the check and a copy of the run's
// inputs alive), and later GPU checks on the same GPUs are skipped, so a hung GPU never hangs gpuenv and the
// report is still produced.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "validate/backend.hpp"
#include "validate/check.hpp"
#include "validate/report.hpp"

namespace gpuenv::validate {

/// Stable outcome codes the runner itself produces (they belong in the error-code catalog too).
inline constexpr const char* k_code_hang = "hang";
inline constexpr const char* k_code_internal = "internal";

/// How to run: which checks, whom to tell about progress, which clock to time with.
struct RunOptions {
  /// `--check` entries: a category ("kernels"), an exact key ("memtest") or a key prefix ("gemm_"); empty = every
  /// check of the level. An exact key outside the level is still listed, as SKIP with the reason.
  std::vector<std::string> filter;
  /// Called on the calling thread after each check with its status; done counts from 1 to total. May be empty.
  std::function<void(const std::string& check_key, CheckStatus status, int done, int total)> progress;
  /// The clock durations are measured with; empty = std::chrono::steady_clock::now. Deadlines always use the real
  /// steady clock, since they bound real threads.
  std::function<std::chrono::steady_clock::time_point()> clock;
  /// Multiplies every check's deadline. 1 for GPUs, which the deadlines are sized for; the contract tests that run
  /// the real adapters on the CPU doubles of the NVIDIA libraries (tests/contract/cpu_*.cpp) give more, since a CPU
  /// on a busy test machine moves memory far slower than a GPU. The CLI never sets it.
  double deadline_scale = 1.0;
  /// Time added to a check's deadline, by check key: `validate --multi-node` adds the rendezvous and the wait for the
  /// other ranks to nccl_allreduce, which no GPU-sized budget covers.
  std::map<std::string, std::chrono::milliseconds> extra_deadline;
  /// Copied into Report::started_at (the CLI formats the wall-clock time; the runner reads no wall clock).
  std::string started_at;
};

/// Whether the check touches a GPU (every category but "software"): such checks are skipped when there is no
/// driver or GPU, and after a hang on their GPUs.
bool uses_gpu(const Check& check);

/// Whether one `--check` entry selects the check: equal to its category or key, or a prefix of its key.
bool filter_matches(const Check& check, const std::string& entry);

/// Runs `checks` (in order) at inputs.level on inputs.gpus (empty = all). Errors (usage): a `--check` entry that
/// selects no check at all (the message lists the known keys and categories), a GPU index the backend does not
/// have. No driver or no GPU is not an error: the report says could_not_run and the GPU checks SKIP with the
/// reason. A check that throws is FAIL `internal`; one that passes its deadline is FAIL `hang`. `backend` and
/// inputs.thresholds must outlive any thread the watchdog abandoned (the CLI keeps them until the process exits).
Result<Report> run_validation(GpuBackend& backend, const CheckInputs& inputs, std::vector<std::unique_ptr<Check>> checks,
                              const RunOptions& options);

/// The GPU indices of --gpus ("0,2,3" -> {0, 2, 3}), as nvidia-smi numbers them. Error: `validate.gpus` (usage).
Result<std::vector<int>> parse_gpu_list(const std::string& text);

}  // namespace gpuenv::validate
