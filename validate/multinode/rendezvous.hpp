#pragma once
// `validate --multi-node`: the ranks of an NCCL all-reduce across nodes meet over TCP (docs/validate.md "More than
// one node"). Rank 0 listens on the rendezvous port; every other rank connects (retrying until the rendezvous
// deadline) and says hello: protocol version, rank, world size, the run's token (so two jobs on one port cannot
// cross) and how many GPUs it drives. Rank 0 refuses a hello that does not fit, waits until every rank has said
// hello or the deadline passed (then it names every missing rank and its host, and tells the ranks it has), asks
// NCCL for the unique id and sends it to every rank. Each rank then runs the all-reduce on all its GPUs, NCCL ranks
// rank x gpus ... rank x gpus + gpus - 1, while the TCP channel is watched: a peer that closes it (it died) or an
// abort ends the measurement at once, naming the peer. The ranks send their results to rank 0, which returns them all.
// Every wait is bounded: connects, reads and writes have deadlines, and the measurement's own waits are the NCCL
// adapter's (multi_gpu.hpp).
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "validate/backend.hpp"
#include "validate/multinode/result.hpp"
#include "validate/multinode/wire.hpp"

namespace gpuenv::validate::multinode {

using UniqueId = std::array<std::uint8_t, k_unique_id_bytes>;
/// Asked often while the measurement waits; an error ends the measurement (a peer died, rank 0 aborted).
using Watch = std::function<Status()>;

/// Where this rank stands in the run. The CLI fills it from Slurm's variables or from --peers/--rank.
struct NodeConfig {
  int rank = 0;
  int world = 0;
  /// Each rank's host, by rank (hosts[0] is where rank 0 listens and the others connect); used to name ranks.
  std::vector<std::string> hosts;
  int port = 29517;   ///< rank 0's rendezvous port
  std::string token;  ///< the same on every rank of one run (the Slurm job and step, or --run-token)
  std::string local_host;  ///< this rank's name in its hello and in the report
  std::chrono::milliseconds rendezvous_timeout{120000};  ///< until every rank said hello and got the id
  std::chrono::milliseconds result_timeout{120000};      ///< rank 0: from its own result until every rank's
  /// Rank 0's choice of the all-reduce buffer per NCCL rank, sent to every rank with the id (they must agree).
  std::uint64_t buffer_bytes = 256ull << 20;
  /// The samples this rank measures and the level they come from (the nccl_allreduce check sets both); rank 0
  /// refuses a hello whose samples or level differ from its own, naming both.
  int samples = 1;
  std::string level;
};

/// The NCCL side, one implementation per NCCL (multi_gpu.hpp for libnccl; tests hand in others).
struct NcclRanks {
  /// ncclGetUniqueId, called on rank 0 only.
  std::function<Result<UniqueId>()> unique_id;
  /// The all-reduce on this rank's GPUs as NCCL ranks first_rank.., of total_ranks; empty when NCCL is absent.
  std::function<Result<std::optional<Samples>>(const UniqueId& id, int first_rank, int total_ranks,
                                               std::uint64_t buffer_bytes, const Watch& watch)>
      measure;
};

/// Runs this rank's part. GPUS: how many GPUs it drives (every rank must drive as many). Fails with
/// `validate.bad_request` (a config that cannot be: rank out of range, no hosts), `multinode.connect` (rank 0's port
/// cannot be listened on or reached by the deadline), `multinode.peer_missing` (ranks that never said hello, each
/// named with its host), `multinode.refused` (rank 0 refused this rank's hello: the reason), `multinode.protocol`,
/// `multinode.peer_lost` (a peer closed the channel before its result: it died; named), `multinode.timeout` (a read
/// or write passed its deadline), or the measurement's own error.
Result<MultiNodeResult> run_rank(const NodeConfig& config, int gpus, const NicSummary& nics, const NcclRanks& nccl);

}  // namespace gpuenv::validate::multinode
