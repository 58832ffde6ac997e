// Multi-GPU measurements: peer-to-peer copies through the CUDA driver API and NCCL all-reduce, both by dlopen.
//
// Discipline (as cuda_session.cpp): nothing here calls cuStreamSynchronize or cuCtxSynchronize; streams are polled
// with cuStreamQuery until options.operation_timeout, after which the measurement reports `cuda.timeout`, aborts its
// NCCL communicators and leaks its driver resources instead of freeing them (a free could block in a driver that
// stopped answering). Data is seeded, never zero, destinations are cleared before each sample and checked after it.
// NCCL's entry points and enum values are declared by hand from nccl.h (NCCL 2.x); enums travel as int, as the C
// ABI passes them.
#include "validate/adapters/multi_gpu.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "validate/adapters/driver_api.hpp"
#include "validate/kernels/reference.hpp"

namespace gpuenv::validate {
namespace {

namespace ref = reference;
using namespace cuda;  // NOLINT: the driver API names of driver_api.hpp
using gpuenv::Status;  // not validate::Status (check.hpp), should that header ever be included here

// ---- NCCL declarations (nccl.h) ---------------------------------------------------------------------------------

using NcclResult = int;       // ncclResult_t
using NcclComm = void*;       // ncclComm_t (opaque)
constexpr NcclResult k_nccl_success = 0;      // ncclSuccess
constexpr NcclResult k_nccl_in_progress = 7;  // ncclInProgress (non-blocking communicators only)
constexpr int k_nccl_float32 = 7;             // ncclFloat32
constexpr int k_nccl_sum = 0;                 // ncclSum
/// ncclUniqueId: `char internal[NCCL_UNIQUE_ID_BYTES]` (128), passed by value.
struct NcclUniqueId {
  char internal[128];
};

struct NcclApi {
  std::string library;
  NcclResult (*get_version)(int*) = nullptr;
  NcclResult (*comm_init_all)(NcclComm*, int, const int*) = nullptr;
  NcclResult (*comm_destroy)(NcclComm) = nullptr;
  NcclResult (*comm_abort)(NcclComm) = nullptr;
  NcclResult (*comm_get_async_error)(NcclComm, NcclResult*) = nullptr;
  const char* (*get_error_string)(NcclResult) = nullptr;
  const char* (*get_last_error)(NcclComm) = nullptr;  // NCCL 2.13+; optional
  NcclResult (*all_reduce)(const void*, void*, std::size_t, int, int, NcclComm, CUstream) = nullptr;
  NcclResult (*group_start)() = nullptr;
  NcclResult (*group_end)() = nullptr;
  // Multi-node only (ncclGetUniqueId, ncclCommInitRank: NCCL 2.0+); resolved but not required by single-node runs.
  NcclResult (*get_unique_id)(NcclUniqueId*) = nullptr;
  NcclResult (*comm_init_rank)(NcclComm*, int, NcclUniqueId, int) = nullptr;

  /// "ncclUnhandledCudaError (1): ..." with NCCL's last error text when it has one.
  [[nodiscard]] std::string describe(NcclResult rc) const {
    const char* text = get_error_string ? get_error_string(rc) : nullptr;
    std::string out = (text ? std::string(text) : std::string("NCCL error")) + " (" + std::to_string(rc) + ")";
    const char* last = get_last_error ? get_last_error(nullptr) : nullptr;
    if (last && *last) out += ": " + std::string(last);
    return out;
  }
};

Error nccl_error(const NcclApi& nccl, const char* call, NcclResult rc, const std::string& doing) {
  return make_error(ErrorKind::environment, "nccl.call",
                    std::string(call) + " failed with " + nccl.describe(rc) + " while " + doing, nccl.library,
                    "run with NCCL_DEBUG=WARN for NCCL's reasons; check nvidia-smi topo -m and dmesg for Xid errors");
}

// Loads the first of `libraries` that dlopen accepts; nullptr when none does.
Result<std::shared_ptr<NcclApi>> load_nccl(const std::vector<std::string>& libraries) {
  for (const std::string& name : libraries) {
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    // Never dlclosed: NCCL and its CUDA runtime register atexit handlers and threads.
    auto api = std::make_shared<NcclApi>();
    api->library = name;
    std::vector<std::string> missing;
    resolve(h, api->get_version, "ncclGetVersion", missing);
    resolve(h, api->comm_init_all, "ncclCommInitAll", missing);
    resolve(h, api->comm_destroy, "ncclCommDestroy", missing);
    resolve(h, api->comm_abort, "ncclCommAbort", missing);
    resolve(h, api->comm_get_async_error, "ncclCommGetAsyncError", missing);
    resolve(h, api->get_error_string, "ncclGetErrorString", missing);
    resolve(h, api->all_reduce, "ncclAllReduce", missing);
    resolve(h, api->group_start, "ncclGroupStart", missing);
    resolve(h, api->group_end, "ncclGroupEnd", missing);
    api->get_last_error = reinterpret_cast<decltype(api->get_last_error)>(dlsym(h, "ncclGetLastError"));
    api->get_unique_id = reinterpret_cast<decltype(api->get_unique_id)>(dlsym(h, "ncclGetUniqueId"));
    api->comm_init_rank = reinterpret_cast<decltype(api->comm_init_rank)>(dlsym(h, "ncclCommInitRank"));
    if (!missing.empty()) {
      std::string names;
      for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
      return make_error(ErrorKind::environment, "nccl.symbols", name + " lacks NCCL entry points: " + names, name,
                        "the library is not NVIDIA's NCCL or is older than 2.4; install a current NCCL (libnccl2)");
    }
    return api;
  }
  return std::shared_ptr<NcclApi>{};
}

// ---- shared plumbing --------------------------------------------------------------------------------------------

constexpr std::uint64_t k_buffer_bytes = 256 * k_mib;  // per buffer: far beyond any L2 cache
constexpr std::uint64_t k_min_buffer_bytes = 16 * k_mib;

Error bad_request(const std::string& message) {
  return make_error(ErrorKind::usage, "validate.bad_request", message, "multi_gpu", "this is a bug in the check");
}

Error host_error(const std::string& what, const std::exception& e) {
  return make_error(ErrorKind::environment, "cuda.host", what + " failed on the host: " + e.what(), "multi_gpu",
                    "the machine may be short of host memory");
}

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return text;
}

// The kernels of validation_kernels.cu used here, loaded into one context.
struct CollectiveKernels {
  CUfunction spin_wait = nullptr, memtest_write = nullptr, memtest_check = nullptr;
  unsigned max_grid = k_blocks_per_sm;  // one wave on this GPU

  [[nodiscard]] unsigned grid_for(std::uint64_t count) const {
    const std::uint64_t needed = (count + k_block - 1) / k_block;
    return static_cast<unsigned>(std::clamp<std::uint64_t>(needed, 1, max_grid));
  }
};

// One GPU of a measurement: its device, retained primary context, stream and a pair of events.
struct Gpu {
  std::string bus_id;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  CUevent start = nullptr, stop = nullptr;
};

// The driver resources of one measurement, released in reverse order when it ends, unless a wait timed out: then
// they are leaked rather than freed, since a free could block in a driver that stopped answering.
class Run {
  static void keep_forever(std::vector<std::shared_ptr<void>> host) {
    static std::mutex mutex;
    static auto* kept = new std::vector<std::vector<std::shared_ptr<void>>>();
    const std::lock_guard<std::mutex> lock(mutex);
    kept->push_back(std::move(host));
  }

 public:
  Run(std::shared_ptr<DriverApi> api, std::chrono::milliseconds timeout) : m_api(std::move(api)), m_timeout(timeout) {}
  ~Run() {
    if (m_broken) {
      // A copy still queued behind the hung operation may read these host buffers later: they outlive the run,
      // kept where the process can still reach them (a leak on purpose, not one the leak checker should report).
      keep_forever(std::move(m_host));
      return;
    }
    for (auto it = m_cleanup.rbegin(); it != m_cleanup.rend(); ++it) (*it)();
    // libcuda stays loaded: unloading it under sessions or atexit handlers is not safe.
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  [[nodiscard]] const DriverApi& api() const { return *m_api; }
  [[nodiscard]] bool broken() const { return m_broken; }
  // A thread of the run (NCCL's init) was left behind while it may still use the contexts: nothing is freed.
  void abandon() { m_broken = true; }

  [[nodiscard]] Error fail(const char* call, CUresult rc, const std::string& doing) const {
    return call_error(*m_api, call, rc, doing);
  }

  Status current(CUcontext ctx, const std::string& doing) const {
    if (CUresult rc = m_api->ctx_set_current(ctx); rc != k_cuda_success) return fail("cuCtxSetCurrent", rc, doing);
    return ok_status();
  }

  // The device at `bus_id` with its primary context retained (released when the run ends) and a stream and two
  // events in that context.
  Result<Gpu> open(const std::string& bus_id) {
    Gpu gpu;
    gpu.bus_id = bus_id;
    if (CUresult rc = m_api->device_get_by_pci_bus_id(&gpu.device, bus_id.c_str()); rc != k_cuda_success) {
      return make_error(
          ErrorKind::environment, "cuda.device",
          "no CUDA device at PCI bus id " + bus_id + ": " + m_api->error_name(rc) + " (" + std::to_string(rc) + ")",
          m_api->library, "check CUDA_VISIBLE_DEVICES and that nvidia-smi lists this GPU");
    }
    if (CUresult rc = m_api->primary_ctx_retain(&gpu.ctx, gpu.device); rc != k_cuda_success) {
      return fail("cuDevicePrimaryCtxRetain", rc, "retaining the primary context of " + bus_id);
    }
    const CUdevice device = gpu.device;
    m_cleanup.emplace_back([api = m_api, device]() { api->primary_ctx_release(device); });
    keep_primary_context(*m_api, device);
    if (auto s = current(gpu.ctx, "making the context of " + bus_id + " current"); !s) return std::move(s).error();
    if (CUresult rc = m_api->stream_create(&gpu.stream, k_stream_non_blocking); rc != k_cuda_success)
      return fail("cuStreamCreate", rc, "creating a stream on " + bus_id);
    on_exit(gpu.ctx, [api = m_api, s = gpu.stream]() { api->stream_destroy(s); });
    for (CUevent* event : {&gpu.start, &gpu.stop}) {
      if (CUresult rc = m_api->event_create(event, 0); rc != k_cuda_success)
        return fail("cuEventCreate", rc, "creating an event on " + bus_id);
      on_exit(gpu.ctx, [api = m_api, e = *event]() { api->event_destroy(e); });
    }
    return gpu;
  }

  Result<std::size_t> free_memory(const Gpu& gpu) const {
    if (auto s = current(gpu.ctx, "reading free memory on " + gpu.bus_id); !s) return std::move(s).error();
    std::size_t free_bytes = 0, total = 0;
    if (CUresult rc = m_api->mem_get_info(&free_bytes, &total); rc != k_cuda_success)
      return fail("cuMemGetInfo_v2", rc, "reading free memory on " + gpu.bus_id);
    return free_bytes;
  }

  Result<CUdeviceptr> alloc(const Gpu& gpu, std::size_t bytes, const std::string& doing) {
    if (auto s = current(gpu.ctx, doing); !s) return std::move(s).error();
    CUdeviceptr ptr = 0;
    if (CUresult rc = m_api->mem_alloc(&ptr, bytes); rc != k_cuda_success)
      return fail("cuMemAlloc_v2", rc, doing + " on " + gpu.bus_id);
    on_exit(gpu.ctx, [api = m_api, ptr]() { api->mem_free(ptr); });
    return ptr;
  }

  // Loads the validation kernels into the GPU's context (unloaded when the run ends).
  Result<CollectiveKernels> load_kernels(const Gpu& gpu, const FatbinImage& fatbin) {
    if (fatbin.size == 0) {
      return make_error(ErrorKind::environment, "cuda.no_kernels",
                        "peer-to-peer bandwidth needs the validation kernels, but this gpuenv was built without CUDA",
                        gpu.bus_id, "use a gpuenv release build, or build with the CUDA toolkit (nvcc) installed");
    }
    if (auto s = current(gpu.ctx, "loading the validation kernels"); !s) return std::move(s).error();
    CUmodule module = nullptr;
    if (CUresult rc = m_api->module_load_data(&module, fatbin.data); rc != k_cuda_success) {
      return make_error(ErrorKind::environment, "cuda.module",
                        "cuModuleLoadData failed with " + m_api->error_name(rc) + " (" + std::to_string(rc) +
                            ") loading the validation kernels on " + gpu.bus_id,
                        m_api->library,
                        "the kernels hold code for sm_75 and newer plus PTX for the newest; an older GPU is not "
                        "supported, and PTX needs a driver at least as new as the toolkit that built gpuenv");
    }
    on_exit(gpu.ctx, [api = m_api, module]() { api->module_unload(module); });
    CollectiveKernels k;
    int sms = 1;
    m_api->device_get_attribute(&sms, k_attr_multiprocessor_count, gpu.device);
    k.max_grid = static_cast<unsigned>(std::max(sms, 1)) * k_blocks_per_sm;
    const std::pair<CUfunction*, const char*> names[] = {
        {&k.spin_wait, "spin_wait"}, {&k.memtest_write, "memtest_write"}, {&k.memtest_check, "memtest_check"}};
    for (const auto& [fn, name] : names) {
      if (CUresult rc = m_api->module_get_function(fn, module, name); rc != k_cuda_success)
        return fail("cuModuleGetFunction", rc, std::string("finding kernel ") + name + " in the validation fatbin");
      // Load now: with lazy loading a first launch may wait for the context to go idle, which a held stream is not.
      if (m_api->func_load) {
        if (CUresult rc = m_api->func_load(*fn); rc != k_cuda_success)
          return fail("cuFuncLoad", rc, std::string("loading kernel ") + name + " on " + gpu.bus_id);
      }
    }
    return k;
  }

  Status launch(const Gpu& gpu, CUfunction fn, unsigned grid, unsigned block, std::initializer_list<void*> args,
                const char* name) const {
    std::vector<void*> params(args);
    const CUresult rc = m_api->launch_kernel(fn, grid, 1, 1, block, 1, 1, 0, gpu.stream, params.data(), nullptr);
    if (rc != k_cuda_success) return fail("cuLaunchKernel", rc, std::string("launching ") + name + " on " + gpu.bus_id);
    return ok_status();
  }

  Status clear(const Gpu& gpu, CUdeviceptr ptr, std::size_t bytes, const std::string& doing) const {
    if (auto s = current(gpu.ctx, doing); !s) return s;
    if (CUresult rc = m_api->memset_d8_async(ptr, 0, bytes, gpu.stream); rc != k_cuda_success)
      return fail("cuMemsetD8Async", rc, doing + " on " + gpu.bus_id);
    return ok_status();
  }

  // Polls the GPUs' streams until all are idle; `poll` (when given) is asked between rounds and may fail the wait.
  // After operation_timeout the run is broken: `cuda.timeout`, and nothing is freed.
  Status wait(const std::vector<const Gpu*>& gpus, const std::string& doing,
              const std::function<Status()>& poll = {}) {
    const auto deadline = std::chrono::steady_clock::now() + m_timeout;
    std::vector<bool> done(gpus.size(), false);
    for (int polls = 0;; ++polls) {
      bool all = true;
      for (std::size_t i = 0; i < gpus.size(); ++i) {
        if (done[i]) continue;
        if (auto s = current(gpus[i]->ctx, doing); !s) return s;
        const CUresult rc = m_api->stream_query(gpus[i]->stream);
        if (rc == k_cuda_success) {
          done[i] = true;
        } else if (rc != k_cuda_not_ready) {
          return fail("cuStreamQuery", rc, doing + " on " + gpus[i]->bus_id);
        } else {
          all = false;
        }
      }
      if (all) return ok_status();
      if (poll) {
        if (auto s = poll(); !s) return s;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        m_broken = true;
        std::string which;
        for (std::size_t i = 0; i < gpus.size(); ++i)
          if (!done[i]) which += (which.empty() ? "" : ", ") + gpus[i]->bus_id;
        return make_error(ErrorKind::environment, "cuda.timeout",
                          "the GPU did not finish " + doing + " on " + which + " within " +
                              std::to_string(m_timeout.count()) + " ms",
                          which, "the GPU or its links may be hung: check dmesg for Xid errors and nvidia-smi");
      }
      if (polls > 100) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  Result<double> elapsed_ms(const Gpu& gpu, const std::string& doing) const {
    float ms = 0;
    if (CUresult rc = m_api->event_elapsed_time(&ms, gpu.start, gpu.stop); rc != k_cuda_success)
      return fail("cuEventElapsedTime", rc, doing + " on " + gpu.bus_id);
    return static_cast<double>(ms);
  }

  // Host memory that asynchronous copies read: owned by the run, and never freed if it breaks.
  template <class T>
  T& host(T value) {
    auto owned = std::make_shared<T>(std::move(value));
    T& ref = *owned;
    m_host.push_back(std::move(owned));
    return ref;
  }

  // Registers `release` to run, with `ctx` current, when the run ends.
  void on_exit(CUcontext ctx, std::function<void()> release) {
    m_cleanup.emplace_back([api = m_api, ctx, release = std::move(release)]() {
      api->ctx_set_current(ctx);
      release();
    });
  }

 private:
  std::shared_ptr<DriverApi> m_api;
  std::chrono::milliseconds m_timeout;
  bool m_broken = false;
  std::vector<std::function<void()>> m_cleanup;
  std::vector<std::shared_ptr<void>> m_host;
};

Error data_mismatch(const std::string& what, std::uint64_t bad, std::uint64_t total, const std::string& expected,
                    const std::string& actual, const std::string& where) {
  return make_error(ErrorKind::environment, "validate.data_mismatch",
                    what + ": " + std::to_string(bad) + " of " + std::to_string(total) +
                        " checked elements differ from what was sent (first: expected " + expected + ", got " +
                        actual + ")",
                    where, "the GPUs or the link between them corrupt data: check dmesg for Xid errors, run "
                           "gpuenv validate --level long");
}

std::string hex(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

// Loads the driver, checks the entry points the measurement needs beyond load_driver's, and runs cuInit.
Result<std::shared_ptr<DriverApi>> driver_for(const std::string& library, bool peer) {
  auto api = load_driver(library);
  if (!api) return std::move(api).error();
  if (peer) {
    std::string missing;
    const DriverApi& a = **api;
    if (!a.device_can_access_peer) missing += "cuDeviceCanAccessPeer";
    if (!a.ctx_enable_peer_access) missing += std::string(missing.empty() ? "" : ", ") + "cuCtxEnablePeerAccess";
    if (!a.memcpy_peer_async) missing += std::string(missing.empty() ? "" : ", ") + "cuMemcpyPeerAsync";
    if (!missing.empty()) {
      return make_error(ErrorKind::environment, "cuda.symbols",
                        library + " lacks CUDA driver API entry points: " + missing, library,
                        "the library is not an NVIDIA CUDA driver or is too old; install a current NVIDIA driver");
    }
  }
  if (auto s = init_driver(**api); !s) return std::move(s).error();
  return api;
}

// ---- peer to peer -----------------------------------------------------------------------------------------------

// One peer-to-peer measurement's GPUs, kernels, spin flag and buffers, shared by run_p2p's steps.
struct PeerCopy {
  std::string what;  // "peer-to-peer copy from SRC to DST"
  Gpu src, dst;
  CollectiveKernels src_kernels, dst_kernels;
  int* flags = nullptr;  // mapped pinned: [0] released by the host, [1] set by spin_wait when it gave up
  CUdeviceptr flag_device = 0;
  std::uint64_t bytes = 0;
  CUdeviceptr from = 0, to = 0, counters = 0;
  unsigned long long words = 0, seed_arg = 0;
  int pattern = static_cast<int>(ref::Pattern::random);
};

// Whether the GPU at `src_bus_id` can map the memory of the one at `dst_bus_id`; fails when either is not a CUDA
// device or both are one.
Result<bool> peers_can_access(Run& run, const std::string& src_bus_id, const std::string& dst_bus_id) {
  const DriverApi& driver = run.api();
  CUdevice src_device = 0, dst_device = 0;
  for (auto [id, device] : {std::pair{&src_bus_id, &src_device}, std::pair{&dst_bus_id, &dst_device}}) {
    if (CUresult rc = driver.device_get_by_pci_bus_id(device, id->c_str()); rc != k_cuda_success) {
      return make_error(
          ErrorKind::environment, "cuda.device",
          "no CUDA device at PCI bus id " + *id + ": " + driver.error_name(rc) + " (" + std::to_string(rc) + ")",
          driver.library, "check CUDA_VISIBLE_DEVICES and that nvidia-smi lists this GPU");
    }
  }
  if (src_device == dst_device)
    return bad_request("p2p_bandwidth needs two different GPUs: " + src_bus_id + " and " + dst_bus_id + " are one");
  int can_access = 0;
  if (CUresult rc = driver.device_can_access_peer(&can_access, src_device, dst_device); rc != k_cuda_success)
    return run.fail("cuDeviceCanAccessPeer", rc, "asking whether " + src_bus_id + " can reach " + dst_bus_id);
  return can_access != 0;
}

// Opens both GPUs, loads the kernels into each and lets the source context map the destination's memory.
Status open_peers(Run& run, const FatbinImage& fatbin, const std::string& src_bus_id, const std::string& dst_bus_id,
                  PeerCopy& p) {
  auto src = run.open(src_bus_id);
  if (!src) return std::move(src).error();
  auto dst = run.open(dst_bus_id);
  if (!dst) return std::move(dst).error();
  p.src = *src;
  p.dst = *dst;
  auto src_kernels = run.load_kernels(p.src, fatbin);
  if (!src_kernels) return std::move(src_kernels).error();
  auto dst_kernels = run.load_kernels(p.dst, fatbin);
  if (!dst_kernels) return std::move(dst_kernels).error();
  p.src_kernels = *src_kernels;
  p.dst_kernels = *dst_kernels;

  // The source context maps the destination's memory. Already enabled (by another measurement or NCCL in this
  // process) is fine; it is never disabled (see the header).
  if (auto s = run.current(p.src.ctx, "enabling peer access"); !s) return s;
  if (CUresult rc = run.api().ctx_enable_peer_access(p.dst.ctx, 0);
      rc != k_cuda_success && rc != k_cuda_peer_access_already_enabled) {
    return run.fail("cuCtxEnablePeerAccess", rc, "enabling peer access from " + src_bus_id + " to " + dst_bus_id);
  }
  return ok_status();
}

// The spin flag: mapped pinned memory, [0] released by the host, [1] set by spin_wait when it gave up.
Status map_spin_flag(Run& run, const std::shared_ptr<DriverApi>& api, PeerCopy& p) {
  const DriverApi& driver = *api;
  void* flag_memory = nullptr;
  if (CUresult rc = driver.mem_host_alloc(&flag_memory, 64, k_host_alloc_portable | k_host_alloc_devicemap);
      rc != k_cuda_success) {
    return run.fail("cuMemHostAlloc", rc, "allocating the mapped spin flag");
  }
  run.on_exit(p.src.ctx, [a = api, flag_memory]() { a->mem_free_host(flag_memory); });
  std::memset(flag_memory, 0, 64);
  if (CUresult rc = driver.mem_host_get_device_pointer(&p.flag_device, flag_memory, 0); rc != k_cuda_success)
    return run.fail("cuMemHostGetDevicePointer_v2", rc, "mapping the spin flag");
  p.flags = static_cast<int*>(flag_memory);
  return ok_status();
}

// Sizes the copy to the free memory of both GPUs and allocates the source, the destination and the check counters.
Status allocate_peer_buffers(Run& run, const std::string& src_bus_id, PeerCopy& p) {
  auto src_free = run.free_memory(p.src);
  if (!src_free) return std::move(src_free).error();
  auto dst_free = run.free_memory(p.dst);
  if (!dst_free) return std::move(dst_free).error();
  p.bytes = std::min<std::uint64_t>({k_buffer_bytes, *src_free / 4, *dst_free / 4}) & ~(k_mib - 1);
  if (p.bytes < k_min_buffer_bytes) {
    return make_error(ErrorKind::environment, "cuda.out_of_memory",
                      p.what + " needs 64 MiB of free memory on each GPU; " + std::to_string(*src_free) + " and " +
                          std::to_string(*dst_free) + " bytes are free",
                      src_bus_id, "another process is using the GPUs' memory: check nvidia-smi");
  }
  auto from = run.alloc(p.src, p.bytes, "allocating the copy source");
  if (!from) return std::move(from).error();
  p.from = *from;
  auto to = run.alloc(p.dst, p.bytes, "allocating the copy destination");
  if (!to) return std::move(to).error();
  p.to = *to;
  auto counters = run.alloc(p.dst, sizeof(ref::MemtestErrors), "allocating the check counters");
  if (!counters) return std::move(counters).error();
  p.counters = *counters;
  return ok_status();
}

// Fills the copy source with the seeded random pattern, on the source GPU.
Status fill_peer_source(Run& run, std::uint64_t seed, PeerCopy& p) {
  p.words = p.bytes / 8;
  p.seed_arg = seed;
  CUdeviceptr base = p.from;
  if (auto s = run.current(p.src.ctx, "filling the copy source"); !s) return s;
  if (auto s = run.launch(p.src, p.src_kernels.memtest_write, p.src_kernels.grid_for(p.words), k_block,
                          {&base, &p.words, &p.pattern, &p.seed_arg}, "memtest_write");
      !s) {
    return s;
  }
  return run.wait({&p.src}, "filling the copy source");
}

// `count` copies behind the spin kernel, between the source's events; returns their milliseconds.
Result<double> timed_peer_copies(Run& run, PeerCopy& p, int count, const std::string& doing) {
  const DriverApi& driver = run.api();
  if (auto s = run.current(p.src.ctx, doing); !s) return std::move(s).error();
  set_spin_flag(p.flags, 0, 0);
  set_spin_flag(p.flags, 1, 0);
  unsigned long long timeout = k_spin_timeout_ns;
  CUdeviceptr flag = p.flag_device;
  if (auto s = run.launch(p.src, p.src_kernels.spin_wait, 1, 1, {&flag, &timeout}, "spin_wait"); !s)
    return std::move(s).error();
  Status queued = ok_status();
  if (CUresult rc = driver.event_record(p.src.start, p.src.stream); rc != k_cuda_success)
    queued = run.fail("cuEventRecord", rc, doing);
  for (int i = 0; queued && i < count; ++i) {
    if (CUresult rc = driver.memcpy_peer_async(p.to, p.dst.ctx, p.from, p.src.ctx, p.bytes, p.src.stream);
        rc != k_cuda_success) {
      queued = run.fail("cuMemcpyPeerAsync", rc, doing);
    }
  }
  if (queued) {
    if (CUresult rc = driver.event_record(p.src.stop, p.src.stream); rc != k_cuda_success)
      queued = run.fail("cuEventRecord", rc, doing);
  }
  set_spin_flag(p.flags, 0, 1);  // release the spin kernel, whether or not the work was queued
  Status done = run.wait({&p.src}, doing);
  if (!queued) return std::move(queued).error();
  if (!done) return std::move(done).error();
  // flags[1] != 0: the spin gave up before the release; the sample then includes queueing gaps and reads low,
  // which errs on the safe side, so it is kept.
  return run.elapsed_ms(p.src, doing);
}

// Checks every word of the destination on its own GPU after sample `sample` (0-based).
Status check_peer_copy(Run& run, PeerCopy& p, int sample, const std::string& dst_bus_id) {
  const std::string checking = "checking the data of the " + p.what;
  if (auto s = run.clear(p.dst, p.counters, sizeof(ref::MemtestErrors), checking); !s) return s;
  CUdeviceptr base = p.to, errors = p.counters;
  int next_pattern = -1;
  if (auto s = run.launch(p.dst, p.dst_kernels.memtest_check, p.dst_kernels.grid_for(p.words), k_block,
                          {&base, &p.words, &p.pattern, &p.seed_arg, &next_pattern, &errors}, "memtest_check");
      !s) {
    return s;
  }
  if (auto s = run.wait({&p.dst}, checking); !s) return s;
  ref::MemtestErrors found{};
  if (CUresult rc = run.api().memcpy_dtoh(&found, p.counters, sizeof found); rc != k_cuda_success)
    return run.fail("cuMemcpyDtoH_v2", rc, checking);
  if (found.count != 0) {
    return data_mismatch("the " + p.what + " (sample " + std::to_string(sample + 1) + ")", found.count, p.words,
                         hex(found.expected), hex(found.actual), dst_bus_id);
  }
  return ok_status();
}

Result<std::optional<Samples>> run_p2p(const MultiGpuOptions& options, const std::string& src_bus_id,
                                       const std::string& dst_bus_id, int samples) {
  if (samples < 1) return bad_request("p2p_bandwidth needs at least one sample, got " + std::to_string(samples));
  if (src_bus_id.empty() || dst_bus_id.empty()) return bad_request("p2p_bandwidth needs two PCI bus ids");
  if (upper(src_bus_id) == upper(dst_bus_id))
    return bad_request("p2p_bandwidth needs two different GPUs, got " + src_bus_id + " twice");
  auto api = driver_for(options.cuda_library, true);
  if (!api) return std::move(api).error();
  Run run(*api, options.operation_timeout);
  PeerCopy p;
  p.what = "peer-to-peer copy from " + src_bus_id + " to " + dst_bus_id;

  auto can_access = peers_can_access(run, src_bus_id, dst_bus_id);
  if (!can_access) return std::move(can_access).error();
  if (!*can_access) return std::optional<Samples>{};
  if (auto s = open_peers(run, options.fatbin, src_bus_id, dst_bus_id, p); !s) return std::move(s).error();
  if (auto s = map_spin_flag(run, *api, p); !s) return std::move(s).error();
  if (auto s = allocate_peer_buffers(run, src_bus_id, p); !s) return std::move(s).error();
  if (auto s = fill_peer_source(run, options.seed + 501, p); !s) return std::move(s).error();

  auto warm = timed_peer_copies(run, p, 1, "warming up the " + p.what);
  if (!warm) return std::move(warm).error();
  // About 40 ms of copies per sample.
  const int iterations = static_cast<int>(std::clamp(std::ceil(40.0 / std::max(*warm, 1e-3)), 2.0, 32.0));

  Samples result;
  result.unit = "GB/s";
  result.engine = "gpuenv";
  for (int sample = 0; sample < samples; ++sample) {
    if (auto s = run.clear(p.dst, p.to, p.bytes, "clearing the copy destination"); !s) return std::move(s).error();
    if (auto s = run.wait({&p.dst}, "clearing the copy destination"); !s) return std::move(s).error();
    auto ms = timed_peer_copies(run, p, iterations, "the " + p.what);
    if (!ms) return std::move(ms).error();
    if (auto s = check_peer_copy(run, p, sample, dst_bus_id); !s) return std::move(s).error();
    result.values.push_back(static_cast<double>(p.bytes) * iterations / (std::max(*ms, 1e-6) * 1e6));
  }
  result.data_verified = true;
  return std::optional<Samples>(std::move(result));
}

// ---- NCCL all-reduce --------------------------------------------------------------------------------------------

// NCCL communicators: aborted when the measurement fails (a wait timed out, or an NCCL call failed), destroyed
// when it succeeds.
class Communicators {
 public:
  Communicators(std::shared_ptr<NcclApi> nccl, std::size_t count) : m_nccl(std::move(nccl)), m_comms(count) {}
  ~Communicators() {
    for (NcclComm comm : m_comms) {
      if (comm) (m_keep ? m_nccl->comm_destroy : m_nccl->comm_abort)(comm);
    }
  }
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;

  NcclComm* data() { return m_comms.data(); }
  NcclComm operator[](std::size_t i) const { return m_comms[i]; }
  void succeeded() { m_keep = true; }
  void forget() { std::fill(m_comms.begin(), m_comms.end(), nullptr); }

 private:
  std::shared_ptr<NcclApi> m_nccl;
  std::vector<NcclComm> m_comms;
  bool m_keep = false;
};

// Small integers (1..251) as floats: any sum of up to 66,000 of them is exact in float.
float base_value(std::uint64_t seed, std::uint64_t index) {
  return static_cast<float>(1 + ref::random_word(seed, index) % 251);
}

// One NCCL all-reduce measurement's GPUs, communicators and buffers, shared by run_nccl's steps (all owned by
// run_nccl: the communicators must go before the run releases the contexts).
struct AllReduce {
  Run& run;
  const DriverApi& driver;
  const NcclApi& nccl;
  const std::vector<std::string>& bus_ids;
  const std::vector<Gpu>& gpus;
  const std::vector<const Gpu*>& all;
  const Communicators& comms;
  const std::vector<CUdeviceptr>& send;
  const std::vector<CUdeviceptr>& recv;
  const std::vector<float>& base;            // the pattern every rank sends, rotated by its offset
  const std::vector<std::uint64_t>& offset;  // per NCCL rank, all of them (across nodes too)
  std::uint64_t bytes = 0, count = 0;        // per rank's buffer
  std::string what;                          // "the NCCL all-reduce across ..."
  std::size_t first_rank = 0;                // the NCCL rank of gpus[0]
  std::function<Status()> watch;             // asked while waiting (multi-node: the peers' channel); may be empty
};

// Each rank's send buffer: the base pattern rotated by the rank's offset, uploaded and waited for.
Status upload_all_reduce_input(const AllReduce& x) {
  Run& run = x.run;
  const std::size_t n = x.gpus.size();
  for (std::size_t r = 0; r < n; ++r) {
    const std::string doing = "uploading the all-reduce input";
    if (auto s = run.current(x.gpus[r].ctx, doing); !s) return s;
    const std::uint64_t offset = x.offset[x.first_rank + r];
    const std::uint64_t head = x.count - offset;
    if (CUresult rc = x.driver.memcpy_htod_async(x.send[r], x.base.data() + offset, head * 4, x.gpus[r].stream);
        rc != k_cuda_success) {
      return run.fail("cuMemcpyHtoDAsync_v2", rc, doing + " on " + x.gpus[r].bus_id);
    }
    if (offset != 0) {
      if (CUresult rc = x.driver.memcpy_htod_async(x.send[r] + head * 4, x.base.data(), offset * 4, x.gpus[r].stream);
          rc != k_cuda_success) {
        return run.fail("cuMemcpyHtoDAsync_v2", rc, doing + " on " + x.gpus[r].bus_id);
      }
    }
  }
  return run.wait(x.all, "uploading the all-reduce input");
}

// Asked while waiting: an asynchronous NCCL error (a peer or link failed) ends the wait.
Status all_reduce_async_errors(const AllReduce& x) {
  for (std::size_t r = 0; r < x.gpus.size(); ++r) {
    NcclResult state = k_nccl_success;
    if (NcclResult rc = x.nccl.comm_get_async_error(x.comms[r], &state); rc != k_nccl_success)
      return nccl_error(x.nccl, "ncclCommGetAsyncError", rc, x.what);
    if (state != k_nccl_success && state != k_nccl_in_progress)
      return nccl_error(x.nccl, "ncclCommGetAsyncError", state, x.what + " (the rank on " + x.bus_ids[r] + " failed)");
  }
  if (x.watch) return x.watch();
  return ok_status();
}

// Records each rank's start or stop event.
Status record_all_reduce_events(const AllReduce& x, bool start, const std::string& doing) {
  for (const Gpu& g : x.gpus) {
    if (auto s = x.run.current(g.ctx, doing); !s) return s;
    if (CUresult rc = x.driver.event_record(start ? g.start : g.stop, g.stream); rc != k_cuda_success)
      return x.run.fail("cuEventRecord", rc, doing + " on " + g.bus_id);
  }
  return ok_status();
}

// `iterations` all-reduces between each rank's events; returns the slowest rank's milliseconds.
Result<double> timed_all_reduce(const AllReduce& x, int iterations, const std::string& doing) {
  const NcclApi& nccl = x.nccl;
  if (auto s = record_all_reduce_events(x, true, doing); !s) return std::move(s).error();
  for (int it = 0; it < iterations; ++it) {
    if (NcclResult rc = nccl.group_start(); rc != k_nccl_success) return nccl_error(nccl, "ncclGroupStart", rc, doing);
    NcclResult first = k_nccl_success;
    for (std::size_t r = 0; r < x.gpus.size(); ++r) {
      const NcclResult rc =
          nccl.all_reduce(reinterpret_cast<const void*>(x.send[r]), reinterpret_cast<void*>(x.recv[r]), x.count,
                          k_nccl_float32, k_nccl_sum, x.comms[r], x.gpus[r].stream);
      if (rc != k_nccl_success && first == k_nccl_success) first = rc;
    }
    const NcclResult ended = nccl.group_end();  // always closes the group, even after a failed call
    if (first != k_nccl_success) return nccl_error(nccl, "ncclAllReduce", first, doing);
    if (ended != k_nccl_success) return nccl_error(nccl, "ncclGroupEnd", ended, doing);
  }
  if (auto s = record_all_reduce_events(x, false, doing); !s) return std::move(s).error();
  if (auto s = x.run.wait(x.all, doing, [&x]() -> Status { return all_reduce_async_errors(x); }); !s)
    return std::move(s).error();
  double slowest = 0;
  for (const Gpu& g : x.gpus) {
    if (auto s = x.run.current(g.ctx, doing); !s) return std::move(s).error();
    auto ms = x.run.elapsed_ms(g, doing);
    if (!ms) return std::move(ms).error();
    slowest = std::max(slowest, *ms);
  }
  return slowest;
}

// Clears every rank's receive buffer and waits for it.
Status clear_all_reduce_output(const AllReduce& x, const std::string& doing) {
  for (std::size_t r = 0; r < x.gpus.size(); ++r) {
    if (auto s = x.run.clear(x.gpus[r], x.recv[r], x.bytes, doing); !s) return s;
  }
  return x.run.wait(x.all, doing);
}

// Checks 16 spans of 256 elements spread over each rank's result, first and last elements included.
Status verify_all_reduce(const AllReduce& x, const std::string& label) {
  constexpr std::uint64_t k_spans = 16, k_span = 256;
  const std::string doing = "checking the result of " + x.what;
  const std::size_t n = x.gpus.size();
  std::vector<float> got(k_span);
  std::uint64_t bad = 0, checked = 0;
  std::string first_expected, first_actual, first_where;
  for (std::size_t r = 0; r < n; ++r) {
    if (auto s = x.run.current(x.gpus[r].ctx, doing); !s) return s;
    for (std::uint64_t s = 0; s < k_spans; ++s) {
      const std::uint64_t start = s * (x.count - k_span) / (k_spans - 1);
      if (CUresult rc = x.driver.memcpy_dtoh(got.data(), x.recv[r] + start * 4, k_span * 4); rc != k_cuda_success)
        return x.run.fail("cuMemcpyDtoH_v2", rc, doing + " on " + x.gpus[r].bus_id);
      for (std::uint64_t j = 0; j < k_span; ++j) {
        const std::uint64_t i = start + j;
        float expected = 0;
        for (const std::uint64_t o : x.offset) expected += x.base[(i + o) % x.count];
        ++checked;
        if (got[j] != expected && bad++ == 0) {
          first_expected = std::to_string(expected);
          first_actual = std::to_string(got[j]) + " at element " + std::to_string(i) + " on " + x.gpus[r].bus_id;
          first_where = x.gpus[r].bus_id;
        }
      }
    }
  }
  if (bad == 0) return ok_status();
  return data_mismatch(x.what + " (" + label + ")", bad, checked, first_expected, first_actual, first_where);
}

Status check_bus_ids(const std::vector<std::string>& bus_ids) {
  if (bus_ids.empty()) return bad_request("nccl_allreduce needs at least one GPU");
  for (std::size_t i = 0; i < bus_ids.size(); ++i) {
    if (bus_ids[i].empty()) return bad_request("nccl_allreduce got an empty PCI bus id");
    for (std::size_t j = 0; j < i; ++j) {
      if (upper(bus_ids[i]) == upper(bus_ids[j]))
        return bad_request("nccl_allreduce got the GPU " + bus_ids[i] + " twice");
    }
  }
  return ok_status();
}

// Multi-node: ncclCommInitRank for every local GPU in one group, on a thread of its own, since NCCL's init cannot be
// bounded: it is waited for until the operation timeout while RANKS.watch is asked. When the wait ends early the
// thread is left behind and whatever it makes is leaked (never used, never freed under a hung NCCL), and RUN is
// abandoned: the thread may still be inside ncclCommInitRank on those contexts, so they are never released.
Status init_rank_comms(Run& run, const std::shared_ptr<DriverApi>& driver, const std::shared_ptr<NcclApi>& nccl,
                       const std::vector<Gpu>& gpus, Communicators& comms, const NcclRankSpec& ranks,
                       std::chrono::milliseconds timeout, const std::string& names) {
  if (!nccl->get_unique_id || !nccl->comm_init_rank)
    return make_error(ErrorKind::environment, "nccl.symbols", nccl->library + " lacks ncclCommInitRank", nccl->library,
                      "install a current NCCL (libnccl2) on every node");
  struct State {
    std::mutex mutex;
    bool done = false;
    NcclResult rc = k_nccl_success;
    std::string call;
    std::vector<NcclComm> comms;
  };
  auto state = std::make_shared<State>();
  std::vector<CUcontext> contexts;
  for (const Gpu& g : gpus) contexts.push_back(g.ctx);
  NcclUniqueId id{};
  std::memcpy(id.internal, ranks.id.data(), sizeof id.internal);
  std::thread([state, driver, nccl, contexts, id, first = ranks.first_rank, total = ranks.total_ranks] {
    std::vector<NcclComm> made(contexts.size(), nullptr);
    NcclResult rc = nccl->group_start();
    std::string call = "ncclGroupStart";
    for (std::size_t i = 0; i < contexts.size() && rc == k_nccl_success; ++i) {
      (void)driver->ctx_set_current(contexts[i]);
      rc = nccl->comm_init_rank(&made[i], total, id, first + static_cast<int>(i));
      call = "ncclCommInitRank";
    }
    if (const NcclResult ended = nccl->group_end(); rc == k_nccl_success && ended != k_nccl_success) {
      rc = ended;
      call = "ncclGroupEnd";
    }
    std::lock_guard lock(state->mutex);
    state->done = true;
    state->rc = rc;
    state->call = call;
    state->comms = made;
  }).detach();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard lock(state->mutex);
      if (state->done) {
        if (state->rc != k_nccl_success)
          return nccl_error(*nccl, state->call.c_str(), state->rc, "creating communicators for " + names);
        for (std::size_t i = 0; i < state->comms.size(); ++i) comms.data()[i] = state->comms[i];
        return ok_status();
      }
    }
    if (ranks.watch) {
      if (auto s = ranks.watch(); !s) {
        run.abandon();
        return s;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      run.abandon();
      return make_error(ErrorKind::environment, "cuda.timeout",
                        "ncclCommInitRank did not finish within " + std::to_string(timeout.count()) + " ms for " + names,
                        names, "a rank may be missing from NCCL's bootstrap or the fabric may not connect: run with "
                               "NCCL_DEBUG=INFO and check NCCL_SOCKET_IFNAME/NCCL_IB_HCA on every node");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The samples of a prepared all-reduce: warm-up, then `samples` timed and verified samples of bus bandwidth.
Result<std::optional<Samples>> sample_all_reduce(const AllReduce& x, const std::string& library, int samples,
                                                 std::size_t total_ranks) {
  auto timed = [&x](int iterations, const std::string& doing) { return timed_all_reduce(x, iterations, doing); };
  auto clear_all = [&x](const std::string& doing) { return clear_all_reduce_output(x, doing); };
  auto verify = [&x](const std::string& label) { return verify_all_reduce(x, label); };
  const std::string& what = x.what;

  // Warm-up: the first all-reduce also sets up NCCL's connections; the second sizes the samples.
  if (auto s = clear_all("clearing the all-reduce output"); !s) return std::move(s).error();
  if (auto s = timed(1, "warming up " + what); !s) return std::move(s).error();
  if (auto s = verify("warm-up"); !s) return std::move(s).error();
  auto warm = timed(1, "warming up " + what);
  if (!warm) return std::move(warm).error();
  // About 50 ms of all-reduces per sample; across nodes every rank must run as many, so the count is fixed there.
  const int iterations = x.offset.size() > x.gpus.size()
                             ? 5
                             : static_cast<int>(std::clamp(std::ceil(50.0 / std::max(*warm, 1e-3)), 1.0, 20.0));
  const auto n = static_cast<double>(total_ranks);
  const double factor = total_ranks > 1 ? 2.0 * (n - 1) / n : 1.0;

  Samples result;
  result.unit = "GB/s";
  result.engine = "nccl";
  result.library = library;  // the image's NCCL with --image, else the host's: the report names which ran
  for (int sample = 0; sample < samples; ++sample) {
    if (auto s = clear_all("clearing the all-reduce output"); !s) return std::move(s).error();
    auto ms = timed(iterations, what);
    if (!ms) return std::move(ms).error();
    if (auto s = verify("sample " + std::to_string(sample + 1)); !s) return std::move(s).error();
    const double algorithm_gbps = static_cast<double>(x.bytes) * iterations / (std::max(*ms, 1e-6) * 1e6);
    result.values.push_back(algorithm_gbps * factor);
  }
  result.data_verified = true;
  return std::optional<Samples>(std::move(result));
}

// Single node (RANKS null): ncclCommInitAll across BUS_IDS. Multi-node: this process's NCCL ranks of RANKS.
Result<std::optional<Samples>> run_nccl(const MultiGpuOptions& options, const std::vector<std::string>& bus_ids,
                                        int samples, const NcclRankSpec* ranks) {
  if (samples < 1) return bad_request("nccl_allreduce needs at least one sample, got " + std::to_string(samples));
  if (auto s = check_bus_ids(bus_ids); !s) return std::move(s).error();
  if (ranks && (ranks->first_rank < 0 || ranks->total_ranks < ranks->first_rank + static_cast<int>(bus_ids.size()) ||
                ranks->buffer_bytes < k_min_buffer_bytes))
    return bad_request("nccl_allreduce got NCCL ranks that do not fit its GPUs or a buffer under 16 MiB");
  auto loaded = load_nccl(options.nccl_libraries);
  if (!loaded) return std::move(loaded).error();
  if (!*loaded) return std::optional<Samples>{};
  std::shared_ptr<NcclApi> nccl = *loaded;

  auto api = driver_for(options.cuda_library, false);
  if (!api) return std::move(api).error();
  const DriverApi& driver = **api;
  Run run(*api, options.operation_timeout);
  const std::size_t n = bus_ids.size();
  std::vector<Gpu> gpus;
  std::vector<int> ordinals;
  for (const std::string& id : bus_ids) {
    auto gpu = run.open(id);
    if (!gpu) return std::move(gpu).error();
    if (std::find(ordinals.begin(), ordinals.end(), gpu->device) != ordinals.end())
      return bad_request("nccl_allreduce got the GPU " + id + " twice (under another spelling)");
    ordinals.push_back(gpu->device);
    gpus.push_back(std::move(*gpu));
  }
  std::vector<const Gpu*> all;
  for (const Gpu& g : gpus) all.push_back(&g);
  std::string names;
  for (const std::string& id : bus_ids) names += (names.empty() ? "" : ", ") + id;
  const std::string what = ranks ? "the NCCL all-reduce of " + std::to_string(ranks->total_ranks) +
                                       " ranks across nodes (here: " + names + ")"
                                 : "the NCCL all-reduce across " + names;

  // Declared after `run`: the communicators go before the contexts are released.
  Communicators comms(nccl, n);
  if (ranks) {
    if (auto s = init_rank_comms(run, *api, nccl, gpus, comms, *ranks, options.operation_timeout, names); !s)
      return std::move(s).error();
  } else if (NcclResult rc = nccl->comm_init_all(comms.data(), static_cast<int>(n), ordinals.data());
             rc != k_nccl_success) {
    comms.forget();  // ncclCommInitAll frees what it made when it fails
    return nccl_error(*nccl, "ncclCommInitAll", rc, "creating communicators for " + names);
  }

  // Buffers sized after NCCL took its own memory; every rank uses the same count (across nodes: the one asked for).
  std::uint64_t bytes = ranks ? ranks->buffer_bytes : k_buffer_bytes;
  for (const Gpu& g : gpus) {
    auto free_bytes = run.free_memory(g);
    if (!free_bytes) return std::move(free_bytes).error();
    if (ranks && *free_bytes / 2 < bytes) bytes = 0;
    if (!ranks) bytes = std::min<std::uint64_t>(bytes, (*free_bytes / 4) & ~(k_mib - 1));
  }
  if (bytes < k_min_buffer_bytes) {
    return make_error(ErrorKind::environment, "cuda.out_of_memory",
                      what + " needs " + (ranks ? std::to_string(2 * ranks->buffer_bytes / k_mib) + " MiB" : std::string("64 MiB")) +
                          " of free memory on each GPU beside NCCL's own", names,
                      "another process is using the GPUs' memory: check nvidia-smi");
  }
  const std::uint64_t count = bytes / 4;
  std::vector<CUdeviceptr> send(n), recv(n);
  for (std::size_t r = 0; r < n; ++r) {
    auto s = run.alloc(gpus[r], bytes, "allocating the all-reduce send buffer");
    if (!s) return std::move(s).error();
    send[r] = *s;
    auto d = run.alloc(gpus[r], bytes, "allocating the all-reduce receive buffer");
    if (!d) return std::move(d).error();
    recv[r] = *d;
  }

  // NCCL rank r sends the base pattern rotated by offset[r]; element i sums to the sum of base[(i + offset[r]) % count].
  const std::uint64_t seed = options.seed + 601;
  // The upload is asynchronous: if it times out, a copy may still read the pattern after this function returned.
  std::vector<float>& base = run.host(std::vector<float>(count));
  for (std::uint64_t i = 0; i < count; ++i) base[i] = base_value(seed, i);
  const std::size_t total = ranks ? static_cast<std::size_t>(ranks->total_ranks) : n;
  std::vector<std::uint64_t> offset(total);
  for (std::size_t r = 0; r < total; ++r) offset[r] = (r * (count / total + 7919)) % count;
  const AllReduce x{run,  driver, *nccl, bus_ids, gpus, all, comms, send, recv, base, offset, bytes, count, what,
                    ranks ? static_cast<std::size_t>(ranks->first_rank) : 0, ranks ? ranks->watch : std::function<Status()>{}};
  if (auto s = upload_all_reduce_input(x); !s) return std::move(s).error();
  auto result = sample_all_reduce(x, nccl->library, samples, total);
  if (result) comms.succeeded();
  return result;
}

}  // namespace

Result<std::optional<NcclLibrary>> nccl_library_status(const std::vector<std::string>& libraries) {
  try {
    auto loaded = load_nccl(libraries);
    if (!loaded) return std::move(loaded).error();
    if (!*loaded) return std::optional<NcclLibrary>{};
    const NcclApi& nccl = **loaded;
    NcclLibrary out;
    out.library = nccl.library;
    if (NcclResult rc = nccl.get_version(&out.version); rc != k_nccl_success)
      return nccl_error(nccl, "ncclGetVersion", rc, "reading the NCCL version");
    return std::optional<NcclLibrary>(std::move(out));
  } catch (const std::exception& e) {
    return host_error("loading NCCL", e);
  }
}

Result<std::optional<Samples>> measure_p2p_bandwidth(const MultiGpuOptions& options, const std::string& src_bus_id,
                                                     const std::string& dst_bus_id, int samples) {
  try {
    return run_p2p(options, src_bus_id, dst_bus_id, samples);
  } catch (const std::exception& e) {
    return host_error("the peer-to-peer measurement", e);
  }
}

Result<std::optional<Samples>> measure_nccl_allreduce(const MultiGpuOptions& options,
                                                      const std::vector<std::string>& bus_ids, int samples) {
  try {
    return run_nccl(options, bus_ids, samples, nullptr);
  } catch (const std::exception& e) {
    return host_error("the NCCL all-reduce measurement", e);
  }
}

Result<std::optional<std::array<std::uint8_t, 128>>> nccl_unique_id(const MultiGpuOptions& options) {
  try {
    auto loaded = load_nccl(options.nccl_libraries);
    if (!loaded) return std::move(loaded).error();
    if (!*loaded) return std::optional<std::array<std::uint8_t, 128>>{};
    const NcclApi& nccl = **loaded;
    if (!nccl.get_unique_id)
      return make_error(ErrorKind::environment, "nccl.symbols", nccl.library + " lacks ncclGetUniqueId", nccl.library,
                        "install a current NCCL (libnccl2)");
    NcclUniqueId id{};
    if (NcclResult rc = nccl.get_unique_id(&id); rc != k_nccl_success)
      return nccl_error(nccl, "ncclGetUniqueId", rc, "making the unique id of a multi-node run");
    std::array<std::uint8_t, 128> out{};
    std::memcpy(out.data(), id.internal, out.size());
    return std::optional<std::array<std::uint8_t, 128>>(out);
  } catch (const std::exception& e) {
    return host_error("making NCCL's unique id", e);
  }
}

Result<std::optional<Samples>> measure_nccl_allreduce_ranks(const MultiGpuOptions& options,
                                                            const std::vector<std::string>& bus_ids,
                                                            const NcclRankSpec& ranks, int samples) {
  try {
    return run_nccl(options, bus_ids, samples, &ranks);
  } catch (const std::exception& e) {
    return host_error("the multi-node NCCL all-reduce measurement", e);
  }
}

}  // namespace gpuenv::validate
