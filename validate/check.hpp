#pragma once
// The check model: what a validation check is, what it may read, and what it returns. Checks judge readings from
// the GpuBackend port; they never print, never read the environment (the CLI hands the variables in) and never
// change the GPU.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "validate/backend.hpp"
#include "validate/data_files.hpp"
#include "validate/multinode/result.hpp"
#include "validate/thresholds.hpp"

namespace gpuenv::validate {

/// A check's verdict. SKIP is never counted as passed. MEASURED: the check ran and its data was verified, but no
/// reference judged the figure (none is known for this GPU model, link or mode), so it is neither a pass nor a
/// failure; it never fails a run.
enum class CheckStatus { pass, warn, fail, skip, measured };
const char* to_string(CheckStatus status);
/// The worse of two statuses for aggregating one check's outcomes: fail > warn > measured > pass; skip counts only
/// when nothing ran. A check with one unjudged figure is MEASURED, never PASS.
CheckStatus worse(CheckStatus a, CheckStatus b);

/// Depth of a run: `quick` is the boot pre-flight (<= 15 s on one GPU), `standard` <= 2 min, `long` <= 15 min.
enum class Level { quick, standard, long_ };
const char* to_string(Level level);
std::optional<Level> parse_level(const std::string& text);

/// One named measured value ("bandwidth_gbs": 4012.5).
struct Metric {
  std::string name;
  double value = 0;
  std::string unit;
};

/// The outcome of a check on one GPU (gpu = -1 for a host-wide outcome).
struct GpuOutcome {
  int gpu = -1;
  CheckStatus status = CheckStatus::skip;
  std::string message;          ///< one line: what was found, with values
  std::string code;             ///< stable error code from the catalog (error_codes.hpp) when WARN, FAIL or MEASURED
  std::string hint;             ///< what to do next, when WARN, FAIL, SKIP or MEASURED
  std::vector<Metric> metrics;
  /// The MIG device the outcome is for (checks that run per instance); empty for a whole GPU or the host.
  std::optional<MigDevice> mig = std::nullopt;
};

/// "GPU 0 / MIG 1g.10gb (GI 7, CI 0)" for an instance's outcome, "GPU 0" for a GPU's, "host" for gpu -1.
std::string unit_label(const GpuOutcome& outcome);
/// "MIG 1g.10gb (GI 7, CI 0)".
std::string mig_label(const MigDevice& device);

/// Where a GPU check runs when a GPU has MIG on (and instances): `physical` once per GPU (health counters and
/// state, which NVML keeps per GPU), `instance` once per MIG device (work that fits in an instance), `whole_gpu`
/// only on GPUs without MIG (copies and links of the whole board; SKIP on a GPU with MIG instances).
enum class MigScope { physical, instance, whole_gpu };

/// What a command run inside the image under validation did (CheckInputs::run_in_image).
struct ImageRun {
  int exit_code = 0;  ///< 128 + signal number when killed by a signal
  std::string out, err;
  bool timed_out = false;  ///< killed at the timeout; out and err may then be empty
};

/// One claim of a GPU's confidential-computing attestation, as the verifier (attest/, wired by app/) judged it.
struct AttestationClaim {
  std::string name;    ///< "signature", "measurements", "driver_nvml", ...
  std::string status;  ///< pass | fail | not_checked
  std::string detail;
};
/// A GPU's attestation judged by the policy.
struct AttestationVerdict {
  bool pass = false;
  std::vector<std::string> reasons;  ///< the claims that fail the policy
  std::vector<AttestationClaim> claims;
};
/// Judges EVIDENCE against the NONCE the request must have carried, with the DRIVER's state (NVML's driver version,
/// CC environment and mode) as the live claims. An Error only when it cannot judge at all (unreadable report).
using AttestFunction = std::function<Result<AttestationVerdict>(const CcEvidence& evidence, const std::string& nonce, const DriverState& driver)>;

/// Where the cdi_spec check reads CDI specs and looks up the host paths they name: from the CLI (/etc/cdi,
/// /var/run/cdi and the NVIDIA container toolkit's spec-dirs under "/", or --cdi-dir and --cdi-root), never found
/// by the check itself, so tests point it at a temporary tree.
struct CdiSearch {
  std::vector<std::string> dirs;   ///< spec directories in the order runtimes read them; empty: not asked (not applicable)
  std::string host_root = "/";     ///< host paths of the specs are looked up beneath this directory
  std::vector<std::string> notes;  ///< where the directories came from, or why the toolkit's config was not read
  bool named = false;              ///< the directories were named (--cdi-dir), not the host's own
};

/// What the checks know about the run: from the CLI (lock, spec, environment), never read by the checks.
struct CheckInputs {
  Level level = Level::standard;
  std::vector<int> gpus;                         ///< GPU indices to check; empty = all
  bool lock_given = false;                       ///< a lock was read (--lock, or the one inside --image)
  std::optional<std::string> lock_driver_floor;  ///< "525.60.13" from the lock; empty: the lock has no floor
  std::optional<std::string> lock_cuda;          ///< "12.4": the image's CUDA version; empty: the image has no CUDA
  std::optional<bool> lock_forward_compat;       ///< the lock ships CUDA forward compatibility (cuda-compat)
  std::optional<bool> spec_mig;                  ///< MIG expected on (true) or off (false); empty = not asked
  /// Confidential computing as the lock asks for it: "off", "allowed" or "required"; empty = no lock.
  std::optional<std::string> lock_confidential;
  std::map<std::string, std::string> environment;  ///< the variables the CLI chose to pass (CUDA_*, NCCL_*, LD_*)
  const ThresholdTable* thresholds = nullptr;    ///< per-GPU references; null = none loaded
  /// Runs a command inside the image under validation (`--image`), with the host's GPUs and driver libraries
  /// bound in, capturing its output; kills it at `timeout` (timed_out). An Error when it cannot be started at all.
  /// Empty = no image given: the image checks SKIP.
  std::function<Result<ImageRun>(const std::vector<std::string>& command, std::chrono::milliseconds timeout)> run_in_image;
  std::optional<std::string> lock_cudnn;  ///< "9.1.0": the image's cuDNN version from the lock
  std::vector<std::pair<std::string, std::string>> lock_frameworks;  ///< (name, version) as the lock records them
  std::string image;                      ///< the image as given (`DIR[:REF]`), for messages
  /// The attestation verifier for cc_attestation; empty = none wired (the check then skips, saying so).
  AttestFunction attest;
  /// `--data`: the path the data_read check measures: a directory (gpuenv writes a file of its own in a directory it
  /// makes there) or a file (only read). Empty: data_read skips.
  std::string data_path;
  /// The data_read threshold in bytes per second (`--data-min`, else the spec's validate.data_read_min); empty:
  /// the rate is MEASURED, not judged.
  std::optional<double> data_read_min;
  /// The file-system port data_read reads through (shared: a check thread the watchdog abandoned keeps it alive).
  std::shared_ptr<DataFiles> data_files;
  /// `--multi-node`: runs this rank's part of the all-reduce across nodes on the GPUs at these PCI bus ids with this
  /// many samples (the CLI wires the rendezvous and NCCL). Empty = one node: nccl_allreduce runs across local GPUs.
  std::function<Result<multinode::MultiNodeResult>(const std::vector<std::string>& bus_ids, int samples)> multi_node;
  CdiSearch cdi;  ///< the cdi_spec check's directories and host root
};

/// Everything a check may use while it runs.
struct CheckContext {
  GpuBackend& backend;
  const CheckInputs& inputs;
  const DriverState& driver;
  const std::vector<GpuInfo>& gpus;  ///< the GPUs selected for this run
  std::chrono::steady_clock::time_point deadline;
  /// Tells the runner one GPU's outcome as soon as it is known (may be empty; may be called from any thread while
  /// run() has not returned). When the check passes its deadline, GPUs with an outcome keep it and only the others
  /// are FAIL `hang`, so one hung GPU does not take the verdicts of the others with it.
  std::function<void(const GpuOutcome&)> partial = {};
};

/// A validation check. Stable snake_case key, a one-line description, the levels it runs at, and a deadline.
class Check {
 public:
  virtual ~Check() = default;
  [[nodiscard]] virtual std::string key() const = 0;
  [[nodiscard]] virtual std::string category() const = 0;  ///< software | health | kernels | throughput | image | data
  [[nodiscard]] virtual std::string description() const = 0;
  /// Whether the check reads a GPU (skipped without GPUs and after a GPU hung). Software checks that read a
  /// GPU's state (persistence_mode, mig_state) override this.
  [[nodiscard]] virtual bool uses_gpu() const { return category() != "software"; }
  /// Whether the check is about this machine's NVIDIA driver or GPUs at all. data_read is not: a run of only such
  /// checks on a machine without a driver or GPU is a run like any other, not "could not run".
  [[nodiscard]] virtual bool needs_nvidia() const { return true; }
  /// How the check treats GPUs with MIG instances (MigScope). Physical unless the check says otherwise.
  [[nodiscard]] virtual MigScope mig_scope() const { return MigScope::physical; }
  /// Whether the check belongs to `level` at all (a check outside the level is not listed in the report).
  [[nodiscard]] virtual bool runs_at(Level level) const = 0;
  /// The longest the check may take at `level` on `gpu_count` GPUs; the watchdog fails it with `hang` after that.
  [[nodiscard]] virtual std::chrono::milliseconds deadline(Level level, std::size_t gpu_count) const = 0;
  /// Why the check cannot run here (no driver, no GPU, unsupported): the reason for SKIP, or empty to run.
  [[nodiscard]] virtual std::optional<std::string> not_applicable(const CheckContext& context) const = 0;
  /// Runs the check. One outcome per GPU checked, or a single host-wide outcome (gpu = -1).
  virtual std::vector<GpuOutcome> run(CheckContext& context) = 0;
};

/// Every check gpuenv has, in the order they run (software, health, kernels, throughput).
std::vector<std::unique_ptr<Check>> all_checks();

/// Whether NAME is a variable that changes how CUDA, NCCL, cuBLAS, cuDNN, the frameworks or the loader behave
/// (CUDA_*, NCCL_*, LD_*, ...): what the env_vars check judges (CheckInputs::environment).
bool is_gpu_environment_variable(const std::string& name);

}  // namespace gpuenv::validate
