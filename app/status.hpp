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
  std::string driver, cc_state;       ///< from the pre-flight's report
  std::vector<std::string> gpu_models;  ///< the distinct GPU models of the pre-flight's report, in order
  std::vector<FailedCheck> failed;
};

/// The node's state. Errors only for bad usage (`status.max_age`): a missing or malformed file is a state (exit 4),
/// so every consumer gets one answer in one form.
Result<NodeStatus> node_status(const StatusRequest& rq, const Services& services);

/// The reason a scheduler records when it takes the node out of service (Slurm's drain reason): one line
/// `gpuenv: <check>: [GPU <n>: ]<message>` for a failed pre-flight, `gpuenv: <state>: <reason>` otherwise, at most 256
/// bytes, with no control characters; "" when healthy. Every reason begins with `gpuenv:`, which is how the
/// Slurm recipe tells its own drains from an administrator's (docs/slurm.md).
std::string drain_reason(const NodeStatus& status);

/// The taint that keeps work off a node whose pre-flight failed (its value: the first failed check).
inline constexpr const char* k_unhealthy_taint = "gpuenv.dev/unhealthy";
/// The startup taint a node pool puts on new nodes, which Cluster Autoscaler treats as "still starting"
/// (kubernetes/autoscaler cluster-autoscaler/FAQ.md: the prefix startup-taint.cluster-autoscaler.kubernetes.io/).
inline constexpr const char* k_startup_taint = "startup-taint.cluster-autoscaler.kubernetes.io/gpuenv";

/// Node Feature Discovery's local feature file for STATUS (kubernetes-sigs/node-feature-discovery,
/// customization-guide: lines `<name>=<value>` under a `# +expiry-time=<RFC 3339>` directive): gpuenv.dev/status,
/// level, driver, cc and, when failed, failed-check; the lines expire at NOW + TTL_S so labels of a node whose
/// pre-flight stopped running disappear. Values are sanitised to label values.
std::string node_features(const NodeStatus& status, std::int64_t now, std::int64_t ttl_s);

/// What the node's taints must become, as `kubectl taint node NODE ARG --overwrite` arguments: healthy removes the
/// startup taint and gpuenv's own; failed removes the startup taint and sets gpuenv.dev/unhealthy=<check>:NoSchedule;
/// any other state (missing, stale, could not run) changes nothing, so a starting node stays unschedulable.
std::vector<std::string> taint_args(const NodeStatus& status);

}  // namespace gpuenv::app
