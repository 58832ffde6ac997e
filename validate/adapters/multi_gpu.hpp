#pragma once
// Multi-GPU measurements of the real adapter: peer-to-peer copy bandwidth through the CUDA driver API and NCCL
// all-reduce bus bandwidth through libnccl. Both libraries are opened with dlopen (never linked) and declared by
// hand, so gpuenv builds and runs without the CUDA toolkit, NCCL or a driver. The timing discipline is the CUDA
// session's (cuda_session.cpp): CUDA events, a warm-up, the data checked after every sample (never zeros), and every
// wait on the GPU bounded by polling with a timeout. The real backend (real_backend.hpp) receives these functions
// from the CLI, which is why they take PCI bus ids rather than GPU indices.
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "validate/adapters/cuda_session.hpp"
#include "validate/backend.hpp"

namespace gpuenv::validate {

/// How the multi-GPU measurements run. The CLI (composition root) fills it; nothing here reads the environment.
struct MultiGpuOptions {
  std::string cuda_library = "libcuda.so.1";  ///< the driver library, by name or path
  /// The validation kernels: the peer-to-peer measurement needs spin_wait, memtest_write and memtest_check from it
  /// and fails `cuda.no_kernels` when the size is 0. The NCCL measurement does not use it.
  FatbinImage fatbin;
  /// NCCL libraries tried in order; the first that loads is used. NCCL's own CUDA runtime loads the system's
  /// libcuda.so.1 whatever cuda_library says.
  std::vector<std::string> nccl_libraries = {"libnccl.so.2", "libnccl.so"};
  /// Longest a single wait on the GPU may last before the measurement reports `cuda.timeout`; its resources are then
  /// leaked (NCCL communicators aborted) rather than freed, since a free could block in a driver that stopped
  /// answering.
  std::chrono::milliseconds operation_timeout{30000};
  std::uint64_t seed = 1;  ///< seeds the data that is moved and checked
};

/// An NCCL library that loaded and has every entry point the measurement uses.
struct NcclLibrary {
  std::string library;  ///< the name or path it was loaded by
  int version = 0;      ///< ncclGetVersion(): 22703 for 2.27.3
};

/// Finds NCCL: the first of `libraries` that dlopen loads decides. Empty when none loads (NCCL not present); fails
/// with `nccl.symbols` (naming the missing entry points) when that library is not NCCL or too old, and `nccl.call`
/// when ncclGetVersion fails. Needs no GPU; the library stays loaded.
Result<std::optional<NcclLibrary>> nccl_library_status(const std::vector<std::string>& libraries);

/// Peer-to-peer copy bandwidth from the GPU at `src_bus_id` to the one at `dst_bus_id`, GB/s (1e9): a 256 MiB
/// buffer (less when either GPU is short of memory) copied with cuMemcpyPeerAsync on a stream of the source held by
/// the spin kernel, `samples` timed samples after a warm-up, the destination cleared before and checked on the device
/// after every sample. Peer access is enabled and left enabled for the process's lifetime (it is local to this
/// process, and a concurrent measurement or NCCL communicator may rely on it). Empty when cuDeviceCanAccessPeer says
/// the source cannot reach the destination. Fails with `validate.bad_request` (samples < 1, an empty or the same bus
/// id twice), `cuda.library`, `cuda.symbols`, `cuda.init`, `cuda.device` (no such bus id), `cuda.no_kernels`,
/// `cuda.module`, `cuda.out_of_memory`, `cuda.call`, `cuda.timeout` or `validate.data_mismatch`.
Result<std::optional<Samples>> measure_p2p_bandwidth(const MultiGpuOptions& options, const std::string& src_bus_id,
                                                     const std::string& dst_bus_id, int samples);

/// NCCL all-reduce (sum of floats, out of place) across the GPUs at `bus_ids`, GB/s (1e9) of bus bandwidth as
/// nccl-tests defines it: bytes / time x 2(n-1)/n, with the slowest rank's time. With a single GPU that factor is 0,
/// so the algorithm bandwidth (bytes / time) is reported instead. Each rank reduces a 256 MiB buffer (less when memory
/// is short) of small integers whose sums are exact; every sample runs several all-reduces (not held by a spin
/// kernel: launch costs are amortised as nccl-tests does) timed by events on each rank's stream, after a warm-up,
/// with the receive buffers cleared before and 4096 elements of every rank's result checked after. Empty when no
/// NCCL library loads. Fails with `validate.bad_request` (samples < 1, no bus id, one twice), `nccl.symbols`,
/// `nccl.call` (with ncclGetErrorString), the `cuda.*` errors of measure_p2p_bandwidth, `cuda.timeout` (the
/// communicators are then aborted) or `validate.data_mismatch`. ncclCommInitAll itself cannot be bounded; the
/// runner's watchdog covers it.
Result<std::optional<Samples>> measure_nccl_allreduce(const MultiGpuOptions& options,
                                                      const std::vector<std::string>& bus_ids, int samples);

/// The NCCL unique id of a multi-node run (ncclGetUniqueId; with NCCL this also starts its bootstrap listener in this
/// process). Empty when no NCCL library loads; fails with `nccl.symbols` or `nccl.call`.
Result<std::optional<std::array<std::uint8_t, 128>>> nccl_unique_id(const MultiGpuOptions& options);

/// This process's part of a multi-node all-reduce (validate/multinode/rendezvous.hpp).
struct NcclRankSpec {
  std::array<std::uint8_t, 128> id{};  ///< rank 0's ncclGetUniqueId
  int first_rank = 0;                  ///< the NCCL rank of the first bus id; the others follow
  int total_ranks = 0;                 ///< NCCL ranks across all nodes
  std::uint64_t buffer_bytes = 0;      ///< per rank and buffer: the same on every rank (at least 16 MiB)
  std::function<Status()> watch;       ///< asked while waiting; its error ends the measurement (communicators aborted)
};

/// measure_nccl_allreduce across nodes: ncclCommInitRank for each of BUS_IDS (one group; bounded by the operation
/// timeout, asking RANKS.watch meanwhile), a fixed buffer size and 5 all-reduces per sample (every rank runs the same
/// sequence), bus bandwidth with n = total_ranks, and every element checked against the sum over all NCCL ranks.
/// Errors as measure_nccl_allreduce, plus `cuda.timeout` when the init does not finish, `nccl.symbols` without
/// ncclCommInitRank, and whatever RANKS.watch returns.
Result<std::optional<Samples>> measure_nccl_allreduce_ranks(const MultiGpuOptions& options,
                                                            const std::vector<std::string>& bus_ids,
                                                            const NcclRankSpec& ranks, int samples);

}  // namespace gpuenv::validate
