#pragma once
// The validation report: what ran, on which GPUs, with which verdicts, and its three renderings (JSON for programs,
// JUnit XML for CI, a text table for people). The model holds no clock: the runner fills in times from the clock it
// was given, so a report is the same bytes for the same inputs apart from those times.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/backend.hpp"
#include "validate/check.hpp"

namespace gpuenv::validate {

/// The schema tag of the JSON report; a new incompatible layout gets a new tag.
inline constexpr const char* k_report_schema = "gpuenv-validation-v1";

/// One check's entry: its identity, its aggregated status, how long it took and the per-GPU outcomes.
struct CheckReport {
  std::string key;
  std::string category;
  std::string description;
  CheckStatus status = CheckStatus::skip;      ///< worse() over the outcomes; skip only when every outcome skipped
  std::int64_t duration_ms = 0;
  std::vector<GpuOutcome> results;   ///< at least one; gpu = -1 for a host-wide outcome
};

/// A whole validation run.
struct Report {
  std::string schema = k_report_schema;
  CheckStatus status = CheckStatus::skip;      ///< overall_status(checks)
  std::string backend;               ///< GpuBackend::name(): "nvml+cuda", "replay", ...
  Level level = Level::standard;
  std::string started_at;            ///< as given by the caller (RFC 3339 UTC by convention)
  std::int64_t duration_ms = 0;
  bool could_not_run = false;        ///< no driver or no GPU: the GPU checks were skipped (exit 4)
  std::string could_not_run_reason;  ///< "no NVIDIA driver loaded", ...
  std::string could_not_run_hint;    ///< what to do about it, stated once for the whole report
  std::vector<std::string> notes;    ///< backend errors met while gathering the inventory
  DriverState driver;
  std::vector<GpuInfo> gpus;         ///< the GPUs selected for the run
  std::vector<MigDevice> mig_devices;  ///< the MIG devices of those GPUs (MIG on, instances made), in GPU order
  std::vector<CheckReport> checks;
  std::string image;                 ///< the image validated (--image as given); empty for the host alone
  std::string image_digest;          ///< its manifest digest "sha256:<hex>"; what a mark's subject names
  std::string lock_sha256;           ///< hex sha256 of the lock the checks compared with; empty without one
};

/// worse() over the outcomes of one check: fail > warn > measured > pass; skip only when all skipped (or none).
CheckStatus aggregate_outcomes(const std::vector<GpuOutcome>& results);
/// The overall rule: fail if any check failed, else warn if any warned, else pass if any passed, else measured if
/// any figure was only measured, else skip. MEASURED beside passes is PASS overall (nothing judged failed); the
/// summary still counts the measured checks.
CheckStatus overall_status(const std::vector<CheckReport>& checks);

/// The report's status as the JSON and JUnit write it: "could_not_run" when the run could not run (no driver or no
/// GPU), else to_string(report.status): "pass" | "warn" | "fail" | "measured" | "skip".
std::string report_status_text(const Report& report);

/// Process exit code for a report: 4 (k_exit_environment) when it could not run (no driver or no GPU) or when
/// nothing ran at all (every check skipped, so nothing was validated and 0 would claim a pass); otherwise 1 when
/// any check failed and 0 when all passed, warnings and measured figures allowed. Skips beside checks that ran
/// change nothing.
int exit_code(const Report& report);

/// The JSON report ("schema": "gpuenv-validation-v1"). Host-wide outcomes have "gpu": null; an absent code or
/// hint is null; strings that are not valid UTF-8 are repaired (U+FFFD), so dump() cannot throw.
nlohmann::ordered_json report_json(const Report& report);

/// The canonical bytes of a report: report_json with two-space indentation and a final newline. What
/// `validate --json` prints, and what a mark's report digest names (docs/mark.md).
std::string report_bytes(const Report& report);

/// JUnit XML: one testsuite "gpuenv-validate", one testcase per (check, GPU); FAIL is a <failure> carrying the code
/// and hint, SKIP a <skipped message=...>, WARN and MEASURED a passed testcase with "WARN" or "MEASURED" and the
/// message in <system-out>; the suite's status property is report_status_text(). Text is
/// XML-escaped and characters XML 1.0 forbids are replaced.
std::string report_junit(const Report& report);

/// GPU indices as ranges: {0,1,2,3,5,7} -> "0-3,5,7" (sorted, duplicates dropped).
std::string gpu_ranges(std::vector<int> gpus);

/// The human table: a header naming the backend (the replay backend says it is not a real GPU), the driver and
/// GPUs, then the checks and a summary line. With one GPU: one row per check and GPU, hints under
/// WARN/FAIL/SKIP/MEASURED rows. With several GPUs: one row per check whose status column lists the GPUs per status
/// ("PASS 0-6, FAIL 7"), detail lines only for the GPUs that are not passing, and a per-GPU table of the measured
/// throughput figures. A run that could not run says so once with its hint, lists the checks that ran, counts the
/// GPU checks it skipped in one line, and ends "result: COULD NOT RUN". ANSI colour codes only when `colour` is true.
std::string report_text(const Report& report, bool colour);

}  // namespace gpuenv::validate
