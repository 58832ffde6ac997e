// A CPU implementation of the part of the CUDA driver API (libcuda.so.1) that gpuenv's real adapters use
// (validate/adapters/driver_api.hpp): a test double that lets the contract tests run the real CUDA session, the
// peer-to-peer and the NCCL measurements end to end on a machine without a GPU.
//
// What it models, so that the adapters' mistakes show up here as they would on a GPU:
// - device memory is host memory (a CUdeviceptr is the bytes' address), counted against each device's size; a
//   kernel, copy or memset that touches bytes outside one live allocation of the right device fails at launch with
//   CUDA_ERROR_ILLEGAL_ADDRESS;
// - contexts: one primary context per device, current per thread; allocations, streams, modules and launches need
//   one, and a launch on a stream or with a function of another device's context fails;
// - streams run their work in order on a worker thread of their own, asynchronously to the host: cuStreamQuery says
//   CUDA_ERROR_NOT_READY until it is done, events take the time when the stream reaches them, and the synchronous
//   cuMemcpyDtoH does not wait for a non-blocking stream (as the real one does not);
// - cuModuleLoadData takes only a fatbin (its magic number), and cuModuleGetFunction only names the fatbin holds;
// - the validation kernels (validate/kernels/validation_kernels.cu) run on the CPU from the same reference code
//   (reference.hpp), with the launch shapes their comments require (gemm_simple: blocks of 32 x 8 and a grid
//   covering the matrix; digest_u64: whole warps); spin_wait spins on the mapped host flag as on a GPU.
//
// Configuration, read when cuInit first runs: CPU_CUDA_DEVICES (default 2; bus ids 00000000:19:00.0 and
// 00000000:3B:00.0 as in fake_nvml_full.cpp, then 00000000:40:00.0, 00000000:41:00.0, ...), CPU_CUDA_MEMORY_MIB per
// device (default 512), CPU_CUDA_SMS (default 4).
// Faults, read at every call from CPU_CUDA_FAULTS (comma-separated): init (cuInit fails), compute (compute_int gets
// one word wrong), memtest_flip (memtest_write leaves one bit flipped in the middle word of every region),
// copy_corrupt (stream_copy corrupts word 3), memcpy_corrupt (host<->device async copies corrupt word 3),
// peer_corrupt (peer copies corrupt word 3), no_peer (no device reaches another), hang:<kernel> (that kernel never
// finishes: its stream stays busy for good), confidential (confidential computing is on: host memory cannot be
// registered or mapped into the GPU, cuMemHostRegister and cuMemHostGetDevicePointer answer 801 not supported).
//
// Built with CPU_CUDA_LAZY (libcpu_cuda_lazy.so), it is a driver from before CUDA 12.4 with lazy loading on: there
// is no cuFuncLoad, and a function's first launch waits until every stream of its device is idle, as the driver
// loads the code then. A launch queued behind a held stream (spin_wait) before the function was loaded therefore
// waits until the spin gives up, which is what the adapters' warm-ups must avoid.
//
// Nothing is ever freed back to the C library while the process lives, except device and host allocations: streams,
// events and modules stay in global registries that are never destroyed (not even at exit), so what a hung stream or
// an adapter that deliberately leaks on a timeout still holds is reachable, not a leak to LeakSanitizer.
//
// No thread_local, here or in the other doubles the adapters dlopen (TestDoubles.HaveNoThreadLocalStorage checks
// their ELF files): per-thread state lives in pthread keys or in registries keyed by thread. A thread_local of a
// dlopen'd library lives in dynamic TLS, which glibc 2.25 and later mallocs on the thread's first use. Up to LLVM 16
// (clang 14 builds CI's Sanitize tests), the sanitizers' __tls_get_addr interceptor takes a block that starts 16
// bytes past a 4096-byte boundary for an old glibc block with a header, and records the two words before it (under
// AddressSanitizer: the allocator's chunk header) as the block's start and size; at exit LeakSanitizer's tracer
// scans that range and dies ("Tracer caught signal 11" after the test passed). Where the block lands depends on
// every earlier allocation of its size class, so paths, environment or timing moved tests in and out of the failure.
// Sources: https://github.com/google/sanitizers/issues/1322, and LLVM's fix "Fix tls_get_addr handling for glibc
// >=2.25" (April 2023, LLVM 17), which asks the allocator for the block's bounds instead.
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/contract/cpu_cuda_ext.h"
#include "tests/contract/thread_slot.hpp"
#include "validate/kernels/reference.hpp"

namespace {

namespace ref = gpuenv::validate::reference;

using CUresult = int;
using CUdeviceptr = unsigned long long;

constexpr CUresult k_success = 0;
constexpr CUresult k_invalid_value = 1;
constexpr CUresult k_out_of_memory = 2;
constexpr CUresult k_not_initialized = 3;
constexpr CUresult k_invalid_device = 101;
constexpr CUresult k_invalid_image = 200;
constexpr CUresult k_invalid_context = 201;
constexpr CUresult k_invalid_handle = 400;
constexpr CUresult k_not_found = 500;
constexpr CUresult k_not_ready = 600;
constexpr CUresult k_illegal_address = 700;
constexpr CUresult k_peer_access_already_enabled = 704;
constexpr CUresult k_peer_access_unsupported = 217;
constexpr CUresult k_host_memory_not_registered = 713;
constexpr CUresult k_not_supported = 801;

constexpr std::uint32_t k_fatbin_magic = 0xBA55ED50u;

struct ErrorName {
  CUresult code;
  const char* name;
};
constexpr ErrorName k_error_names[] = {
    {0, "CUDA_SUCCESS"},
    {1, "CUDA_ERROR_INVALID_VALUE"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY"},
    {3, "CUDA_ERROR_NOT_INITIALIZED"},
    {101, "CUDA_ERROR_INVALID_DEVICE"},
    {200, "CUDA_ERROR_INVALID_IMAGE"},
    {201, "CUDA_ERROR_INVALID_CONTEXT"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"},
    {400, "CUDA_ERROR_INVALID_HANDLE"},
    {500, "CUDA_ERROR_NOT_FOUND"},
    {600, "CUDA_ERROR_NOT_READY"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
    {801, "CUDA_ERROR_NOT_SUPPORTED"},
};

// ---- configuration and faults ----------------------------------------------------------------------------------

bool has_fault(std::string_view name) {
  const char* env = std::getenv("CPU_CUDA_FAULTS");
  if (!env) return false;
  std::string_view list(env);
  while (!list.empty()) {
    const auto comma = list.find(',');
    if (list.substr(0, comma) == name) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

long env_number(const char* name, long fallback, long low, long high) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return (*end == '\0' && value >= low && value <= high) ? value : fallback;
}

// ---- devices, contexts and memory -------------------------------------------------------------------------------

struct Device {
  int ordinal = 0;
  std::string bus_id;
  std::uint64_t total = 0;
  std::uint64_t allocated = 0;  // guarded by g_memory_mutex
  int retained = 0;             // primary context references; guarded by g_memory_mutex
  std::set<int> peers;          // devices whose memory this device's context may read (peer access enabled)
  std::atomic<int> spinning{0};  // spin kernels launched on its streams and not yet finished
};

struct Allocation {
  std::uint64_t bytes = 0;
  int device = -1;  // -1: host memory (cuMemHostAlloc or registered)
  bool mapped = false;
  bool registered = false;  // cuMemHostRegister'd, not owned
};

std::once_flag g_init_once;
std::atomic<bool> g_initialised{false};
auto& g_devices = *new std::vector<std::unique_ptr<Device>>;  // fixed after the first cuInit
int g_sms = 4;

std::mutex g_memory_mutex;
auto& g_allocations = *new std::map<std::uint64_t, Allocation>;  // by start address

// The device whose primary context is current on the calling thread (per thread, as in the driver). A pthread key,
// not a thread_local: see "No thread_local" at the top of this file.
pthread_key_t current_key() {
  static const pthread_key_t key = gpuenv::testing::new_thread_slot();
  return key;
}

Device* current_device() { return static_cast<Device*>(pthread_getspecific(current_key())); }

// False when the thread's slot could not be allocated.
bool set_current_device(Device* device) { return pthread_setspecific(current_key(), device) == 0; }

void initialise() {
  std::call_once(g_init_once, [] {
    const int count = static_cast<int>(env_number("CPU_CUDA_DEVICES", 2, 0, 16));
    const auto mib = static_cast<std::uint64_t>(env_number("CPU_CUDA_MEMORY_MIB", 512, 16, 1 << 20));
    g_sms = static_cast<int>(env_number("CPU_CUDA_SMS", 4, 1, 1024));
    for (int i = 0; i < count; ++i) {
      auto device = std::make_unique<Device>();
      device->ordinal = i;
      char id[32];
      const int bus = i == 0 ? 0x19 : i == 1 ? 0x3B : 0x40 + i - 2;
      std::snprintf(id, sizeof id, "00000000:%02X:00.0", bus);
      device->bus_id = id;
      device->total = mib << 20;
      g_devices.push_back(std::move(device));
    }
    g_initialised = true;
  });
}

Device* device_at(int ordinal) {
  if (!g_initialised || ordinal < 0 || ordinal >= static_cast<int>(g_devices.size())) return nullptr;
  return g_devices[static_cast<std::size_t>(ordinal)].get();
}

Device* context_device(void* ctx) {
  for (const auto& d : g_devices) {
    if (d.get() == ctx) return d.get();
  }
  return nullptr;
}

// The allocation holding [ptr, ptr + bytes), or null. Caller holds g_memory_mutex.
const Allocation* find_locked(std::uint64_t ptr, std::uint64_t bytes, std::uint64_t* start = nullptr) {
  auto it = g_allocations.upper_bound(ptr);
  if (it == g_allocations.begin()) return nullptr;
  --it;
  if (ptr - it->first > it->second.bytes || bytes > it->second.bytes - (ptr - it->first)) return nullptr;
  if (start) *start = it->first;
  return &it->second;
}

// Whether a kernel or copy of `device` may touch [ptr, ptr + bytes): its own memory, a peer's memory once peer
// access is enabled, or mapped host memory.
bool reachable(const Device* device, std::uint64_t ptr, std::uint64_t bytes) {
  if (bytes == 0) return true;
  std::lock_guard lock(g_memory_mutex);
  const Allocation* a = find_locked(ptr, bytes);
  if (!a) return false;
  if (a->device < 0) return a->mapped;
  return a->device == device->ordinal || device->peers.count(a->device) != 0;
}

bool host_memory(std::uint64_t ptr, std::uint64_t bytes) {
  std::lock_guard lock(g_memory_mutex);
  const Allocation* a = find_locked(ptr, bytes);
  return a == nullptr || a->device < 0;  // pageable memory is not tracked: anything not on a device is host memory
}

// ---- streams and events ----------------------------------------------------------------------------------------

struct Stream {
  Device* device = nullptr;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool busy = false;
  bool destroyed = false;
};

std::mutex g_registry_mutex;
auto& g_streams = *new std::set<Stream*>;         // live streams
auto& g_all_streams = *new std::vector<Stream*>;  // every stream ever made (a hung worker still uses its own)

void worker(Stream* s) {
  std::unique_lock lock(s->mutex);
  while (true) {
    s->cv.wait(lock, [s] { return !s->queue.empty() || s->destroyed; });
    if (s->queue.empty()) return;  // destroyed and drained
    auto work = std::move(s->queue.front());
    s->queue.pop_front();
    s->busy = true;
    lock.unlock();
    work();
    lock.lock();
    s->busy = false;
  }
}

Stream* live_stream(void* handle) {
  std::lock_guard lock(g_registry_mutex);
  auto* s = static_cast<Stream*>(handle);
  return g_streams.count(s) ? s : nullptr;
}

CUresult enqueue(void* handle, std::function<void()> work) {
  if (!handle) {
    work();
    return k_success;
  }
  Stream* s = live_stream(handle);
  if (!s) return k_invalid_handle;
  {
    std::lock_guard lock(s->mutex);
    s->queue.push_back(std::move(work));
  }
  s->cv.notify_one();
  return k_success;
}

struct Event {
  std::atomic<int> pending{0};
  std::atomic<bool> recorded{false};
  std::atomic<std::int64_t> ns{0};
};
auto& g_events = *new std::set<Event*>;         // live events
auto& g_all_events = *new std::vector<Event*>;  // every event ever made (a queued record may still set it)

Event* live_event(void* handle) {
  std::lock_guard lock(g_registry_mutex);
  auto* e = static_cast<Event*>(handle);
  return g_events.count(e) ? e : nullptr;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---- modules and kernels ---------------------------------------------------------------------------------------

enum class Kernel {
  spin_wait,
  compute_int,
  compute_float,
  fill_values,
  memtest_write,
  memtest_check,
  stream_copy,
  gemm_simple,
  digest_u64
};

struct Function {
  Kernel kernel;
  const char* name;
  Device* device = nullptr;
  std::atomic<bool> loaded{false};  // CPU_CUDA_LAZY: the code is loaded at the first launch
};

struct Module {
  Device* device = nullptr;
  std::vector<std::unique_ptr<Function>> functions;
};
auto& g_modules = *new std::set<Module*>;         // loaded modules
auto& g_all_modules = *new std::vector<Module*>;  // every module ever loaded (a racing launch may read its functions)
auto& g_functions = *new std::vector<Function*>;  // every function ever handed out, for handle checks

constexpr std::pair<Kernel, const char*> k_kernel_names[] = {
    {Kernel::spin_wait, "spin_wait"},         {Kernel::compute_int, "compute_int"},
    {Kernel::compute_float, "compute_float"}, {Kernel::fill_values, "fill_values"},
    {Kernel::memtest_write, "memtest_write"}, {Kernel::memtest_check, "memtest_check"},
    {Kernel::stream_copy, "stream_copy"},     {Kernel::gemm_simple, "gemm_simple"},
    {Kernel::digest_u64, "digest_u64"}};

template <class T>
T param(void** params, int index) {
  T value{};
  std::memcpy(&value, params[index], sizeof(T));
  return value;
}

std::size_t fill_bytes(int format) {
  switch (static_cast<ref::Fill>(format)) {
    case ref::Fill::random_f32:
    case ref::Fill::grid_f32:
      return 4;
    case ref::Fill::random_bf16:
    case ref::Fill::grid_bf16:
    case ref::Fill::grid_f16:
      return 2;
    case ref::Fill::grid_f64:
      return 8;
  }
  return 0;
}

void corrupt_word(void* base, std::uint64_t bytes, std::uint64_t index) {
  if ((index + 1) * 8 <= bytes) static_cast<std::uint64_t*>(base)[index] ^= 0x10;
}

// First launches that found a spin kernel holding their device (cpucuda_lazy_stalls).
std::atomic<unsigned long long> g_lazy_stalls{0};

// Blocks the calling stream worker for good (the hang:<kernel> fault).
[[noreturn]] void hang_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// Checks a launch and returns the work that runs it, or an error code.
CUresult prepare_launch(const Function& f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, void** params, std::function<void()>& work) {
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || bx * by * bz > 1024) return k_invalid_value;
  if (!params) return k_invalid_value;
  const Device* dev = f.device;
  const bool hang = has_fault(std::string("hang:") + f.name);
  switch (f.kernel) {
    case Kernel::spin_wait: {
      auto flag = param<std::uint64_t>(params, 0);
      auto timeout = param<unsigned long long>(params, 1);
      if (!reachable(dev, flag, 8)) return k_illegal_address;
      // Counted from its launch (cuLaunchKernel, once the kernel is loaded): a spin queued behind other work will
      // hold the stream as surely as a running one.
      Device* spinning_on = f.device;
      work = [flag, timeout, hang, spinning_on] {
        if (hang) hang_forever();
        // Atomic loads and stores: the host's side writes the flag with atomic stores (set_spin_flag), and on the
        // CPU the two sides are threads of one process.
        auto* flags = reinterpret_cast<int*>(flag);
        const std::int64_t start = now_ns();
        while (__atomic_load_n(&flags[0], __ATOMIC_ACQUIRE) == 0) {
          if (static_cast<std::uint64_t>(now_ns() - start) > timeout) {
            __atomic_store_n(&flags[1], 1, __ATOMIC_RELEASE);
            break;
          }
          std::this_thread::yield();
        }
        --spinning_on->spinning;
      };
      return k_success;
    }
    case Kernel::compute_int:
    case Kernel::compute_float: {
      auto out = param<std::uint64_t>(params, 0);
      auto n = param<unsigned long long>(params, 1);
      auto seed = param<unsigned long long>(params, 2);
      const bool ints = f.kernel == Kernel::compute_int;
      if (!reachable(dev, out, n * (ints ? 8 : 4))) return k_illegal_address;
      const bool wrong = ints && has_fault("compute");
      work = [out, n, seed, ints, wrong, hang] {
        if (hang) hang_forever();
        if (ints) {
          auto* o = reinterpret_cast<std::uint64_t*>(out);
          for (std::uint64_t i = 0; i < n; ++i) o[i] = ref::int_element(seed, i);
          if (wrong && n > 12345) o[12345] ^= 1;
        } else {
          auto* o = reinterpret_cast<float*>(out);
          for (std::uint64_t i = 0; i < n; ++i) o[i] = ref::float_element(seed, i);
        }
      };
      return k_success;
    }
    case Kernel::fill_values: {
      auto out = param<std::uint64_t>(params, 0);
      auto n = param<unsigned long long>(params, 1);
      auto seed = param<unsigned long long>(params, 2);
      auto format = param<int>(params, 3);
      const std::size_t size = fill_bytes(format);
      if (size == 0) return k_invalid_value;  // the GPU would write nothing; the adapter never asks for it
      if (!reachable(dev, out, n * size)) return k_illegal_address;
      work = [out, n, seed, format, hang] {
        if (hang) hang_forever();
        for (std::uint64_t i = 0; i < n; ++i) {
          switch (static_cast<ref::Fill>(format)) {
            case ref::Fill::random_f32:
              reinterpret_cast<float*>(out)[i] = ref::random_float(seed, i);
              break;
            case ref::Fill::random_bf16:
              reinterpret_cast<std::uint16_t*>(out)[i] = ref::bf16_truncate(ref::random_float(seed, i));
              break;
            case ref::Fill::grid_f32:
              reinterpret_cast<float*>(out)[i] = static_cast<float>(ref::grid_value(seed, i));
              break;
            case ref::Fill::grid_bf16:
              reinterpret_cast<std::uint16_t*>(out)[i] = ref::grid_bf16(seed, i);
              break;
            case ref::Fill::grid_f16:
              reinterpret_cast<std::uint16_t*>(out)[i] = ref::grid_f16(seed, i);
              break;
            case ref::Fill::grid_f64:
              reinterpret_cast<double*>(out)[i] = ref::grid_value(seed, i);
              break;
          }
        }
      };
      return k_success;
    }
    case Kernel::memtest_write: {
      auto base = param<std::uint64_t>(params, 0);
      auto n = param<unsigned long long>(params, 1);
      auto pattern = param<int>(params, 2);
      auto seed = param<unsigned long long>(params, 3);
      if (pattern < 0 || pattern > static_cast<int>(ref::Pattern::random)) return k_invalid_value;
      if (!reachable(dev, base, n * 8)) return k_illegal_address;
      const bool flip = has_fault("memtest_flip");
      work = [base, n, pattern, seed, flip, hang] {
        if (hang) hang_forever();
        auto* words = reinterpret_cast<std::uint64_t*>(base);
        const auto p = static_cast<ref::Pattern>(pattern);
        for (std::uint64_t i = 0; i < n; ++i) words[i] = ref::pattern_word(p, i, base + i * 8, seed);
        if (flip && n > 0) words[n / 2] ^= 0x8;
      };
      return k_success;
    }
    case Kernel::memtest_check: {
      auto base = param<std::uint64_t>(params, 0);
      auto n = param<unsigned long long>(params, 1);
      auto pattern = param<int>(params, 2);
      auto seed = param<unsigned long long>(params, 3);
      auto next = param<int>(params, 4);
      auto errors = param<std::uint64_t>(params, 5);
      if (pattern < 0 || pattern > static_cast<int>(ref::Pattern::random)) return k_invalid_value;
      if (next > static_cast<int>(ref::Pattern::random)) return k_invalid_value;
      if (!reachable(dev, base, n * 8) || !reachable(dev, errors, sizeof(ref::MemtestErrors))) return k_illegal_address;
      work = [base, n, pattern, seed, next, errors, hang] {
        if (hang) hang_forever();
        auto* words = reinterpret_cast<std::uint64_t*>(base);
        auto* counters = reinterpret_cast<ref::MemtestErrors*>(errors);
        const auto p = static_cast<ref::Pattern>(pattern);
        for (std::uint64_t i = 0; i < n; ++i) {
          const std::uint64_t address = base + i * 8;
          const std::uint64_t expected = ref::pattern_word(p, i, address, seed);
          if (words[i] != expected) {
            ++counters->count;
            if (counters->claimed == 0) {
              counters->claimed = 1;
              counters->first_index = i;
              counters->expected = expected;
              counters->actual = words[i];
            }
          }
          if (next >= 0) words[i] = ref::pattern_word(static_cast<ref::Pattern>(next), i, address, seed);
        }
      };
      return k_success;
    }
    case Kernel::stream_copy: {
      auto src = param<std::uint64_t>(params, 0);
      auto dst = param<std::uint64_t>(params, 1);
      auto n = param<unsigned long long>(params, 2);
      if (!reachable(dev, src, n * 16) || !reachable(dev, dst, n * 16)) return k_illegal_address;
      const bool corrupt = has_fault("copy_corrupt");
      work = [src, dst, n, corrupt, hang] {
        if (hang) hang_forever();
        std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n * 16);
        if (corrupt) corrupt_word(reinterpret_cast<void*>(dst), n * 16, 3);
      };
      return k_success;
    }
    case Kernel::gemm_simple: {
      auto a = param<std::uint64_t>(params, 0);
      auto b = param<std::uint64_t>(params, 1);
      auto c = param<std::uint64_t>(params, 2);
      auto m = param<int>(params, 3);
      auto n = param<int>(params, 4);
      auto k = param<int>(params, 5);
      // The kernel's documented launch: blocks of (32, 8) threads; the grid decides which outputs are written.
      if (bx != 32 || by != 8 || bz != 1 || m < 0 || n < 0 || k < 0) return k_invalid_value;
      const auto um = static_cast<std::uint64_t>(m), un = static_cast<std::uint64_t>(n),
                 uk = static_cast<std::uint64_t>(k);
      if (!reachable(dev, a, um * uk * 4) || !reachable(dev, b, uk * un * 4) || !reachable(dev, c, um * un * 4))
        return k_illegal_address;
      const std::uint64_t rows = std::min<std::uint64_t>(um, std::uint64_t{gx} * 32);
      const std::uint64_t cols = std::min<std::uint64_t>(un, std::uint64_t{gy} * 32);
      work = [a, b, c, um, uk, rows, cols, hang] {
        if (hang) hang_forever();
        const auto* pa = reinterpret_cast<const float*>(a);
        const auto* pb = reinterpret_cast<const float*>(b);
        auto* pc = reinterpret_cast<float*>(c);
        // The kernel's order: one fused multiply-add per k, in increasing k, for every output.
        std::vector<float> acc(rows);
        for (std::uint64_t j = 0; j < cols; ++j) {
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (std::uint64_t l = 0; l < uk; ++l) {
            const float bv = pb[l + j * uk];
            const float* column = pa + l * um;
            for (std::uint64_t i = 0; i < rows; ++i) acc[i] = std::fma(column[i], bv, acc[i]);
          }
          for (std::uint64_t i = 0; i < rows; ++i) pc[i + j * um] = acc[i];
        }
      };
      return k_success;
    }
    case Kernel::digest_u64: {
      auto words = param<std::uint64_t>(params, 0);
      auto n = param<unsigned long long>(params, 1);
      auto out = param<std::uint64_t>(params, 2);
      if (bx % 32 != 0 || by != 1 || bz != 1) return k_invalid_value;  // __shfl_down_sync over whole warps
      if (!reachable(dev, words, n * 8) || !reachable(dev, out, 8)) return k_illegal_address;
      work = [words, n, out, hang] {
        if (hang) hang_forever();
        std::uint64_t sum = 0;
        const auto* w = reinterpret_cast<const std::uint64_t*>(words);
        for (std::uint64_t i = 0; i < n; ++i) sum += ref::digest_term(w[i], i);
        *reinterpret_cast<std::uint64_t*>(out) += sum;
      };
      return k_success;
    }
  }
  return k_invalid_value;
}

CUresult need_context() { return current_device() ? k_success : k_invalid_context; }

// Whether every live stream of `device` has nothing queued or running.
bool device_idle(const Device* device) {
  std::lock_guard registry(g_registry_mutex);
  for (Stream* s : g_streams) {
    if (s->device != device) continue;
    std::lock_guard lock(s->mutex);
    if (!s->queue.empty() || s->busy) return false;
  }
  return true;
}

// A lazy driver's first launch of `f`: the code is loaded once the device is idle. Waiting behind ordinary work is
// only slow; waiting while a spin kernel holds a stream is the stall the adapters must never cause (it lasts until
// the spin gives up), so it is counted.
void load_lazily(Function& f) {
  if (f.loaded) return;
  if (!device_idle(f.device) && f.device->spinning > 0) ++g_lazy_stalls;
  while (!device_idle(f.device)) std::this_thread::sleep_for(std::chrono::microseconds(200));
  f.loaded = true;
}

}  // namespace

extern "C" {

// ---- the extension for the other CPU test doubles (cpu_cuda_ext.h) ----------------------------------------------

int cpucuda_enqueue(void* stream, void (*fn)(void*), void* arg) {
  if (!fn) return k_invalid_value;
  return enqueue(stream, [fn, arg] { fn(arg); });
}

int cpucuda_is_device_memory(unsigned long long ptr, unsigned long long bytes) {
  std::lock_guard lock(g_memory_mutex);
  const Allocation* a = find_locked(ptr, bytes);
  return a != nullptr && a->device >= 0 ? 1 : 0;
}

int cpucuda_current_device(void) {
  const Device* const d = current_device();
  return d ? d->ordinal : -1;
}

unsigned long long cpucuda_lazy_stalls(void) { return g_lazy_stalls; }

// The primary-context references held on every device: a run that leaks its contexts (it left a thread behind that
// may still use them) shows as references that never come back.
unsigned long long cpucuda_primary_retained(void) {
  std::lock_guard lock(g_memory_mutex);
  unsigned long long total = 0;
  for (const auto& d : g_devices) total += static_cast<unsigned long long>(d->retained);
  return total;
}

int cpucuda_device_count(void) {
  initialise();
  return static_cast<int>(g_devices.size());
}

// ---- initialisation and devices ---------------------------------------------------------------------------------

CUresult cuInit(unsigned flags) {
  if (flags != 0) return k_invalid_value;
  if (has_fault("init")) return k_not_initialized;
  initialise();
  return k_success;
}

CUresult cuDriverGetVersion(int* version) {
  if (!version) return k_invalid_value;
  *version = 13000;
  return k_success;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  if (!name) return k_invalid_value;
  for (const auto& entry : k_error_names) {
    if (entry.code == error) {
      *name = entry.name;
      return k_success;
    }
  }
  return k_invalid_value;
}

CUresult cuGetErrorString(CUresult error, const char** text) { return cuGetErrorName(error, text); }

CUresult cuDeviceGetCount(int* count) {
  if (!g_initialised) return k_not_initialized;
  if (!count) return k_invalid_value;
  *count = static_cast<int>(g_devices.size());
  return k_success;
}

CUresult cuDeviceGet(int* device, int ordinal) {
  if (!g_initialised) return k_not_initialized;
  if (!device) return k_invalid_value;
  if (!device_at(ordinal)) return k_invalid_device;
  *device = ordinal;
  return k_success;
}

CUresult cuDeviceGetByPCIBusId(int* device, const char* bus_id) {
  if (!g_initialised) return k_not_initialized;
  if (!device || !bus_id) return k_invalid_value;
  // Domain, bus, device and function as hex numbers, so "0000:3b:00.0" and "00000000:3B:00.0" name one GPU.
  unsigned domain = 0, bus = 0, dev = 0, function = 0;
  if (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &function) != 4) return k_invalid_value;
  for (const auto& d : g_devices) {
    unsigned d0 = 0, b0 = 0, v0 = 0, f0 = 0;
    std::sscanf(d->bus_id.c_str(), "%x:%x:%x.%x", &d0, &b0, &v0, &f0);
    if (d0 == domain && b0 == bus && v0 == dev && f0 == function) {
      *device = d->ordinal;
      return k_success;
    }
  }
  return k_invalid_device;
}

CUresult cuDeviceGetPCIBusId(char* out, int length, int ordinal) {
  if (!g_initialised) return k_not_initialized;
  const Device* d = device_at(ordinal);
  if (!d) return k_invalid_device;
  if (!out || length < 13) return k_invalid_value;
  std::snprintf(out, static_cast<std::size_t>(length), "%s", d->bus_id.c_str());
  return k_success;
}

CUresult cuDeviceGetName(char* out, int length, int ordinal) {
  if (!device_at(ordinal)) return k_invalid_device;
  if (!out || length < 1) return k_invalid_value;
  std::snprintf(out, static_cast<std::size_t>(length), "%s", "CPU CUDA test double");
  return k_success;
}

CUresult cuDeviceTotalMem_v2(std::size_t* bytes, int ordinal) {
  const Device* d = device_at(ordinal);
  if (!d) return k_invalid_device;
  if (!bytes) return k_invalid_value;
  *bytes = d->total;
  return k_success;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, int ordinal) {
  if (!device_at(ordinal)) return k_invalid_device;
  if (!value) return k_invalid_value;
  switch (attribute) {
    case 16:  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
      *value = g_sms;
      break;
    case 75:  // compute capability 9.0
      *value = 9;
      break;
    case 76:
      *value = 0;
      break;
    default:
      *value = 0;
  }
  return k_success;
}

CUresult cuDeviceCanAccessPeer(int* can, int ordinal, int peer) {
  if (!device_at(ordinal) || !device_at(peer)) return k_invalid_device;
  if (!can) return k_invalid_value;
  *can = (ordinal != peer && !has_fault("no_peer")) ? 1 : 0;
  return k_success;
}

// ---- contexts ---------------------------------------------------------------------------------------------------

CUresult cuDevicePrimaryCtxRetain(void** ctx, int ordinal) {
  Device* d = device_at(ordinal);
  if (!d) return g_initialised ? k_invalid_device : k_not_initialized;
  if (!ctx) return k_invalid_value;
  std::lock_guard lock(g_memory_mutex);
  ++d->retained;
  *ctx = d;
  return k_success;
}

CUresult cuDevicePrimaryCtxRelease_v2(int ordinal) {
  Device* d = device_at(ordinal);
  if (!d) return k_invalid_device;
  std::lock_guard lock(g_memory_mutex);
  if (d->retained == 0) return k_invalid_context;
  --d->retained;
  return k_success;
}

CUresult cuCtxSetCurrent(void* ctx) {
  if (!ctx) return set_current_device(nullptr) ? k_success : k_out_of_memory;
  Device* d = context_device(ctx);
  if (!d) return k_invalid_context;
  {
    std::lock_guard lock(g_memory_mutex);
    if (d->retained == 0) return k_invalid_context;  // a released primary context is destroyed
  }
  return set_current_device(d) ? k_success : k_out_of_memory;
}

CUresult cuCtxEnablePeerAccess(void* peer_ctx, unsigned flags) {
  if (CUresult rc = need_context(); rc != k_success) return rc;
  Device* peer = context_device(peer_ctx);
  if (!peer || flags != 0) return k_invalid_value;
  Device* const self = current_device();
  if (peer == self || has_fault("no_peer")) return k_peer_access_unsupported;
  std::lock_guard lock(g_memory_mutex);
  if (!self->peers.insert(peer->ordinal).second) return k_peer_access_already_enabled;
  return k_success;
}

// ---- memory -----------------------------------------------------------------------------------------------------

CUresult cuMemGetInfo_v2(std::size_t* free_bytes, std::size_t* total) {
  if (CUresult rc = need_context(); rc != k_success) return rc;
  if (!free_bytes || !total) return k_invalid_value;
  const Device* const d = current_device();
  std::lock_guard lock(g_memory_mutex);
  *total = d->total;
  *free_bytes = d->total - d->allocated;
  return k_success;
}

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, std::size_t bytes) {
  if (CUresult rc = need_context(); rc != k_success) return rc;
  if (!ptr || bytes == 0) return k_invalid_value;
  const std::size_t rounded = (bytes + 255) & ~std::size_t{255};
  Device* const d = current_device();
  {
    std::lock_guard lock(g_memory_mutex);
    if (d->allocated + rounded > d->total) return k_out_of_memory;
    d->allocated += rounded;
  }
  void* p = std::aligned_alloc(256, rounded);
  std::lock_guard lock(g_memory_mutex);
  if (!p) {
    d->allocated -= rounded;
    return k_out_of_memory;
  }
  g_allocations[reinterpret_cast<std::uint64_t>(p)] = Allocation{rounded, d->ordinal, false, false};
  *ptr = reinterpret_cast<std::uint64_t>(p);
  return k_success;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  std::lock_guard lock(g_memory_mutex);
  auto it = g_allocations.find(ptr);
  if (it == g_allocations.end() || it->second.device < 0) return k_invalid_value;
  g_devices[static_cast<std::size_t>(it->second.device)]->allocated -= it->second.bytes;
  g_allocations.erase(it);
  std::free(reinterpret_cast<void*>(ptr));
  return k_success;
}

CUresult cuMemHostAlloc(void** p, std::size_t bytes, unsigned flags) {
  if (!p || bytes == 0 || (flags & ~0x7u) != 0) return k_invalid_value;
  void* memory = std::aligned_alloc(4096, (bytes + 4095) & ~std::size_t{4095});
  if (!memory) return k_out_of_memory;
  std::lock_guard lock(g_memory_mutex);
  g_allocations[reinterpret_cast<std::uint64_t>(memory)] = Allocation{bytes, -1, (flags & 0x2u) != 0, false};
  *p = memory;
  return k_success;
}

CUresult cuMemFreeHost(void* p) {
  std::lock_guard lock(g_memory_mutex);
  auto it = g_allocations.find(reinterpret_cast<std::uint64_t>(p));
  if (it == g_allocations.end() || it->second.device >= 0 || it->second.registered) return k_invalid_value;
  g_allocations.erase(it);
  std::free(p);
  return k_success;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* out, void* p, unsigned flags) {
  if (!out || flags != 0) return k_invalid_value;
  if (has_fault("confidential")) return k_not_supported;
  std::lock_guard lock(g_memory_mutex);
  const Allocation* a = find_locked(reinterpret_cast<std::uint64_t>(p), 1);
  if (!a || a->device >= 0 || !a->mapped) return k_invalid_value;  // only memory allocated with DEVICEMAP is mapped
  *out = reinterpret_cast<std::uint64_t>(p);
  return k_success;
}

CUresult cuMemHostRegister_v2(void* p, std::size_t bytes, unsigned flags) {
  if (!p || bytes == 0 || (flags & ~0xFu) != 0) return k_invalid_value;
  if (has_fault("confidential")) return k_not_supported;
  std::lock_guard lock(g_memory_mutex);
  if (find_locked(reinterpret_cast<std::uint64_t>(p), 1)) return k_invalid_value;  // already registered or owned
  g_allocations[reinterpret_cast<std::uint64_t>(p)] = Allocation{bytes, -1, (flags & 0x2u) != 0, true};
  return k_success;
}

CUresult cuMemHostUnregister(void* p) {
  std::lock_guard lock(g_memory_mutex);
  auto it = g_allocations.find(reinterpret_cast<std::uint64_t>(p));
  if (it == g_allocations.end() || !it->second.registered) return k_host_memory_not_registered;
  g_allocations.erase(it);
  return k_success;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, std::size_t bytes) {
  if (CUresult rc = need_context(); rc != k_success) return rc;
  if (!reachable(current_device(), src, bytes) || !host_memory(reinterpret_cast<std::uint64_t>(dst), bytes))
    return k_illegal_address;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);  // does not wait for non-blocking streams
  return k_success;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, std::size_t bytes, void* stream) {
  if (CUresult rc = need_context(); rc != k_success) return rc;
  if (!reachable(current_device(), dst, bytes)) return k_illegal_address;
  const bool corrupt = has_fault("memcpy_corrupt");
  return enqueue(stream, [dst, src, bytes, corrupt] {
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    if (corrupt) corrupt_word(reinterpret_cast<void*>(dst), bytes, 3);
  });
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, std::size_t bytes, void* stream) {
  if (CUresult rc = need_context(); rc != k_success) return rc;
  if (!reachable(current_device(), src, bytes)) return k_illegal_address;
  const bool corrupt = has_fault("memcpy_corrupt");
  return enqueue(stream, [dst, src, bytes, corrupt] {
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    if (corrupt) corrupt_word(dst, bytes, 3);
  });
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, std::size_t bytes, void* stream) {
  if (CUresult rc = need_context(); rc != k_success) return rc;
  if (!reachable(current_device(), dst, bytes)) return k_illegal_address;
  return enqueue(stream, [dst, value, bytes] { std::memset(reinterpret_cast<void*>(dst), value, bytes); });
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, void* dst_ctx, CUdeviceptr src, void* src_ctx, std::size_t bytes,
                           void* stream) {
  Device* to = context_device(dst_ctx);
  Device* from = context_device(src_ctx);
  if (!to || !from) return k_invalid_context;
  if (!reachable(to, dst, bytes) || !reachable(from, src, bytes)) return k_illegal_address;
  const bool corrupt = has_fault("peer_corrupt");
  return enqueue(stream, [dst, src, bytes, corrupt] {
    std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    if (corrupt) corrupt_word(reinterpret_cast<void*>(dst), bytes, 3);
  });
}

// ---- streams and events -----------------------------------------------------------------------------------------

CUresult cuStreamCreate(void** stream, unsigned flags) {
  if (CUresult rc = need_context(); rc != k_success) return rc;
  if (!stream || flags > 1) return k_invalid_value;
  auto* s = new Stream;  // kept in g_all_streams for the process's lifetime
  s->device = current_device();
  {
    std::lock_guard lock(g_registry_mutex);
    g_streams.insert(s);
    g_all_streams.push_back(s);
  }
  std::thread(worker, s).detach();
  *stream = s;
  return k_success;
}

CUresult cuStreamDestroy_v2(void* stream) {
  Stream* s = live_stream(stream);
  if (!s) return k_invalid_handle;
  {
    std::lock_guard lock(g_registry_mutex);
    g_streams.erase(s);
  }
  {
    std::lock_guard lock(s->mutex);
    s->destroyed = true;  // the worker finishes what is queued, then ends (as the driver does)
  }
  s->cv.notify_one();
  return k_success;
}

CUresult cuStreamQuery(void* stream) {
  Stream* s = live_stream(stream);
  if (!s) return k_invalid_handle;
  std::lock_guard lock(s->mutex);
  return (s->queue.empty() && !s->busy) ? k_success : k_not_ready;
}

CUresult cuEventCreate(void** event, unsigned flags) {
  if (CUresult rc = need_context(); rc != k_success) return rc;
  if (!event || flags > 0xF) return k_invalid_value;
  auto* e = new Event;  // kept for the process's lifetime: a hung stream may still hold it
  std::lock_guard lock(g_registry_mutex);
  g_events.insert(e);
  g_all_events.push_back(e);
  *event = e;
  return k_success;
}

CUresult cuEventDestroy_v2(void* event) {
  std::lock_guard lock(g_registry_mutex);
  return g_events.erase(static_cast<Event*>(event)) ? k_success : k_invalid_handle;
}

CUresult cuEventRecord(void* event, void* stream) {
  Event* e = live_event(event);
  if (!e) return k_invalid_handle;
  if (stream) {
    Stream* s = live_stream(stream);
    if (!s) return k_invalid_handle;
    const Device* const d = current_device();
    if (d && s->device != d) return k_invalid_handle;  // the event and stream must share a context
  }
  ++e->pending;
  return enqueue(stream, [e] {
    e->ns = now_ns();
    e->recorded = true;
    --e->pending;
  });
}

CUresult cuEventElapsedTime(float* ms, void* start, void* stop) {
  Event* a = live_event(start);
  Event* b = live_event(stop);
  if (!a || !b || !ms) return k_invalid_handle;
  if (a->pending || b->pending) return k_not_ready;
  if (!a->recorded || !b->recorded) return k_invalid_handle;
  *ms = static_cast<float>(static_cast<double>(b->ns - a->ns) / 1e6);
  return k_success;
}

CUresult cuEventElapsedTime_v2(float* ms, void* start, void* stop) { return cuEventElapsedTime(ms, start, stop); }

// ---- modules and launches ---------------------------------------------------------------------------------------

CUresult cuModuleLoadData(void** module, const void* image) {
  if (CUresult rc = need_context(); rc != k_success) return rc;
  if (!module || !image) return k_invalid_value;
  std::uint32_t magic = 0;
  std::memcpy(&magic, image, 4);
  if (magic != k_fatbin_magic) return k_invalid_image;
  auto* m = new Module;
  m->device = current_device();
  // The fatbin's size is in its header (a 16-byte header whose second 8 bytes are the payload size); the kernel
  // names are looked up in it, so a fatbin without a kernel gives CUDA_ERROR_NOT_FOUND as the driver does.
  std::uint64_t payload = 0;
  std::memcpy(&payload, static_cast<const unsigned char*>(image) + 8, 8);
  const std::string_view bytes(static_cast<const char*>(image), 16 + payload);
  for (const auto& [kernel, name] : k_kernel_names) {
    const std::string needle = std::string(name) + '\0';
    if (bytes.find(needle) == std::string_view::npos) continue;
    auto f = std::make_unique<Function>();
    f->kernel = kernel;
    f->name = name;
    f->device = current_device();
    m->functions.push_back(std::move(f));
  }
  std::lock_guard lock(g_registry_mutex);
  g_modules.insert(m);
  g_all_modules.push_back(m);
  for (const auto& f : m->functions) g_functions.push_back(f.get());
  *module = m;
  return k_success;
}

CUresult cuModuleUnload(void* module) {
  std::lock_guard lock(g_registry_mutex);
  // Functions stay allocated (a launch racing the unload must not read freed memory); the handle is gone.
  return g_modules.erase(static_cast<Module*>(module)) ? k_success : k_invalid_handle;
}

CUresult cuModuleGetFunction(void** function, void* module, const char* name) {
  if (!function || !name) return k_invalid_value;
  std::lock_guard lock(g_registry_mutex);
  auto* m = static_cast<Module*>(module);
  if (!g_modules.count(m)) return k_invalid_handle;
  for (const auto& f : m->functions) {
    if (std::strcmp(f->name, name) == 0) {
      *function = f.get();
      return k_success;
    }
  }
  return k_not_found;
}

namespace {
bool known_function(void* function) {
  std::lock_guard lock(g_registry_mutex);
  return std::find(g_functions.begin(), g_functions.end(), function) != g_functions.end();
}
}  // namespace

#ifndef CPU_CUDA_LAZY
CUresult cuFuncLoad(void* function) {
  if (!known_function(function)) return k_invalid_handle;
  static_cast<Function*>(function)->loaded = true;
  return k_success;
}
#endif

CUresult cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared_bytes, void* stream, void** params, void** extra) {
  if (CUresult rc = need_context(); rc != k_success) return rc;
  if (!known_function(function)) return k_invalid_handle;
  auto* f = static_cast<Function*>(function);
  if (f->device != current_device()) return k_invalid_handle;  // a function of another context's module
  if (stream) {
    Stream* s = live_stream(stream);
    if (!s || s->device != current_device()) return k_invalid_handle;
  }
  if (extra || shared_bytes > 48 * 1024) return k_invalid_value;
  std::function<void()> work;
  if (CUresult rc = prepare_launch(*f, gx, gy, gz, bx, by, bz, params, work); rc != k_success) return rc;
#ifdef CPU_CUDA_LAZY
  load_lazily(*f);
#endif
  if (f->kernel == Kernel::spin_wait) ++f->device->spinning;
  return enqueue(stream, std::move(work));
}

}  // extern "C"
