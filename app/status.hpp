#pragma once
// `gpuenv status` (docs/fleet.md): what the last pre-flight found, read from its status file, for consumers that must
// be fast and must never hang (a Slurm health check, a Kubernetes probe, a prolog): no NVML, no GPU, one bounded
// file read. Exit 0 healthy, 1 failed (naming the checks), 4 missing, unreadable, stale, or could not run.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/services.hpp"
#include "base/error.hpp"

namespace gpuenv::app {

struct StatusRequest {
  std::string status_file = "/run/gpuenv/status.json";
  std::string max_age;  ///< "30m", "24h": older than this is stale; "" : any age
};

/// One check the pre-flight failed.
struct FailedCheck {
  std::string check;    ///< "ecc_errors"
  int gpu = -1;         ///< -1: host-wide
  std::string code;     ///< "ecc_uncorrectable"
  std::string message;
};

struct NodeStatus {
  /// healthy | failed | could_not_run | missing | unreadable | stale
  std::string state;
  int exit_code = 4;
  std::string status_file;
  std::string reason;                 ///< one line: why the state is what it is
  std::string verified_at;            ///< the pre-flight's start (RFC 3339), when known
  std::optional<std::int64_t> age_s;  ///< seconds since the pre-flight finished, when known
  std::string level, backend;
  std::vector<FailedCheck> failed;
};

/// The node's state. Errors only for bad usage (`status.max_age`): a missing or malformed file is a state (exit 4),
/// so every consumer gets one answer in one form.
Result<NodeStatus> node_status(const StatusRequest& rq, const Services& services);

}  // namespace gpuenv::app
