#pragma once
// A recording in the replay format (gpuenv-replay-v1, docs/replay.md), typed: what the replay adapter answers from,
// and what `gpuenv validate --record FILE` writes after a run (validate/replay/recorder.hpp). render_replay writes
// one as YAML that load_replay_backend reads back to the same values.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "validate/backend.hpp"

namespace gpuenv::validate {

/// One GPU of the inventory: what gpus() lists, its idle and under-load health, its MIG devices in NVML order.
struct ReplayGpu {
  GpuInfo info;
  std::optional<GpuHealth> health, health_under_load;
  std::vector<MigDevice> mig;
};

/// What was measured on one GPU or one MIG device of it.
struct ReplayMeasurements {
  std::optional<std::uint64_t> compute_mismatches;
  std::optional<MemtestResult> memtest;
  std::optional<ConsistencyResult> gemm_consistency;
  std::optional<Samples> hbm_bandwidth, h2d_bandwidth, d2h_bandwidth;
  bool has_gemm_tflops = false;
  std::map<std::string, std::optional<Samples>> gemm_tflops;  ///< dtype -> samples, or empty when unsupported
  std::optional<CcEvidence> cc_evidence;                      ///< evidence as NVML gave it, with the nonce asked
};

/// An injected (or recorded) failure of one method: an error, or a call that never returns.
struct ReplayFault {
  bool hang = false;
  std::string id, message, where;
};

struct ReplayRecording {
  std::string origin;  ///< the file it was read from (errors name it)
  DriverState driver;
  std::vector<ReplayGpu> gpus;
  std::map<std::pair<int, std::string>, ReplayMeasurements> measurements;  ///< (gpu, MIG uuid or "")
  bool has_p2p = false;
  std::map<std::pair<int, int>, std::optional<Samples>> p2p;  ///< empty when peer access is not possible
  bool has_nccl = false;
  std::optional<Samples> nccl;                                 ///< empty when NCCL is not present
  std::map<std::pair<int, std::string>, ReplayFault> faults;   ///< (gpu or -1, method)
};

/// The backend methods a fault may name, and whether each is per GPU and may hang (driver() and gpus() run before
/// any check, outside the runner's watchdog, so they may fail but not hang; cc_evidence may fail only).
struct ReplayMethod {
  std::string_view name;
  bool per_gpu;
  bool may_hang;
};
inline constexpr ReplayMethod k_replay_methods[] = {
    {"driver", false, false},           {"gpus", false, false},
    {"health", true, true},             {"open", true, true},
    {"compute_mismatches", true, true}, {"memtest", true, true},
    {"gemm_consistency", true, true},   {"hbm_bandwidth", true, true},
    {"h2d_bandwidth", true, true},      {"d2h_bandwidth", true, true},
    {"gemm_tflops", true, true},        {"health_under_load", true, true},
    {"p2p_bandwidth", true, true},      {"nccl_allreduce", false, true},
    {"cc_evidence", true, false},
};

/// RECORDING as gpuenv-replay-v1 YAML: `header` (lines written as YAML comments first), then schema, inventory and
/// scenario. Numbers are written in their shortest form that reads back to the same double; text is quoted JSON
/// style, so any bytes of a GPU's name or an error message read back unchanged. A p2p pair not recorded is `~`.
std::string render_replay(const ReplayRecording& recording, std::string_view header);

}  // namespace gpuenv::validate
