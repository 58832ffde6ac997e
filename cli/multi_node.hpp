#pragma once
// `validate --multi-node`: this rank's place in the run, from Slurm's variables or from --peers/--rank
// (docs/validate.md "More than one node"). The composition root reads the environment; this turns it into a
// NodeConfig, so tests hand in the variables they want.
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "base/error.hpp"
#include "validate/multinode/rendezvous.hpp"

namespace gpuenv::cli {

/// The flags of `validate --multi-node`.
struct MultiNodeOptions {
  bool enabled = false;           ///< --multi-node
  std::string peers;              ///< --peers HOST[:PORT],HOST,...: every rank's host in rank order
  int rank = -1;                  ///< --rank N with --peers
  std::string run_token;          ///< --run-token: the same on every rank of one run
  int port = 0;                   ///< --rendezvous-port (0: the port of --peers' first entry, else 29517)
  std::string timeout = "120s";   ///< --rendezvous-timeout
  std::string buffer = "256MiB";  ///< --nccl-buffer: per NCCL rank
};

/// The run as OPTIONS and ENV (the Slurm variables SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_NODELIST or
/// SLURM_JOB_NODELIST, SLURM_JOB_ID, SLURM_STEP_ID) describe it; LOCAL_HOST names this rank. With --peers the flags
/// decide; without, Slurm's variables must all be there, with one task per node (the node list has as many hosts as
/// SLURM_NTASKS). Fails (kind usage) with `validate.multi_node` naming what is missing or wrong, or
/// `multinode.hostlist`.
Result<validate::multinode::NodeConfig> multi_node_config(const MultiNodeOptions& options,
                                                         const std::map<std::string, std::string>& env,
                                                         const std::string& local_host);

}  // namespace gpuenv::cli
