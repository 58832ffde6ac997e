#pragma once
// `gpuenv validate` and `gpuenv preflight`: the backend built (real NVML + CUDA, or a replay), the lock's facts and
// the image (--image, unpacked once; its probe runs in the sandbox of images/run) gathered, the checks run.
#include <nlohmann/json.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/attest.hpp"
#include "app/services.hpp"
#include "validate/adapters/image_libraries.hpp"
#include "validate/backend.hpp"
#include "validate/multinode/rendezvous.hpp"
#include "validate/report.hpp"

namespace gpuenv::app {

struct ValidateRequest {
  std::string level = "standard";   ///< quick | standard | long
  std::string gpus;                 ///< "0,1"; empty = all
  std::string lock;                 ///< a lock whose driver floor and CUDA version the checks compare with
  std::string image;                ///< DIR[:REF] or docker://REF: run libraries_load, framework_smoke, cudnn_smoke inside it
  std::vector<std::string> checks;  ///< KEY|PREFIX|CATEGORY filters
  std::string junit;                ///< write JUnit XML here ("" for none)
  std::string backend;              ///< "replay:FILE"; empty = GPUENV_BACKEND, else the real GPU
  std::string thresholds;           ///< a thresholds YAML instead of the built-in one
  std::string mig;                  ///< "on" | "off": what mig_state expects; empty = not checked
  AttestOptions attest;             ///< RIMs, policy and revocation of the cc_attestation check
  std::string metrics;              ///< write Prometheus metrics here (node_exporter's textfile format); "" for none
  bool plain_http = false;          ///< pull a docker:// --image over plain HTTP
  std::string data;                 ///< --data: the directory or file data_read measures; "" = data_read skips
  std::string data_min;             ///< --data-min "5GB/s": data_read's threshold (before the spec's)
  std::string spec;                 ///< --spec: a spec whose validate.data_read_min judges data_read
  /// `--multi-node`: this rank's place in the run (the CLI fills it from Slurm's variables or --peers/--rank);
  /// nccl_allreduce then runs across the nodes.
  std::optional<validate::multinode::NodeConfig> multi_node;
  std::string sysfs_root = "/sys";  ///< where the RDMA ports are read (fixture trees in tests)
  /// The cdi_spec check's spec directories; empty: /etc/cdi, /var/run/cdi and the NVIDIA container toolkit's
  /// spec-dirs (its config.toml), all beneath cdi_root.
  std::vector<std::string> cdi_dirs;
  std::string cdi_root = "/";       ///< host paths named by the specs are looked up beneath this directory
  /// `--record FILE`: every answer of the backend during the run, written as a replay file (docs/replay.md,
  /// "Recording a machine") after the checks; "" for none.
  std::string record;
};

struct Validation {
  validate::Report report;
  /// A check hung: its thread may still be inside the driver, so what it uses was kept alive and the process
  /// must exit as soon as the report is out (std::_Exit).
  bool hung = false;
  /// --record could not be written at the end (the disk filled, say): the report still stands, and this says why.
  std::optional<Error> record_error;
};

/// Validates. Errors: `validate.level`, `validate.record` (--record's directory is missing), `validate.record_empty`
/// (the driver was never read), `validate.record_invalid` (a recording that would not load: a bug), `validate.gpus`, `validate.backend`, `validate.data_min` (--data-min without
/// --data), `config.bad_rate`, those of the lock, the image, the spec and the thresholds; a report with failures is a
/// value, not an error.
Result<Validation> validate(const ValidateRequest& request, Services& services);

struct PreflightRequest {
  std::string status_file = "/run/gpuenv/status.json";
  std::string backend;
  std::string lock;
  /// On NVSwitch systems, wait up to this long for the fabric manager to have registered the GPUs before the checks
  /// run (CUDA cannot start before); 0: no wait. The wait ends early once the fabric is up or there is no NVSwitch.
  std::chrono::seconds wait_fabric{0};
  std::string metrics;  ///< write Prometheus metrics here as well; "" for none
};

struct Preflight {
  validate::Report report;
  nlohmann::ordered_json status;  ///< what was written to status_file (the report's JSON and its exit code)
  int exit_code = 0;
  bool hung = false;
};

/// The quick level, with the status file written atomically.
Result<Preflight> preflight(const PreflightRequest& request, Services& services);

}  // namespace gpuenv::app
