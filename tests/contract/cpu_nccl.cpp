// A CPU stand-in for libnccl.so.2 (NCCL 2.27.3), for the contract tests of the multi-GPU adapter on machines
// without a GPU. It runs on the CPU CUDA driver (cpu_cuda.cpp, linked): device memory is host memory and every rank's
// all-reduce is queued on that rank's stream (cpucuda_enqueue), so ranks meet on their streams' worker threads as
// NCCL kernels meet on the GPUs. Only float32 sum all-reduces are supported; each rank sums every rank's input in
// rank order, so all ranks get identical bits.
//
// The communicators of one ncclCommInitAll form a clique; the k-th all-reduce of every rank is round k of the clique.
// A round's work on each rank: wait at the first barrier until every rank arrived (their inputs are then ready, as
// their streams ran everything queued before), sum, wait at the second barrier (no rank may overwrite its send buffer
// while another still reads it). ncclCommAbort wakes the waiters of its clique, which then return without computing.
//
// Environment (read by this test double only, at each call):
//   CPU_NCCL_FAULTS   comma-separated faults:
//     corrupt       after computing, rank 1's recv[5] (rank 0's with one rank) gets +1.0f
//     hang          the round waits at its first barrier until the clique is aborted
//     async_error   ncclCommGetAsyncError reports ncclRemoteError (6) once the clique finished its first all-reduce,
//                   and every later all-reduce stalls at its first barrier until the clique is aborted, as a broken
//                   peer would stall it (so a test sees the error on every poll, however fast the first round ran)
//     init          ncclCommInitAll fails with ncclUnhandledCudaError (1)
//
// cpunccl_allreduce_count() tells tests how many all-reduces were queued.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "tests/contract/cpu_cuda_ext.h"

namespace {

constexpr int k_success = 0;                // ncclSuccess
constexpr int k_unhandled_cuda_error = 1;   // ncclUnhandledCudaError
constexpr int k_system_error = 2;           // ncclSystemError
constexpr int k_internal_error = 3;         // ncclInternalError
constexpr int k_invalid_argument = 4;       // ncclInvalidArgument
constexpr int k_invalid_usage = 5;          // ncclInvalidUsage
constexpr int k_remote_error = 6;           // ncclRemoteError
constexpr int k_in_progress = 7;            // ncclInProgress
constexpr int k_float32 = 7;                // ncclFloat32
constexpr int k_sum = 0;                    // ncclSum
constexpr int k_version = 22703;            // 2.27.3
constexpr std::size_t k_corrupt_index = 5;  // the element the `corrupt` fault changes

struct Faults {
  bool corrupt = false, hang = false, async_error = false, init = false;
};

Faults faults() {
  Faults f;
  const char* v = std::getenv("CPU_NCCL_FAULTS");
  std::string_view rest = v ? v : "";
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view name = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name == "corrupt") f.corrupt = true;
    if (name == "hang") f.hang = true;
    if (name == "async_error") f.async_error = true;
    if (name == "init") f.init = true;
  }
  return f;
}

// NCCL keeps one last-error text per process; per thread keeps concurrent tests from reading each other's.
thread_local std::string t_last_error;
thread_local int t_group_depth = 0;
std::atomic<unsigned long long> g_allreduce_count{0};

int fail(int rc, std::string message) {
  t_last_error = std::move(message);
  return rc;
}

// One all-reduce of the clique: what every rank brought to it and how far each got.
struct Round {
  explicit Round(int n) : sends(n), counts(n), streams(n), registered(n), arrived(n) {}
  std::vector<const float*> sends;
  std::vector<std::size_t> counts;
  std::vector<void*> streams;  // set at call time, to refuse two ranks on one stream (their work would deadlock)
  std::vector<bool> registered, arrived;
  int arrived_first = 0, arrived_second = 0, left = 0;
  bool stall = false;     // a rank's call saw `hang` (or `async_error` past round 0): never released but by an abort
  bool released = false;  // every rank passed the first barrier: all of them will reach the second
  bool skip = false;      // released, but the ranks disagree on the count: nothing is computed
};

// The communicators of one ncclCommInitAll. Owned by its communicators and by the work queued for them, so work still
// queued when a communicator is destroyed runs against live state.
struct Clique {
  explicit Clique(int n) : size(n), issued(n, 0), gone(n, false), live(n) {}
  std::mutex mutex;
  std::condition_variable changed;
  const int size;
  std::vector<std::uint64_t> issued;  // all-reduces queued by each rank: its next call is round issued[rank]
  std::vector<bool> gone;             // the rank's communicator was destroyed or aborted
  int live;                           // communicators not yet destroyed or aborted
  bool aborted = false;
  int error = k_success;          // an asynchronous error (the ranks disagreed on a count, or the host ran short)
  std::uint64_t rounds_done = 0;  // rounds released past the first barrier and left by every rank
  std::map<std::uint64_t, Round> rounds;

  // Round `k` can never fill: a rank that has not arrived is gone and never queued it. Called with `mutex` held.
  [[nodiscard]] bool doomed(std::uint64_t k, const Round& round) const {
    for (int r = 0; r < size; ++r) {
      if (!round.arrived[r] && gone[r] && issued[r] <= k) return true;
    }
    return false;
  }
};

struct Comm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  int device = 0;
};

// Live communicators, so a stale or foreign handle is refused rather than followed.
std::mutex g_comms_mutex;
auto& g_comms = *new std::unordered_set<const void*>;  // never destroyed: a hung round may outlive main()

// The clique and rank of a live communicator (a null clique when it is not live), copied under the registry's lock
// so a concurrent destroy cannot free them under the caller.
struct CommRef {
  std::shared_ptr<Clique> clique;
  int rank = 0;
};

CommRef find_comm(const void* handle) {
  std::lock_guard lock(g_comms_mutex);
  if (!g_comms.count(handle)) return {};
  const auto* comm = static_cast<const Comm*>(handle);
  return {comm->clique, comm->rank};
}

// Removes the handle from the live set; nullptr when it was not live.
Comm* take_comm(void* handle) {
  std::lock_guard lock(g_comms_mutex);
  return g_comms.erase(handle) ? static_cast<Comm*>(handle) : nullptr;
}

// Leaves the communicator's clique and frees it. Either way the clique's waiters are told: with `abort` they all
// return; without it, those waiting on this rank for a round it never queued do.
void release(Comm* comm, bool abort) {
  {
    std::lock_guard lock(comm->clique->mutex);
    Clique& c = *comm->clique;
    c.gone[comm->rank] = true;
    --c.live;
    // With no communicator left nothing could abort a stalled round later, so its waiters go now.
    if (abort || c.live == 0) c.aborted = true;
  }
  comm->clique->changed.notify_all();
  delete comm;
}

bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

// out[i] = sends[0][i] + sends[1][i] + ... in rank order; chunked so each rank's chunk stays in cache.
void reduce(const std::vector<const float*>& sends, float* out, std::size_t count) {
  constexpr std::size_t k_chunk = 4096;
  for (std::size_t begin = 0; begin < count; begin += k_chunk) {
    const std::size_t end = std::min(count, begin + k_chunk);
    std::copy(sends[0] + begin, sends[0] + end, out + begin);
    for (std::size_t q = 1; q < sends.size(); ++q) {
      const float* in = sends[q];
      for (std::size_t i = begin; i < end; ++i) out[i] += in[i];
    }
  }
}

// One rank's part of one round, queued on its stream.
struct Work {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  std::uint64_t round = 0;
  const float* send = nullptr;
  float* recv = nullptr;
  std::size_t count = 0;
  bool corrupt = false;
};

// Called with the clique's mutex held.
void leave(Clique& c, std::uint64_t k, Round& round) {
  if (++round.left < c.size) return;
  if (round.released) ++c.rounds_done;
  c.rounds.erase(k);  // the last rank out frees the round
}

void run_work(Work& w) {
  Clique& c = *w.clique;
  std::unique_lock lock(c.mutex);
  auto found = c.rounds.find(w.round);
  if (found == c.rounds.end()) return;  // cannot happen: the call registered the round and only leaving erases it
  Round& round = found->second;
  round.sends[w.rank] = w.send;
  round.counts[w.rank] = w.count;
  round.arrived[w.rank] = true;
  if (++round.arrived_first == c.size && !round.stall && !c.aborted) {
    round.released = true;
    round.skip = std::any_of(round.counts.begin(), round.counts.end(), [&](std::size_t n) { return n != w.count; });
    if (round.skip && c.error == k_success) c.error = k_invalid_usage;
  }
  c.changed.notify_all();
  c.changed.wait(lock, [&] { return round.released || c.aborted || c.doomed(w.round, round); });
  if (!round.released) {
    leave(c, w.round, round);
    return;
  }

  // Released: every rank's input is ready and nobody writes a send buffer before the second barrier.
  bool computed = !round.skip && !c.aborted;
  std::vector<float> scratch;
  float* target = w.recv;
  if (computed) {
    // Read unlocked: past the release nobody writes them, and the round lives until this rank leaves it.
    const std::vector<const float*>& sends = round.sends;
    // In place (or aliased with another rank's input): writing recv now would change what the others still read,
    // so the sum goes to scratch and is copied after the second barrier.
    bool aliased = false;
    for (const float* s : sends) aliased = aliased || overlaps(w.recv, w.count * 4, s, w.count * 4);
    lock.unlock();
    try {
      if (aliased) {
        scratch.resize(w.count);
        target = scratch.data();
      }
      reduce(sends, target, w.count);
    } catch (const std::bad_alloc&) {
      computed = false;
    }
    lock.lock();
    if (!computed && c.error == k_success) c.error = k_system_error;
  }
  if (++round.arrived_second == c.size) c.changed.notify_all();
  // No abort escape here: every rank is past the first barrier and will arrive, and one that left early could have
  // its buffers freed while a slower rank still reads them.
  c.changed.wait(lock, [&] { return round.arrived_second == c.size; });
  leave(c, w.round, round);
  lock.unlock();

  if (!computed) return;
  if (target != w.recv) std::copy(scratch.begin(), scratch.end(), w.recv);
  if (w.corrupt && w.rank == std::min(1, c.size - 1) && w.count > 0)
    w.recv[std::min(k_corrupt_index, w.count - 1)] += 1.0f;
}

void run_work_entry(void* arg) {
  std::unique_ptr<Work> work(static_cast<Work*>(arg));
  run_work(*work);
}

// The C entry points must not throw: a host failure becomes ncclSystemError.
template <typename F>
int guarded(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(k_system_error, "the CPU NCCL ran out of host memory");
  } catch (const std::exception& e) {
    return fail(k_internal_error, std::string("the CPU NCCL failed: ") + e.what());
  }
}

int allreduce(const void* send, void* recv, std::size_t count, int datatype, int op, void* handle, void* stream) {
  const CommRef comm = find_comm(handle);
  if (!comm.clique) return fail(k_invalid_argument, "ncclAllReduce: comm is not a live communicator");
  if (datatype != k_float32) {
    return fail(k_invalid_argument, "ncclAllReduce: datatype " + std::to_string(datatype) +
                                        " is not supported by the CPU NCCL (only ncclFloat32, 7)");
  }
  if (op != k_sum)
    return fail(k_invalid_argument, "ncclAllReduce: op " + std::to_string(op) + " is not supported (only ncclSum, 0)");
  if (count > SIZE_MAX / 4)
    return fail(k_invalid_argument, "ncclAllReduce: count " + std::to_string(count) + " overflows");
  const auto bytes = static_cast<unsigned long long>(count) * 4;
  const std::string of_device_memory = " is not " + std::to_string(bytes) + " bytes of device memory";
  if (count > 0) {
    if (!send || !cpucuda_is_device_memory(reinterpret_cast<std::uintptr_t>(send), bytes))
      return fail(k_invalid_argument, "ncclAllReduce: sendbuff" + of_device_memory);
    if (!recv || !cpucuda_is_device_memory(reinterpret_cast<std::uintptr_t>(recv), bytes))
      return fail(k_invalid_argument, "ncclAllReduce: recvbuff" + of_device_memory);
  }
  Clique& c = *comm.clique;
  // The CPU driver runs null-stream work at once on the caller's thread, where rank 0 would wait for ranks not yet
  // called: a deadlock, not a test.
  if (!stream && c.size > 1)
    return fail(k_invalid_usage, "ncclAllReduce: the CPU NCCL needs a stream per rank when there are several ranks");
  const Faults f = faults();

  auto work = std::make_unique<Work>();
  work->clique = comm.clique;
  work->rank = comm.rank;
  work->send = static_cast<const float*>(send);
  work->recv = static_cast<float*>(recv);
  work->count = count;
  work->corrupt = f.corrupt;
  {
    std::lock_guard lock(c.mutex);
    if (c.aborted) return fail(k_invalid_usage, "ncclAllReduce: the communicator's clique was aborted");
    const std::uint64_t k = c.issued[comm.rank];
    Round& round = c.rounds.try_emplace(k, c.size).first->second;
    for (int q = 0; q < c.size; ++q) {
      if (q != comm.rank && round.registered[q] && round.streams[q] == stream) {
        return fail(k_invalid_usage, "ncclAllReduce: ranks " + std::to_string(q) + " and " +
                                         std::to_string(comm.rank) + " share a stream; each rank needs its own");
      }
    }
    round.streams[comm.rank] = stream;
    round.registered[comm.rank] = true;
    round.stall = round.stall || f.hang || (f.async_error && k > 0);
    work->round = k;
    ++c.issued[comm.rank];
  }
  // Not under the clique's lock: a null stream runs the work here and now, and the work takes that lock.
  Work* raw = work.release();
  if (const int rc = cpucuda_enqueue(stream, run_work_entry, raw); rc != 0) {
    std::unique_ptr<Work> back(raw);
    std::lock_guard lock(c.mutex);
    --c.issued[comm.rank];
    if (auto it = c.rounds.find(back->round); it != c.rounds.end()) {
      it->second.registered[comm.rank] = false;
      it->second.streams[comm.rank] = nullptr;
      const bool unused = std::none_of(it->second.registered.begin(), it->second.registered.end(),
                                       [](bool b) { return b; });
      if (unused) c.rounds.erase(it);
    }
    return fail(k_unhandled_cuda_error,
                "ncclAllReduce: queueing on the stream failed with CUDA error " + std::to_string(rc));
  }
  g_allreduce_count.fetch_add(1, std::memory_order_relaxed);
  return k_success;
}

}  // namespace

extern "C" {

int ncclGetVersion(int* version) {
  if (!version) return fail(k_invalid_argument, "ncclGetVersion: version is null");
  *version = k_version;
  return k_success;
}

int ncclCommInitAll(void** comms, int ndev, const int* devlist) {
  return guarded([&] {
    if (!comms) return fail(k_invalid_argument, "ncclCommInitAll: comms is null");
    if (ndev < 1) return fail(k_invalid_argument, "ncclCommInitAll: ndev " + std::to_string(ndev) + " is below 1");
    if (faults().init)
      return fail(k_unhandled_cuda_error, "ncclCommInitAll: injected failure (CPU_NCCL_FAULTS=init)");
    const int devices = cpucuda_device_count();
    std::vector<int> ordinals(static_cast<std::size_t>(ndev));
    for (int r = 0; r < ndev; ++r) {
      const int d = devlist ? devlist[r] : r;
      if (d < 0 || d >= devices) {
        return fail(k_invalid_argument, "ncclCommInitAll: device " + std::to_string(d) + " of rank " +
                                            std::to_string(r) + " is not one of the " + std::to_string(devices) +
                                            " devices");
      }
      if (std::find(ordinals.begin(), ordinals.begin() + r, d) != ordinals.begin() + r)
        return fail(k_invalid_argument, "ncclCommInitAll: device " + std::to_string(d) + " is listed twice");
      ordinals[static_cast<std::size_t>(r)] = d;
    }
    auto clique = std::make_shared<Clique>(ndev);
    std::vector<std::unique_ptr<Comm>> made;
    for (int r = 0; r < ndev; ++r) made.push_back(std::make_unique<Comm>(Comm{clique, r, ordinals[r]}));
    {
      std::lock_guard lock(g_comms_mutex);
      for (const auto& comm : made) g_comms.insert(comm.get());
    }
    for (int r = 0; r < ndev; ++r) comms[r] = made[static_cast<std::size_t>(r)].release();
    return k_success;
  });
}

int ncclCommDestroy(void* comm) {
  if (!comm) return k_success;  // as NCCL
  Comm* c = take_comm(comm);
  if (!c) return fail(k_invalid_argument, "ncclCommDestroy: comm is not a live communicator");
  release(c, false);
  return k_success;
}

int ncclCommAbort(void* comm) {
  if (!comm) return k_success;  // as NCCL
  Comm* c = take_comm(comm);
  if (!c) return fail(k_invalid_argument, "ncclCommAbort: comm is not a live communicator");
  release(c, true);
  return k_success;
}

int ncclCommGetAsyncError(void* comm, int* state) {
  if (!state) return fail(k_invalid_argument, "ncclCommGetAsyncError: asyncError is null");
  const CommRef ref = find_comm(comm);
  if (!ref.clique) return fail(k_invalid_argument, "ncclCommGetAsyncError: comm is not a live communicator");
  std::lock_guard lock(ref.clique->mutex);
  *state = ref.clique->error;
  if (*state == k_success && ref.clique->rounds_done >= 1 && faults().async_error) *state = k_remote_error;
  return k_success;
}

const char* ncclGetErrorString(int result) {
  switch (result) {
    case k_success: return "no error";
    case k_unhandled_cuda_error: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case k_system_error: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case k_internal_error: return "internal error - please report this issue to the NCCL developers";
    case k_invalid_argument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case k_invalid_usage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case k_remote_error: return "remote process exited or there was a network error";
    case k_in_progress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(void*) { return t_last_error.c_str(); }

int ncclGroupStart() {
  ++t_group_depth;
  return k_success;
}

int ncclGroupEnd() {
  if (t_group_depth == 0) return fail(k_invalid_usage, "ncclGroupEnd: not in a group call");
  --t_group_depth;
  return k_success;
}

int ncclAllReduce(const void* send, void* recv, std::size_t count, int datatype, int op, void* comm, void* stream) {
  return guarded([&] { return allreduce(send, recv, count, datatype, op, comm, stream); });
}

unsigned long long cpunccl_allreduce_count(void) { return g_allreduce_count.load(); }

}  // extern "C"
