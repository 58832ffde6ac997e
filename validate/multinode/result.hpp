#pragma once
// What a multi-node all-reduce (rendezvous.hpp) gives back to the nccl_allreduce check: each rank's measurement or
// error, and its NICs. Light on purpose: check.hpp includes it.
#include <optional>
#include <string>
#include <vector>

#include "validate/backend.hpp"
#include "validate/multinode/nic.hpp"

namespace gpuenv::validate::multinode {

/// One rank's part: its measurement, or why it has none.
struct RankReport {
  int rank = 0;
  std::string host;
  int gpus = 0;
  std::optional<Samples> samples;  ///< bus bandwidth per sample (GB/s), empty when it failed or NCCL is absent
  std::string error_id;            ///< the error of a rank that failed ("" when it measured)
  std::string error_message;
  NicSummary nics;  ///< its RDMA ports
};

/// What a rank knows at the end: rank 0 every rank's part, the others their own.
struct MultiNodeResult {
  int rank = 0;
  int world = 0;
  std::vector<RankReport> ranks;
};

}  // namespace gpuenv::validate::multinode
