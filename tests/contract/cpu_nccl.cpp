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
//     init_hang     ncclCommInitRank stays inside the call for 3 s, then fails with ncclSystemError (2), as an init
//                   whose bootstrap never completes (a caller that stops waiting must not free what it may use)
//     die           across processes: this process kills itself (SIGKILL) in its second all-reduce, after sending
//                   half of its buffer, as a node that dies mid-run
//   CPU_NCCL_ROOT_ADDR  the IPv4 address ncclGetUniqueId puts in the id (where the other processes reach this one);
//                   default: the first non-loopback IPv4 address of an interface that is up, else 127.0.0.1
//
// Across processes (ncclGetUniqueId + ncclCommInitRank), the ranks meet over TCP: ncclGetUniqueId starts a root
// thread listening on an ephemeral port, and the id carries its IPv4 address, port and a random nonce.
// ncclCommInitRank connects to the root, says its rank, the rank count and the nonce, and returns (the clique is
// complete when the root has every rank; all-reduces wait for that). Each all-reduce, on the rank's stream, sends
// the rank's buffer to the root, which sums every rank's buffer in rank order and sends the sum back to each, so all
// ranks get identical bits. A rank that dies closes its socket: the root then closes every rank's socket and each
// survivor's ncclCommGetAsyncError says ncclRemoteError (6), with the stream's work returning unfinished. Every
// socket wait is bounded (60 s), so no thread of the double blocks forever.
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

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "tests/contract/cpu_cuda_ext.h"
#include "tests/contract/thread_slot.hpp"

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
  bool corrupt = false, hang = false, async_error = false, init = false, die = false, init_hang = false;
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
    if (name == "die") f.die = true;
    if (name == "init_hang") f.init_hang = true;
  }
  return f;
}

// Per-thread state without thread_local (dynamic TLS in a dlopen'd library: see "No thread_local" in cpu_cuda.cpp).
//
// NCCL keeps one last-error text per process; one per thread keeps ranks running in threads of one test from reading
// each other's. Never destroyed (a hung round may outlive main()); an entry lives as long as the process, so the text
// ncclGetLastError returns stays valid until the same thread fails again.
std::mutex g_last_errors_mutex;
auto& g_last_errors = *new std::map<std::thread::id, std::string>;

// The calling thread's ncclGroupStart nesting depth, in a pthread key (a new thread starts outside any group).
pthread_key_t group_depth_key() {
  static const pthread_key_t key = gpuenv::testing::new_thread_slot();
  return key;
}

std::uintptr_t group_depth() { return reinterpret_cast<std::uintptr_t>(pthread_getspecific(group_depth_key())); }

// False when the thread's slot could not be allocated.
bool set_group_depth(std::uintptr_t depth) {
  return pthread_setspecific(group_depth_key(), reinterpret_cast<void*>(depth)) == 0;
}

std::atomic<unsigned long long> g_allreduce_count{0};

// Never throws (the C entry points call it from their handlers): without memory for the text, the code still tells.
int fail(int rc, std::string message) {
  try {
    std::lock_guard lock(g_last_errors_mutex);
    g_last_errors[std::this_thread::get_id()] = std::move(message);
  } catch (const std::exception&) {
    // the thread keeps its previous text
  }
  return rc;
}

const char* last_error() {
  std::lock_guard lock(g_last_errors_mutex);
  return g_last_errors[std::this_thread::get_id()].c_str();
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

// ---- across processes -------------------------------------------------------------------------------------------

constexpr int k_socket_wait_ms = 60000;       // the longest any socket wait of the double lasts
constexpr char k_id_magic[8] = {'C', 'P', 'U', 'N', 'C', 'C', 'L', '1'};
constexpr std::size_t k_max_remote_ranks = 256;

// Sends or receives exactly `bytes`, each wait bounded; false on EOF, error or timeout.
bool exchange(int fd, void* data, std::size_t bytes, bool sending) {
  auto* p = static_cast<char*>(data);
  std::size_t done = 0;
  while (done < bytes) {
    pollfd pfd{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
    if (::poll(&pfd, 1, k_socket_wait_ms) <= 0) return false;
    const ssize_t n = sending ? ::send(fd, p + done, bytes - done, MSG_NOSIGNAL) : ::recv(fd, p + done, bytes - done, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

struct RemoteHello {
  std::uint64_t nonce = 0;
  std::int32_t rank = 0, nranks = 0;
};

// The root: accepts every rank, then runs rounds until a rank leaves. Owns the listening socket and the ranks' sockets.
void run_root(int listener, std::uint64_t nonce) {
  std::vector<int> fds;
  int nranks = 0;
  auto close_all = [&] {
    for (int fd : fds) {
      if (fd >= 0) {
        ::shutdown(fd, SHUT_RDWR);
        ::close(fd);
      }
    }
    ::close(listener);
  };
  while (nranks == 0 || static_cast<int>(std::count_if(fds.begin(), fds.end(), [](int f) { return f >= 0; })) < nranks) {
    pollfd pfd{listener, POLLIN, 0};
    if (::poll(&pfd, 1, k_socket_wait_ms) <= 0) return close_all();
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) continue;
    RemoteHello h;
    if (!exchange(fd, &h, sizeof h, false) || h.nonce != nonce || h.nranks < 1 ||
        h.nranks > static_cast<int>(k_max_remote_ranks) || (nranks != 0 && h.nranks != nranks) || h.rank < 0 ||
        h.rank >= h.nranks || (nranks != 0 && fds[static_cast<std::size_t>(h.rank)] >= 0)) {
      ::close(fd);  // a stray or foreign connection
      continue;
    }
    if (nranks == 0) {
      nranks = h.nranks;
      fds.assign(static_cast<std::size_t>(nranks), -1);
    }
    fds[static_cast<std::size_t>(h.rank)] = fd;
  }
  std::vector<float> sum, in;
  for (;;) {
    std::uint64_t count = 0;
    for (int r = 0; r < nranks; ++r) {
      std::uint64_t n = 0;
      if (!exchange(fds[static_cast<std::size_t>(r)], &n, sizeof n, false) || (r > 0 && n != count) || n > (1ull << 32))
        return close_all();  // a rank left (destroyed, aborted or dead) or disagrees: the clique is over
      count = n;
      (r == 0 ? sum : in).resize(count);
      if (!exchange(fds[static_cast<std::size_t>(r)], (r == 0 ? sum : in).data(), count * 4, false)) return close_all();
      if (r > 0)
        for (std::uint64_t i = 0; i < count; ++i) sum[i] += in[i];
    }
    for (int r = 0; r < nranks; ++r)
      if (!exchange(fds[static_cast<std::size_t>(r)], sum.data(), count * 4, true)) return close_all();
  }
}

std::uint32_t root_address() {
  if (const char* text = std::getenv("CPU_NCCL_ROOT_ADDR")) {
    in_addr a{};
    if (::inet_pton(AF_INET, text, &a) == 1) return a.s_addr;
  }
  ifaddrs* list = nullptr;
  std::uint32_t out = htonl(INADDR_LOOPBACK);
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
        continue;
      out = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
      break;
    }
    ::freeifaddrs(list);
  }
  return out;
}

int get_unique_id(char* id) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return fail(k_system_error, "ncclGetUniqueId: socket failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, 64) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(listener);
    return fail(k_system_error, std::string("ncclGetUniqueId: cannot listen: ") + std::strerror(errno));
  }
  const std::uint64_t nonce = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  const std::uint32_t address = root_address();
  std::memset(id, 0, 128);
  std::memcpy(id, k_id_magic, 8);
  std::memcpy(id + 8, &address, 4);
  std::memcpy(id + 12, &a.sin_port, 2);
  std::memcpy(id + 16, &nonce, 8);
  std::thread(run_root, listener, nonce).detach();
  return k_success;
}

// One rank's connection to the root.
struct Remote {
  int fd = -1;
  int rank = 0, size = 0;
  std::atomic<int> error{k_success};
  std::atomic<bool> aborted{false};
  std::atomic<std::uint64_t> issued{0};
  ~Remote() {
    if (fd >= 0) ::close(fd);
  }
};

std::mutex g_remote_mutex;
auto& g_remotes = *new std::map<const void*, std::shared_ptr<Remote>>;  // live remote communicators

std::shared_ptr<Remote> find_remote(const void* handle) {
  std::lock_guard lock(g_remote_mutex);
  auto it = g_remotes.find(handle);
  return it == g_remotes.end() ? nullptr : it->second;
}

int init_rank(void** comm, int nranks, const char* id, int rank) {
  if (!comm) return fail(k_invalid_argument, "ncclCommInitRank: comm is null");
  if (nranks < 1 || nranks > static_cast<int>(k_max_remote_ranks) || rank < 0 || rank >= nranks)
    return fail(k_invalid_argument, "ncclCommInitRank: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  if (std::memcmp(id, k_id_magic, 8) != 0) return fail(k_invalid_argument, "ncclCommInitRank: not a CPU NCCL unique id");
  if (faults().init) return fail(k_unhandled_cuda_error, "ncclCommInitRank: injected failure (CPU_NCCL_FAULTS=init)");
  if (faults().init_hang) {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    return fail(k_system_error, "ncclCommInitRank: injected hang (CPU_NCCL_FAULTS=init_hang)");
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  std::memcpy(&a.sin_addr.s_addr, id + 8, 4);
  std::memcpy(&a.sin_port, id + 12, 2);
  RemoteHello h;
  std::memcpy(&h.nonce, id + 16, 8);
  h.rank = rank;
  h.nranks = nranks;
  auto remote = std::make_shared<Remote>();
  remote->rank = rank;
  remote->size = nranks;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(k_socket_wait_ms);
  for (;;) {
    remote->fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (remote->fd >= 0 && ::connect(remote->fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) break;
    const int err = errno;
    if (remote->fd >= 0) ::close(remote->fd);
    remote->fd = -1;
    if (std::chrono::steady_clock::now() > deadline)
      return fail(k_system_error, std::string("ncclCommInitRank: cannot reach the root: ") + std::strerror(err));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int one = 1;
  (void)::setsockopt(remote->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!exchange(remote->fd, &h, sizeof h, true)) return fail(k_system_error, "ncclCommInitRank: the root went away");
  void* handle = new char(0);  // an address of its own, never reused while the process lives
  {
    std::lock_guard lock(g_remote_mutex);
    g_remotes[handle] = remote;
  }
  *comm = handle;
  return k_success;
}

struct RemoteWork {
  std::shared_ptr<Remote> remote;
  const float* send = nullptr;
  float* recv = nullptr;
  std::uint64_t count = 0, round = 0;
  bool die = false, hang = false, corrupt = false;
};

void run_remote_work(void* arg) {
  std::unique_ptr<RemoteWork> w(static_cast<RemoteWork*>(arg));
  Remote& r = *w->remote;
  if (r.error.load() != k_success || r.aborted.load()) return;
  while (w->hang && !r.aborted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::uint64_t n = w->count;
  std::vector<float> sent(w->send, w->send + w->count);  // the input may alias the output
  bool ok = exchange(r.fd, &n, sizeof n, true);
  if (ok && w->die && w->round == 1) {
    ok = exchange(r.fd, sent.data(), w->count * 2, true);  // half the bytes, then the node is gone
    ::kill(::getpid(), SIGKILL);
  }
  ok = ok && exchange(r.fd, sent.data(), w->count * 4, true) && exchange(r.fd, w->recv, w->count * 4, false);
  if (!ok) {
    int expected = k_success;
    r.error.compare_exchange_strong(expected, k_remote_error);
    return;
  }
  if (w->corrupt && r.rank == std::min(1, r.size - 1) && w->count > 0) w->recv[std::min<std::uint64_t>(k_corrupt_index, w->count - 1)] += 1.0f;
}

int remote_allreduce(const std::shared_ptr<Remote>& remote, const void* send, void* recv, std::size_t count, void* stream) {
  if (remote->aborted.load()) return fail(k_invalid_usage, "ncclAllReduce: the communicator was aborted");
  const Faults f = faults();
  auto work = std::make_unique<RemoteWork>();
  work->remote = remote;
  work->send = static_cast<const float*>(send);
  work->recv = static_cast<float*>(recv);
  work->count = count;
  work->round = remote->issued.fetch_add(1);
  work->die = f.die;
  work->hang = f.hang;
  work->corrupt = f.corrupt;
  RemoteWork* raw = work.release();
  if (const int rc = cpucuda_enqueue(stream, run_remote_work, raw); rc != 0) {
    delete raw;
    return fail(k_unhandled_cuda_error, "ncclAllReduce: queueing on the stream failed with CUDA error " + std::to_string(rc));
  }
  g_allreduce_count.fetch_add(1, std::memory_order_relaxed);
  return k_success;
}

// Ends a remote communicator: its socket is shut down, so work blocked on it returns at once.
int end_remote(void* handle) {
  std::shared_ptr<Remote> remote;
  {
    std::lock_guard lock(g_remote_mutex);
    auto it = g_remotes.find(handle);
    if (it == g_remotes.end()) return -1;
    remote = it->second;
    g_remotes.erase(it);
  }
  remote->aborted = true;
  ::shutdown(remote->fd, SHUT_RDWR);
  delete static_cast<char*>(handle);  // the handle's own byte; the work still queued holds the Remote itself
  return k_success;
}

int allreduce(const void* send, void* recv, std::size_t count, int datatype, int op, void* handle, void* stream) {
  const std::shared_ptr<Remote> remote = find_remote(handle);
  const CommRef comm = remote ? CommRef{} : find_comm(handle);
  if (remote && datatype == k_float32 && op == k_sum && count <= (1ull << 32)) {
    const auto bytes = static_cast<unsigned long long>(count) * 4;
    if (count > 0 && (!send || !cpucuda_is_device_memory(reinterpret_cast<std::uintptr_t>(send), bytes) || !recv ||
                      !cpucuda_is_device_memory(reinterpret_cast<std::uintptr_t>(recv), bytes)))
      return fail(k_invalid_argument, "ncclAllReduce: a buffer is not device memory of the right size");
    if (!stream) return fail(k_invalid_usage, "ncclAllReduce: the CPU NCCL needs a stream across processes");
    return remote_allreduce(remote, send, recv, count, stream);
  }
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

int ncclGetUniqueId(char* id) {
  if (!id) return fail(k_invalid_argument, "ncclGetUniqueId: uniqueId is null");
  return guarded([&] { return get_unique_id(id); });
}

// ncclUniqueId is a 128-byte struct passed by value: the C ABI passes it as a copy the callee reads through memory.
struct CpuNcclUniqueId {
  char internal[128];
};

int ncclCommInitRank(void** comm, int nranks, CpuNcclUniqueId id, int rank) {
  return guarded([&] { return init_rank(comm, nranks, id.internal, rank); });
}

int ncclCommDestroy(void* comm) {
  if (!comm) return k_success;  // as NCCL
  if (end_remote(comm) == k_success) return k_success;
  Comm* c = take_comm(comm);
  if (!c) return fail(k_invalid_argument, "ncclCommDestroy: comm is not a live communicator");
  release(c, false);
  return k_success;
}

int ncclCommAbort(void* comm) {
  if (!comm) return k_success;  // as NCCL
  if (end_remote(comm) == k_success) return k_success;
  Comm* c = take_comm(comm);
  if (!c) return fail(k_invalid_argument, "ncclCommAbort: comm is not a live communicator");
  release(c, true);
  return k_success;
}

int ncclCommGetAsyncError(void* comm, int* state) {
  if (!state) return fail(k_invalid_argument, "ncclCommGetAsyncError: asyncError is null");
  if (const auto remote = find_remote(comm)) {
    *state = remote->error.load();
    return k_success;
  }
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

const char* ncclGetLastError(void*) {
  try {
    return last_error();
  } catch (const std::exception&) {
    return "the CPU NCCL ran out of host memory";
  }
}

int ncclGroupStart() {
  if (!set_group_depth(group_depth() + 1))
    return fail(k_system_error, "ncclGroupStart: no memory for the thread's group depth");
  return k_success;
}

int ncclGroupEnd() {
  const std::uintptr_t depth = group_depth();
  if (depth == 0) return fail(k_invalid_usage, "ncclGroupEnd: not in a group call");
  if (!set_group_depth(depth - 1)) return fail(k_system_error, "ncclGroupEnd: no memory for the thread's group depth");
  return k_success;
}

int ncclAllReduce(const void* send, void* recv, std::size_t count, int datatype, int op, void* comm, void* stream) {
  return guarded([&] { return allreduce(send, recv, count, datatype, op, comm, stream); });
}

unsigned long long cpunccl_allreduce_count(void) { return g_allreduce_count.load(); }

}  // extern "C"
