// The CUDA driver API session behind GpuBackend::open: the validation kernels (validate/kernels) run from the
// embedded fatbin, the GEMMs run through cuBLASLt when a libcublasLt loads, else through cuBLAS (cublasGemmEx) when
// a libcublas loads, else (gemm_consistency only) through gpuenv's own kernel, and every result is checked against
// the host reference (validate/kernels/reference.hpp). libcuda (driver_api) and libcublasLt and libcublas
// (blas_library) are opened with dlopen and declared by hand, so gpuenv builds and runs without the CUDA toolkit or
// a driver.
//
// Bounded waits: nothing here calls cuStreamSynchronize; the stream is polled with cuStreamQuery until
// options.operation_timeout, and then the session is marked broken: it returns `cuda.timeout`, fails every later
// call with `cuda.broken` and, rather than block in the driver, leaks its memory and context instead of freeing
// them. Timed measurements follow nvbandwidth: a spin kernel on a flag in mapped pinned memory holds the stream
// while the work is queued, CUDA events time it, a warm-up comes first, and the data is checked after each sample
// (never zeros: sources hold a seeded random pattern and destinations are cleared before each sample).
#include "validate/adapters/cuda_session.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "base/text.hpp"
#include "validate/adapters/blas_library.hpp"
#include "validate/adapters/driver_api.hpp"
#include "validate/adapters/gemm_types.hpp"
#include "validate/kernels/reference.hpp"

namespace gpuenv::validate {
namespace {

namespace ref = reference;
using namespace cuda;  // NOLINT: the driver API names of driver_api.hpp

using namespace blas;  // NOLINT: the cuBLAS(Lt) names of blas_library.hpp
using gemm::k_cuda_r_16bf;
using gemm::k_cuda_r_16f;
using gemm::k_cuda_r_32f;
using gemm::k_cuda_r_64f;

constexpr std::uint64_t k_gib = 1024ull * k_mib;

// The element types of a GEMM measurement: how cuBLAS(Lt) takes them, how gpuenv fills and checks them.
struct GemmType : gemm::GemmTypes {
  ref::Fill fill = ref::Fill::grid_f32;
  double relative_tolerance = 0;  // against the exact host result (grid inputs are exact; only the output rounds)
};

std::optional<GemmType> gemm_type(const std::string& dtype) {
  const auto types = gemm::tflops_gemm_types(dtype);
  if (!types) return std::nullopt;
  if (dtype == "bf16") return GemmType{*types, ref::Fill::grid_bf16, 0x1p-8};
  if (dtype == "fp16") return GemmType{*types, ref::Fill::grid_f16, 0x1p-10};
  if (dtype == "tf32") return GemmType{*types, ref::Fill::grid_f32, 0x1p-20};
  return GemmType{*types, ref::Fill::grid_f64, 0x1p-40};
}

double half_to_double(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  const double sign = (bits & 0x8000u) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// Reads element `index` of a GEMM output of `type` from raw bytes.
double output_value(const GemmType& type, const unsigned char* bytes, std::size_t index) {
  switch (type.output_bytes) {
    case 2: {
      std::uint16_t bits = 0;
      std::memcpy(&bits, bytes + 2 * index, 2);
      if (type.output_type == k_cuda_r_16f) return half_to_double(bits);
      float f = 0;
      const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
      std::memcpy(&f, &wide, 4);
      return f;
    }
    case 4: {
      float f = 0;
      std::memcpy(&f, bytes + 4 * index, 4);
      return f;
    }
    default: {
      double d = 0;
      std::memcpy(&d, bytes + 8 * index, 8);
      return d;
    }
  }
}

class CudaSession;

// Device memory owned by a session; freed unless the session is broken (a free could then block in the driver).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DriverApi* api, const bool* broken, CUdeviceptr ptr, std::size_t bytes)
      : m_api(api), m_broken(broken), m_ptr(ptr), m_bytes(bytes) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      m_api = other.m_api;
      m_broken = other.m_broken;
      m_ptr = std::exchange(other.m_ptr, 0);
      m_bytes = std::exchange(other.m_bytes, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  [[nodiscard]] CUdeviceptr ptr() const { return m_ptr; }
  [[nodiscard]] std::size_t bytes() const { return m_bytes; }

 private:
  void release() {
    if (m_ptr != 0 && m_api && !*m_broken) m_api->mem_free(m_ptr);
    m_ptr = 0;
  }
  const DriverApi* m_api = nullptr;
  const bool* m_broken = nullptr;
  CUdeviceptr m_ptr = 0;
  std::size_t m_bytes = 0;
};

// Page-locked host memory: on the GPU's NUMA node when one is given (mmap + mbind + cuMemHostRegister), else
// cuMemHostAlloc.
class PinnedHost {
 public:
  PinnedHost() = default;
  PinnedHost(const PinnedHost&) = delete;
  PinnedHost& operator=(const PinnedHost&) = delete;
  ~PinnedHost() {
    if (!m_data || (m_broken && *m_broken)) return;
    if (m_registered) {
      m_api->mem_host_unregister(m_data);
      munmap(m_data, m_bytes);
    } else {
      m_api->mem_free_host(m_data);
    }
  }

  static Result<std::unique_ptr<PinnedHost>> allocate(const DriverApi& api, const bool* broken, std::size_t bytes,
                                                      int numa_node) {
    auto host = std::make_unique<PinnedHost>();
    host->m_api = &api;
    host->m_broken = broken;
    host->m_bytes = bytes;
    if (numa_node >= 0 && numa_node < 1024) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) {
        std::array<unsigned long, 1024 / (8 * sizeof(unsigned long))> mask{};
        const auto node = static_cast<std::size_t>(numa_node);
        mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
        constexpr long k_mpol_preferred = 1;
        // Preferred, not bound: a full node falls back to another instead of failing. Pages land on first touch.
        syscall(SYS_mbind, p, bytes, k_mpol_preferred, mask.data(), mask.size() * 8 * sizeof(unsigned long) + 1, 0ul);
        std::memset(p, 0, bytes);
        if (api.mem_host_register(p, bytes, 0) == k_cuda_success) {
          host->m_data = p;
          host->m_registered = true;
          return host;
        }
        munmap(p, bytes);
      }
    }
    void* p = nullptr;
    if (const CUresult rc = api.mem_host_alloc(&p, bytes, k_host_alloc_portable); rc != k_cuda_success) {
      return call_error(api, "cuMemHostAlloc", rc,
                        "allocating " + std::to_string(bytes) + " bytes of pinned host memory");
    }
    host->m_data = p;
    return host;
  }

  [[nodiscard]] void* data() const { return m_data; }
  [[nodiscard]] std::size_t bytes() const { return m_bytes; }
  [[nodiscard]] bool on_numa_node() const { return m_registered; }

 private:
  const DriverApi* m_api = nullptr;
  const bool* m_broken = nullptr;
  void* m_data = nullptr;
  std::size_t m_bytes = 0;
  bool m_registered = false;
};

// The kernels of validation_kernels.cu.
struct Kernels {
  CUfunction spin_wait = nullptr, compute_int = nullptr, compute_float = nullptr, fill_values = nullptr,
             memtest_write = nullptr, memtest_check = nullptr, stream_copy = nullptr, gemm_simple = nullptr,
             digest_u64 = nullptr;
};

// gemm_consistency's GEMM: cuBLASLt's plan, else cuBLAS with the input type its warm-up settled on, else
// gpuenv's gemm_simple; square `edge` x `edge` matrices, fp32 output.
struct ConsistencyGemm {
  std::optional<CublasLtMatmul> plan;
  CublasApi* blas = nullptr;
  int input_type = k_cuda_r_16bf;
  CUdeviceptr a = 0, b = 0, c = 0;
  int edge = 0;
  float alpha = 1, beta = 0;
};

// The state of one gemm_tflops measurement, shared by its steps (allocation, warm-up and sizing, samples).
struct TflopsGemm {
  GemmType type;
  std::string dtype;
  CublasLtApi* lt = nullptr;  // null once cuBLAS is used instead
  CublasApi* blas = nullptr;
  DeviceBuffer a, b, c;
  std::uint64_t seed_a = 0, seed_b = 0;
  int size = 0;  // the matrices' edge; the warm-up halves it while a GEMM is too slow
  double alpha_d = 1, beta_d = 0;
  float alpha_f = 1, beta_f = 0;
  std::optional<CublasLtMatmul> plan;  // the cuBLASLt matmul for `size`; empty once cuBLAS is used instead
  std::vector<std::string> passed;     // why cuBLASLt was passed over in this call
  cublasStatus status = 0;             // the last GEMM call's status

  // alpha and beta in the scale type.
  [[nodiscard]] const void* alpha() const {
    return type.scale_type == k_cuda_r_64f ? static_cast<const void*>(&alpha_d) : static_cast<const void*>(&alpha_f);
  }
  [[nodiscard]] const void* beta() const {
    return type.scale_type == k_cuda_r_64f ? static_cast<const void*>(&beta_d) : static_cast<const void*>(&beta_f);
  }
};

class CudaSession final : public GpuSession {
 public:
  CudaSession(std::shared_ptr<DriverApi> api, CudaSessionOptions options, std::string bus_id)
      : m_api(std::move(api)), m_options(std::move(options)), m_bus_id(std::move(bus_id)) {}

  ~CudaSession() override {
    if (m_broken) return;  // leak rather than block in a driver that stopped answering
    if (m_ctx) m_api->ctx_set_current(m_ctx);
    if (m_cublas && m_cublas->handle) m_cublas->destroy(m_cublas->handle);
    if (m_cublaslt && m_cublaslt->handle) m_cublaslt->destroy(m_cublaslt->handle);
    m_cublaslt_workspace = DeviceBuffer();
    m_scratch = DeviceBuffer();
    if (m_flags) m_api->mem_free_host(m_flags);
    if (m_start) m_api->event_destroy(m_start);
    if (m_stop) m_api->event_destroy(m_stop);
    if (m_stream) m_api->stream_destroy(m_stream);
    if (m_module) m_api->module_unload(m_module);
    if (m_ctx) m_api->primary_ctx_release(m_device);
    // libcuda, libcublas and libcublasLt stay loaded: unloading them under other sessions or atexit handlers is not
    // safe.
  }
  CudaSession(const CudaSession&) = delete;
  CudaSession& operator=(const CudaSession&) = delete;

  Status start() {
    const DriverApi& api = *m_api;
    if (CUresult rc = api.device_get_by_pci_bus_id(&m_device, m_bus_id.c_str()); rc != k_cuda_success) {
      return make_error(
          ErrorKind::environment, "cuda.device",
          "no CUDA device at PCI bus id " + m_bus_id + ": " + api.error_name(rc) + " (" + std::to_string(rc) + ")",
          api.library, "check CUDA_VISIBLE_DEVICES and that nvidia-smi lists this GPU");
    }
    if (CUresult rc = api.primary_ctx_retain(&m_ctx, m_device); rc != k_cuda_success) {
      m_ctx = nullptr;
      return make_error(ErrorKind::environment, "cuda.context",
                        "cuDevicePrimaryCtxRetain failed on " + m_bus_id + " with " + api.error_name(rc) + " (" +
                            std::to_string(rc) + ")",
                        api.library,
                        "the GPU may be in exclusive-process compute mode and used by another process, or faulted; "
                        "check nvidia-smi");
    }
    keep_primary_context(api, m_device);
    if (CUresult rc = api.ctx_set_current(m_ctx); rc != k_cuda_success)
      return fail("cuCtxSetCurrent", rc, "making the context current");
    api.device_get_attribute(&m_sm_count, k_attr_multiprocessor_count, m_device);
    api.device_get_attribute(&m_cc_major, k_attr_cc_major, m_device);
    api.device_get_attribute(&m_cc_minor, k_attr_cc_minor, m_device);
    m_sm_count = std::max(m_sm_count, 1);
    if (CUresult rc = api.stream_create(&m_stream, k_stream_non_blocking); rc != k_cuda_success)
      return fail("cuStreamCreate", rc, "creating a stream");
    if (CUresult rc = api.event_create(&m_start, 0); rc != k_cuda_success)
      return fail("cuEventCreate", rc, "creating an event");
    if (CUresult rc = api.event_create(&m_stop, 0); rc != k_cuda_success)
      return fail("cuEventCreate", rc, "creating an event");
    if (!m_options.confidential) {  // CC maps no host memory into the GPU: no spin flag there (timed_by_host)
      void* flags = nullptr;
      if (CUresult rc = api.mem_host_alloc(&flags, 64, k_host_alloc_portable | k_host_alloc_devicemap); rc != k_cuda_success) {
        return fail("cuMemHostAlloc", rc, "allocating the mapped spin flag");
      }
      m_flags = static_cast<int*>(flags);
      std::memset(m_flags, 0, 64);
      if (CUresult rc = api.mem_host_get_device_pointer(&m_flags_device, m_flags, 0); rc != k_cuda_success) {
        return fail("cuMemHostGetDevicePointer_v2", rc, "mapping the spin flag");
      }
    }
    auto scratch = alloc(64, "allocating the error and digest counters");
    if (!scratch) return std::move(scratch).error();
    m_scratch = std::move(*scratch);
    if (m_options.fatbin.size == 0) return ok_status();
    if (CUresult rc = api.module_load_data(&m_module, m_options.fatbin.data); rc != k_cuda_success) {
      m_module = nullptr;
      return make_error(ErrorKind::environment, "cuda.module",
                        "cuModuleLoadData failed with " + api.error_name(rc) + " (" + std::to_string(rc) +
                            ") loading the validation kernels for sm_" + std::to_string(m_cc_major) +
                            std::to_string(m_cc_minor),
                        api.library,
                        "the kernels hold code for sm_75 and newer plus PTX for the newest; an older GPU is not "
                        "supported, and PTX needs a driver at least as new as the toolkit that built gpuenv");
    }
    const std::pair<CUfunction*, const char*> names[] = {
        {&m_kernels.spin_wait, "spin_wait"},         {&m_kernels.compute_int, "compute_int"},
        {&m_kernels.compute_float, "compute_float"}, {&m_kernels.fill_values, "fill_values"},
        {&m_kernels.memtest_write, "memtest_write"}, {&m_kernels.memtest_check, "memtest_check"},
        {&m_kernels.stream_copy, "stream_copy"},     {&m_kernels.gemm_simple, "gemm_simple"},
        {&m_kernels.digest_u64, "digest_u64"}};
    for (const auto& [fn, name] : names) {
      if (CUresult rc = api.module_get_function(fn, m_module, name); rc != k_cuda_success) {
        return fail("cuModuleGetFunction", rc, std::string("finding kernel ") + name + " in the validation fatbin");
      }
      // With lazy loading (the default since CUDA 12.2) a kernel's first launch may wait for the context to go
      // idle, which a held stream (spin_wait) never does until the spin times out: load every kernel now.
      if (api.func_load) {
        if (CUresult rc = api.func_load(*fn); rc != k_cuda_success) {
          return fail("cuFuncLoad", rc, std::string("loading kernel ") + name);
        }
      }
    }
    m_have_kernels = true;
    return ok_status();
  }

  Result<std::uint64_t> compute_mismatches() override {
    return guarded<std::uint64_t>("compute_mismatches", true, [&]() -> Result<std::uint64_t> {
      constexpr std::uint64_t k_ints = 1u << 20;
      constexpr std::uint64_t k_floats = 1u << 18;
      auto ints = alloc(k_ints * 8, "allocating the integer kernel's output");
      if (!ints) return std::move(ints).error();
      auto floats = alloc(k_floats * 4, "allocating the float kernel's output");
      if (!floats) return std::move(floats).error();
      unsigned long long seed = m_options.seed;
      CUdeviceptr out_i = ints->ptr(), out_f = floats->ptr();
      unsigned long long n_i = k_ints, n_f = k_floats;
      if (auto s = launch(m_kernels.compute_int, grid_for(n_i), {&out_i, &n_i, &seed}, "compute_int"); !s)
        return std::move(s).error();
      if (auto s = launch(m_kernels.compute_float, grid_for(n_f), {&out_f, &n_f, &seed}, "compute_float"); !s)
        return std::move(s).error();
      if (auto s = wait("running the compute kernels"); !s) return std::move(s).error();
      std::vector<std::uint64_t> got_i(k_ints);
      std::vector<float> got_f(k_floats);
      if (auto s = copy_to_host(got_i.data(), out_i, k_ints * 8, "reading the integer results"); !s)
        return std::move(s).error();
      if (auto s = copy_to_host(got_f.data(), out_f, k_floats * 4, "reading the float results"); !s)
        return std::move(s).error();
      std::uint64_t mismatches = 0;
      for (std::uint64_t i = 0; i < k_ints; ++i) mismatches += got_i[i] != ref::int_element(seed, i) ? 1 : 0;
      for (std::uint64_t i = 0; i < k_floats; ++i) {
        mismatches += ref::float_bits(got_f[i]) != ref::float_bits(ref::float_element(seed, i)) ? 1 : 0;
      }
      return mismatches;
    });
  }

  Result<MemtestResult> memtest(const MemtestRequest& request) override {
    return guarded<MemtestResult>("memtest", true, [&]() -> Result<MemtestResult> { return run_memtest(request); });
  }

  Result<ConsistencyResult> gemm_consistency(int repetitions) override {
    return guarded<ConsistencyResult>("gemm_consistency", true,
                                      [&]() -> Result<ConsistencyResult> { return run_gemm_consistency(repetitions); });
  }

  Result<Samples> hbm_bandwidth(int samples) override {
    return guarded<Samples>("hbm_bandwidth", true, [&]() -> Result<Samples> { return run_hbm_bandwidth(samples); });
  }

  Result<Samples> copy_bandwidth(bool to_device, int samples) override {
    return guarded<Samples>(to_device ? "h2d_bandwidth" : "d2h_bandwidth", true,
                            [&]() -> Result<Samples> { return run_copy_bandwidth(to_device, samples); });
  }

  Result<std::optional<Samples>> gemm_tflops(const std::string& dtype, int samples) override {
    return guarded<std::optional<Samples>>(
        "gemm_tflops", true, [&]() -> Result<std::optional<Samples>> { return run_gemm_tflops(dtype, samples); });
  }

  std::string gemm_library_notes() override {
    std::unique_lock lock(m_mutex, std::try_to_lock);
    if (!lock.owns_lock()) return {};  // an earlier call still runs (hung): say nothing rather than wait
    std::string rejected = passed_over_for("", {});  // every library that loaded and was passed over
    if (rejected.empty() && m_cublaslt_tried && m_cublas_tried && !m_cublaslt && !m_cublas) {
      std::vector<std::string> names = m_options.cublaslt_libraries;
      names.insert(names.end(), m_options.cublas_libraries.begin(), m_options.cublas_libraries.end());
      return names.empty() ? "no cuBLASLt or cuBLAS library was to be looked for"
                           : "none of " + join(names, ", ") + " loads";
    }
    return rejected;
  }

  Result<GpuHealth> health() override {
    if (!m_options.health_reader) return GpuHealth{};
    try {
      return m_options.health_reader();
    } catch (const std::exception& e) {
      return make_error(ErrorKind::internal, "cuda.health_reader", std::string("the health reader threw: ") + e.what(),
                        m_bus_id, "report this as a bug");
    }
  }

 private:
  // ---- plumbing -------------------------------------------------------------------------------------------------

  // Runs `body` with the session lock held and the context current; never blocks on a lock another (abandoned)
  // call holds, and turns standard exceptions (allocation failures of host vectors) into Errors.
  template <class T, class F>
  Result<T> guarded(const char* what, bool needs_kernels, F&& body) {
    std::unique_lock lock(m_mutex, std::try_to_lock);
    if (!lock.owns_lock()) {
      return make_error(ErrorKind::environment, "cuda.session_busy",
                        std::string(what) + ": the CUDA session on " + m_bus_id + " is still running an earlier call",
                        m_bus_id, "an earlier check probably hung; see its result");
    }
    if (m_broken) {
      return make_error(ErrorKind::environment, "cuda.broken",
                        std::string(what) + " not run: an earlier GPU operation on " + m_bus_id + " did not finish",
                        m_bus_id, "check dmesg for Xid errors; the GPU may need a reset");
    }
    if (needs_kernels && !m_have_kernels) {
      return make_error(ErrorKind::environment, "cuda.no_kernels",
                        std::string(what) + " needs the validation kernels, but this gpuenv was built without CUDA",
                        m_bus_id, "use a gpuenv release build, or build with the CUDA toolkit (nvcc) installed");
    }
    if (CUresult rc = m_api->ctx_set_current(m_ctx); rc != k_cuda_success) {
      return fail("cuCtxSetCurrent", rc, std::string("starting ") + what);
    }
    try {
      return body();
    } catch (const std::exception& e) {
      return make_error(ErrorKind::environment, "cuda.host", std::string(what) + " failed on the host: " + e.what(),
                        m_bus_id, "the machine may be short of host memory");
    }
  }

  Error fail(const char* call, CUresult rc, const std::string& doing) const {
    return call_error(*m_api, call, rc, doing + " on " + m_bus_id);
  }

  Result<DeviceBuffer> alloc(std::size_t bytes, const std::string& doing) {
    CUdeviceptr ptr = 0;
    if (CUresult rc = m_api->mem_alloc(&ptr, bytes); rc != k_cuda_success) return fail("cuMemAlloc_v2", rc, doing);
    return DeviceBuffer(m_api.get(), &m_broken, ptr, bytes);
  }

  [[nodiscard]] unsigned grid_for(std::uint64_t count) const {
    const std::uint64_t needed = (count + k_block - 1) / k_block;
    const std::uint64_t wave = static_cast<std::uint64_t>(m_sm_count) * k_blocks_per_sm;
    return static_cast<unsigned>(std::clamp<std::uint64_t>(needed, 1, wave));
  }

  Status launch(CUfunction fn, unsigned grid, std::initializer_list<void*> args, const char* name, unsigned grid_y = 1,
                unsigned block_x = k_block, unsigned block_y = 1) {
    std::vector<void*> params(args);
    const CUresult rc =
        m_api->launch_kernel(fn, grid, grid_y, 1, block_x, block_y, 1, 0, m_stream, params.data(), nullptr);
    if (rc != k_cuda_success) return fail("cuLaunchKernel", rc, std::string("launching ") + name);
    return ok_status();
  }

  // Polls the stream until it is idle; after operation_timeout the session is broken.
  Status wait(const std::string& doing) {
    const auto deadline = std::chrono::steady_clock::now() + m_options.operation_timeout;
    int polls = 0;
    while (true) {
      const CUresult rc = m_api->stream_query(m_stream);
      if (rc == k_cuda_success) return ok_status();
      if (rc != k_cuda_not_ready) return fail("cuStreamQuery", rc, doing);
      if (std::chrono::steady_clock::now() > deadline) {
        m_broken = true;
        return make_error(ErrorKind::environment, "cuda.timeout",
                          "the GPU did not finish " + doing + " on " + m_bus_id + " within " +
                              std::to_string(m_options.operation_timeout.count()) + " ms",
                          m_bus_id,
                          "the GPU may be hung: check dmesg for Xid errors and nvidia-smi; it may need a reset");
      }
      if (++polls > 100) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  Status copy_to_host(void* out, CUdeviceptr from, std::size_t bytes, const std::string& doing) {
    if (CUresult rc = m_api->memcpy_dtoh(out, from, bytes); rc != k_cuda_success)
      return fail("cuMemcpyDtoH_v2", rc, doing);
    return ok_status();
  }

  Status clear(CUdeviceptr ptr, std::size_t bytes, const std::string& doing) {
    if (CUresult rc = m_api->memset_d8_async(ptr, 0, bytes, m_stream); rc != k_cuda_success)
      return fail("cuMemsetD8Async", rc, doing);
    return ok_status();
  }

  // Queues `work` behind an event pair and returns the milliseconds between them. With `hold`, a spin kernel
  // keeps the stream waiting while the work is queued, so the events see the work alone.
  template <class F>
  Result<double> timed(bool hold, const std::string& doing, F&& work) {
    if (m_options.confidential) return timed_by_host(doing, work);
    if (hold) {
      set_spin_flag(m_flags, 0, 0);
      set_spin_flag(m_flags, 1, 0);
      unsigned long long timeout = k_spin_timeout_ns;
      CUdeviceptr flag = m_flags_device;
      if (auto s = launch(m_kernels.spin_wait, 1, {&flag, &timeout}, "spin_wait", 1, 1); !s)
        return std::move(s).error();
    }
    Status queued = ok_status();
    if (CUresult rc = m_api->event_record(m_start, m_stream); rc != k_cuda_success)
      queued = fail("cuEventRecord", rc, doing);
    if (queued) queued = work();
    if (queued) {
      if (CUresult rc = m_api->event_record(m_stop, m_stream); rc != k_cuda_success)
        queued = fail("cuEventRecord", rc, doing);
    }
    if (hold) set_spin_flag(m_flags, 0, 1);  // release the spin kernel, whether or not the work was queued
    Status done = wait(doing);
    if (!queued) return std::move(queued).error();
    if (!done) return std::move(done).error();
    // flags[1] != 0: the spin kernel gave up before the release; the sample then includes queueing gaps and
    // reads low, which errs on the safe side, so it is kept.
    float ms = 0;
    if (CUresult rc = m_api->event_elapsed_time(&ms, m_start, m_stop); rc != k_cuda_success) {
      return fail("cuEventElapsedTime", rc, doing);
    }
    return static_cast<double>(ms);
  }

  // Confidential computing: the host's clock from queueing `work` to its completion (no spin flag can hold the
  // stream). Launch and queueing time count too, so a sample reads low, never high.
  template <class F>
  Result<double> timed_by_host(const std::string& doing, F&& work) {
    const auto start = std::chrono::steady_clock::now();
    Status queued = work();
    Status done = wait(doing);
    if (!queued) return std::move(queued).error();
    if (!done) return std::move(done).error();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }

  // Fills `words` 64-bit words with the seeded random memtest pattern (never zeros).
  Status fill_random_words(CUdeviceptr base, std::uint64_t words, std::uint64_t seed) {
    unsigned long long n = words, s = seed;
    int pattern = static_cast<int>(ref::Pattern::random);
    return launch(m_kernels.memtest_write, grid_for(n), {&base, &n, &pattern, &s}, "memtest_write");
  }

  // Checks `words` words against a pattern on the device; returns the counters the kernel wrote.
  Result<ref::MemtestErrors> check_words(CUdeviceptr base, std::uint64_t words, ref::Pattern pattern,
                                         std::uint64_t seed, int next_pattern, const std::string& doing) {
    if (auto s = clear(m_scratch.ptr(), sizeof(ref::MemtestErrors), doing); !s) return std::move(s).error();
    unsigned long long n = words, s = seed;
    int p = static_cast<int>(pattern);
    CUdeviceptr errors = m_scratch.ptr();
    if (auto st =
            launch(m_kernels.memtest_check, grid_for(n), {&base, &n, &p, &s, &next_pattern, &errors}, "memtest_check");
        !st) {
      return std::move(st).error();
    }
    if (auto st = wait(doing); !st) return std::move(st).error();
    ref::MemtestErrors counters{};
    if (auto st = copy_to_host(&counters, errors, sizeof counters, doing); !st) return std::move(st).error();
    return counters;
  }

  // The digest of `words` 64-bit words on the device (reference::digest_words).
  Result<std::uint64_t> device_digest(CUdeviceptr base, std::uint64_t words, const std::string& doing) {
    CUdeviceptr out = m_scratch.ptr() + 48;  // after the MemtestErrors counters
    if (auto s = clear(out, 8, doing); !s) return std::move(s).error();
    unsigned long long n = words;
    if (auto s = launch(m_kernels.digest_u64, grid_for(n), {&base, &n, &out}, "digest_u64"); !s)
      return std::move(s).error();
    if (auto s = wait(doing); !s) return std::move(s).error();
    std::uint64_t digest = 0;
    if (auto s = copy_to_host(&digest, out, 8, doing); !s) return std::move(s).error();
    return digest;
  }

  Result<std::size_t> free_memory() {
    std::size_t free_bytes = 0, total = 0;
    if (CUresult rc = m_api->mem_get_info(&free_bytes, &total); rc != k_cuda_success) {
      return fail("cuMemGetInfo_v2", rc, "reading free memory");
    }
    return free_bytes;
  }

  // This session's share of the free memory for work buffers (CudaSessionOptions::memory_shared_by).
  Result<std::size_t> free_memory_share() {
    auto free_bytes = free_memory();
    if (!free_bytes) return free_bytes;
    return *free_bytes / static_cast<std::size_t>(std::max(m_options.memory_shared_by, 1));
  }

  static Error bad_request(const std::string& message) {
    return make_error(ErrorKind::usage, "validate.bad_request", message, "cuda_session", "this is a bug in the check");
  }

  Error data_mismatch(const std::string& what, std::uint64_t bad, std::uint64_t total) const {
    return make_error(
        ErrorKind::environment, "validate.data_mismatch",
        what + " on " + m_bus_id + ": " + std::to_string(bad) + " of " + std::to_string(total) +
            " words differ from what was written",
        m_bus_id, "the GPU or its link corrupts data: run gpuenv validate --level long, check dmesg for Xid errors");
  }

  // ---- memtest --------------------------------------------------------------------------------------------------

  Result<MemtestResult> run_memtest(const MemtestRequest& request) {
    if (!(request.fraction_of_free > 0 && request.fraction_of_free <= 1)) {
      return bad_request("memtest fraction_of_free must be in (0, 1], got " + std::to_string(request.fraction_of_free));
    }
    if (request.deadline_ms <= 0)
      return bad_request("memtest deadline_ms must be positive, got " + std::to_string(request.deadline_ms));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(request.deadline_ms);
    auto free_bytes = free_memory();
    if (!free_bytes) return std::move(free_bytes).error();
    const auto target = static_cast<std::uint64_t>(static_cast<double>(*free_bytes) * request.fraction_of_free);

    // Chunks of up to 1 GiB; on out-of-memory (another process, fragmentation) halve down to 64 MiB, then stop.
    std::vector<DeviceBuffer> chunks;
    std::uint64_t allocated = 0, chunk = k_gib;
    while (allocated + k_mib <= target) {
      const std::uint64_t size = std::min(chunk, (target - allocated) & ~std::uint64_t{7});
      CUdeviceptr ptr = 0;
      const CUresult rc = m_api->mem_alloc(&ptr, size);
      if (rc == k_cuda_out_of_memory) {
        if (chunk <= 64 * k_mib) break;
        chunk /= 2;
        continue;
      }
      if (rc != k_cuda_success) return fail("cuMemAlloc_v2", rc, "allocating memtest memory");
      chunks.emplace_back(m_api.get(), &m_broken, ptr, size);
      allocated += size;
    }
    if (chunks.empty()) {
      return make_error(
          ErrorKind::environment, "cuda.out_of_memory",
          "memtest could not allocate any memory on " + m_bus_id + " (" + std::to_string(*free_bytes) + " bytes free)",
          m_bus_id, "another process is using the GPU's memory: check nvidia-smi");
    }

    // One step writes or checks a pattern over every chunk; a pattern counts as run once its last check is done.
    struct Step {
      bool write;
      ref::Pattern pattern;
      int next;  // for checks: the pattern written back (moving inversions), or -1
      bool completes;
    };
    using P = ref::Pattern;
    const Step steps[] = {
        {true, P::walking_ones, -1, false},
        {false, P::walking_ones, -1, true},
        {true, P::walking_zeros, -1, false},
        {false, P::walking_zeros, -1, true},
        {true, P::own_address, -1, false},
        {false, P::own_address, -1, true},
        {true, P::moving_inversions, -1, false},
        {false, P::moving_inversions, static_cast<int>(P::moving_inversions_complement), true},
        {false, P::moving_inversions_complement, -1, true},
        {true, P::random, -1, false},
        {false, P::random, -1, true},
    };
    MemtestResult result;
    std::vector<bool> checked(chunks.size(), false);
    bool have_first = false;
    for (const Step& step : steps) {
      std::uint64_t offset = 0;
      for (std::size_t c = 0; c < chunks.size() && !result.truncated_by_deadline; ++c) {
        if (std::chrono::steady_clock::now() >= deadline) {
          result.truncated_by_deadline = true;
          break;
        }
        CUdeviceptr base = chunks[c].ptr();
        const std::uint64_t words = chunks[c].bytes() / 8;
        const std::string doing = std::string(step.write ? "writing " : "checking ") + ref::pattern_name(step.pattern);
        if (step.write) {
          unsigned long long n = words, seed = request.seed;
          int p = static_cast<int>(step.pattern);
          if (auto s = launch(m_kernels.memtest_write, grid_for(n), {&base, &n, &p, &seed}, "memtest_write"); !s)
            return std::move(s).error();
          if (auto s = wait(doing); !s) return std::move(s).error();
        } else {
          auto counters = check_words(base, words, step.pattern, request.seed, step.next, doing);
          if (!counters) return std::move(counters).error();
          checked[c] = true;
          result.errors += counters->count;
          if (counters->count != 0 && counters->claimed != 0 && !have_first) {
            have_first = true;
            result.first_error_offset = offset + counters->first_index * 8;
            result.expected = counters->expected;
            result.actual = counters->actual;
          }
        }
        offset += chunks[c].bytes();
      }
      if (result.truncated_by_deadline) break;
      if (step.completes) result.patterns.emplace_back(ref::pattern_name(step.pattern));
    }
    for (std::size_t c = 0; c < chunks.size(); ++c) result.bytes_tested += checked[c] ? chunks[c].bytes() : 0;
    return result;
  }

  // ---- GEMMs ----------------------------------------------------------------------------------------------------

  // Loads cuBLAS on first use: the first library whose handle can be created on this driver. Null when none.
  CublasApi* cublas() {
    if (m_cublas_tried) return m_cublas.get();
    m_cublas_tried = true;
    auto loaded = load_cublas(m_options.cublas_libraries, m_stream);
    m_cublas_rejected = std::move(loaded.rejected);
    m_cublas = std::move(loaded.api);
    return m_cublas.get();
  }

  // Loads cuBLASLt on first use: the first library whose entry points resolve, whose version is 11 or newer (the
  // cublasComputeType_t interface) and whose handle can be created on this driver. Null when none.
  CublasLtApi* cublaslt() {
    if (m_cublaslt_tried) return m_cublaslt.get();
    m_cublaslt_tried = true;
    auto loaded = load_cublaslt(m_options.cublaslt_libraries);
    m_cublaslt_rejected = std::move(loaded.rejected);
    m_cublaslt = std::move(loaded.api);
    return m_cublaslt.get();
  }

  // The cuBLASLt workspace, allocated once per session: 32 MiB, less when free memory is short, none when even
  // that fails (cuBLASLt then picks algorithms that need no workspace).
  Status ensure_cublaslt_workspace() {
    if (m_cublaslt_workspace_tried) return ok_status();
    m_cublaslt_workspace_tried = true;
    auto free_bytes = free_memory_share();
    if (!free_bytes) return std::move(free_bytes).error();
    const std::size_t bytes = std::min<std::size_t>(k_cublaslt_workspace, (*free_bytes / 64) & ~(k_mib - 1));
    if (bytes == 0) return ok_status();
    CUdeviceptr ptr = 0;
    const CUresult rc = m_api->mem_alloc(&ptr, bytes);
    if (rc == k_cuda_out_of_memory) return ok_status();
    if (rc != k_cuda_success) return fail("cuMemAlloc_v2", rc, "allocating the cuBLASLt workspace");
    m_cublaslt_workspace = DeviceBuffer(m_api.get(), &m_broken, ptr, bytes);
    return ok_status();
  }

  Error cublaslt_error(const CublasLtApi& lt, const char* call, cublasStatus status, const std::string& doing) const {
    return make_error(ErrorKind::environment, "cuda.cublaslt",
                      std::string(call) + " failed with " + lt.name_of(status) + " " + doing + " on " + m_bus_id,
                      lt.library, "check that the image's cuBLAS matches the driver");
  }

  // Why the libraries preferred to `engine` were passed over: cuBLASLt libraries that loaded but could not be used,
  // and for a result of cuBLAS or gpuenv's kernel also this call's reasons (`call_reasons`) and the cuBLAS libraries
  // passed over.
  [[nodiscard]] std::string passed_over_for(const std::string& engine,
                                            const std::vector<std::string>& call_reasons) const {
    std::vector<std::string> all = m_cublaslt_rejected;
    if (engine != "cublasLt") {
      all.insert(all.end(), call_reasons.begin(), call_reasons.end());
      all.insert(all.end(), m_cublas_rejected.begin(), m_cublas_rejected.end());
    }
    return join(all, "; ");
  }

  // Plans D = A * B for `size` x `size` column-major matrices of `types` through cuBLASLt: no transposes, the
  // session's workspace, the heuristic's first algorithm. Empty when cuBLASLt has no algorithm for these types on
  // this GPU (the caller falls back to cuBLAS); `cuda.cublaslt` when a call fails.
  Result<std::optional<CublasLtMatmul>> plan_cublaslt(const CublasLtApi& lt, const gemm::GemmTypes& types, int size,
                                                      const std::string& what) {
    if (auto s = ensure_cublaslt_workspace(); !s) return std::move(s).error();
    LtPlan planned = plan_matmul(lt, types, size, m_cublaslt_workspace.ptr(), m_cublaslt_workspace.bytes());
    if (planned.failed_call)
      return cublaslt_error(lt, planned.failed_call, planned.status, "planning the " + what + " GEMM");
    if (!planned.found) return std::optional<CublasLtMatmul>{};
    return std::optional<CublasLtMatmul>(std::move(planned.matmul));
  }

  Error cublas_error(const CublasApi& blas, const std::string& call, cublasStatus status) const {
    return make_error(ErrorKind::environment, "cuda.cublas",
                      call + " failed with " + blas.name_of(status) + " on " + m_bus_id, blas.library,
                      "check that the image's cuBLAS matches the driver");
  }

  // Fills gemm_consistency's inputs A and B with seeded random values in `format`.
  Status fill_consistency(const ConsistencyGemm& g, std::uint64_t elements, ref::Fill format) {
    CUdeviceptr pa = g.a, pb = g.b;
    unsigned long long n = elements, seed_a = m_options.seed + 101, seed_b = m_options.seed + 102;
    int f = static_cast<int>(format);
    if (auto s = launch(m_kernels.fill_values, grid_for(n), {&pa, &n, &seed_a, &f}, "fill_values"); !s) return s;
    return launch(m_kernels.fill_values, grid_for(n), {&pb, &n, &seed_b, &f}, "fill_values");
  }

  // gemm_consistency's warm-up through cuBLASLt: bf16 inputs, else fp32; leaves g.plan empty when it can run
  // neither.
  Status warm_up_consistency_lt(const CublasLtApi& lt, ConsistencyGemm& g, std::uint64_t elements) {
    for (const bool bf16 : {true, false}) {
      const gemm::GemmTypes types = gemm::consistency_gemm_types(bf16);
      auto planned = plan_cublaslt(lt, types, g.edge, bf16 ? "bf16 consistency" : "fp32 consistency");
      if (!planned) return std::move(planned).error();
      if (!*planned) continue;
      if (auto s = fill_consistency(g, elements, bf16 ? ref::Fill::random_bf16 : ref::Fill::random_f32); !s) return s;
      const cublasStatus st = (*planned)->run(&g.alpha, g.a, g.b, &g.beta, g.c, m_stream);
      if (unsupported(st)) continue;
      if (st != 0) return cublaslt_error(lt, "cublasLtMatmul", st, "running a warm-up GEMM");
      if (auto s = wait("running a warm-up GEMM"); !s) return s;
      g.plan = std::move(*planned);
      break;
    }
    return ok_status();
  }

  // Picks gemm_consistency's engine, fills the inputs for it and warms it up: cuBLASLt, else cuBLAS, else
  // gemm_simple. The libraries get bf16 inputs on tensor cores with fp32 output, or fp32 inputs where bf16 is not
  // supported (before sm_80); gemm_simple gets fp32. Sets the result's engine, library and passed_over.
  Status warm_up_consistency(ConsistencyGemm& g, std::uint64_t elements, ConsistencyResult& result) {
    std::vector<std::string> passed;  // why cuBLASLt was passed over in this call
    if (CublasLtApi* lt = cublaslt()) {
      if (auto s = warm_up_consistency_lt(*lt, g, elements); !s) return s;
      if (!g.plan) passed.push_back(lt->library + ": no bf16 or fp32 GEMM it can run on this GPU");
    }
    g.blas = g.plan ? nullptr : cublas();
    if (g.plan) {
      result.engine = "cublasLt";
      result.library = m_cublaslt->library;
    } else if (g.blas) {
      if (auto s = fill_consistency(g, elements, ref::Fill::random_bf16); !s) return s;
      const cublasStatus st = square_gemm(*g.blas, g.edge, &g.alpha, g.a, g.b, g.input_type, &g.beta, g.c,
                                          k_cuda_r_32f, gemm::k_cublas_compute_32f);
      if (unsupported(st)) {
        g.input_type = k_cuda_r_32f;
      } else if (st != 0) {
        return cublas_error(*g.blas, "cublasGemmEx", st);
      }
      if (auto s = wait("running a warm-up GEMM"); !s) return s;
      if (g.input_type == k_cuda_r_32f) {
        if (auto s = fill_consistency(g, elements, ref::Fill::random_f32); !s) return s;
      }
      result.engine = "cublas";
      result.library = g.blas->library;
    } else {
      if (auto s = fill_consistency(g, elements, ref::Fill::random_f32); !s) return s;
      result.engine = "gpuenv";
    }
    result.passed_over = passed_over_for(result.engine, passed);
    return ok_status();
  }

  // Queues one of gemm_consistency's GEMMs on the engine the warm-up picked.
  Status run_consistency_gemm(const ConsistencyGemm& g) {
    if (g.plan) {
      if (const cublasStatus st = g.plan->run(&g.alpha, g.a, g.b, &g.beta, g.c, m_stream); st != 0)
        return cublaslt_error(*g.plan->api, "cublasLtMatmul", st, "running a consistency GEMM");
      return ok_status();
    }
    if (g.blas) {
      const cublasStatus st = square_gemm(*g.blas, g.edge, &g.alpha, g.a, g.b, g.input_type, &g.beta, g.c,
                                          k_cuda_r_32f, gemm::k_cublas_compute_32f);
      if (st != 0) return cublas_error(*g.blas, "cublasGemmEx", st);
      return ok_status();
    }
    CUdeviceptr pa = g.a, pb = g.b, pc = g.c;
    int m = g.edge, n = g.edge, k = g.edge;
    const auto tiles = static_cast<unsigned>((g.edge + 31) / 32);
    return launch(m_kernels.gemm_simple, tiles, {&pa, &pb, &pc, &m, &n, &k}, "gemm_simple", tiles, 32, 8);
  }

  Result<ConsistencyResult> run_gemm_consistency(int repetitions) {
    if (repetitions < 1)
      return bad_request("gemm_consistency needs at least one repetition, got " + std::to_string(repetitions));
    const int edge = m_options.consistency_gemm_size;
    const std::uint64_t elements = static_cast<std::uint64_t>(edge) * static_cast<std::uint64_t>(edge);
    auto a = alloc(elements * 4, "allocating GEMM inputs");
    if (!a) return std::move(a).error();
    auto b = alloc(elements * 4, "allocating GEMM inputs");
    if (!b) return std::move(b).error();
    auto c = alloc(elements * 4, "allocating the GEMM output");
    if (!c) return std::move(c).error();
    ConsistencyGemm g;
    g.a = a->ptr();
    g.b = b->ptr();
    g.c = c->ptr();
    g.edge = edge;

    ConsistencyResult result;
    if (auto s = warm_up_consistency(g, elements, result); !s) return std::move(s).error();
    for (int r = 0; r < repetitions; ++r) {
      if (auto s = clear(g.c, elements * 4, "clearing the GEMM output"); !s) return std::move(s).error();
      if (auto s = run_consistency_gemm(g); !s) return std::move(s).error();
      auto digest = device_digest(g.c, elements / 2, "digesting a GEMM result");
      if (!digest) return std::move(digest).error();
      result.result_digests.push_back(*digest);
    }
    return result;
  }

  Result<std::optional<Samples>> run_gemm_tflops(const std::string& dtype, int samples) {
    const auto type = gemm_type(dtype);
    if (!type) return bad_request("gemm_tflops: unknown dtype '" + dtype + "' (bf16, fp16, tf32 or fp64)");
    if (samples < 1) return bad_request("gemm_tflops needs at least one sample, got " + std::to_string(samples));
    TflopsGemm g;
    g.type = *type;
    g.dtype = dtype;
    // cuBLASLt first; cuBLAS when it is absent or cannot run this type on this GPU; empty when neither can.
    g.lt = cublaslt();
    g.blas = g.lt ? nullptr : cublas();
    if (!g.lt && !g.blas) return std::optional<Samples>{};
    if (g.lt) {
      // Before sizing: the workspace takes device memory too.
      if (auto s = ensure_cublaslt_workspace(); !s) return std::move(s).error();
    }
    auto smallest = allocate_tflops_buffers(g);
    if (!smallest) return std::move(smallest).error();
    auto warm_ms = warm_up_tflops(g, *smallest);
    if (!warm_ms) return std::move(warm_ms).error();
    if (!*warm_ms) return std::optional<Samples>{};
    auto result = sample_tflops(g, samples, **warm_ms);
    if (!result) return std::move(result).error();
    return std::optional<Samples>(std::move(*result));
  }

  // Sizes gemm_tflops's matrices to the free memory and allocates them; returns the smallest size the warm-up may
  // shrink them to.
  Result<int> allocate_tflops_buffers(TflopsGemm& g) {
    auto free_bytes = free_memory_share();
    if (!free_bytes) return std::move(free_bytes).error();
    // 8192^3 keeps the GPU busy for a few ms per GEMM on the fastest GPUs; 4096 where memory is short.
    int n = m_options.tflops_gemm_size;
    const int smallest = std::min(2048, n);
    auto bytes_for = [&](int size) {
      const auto e = static_cast<std::uint64_t>(size) * static_cast<std::uint64_t>(size);
      return e * (2 * g.type.input_bytes + g.type.output_bytes);
    };
    while (bytes_for(n) > *free_bytes / 2 && n / 2 >= smallest) n /= 2;
    const std::uint64_t elements = static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(n);
    auto a = alloc(elements * g.type.input_bytes, "allocating GEMM inputs");
    if (!a) return std::move(a).error();
    auto b = alloc(elements * g.type.input_bytes, "allocating GEMM inputs");
    if (!b) return std::move(b).error();
    auto c = alloc(elements * g.type.output_bytes, "allocating the GEMM output");
    if (!c) return std::move(c).error();
    g.a = std::move(*a);
    g.b = std::move(*b);
    g.c = std::move(*c);
    g.seed_a = m_options.seed + 201;
    g.seed_b = m_options.seed + 202;
    g.size = n;
    return smallest;
  }

  // Fills gemm_tflops's inputs A and B (g.size x g.size) with the seeded grid values of its type.
  Status fill_tflops(const TflopsGemm& g) {
    unsigned long long count = static_cast<std::uint64_t>(g.size) * static_cast<std::uint64_t>(g.size),
                       sa = g.seed_a, sb = g.seed_b;
    int f = static_cast<int>(g.type.fill);
    CUdeviceptr pa = g.a.ptr(), pb = g.b.ptr();
    if (auto s = launch(m_kernels.fill_values, grid_for(count), {&pa, &count, &sa, &f}, "fill_values"); !s) return s;
    return launch(m_kernels.fill_values, grid_for(count), {&pb, &count, &sb, &f}, "fill_values");
  }

  // Queues one of gemm_tflops's GEMMs: g.plan's cuBLASLt matmul when there is one, else cublasGemmEx. Keeps the
  // call's status in g.status, so that the warm-up can tell NOT_SUPPORTED from other failures.
  Status tflops_gemm(TflopsGemm& g) {
    if (g.plan) {
      g.status = g.plan->run(g.alpha(), g.a.ptr(), g.b.ptr(), g.beta(), g.c.ptr(), m_stream);
      if (g.status != 0)
        return cublaslt_error(*g.plan->api, "cublasLtMatmul", g.status, "running " + g.dtype + " GEMMs");
      return ok_status();
    }
    g.status = square_gemm(*g.blas, g.size, g.alpha(), g.a.ptr(), g.b.ptr(), g.type.input_type, g.beta(), g.c.ptr(),
                           g.type.output_type, g.type.compute_type);
    if (g.status != 0) return cublas_error(*g.blas, "cublasGemmEx (" + g.dtype + ")", g.status);
    return ok_status();
  }

  // Warm-up, also sizing: a GEMM slower than 250 ms (fp64 on GPUs without fp64 units) shrinks to the next size.
  // cuBLASLt without an algorithm for this type, or whose warm-up says NOT_SUPPORTED or ARCH_MISMATCH, gives way
  // to cuBLAS. Returns the last warm-up's milliseconds; empty when neither library can run this type.
  Result<std::optional<double>> warm_up_tflops(TflopsGemm& g, int smallest) {
    while (true) {
      if (g.lt && (!g.plan || g.plan->size != g.size)) {
        g.plan.reset();
        auto planned = plan_cublaslt(*g.lt, g.type, g.size, g.dtype);
        if (!planned) return std::move(planned).error();
        if (*planned) {
          g.plan = std::move(*planned);
        } else {
          g.passed.push_back(g.lt->library + ": no " + g.dtype + " algorithm for this GPU");
          g.lt = nullptr;
        }
      }
      if (!g.lt && !g.blas) {
        g.blas = cublas();
        if (!g.blas) return std::optional<double>{};
      }
      if (auto s = fill_tflops(g); !s) return std::move(s).error();
      auto ms = timed(false, "running a warm-up " + g.dtype + " GEMM", [&]() -> Status { return tflops_gemm(g); });
      if (!ms) {
        if (unsupported(g.status) && g.plan) {
          g.passed.push_back(g.plan->api->library + ": cublasLtMatmul answered " + g.plan->api->name_of(g.status) +
                             " for " + g.dtype);
          g.plan.reset();
          g.lt = nullptr;
          continue;
        }
        if (unsupported(g.status)) return std::optional<double>{};
        return std::move(ms).error();
      }
      if (*ms <= 250 || g.size / 2 < smallest) return std::optional<double>(*ms);
      g.size /= 2;
    }
  }

  // gemm_tflops's timed samples after the warm-up of `warm_ms`: about 100 ms of GEMMs each, every output checked to
  // be the same as the first, whose column 0 is checked against the exact host result.
  Result<Samples> sample_tflops(TflopsGemm& g, int samples, double warm_ms) {
    const int iterations = static_cast<int>(std::clamp(std::ceil(100.0 / std::max(warm_ms, 1e-3)), 1.0, 50.0));
    const int size = g.size;
    const double flops = 2.0 * size * static_cast<double>(size) * size * iterations;

    Samples result;
    result.unit = "TFLOPS";
    result.engine = g.plan ? "cublasLt" : "cublas";
    result.library = g.plan ? m_cublaslt->library : m_cublas ? m_cublas->library : std::string();
    result.passed_over = passed_over_for(result.engine, g.passed);
    std::optional<std::uint64_t> first_digest;
    const std::uint64_t out_words =
        static_cast<std::uint64_t>(size) * static_cast<std::uint64_t>(size) * g.type.output_bytes / 8;
    for (int sample = 0; sample < samples; ++sample) {
      if (auto s = clear(g.c.ptr(), g.c.bytes(), "clearing the GEMM output"); !s) return std::move(s).error();
      auto ms = timed(false, "running " + g.dtype + " GEMMs", [&]() -> Status {
        for (int i = 0; i < iterations; ++i) {
          if (auto s = tflops_gemm(g); !s) return s;
        }
        return ok_status();
      });
      if (!ms) return std::move(ms).error();
      auto digest = device_digest(g.c.ptr(), out_words, "digesting the GEMM output");
      if (!digest) return std::move(digest).error();
      if (!first_digest) {
        first_digest = *digest;
        if (auto s = check_gemm_column(g.type, g.c.ptr(), size, g.seed_a, g.seed_b, g.dtype); !s)
          return std::move(s).error();
      } else if (*digest != *first_digest) {
        return make_error(
            ErrorKind::environment, "validate.data_mismatch",
            g.dtype + " GEMM on " + m_bus_id + " gave a different result in sample " + std::to_string(sample + 1),
            m_bus_id, "the GPU computes inconsistently: run gpuenv validate --check gemm_consistency --level long");
      }
      result.values.push_back(flops / (*ms * 1e9));
    }
    result.data_verified = true;
    return result;
  }

  // Compares the first rows of column 0 of C with the exact host result (grid inputs make it exact).
  Status check_gemm_column(const GemmType& type, CUdeviceptr c, int size, std::uint64_t seed_a, std::uint64_t seed_b,
                           const std::string& dtype) {
    const int rows = std::min(size, 256);
    std::vector<unsigned char> column(static_cast<std::size_t>(rows) * type.output_bytes);
    if (auto s = copy_to_host(column.data(), c, column.size(), "reading the GEMM output"); !s) return s;
    int bad = 0;
    double worst_expected = 0, worst_got = 0;
    for (int i = 0; i < rows; ++i) {
      double exact = 0;
      for (int l = 0; l < size; ++l) {
        exact += ref::grid_value(seed_a, static_cast<std::uint64_t>(i) +
                                             static_cast<std::uint64_t>(l) * static_cast<std::uint64_t>(size)) *
                 ref::grid_value(seed_b, static_cast<std::uint64_t>(l));
      }
      const double got = output_value(type, column.data(), static_cast<std::size_t>(i));
      if (!(std::fabs(got - exact) <= std::fabs(exact) * type.relative_tolerance)) {
        if (bad++ == 0) {
          worst_expected = exact;
          worst_got = got;
        }
      }
    }
    if (bad == 0) return ok_status();
    return make_error(ErrorKind::environment, "validate.data_mismatch",
                      dtype + " GEMM on " + m_bus_id + ": " + std::to_string(bad) + " of " + std::to_string(rows) +
                          " checked outputs are wrong (first: " + std::to_string(worst_got) + ", expected " +
                          std::to_string(worst_expected) + ")",
                      m_bus_id,
                      "the GPU or the cuBLAS library computes wrong results: run gpuenv validate --level long");
  }

  // ---- bandwidth ------------------------------------------------------------------------------------------------

  Result<Samples> run_hbm_bandwidth(int samples) {
    if (samples < 1) return bad_request("hbm_bandwidth needs at least one sample, got " + std::to_string(samples));
    auto free_bytes = free_memory_share();
    if (!free_bytes) return std::move(free_bytes).error();
    // 1 GiB each way: far beyond any L2 cache, small enough to fit beside other work.
    const std::uint64_t bytes = std::min<std::uint64_t>(k_gib, (*free_bytes / 4) & ~(k_mib - 1));
    if (bytes < 64 * k_mib) {
      return make_error(ErrorKind::environment, "cuda.out_of_memory",
                        "hbm_bandwidth needs 256 MiB of free GPU memory on " + m_bus_id +
                            " (it copies between two buffers of a quarter of it, at least 64 MiB each), " +
                            std::to_string(*free_bytes) + " bytes are free" +
                            (m_options.memory_shared_by > 1
                                 ? " (its 1/" + std::to_string(m_options.memory_shared_by) +
                                       " share of the free memory of a MIG GPU instance whose compute instances run at once)"
                                 : std::string()),
                        m_bus_id, "another process is using the GPU's memory: check nvidia-smi");
    }
    auto src = alloc(bytes, "allocating the copy source");
    if (!src) return std::move(src).error();
    auto dst = alloc(bytes, "allocating the copy destination");
    if (!dst) return std::move(dst).error();
    const std::uint64_t seed = m_options.seed + 301;
    if (auto s = fill_random_words(src->ptr(), bytes / 8, seed); !s) return std::move(s).error();
    if (auto s = wait("filling the copy source"); !s) return std::move(s).error();

    CUdeviceptr from = src->ptr(), to = dst->ptr();
    unsigned long long vectors = bytes / 16;
    const unsigned grid = static_cast<unsigned>(m_sm_count) * k_blocks_per_sm;
    auto copies = [&](int count) {
      return [&, count]() -> Status {
        for (int i = 0; i < count; ++i) {
          if (auto s = launch(m_kernels.stream_copy, grid, {&from, &to, &vectors}, "stream_copy"); !s) return s;
        }
        return ok_status();
      };
    };
    // Warm-up, also sizing: about 20 ms of copies per sample. Not held, so that on drivers without cuFuncLoad the
    // kernel's lazy load happens while nothing spins.
    auto warm = timed(false, "warming up the copy kernel", copies(3));
    if (!warm) return std::move(warm).error();
    const int iterations = static_cast<int>(std::clamp(std::ceil(20.0 / std::max(*warm / 3, 1e-3)), 5.0, 64.0));

    Samples result;
    result.unit = "GB/s";
    result.engine = "gpuenv";
    for (int sample = 0; sample < samples; ++sample) {
      if (auto s = clear(to, bytes, "clearing the copy destination"); !s) return std::move(s).error();
      auto ms = timed(true, "copying device memory", copies(iterations));
      if (!ms) return std::move(ms).error();
      auto counters = check_words(to, bytes / 8, ref::Pattern::random, seed, -1, "checking the copied data");
      if (!counters) return std::move(counters).error();
      if (counters->count != 0) return data_mismatch("device-to-device copy", counters->count, bytes / 8);
      result.values.push_back(2.0 * static_cast<double>(bytes) * iterations / (*ms * 1e6));
    }
    result.data_verified = true;
    return result;
  }

  Result<Samples> run_copy_bandwidth(bool to_device, int samples) {
    if (samples < 1) return bad_request("copy_bandwidth needs at least one sample, got " + std::to_string(samples));
    auto free_bytes = free_memory_share();
    if (!free_bytes) return std::move(free_bytes).error();
    const std::uint64_t bytes = std::min<std::uint64_t>(256 * k_mib, (*free_bytes / 4) & ~(k_mib - 1));
    if (bytes < 16 * k_mib) {
      return make_error(ErrorKind::environment, "cuda.out_of_memory",
                        "copy bandwidth needs 64 MiB of free GPU memory on " + m_bus_id, m_bus_id,
                        "another process is using the GPU's memory: check nvidia-smi");
    }
    auto host = PinnedHost::allocate(*m_api, &m_broken, bytes, m_options.confidential ? -1 : m_options.numa_node);
    if (!host) return std::move(host).error();
    auto device = alloc(bytes, "allocating the copy buffer");
    if (!device) return std::move(device).error();
    const std::uint64_t seed = m_options.seed + (to_device ? 401 : 402);
    const std::uint64_t words = bytes / 8;
    auto* host_words = static_cast<std::uint64_t*>((*host)->data());
    CUdeviceptr dev = device->ptr();
    if (to_device) {
      for (std::uint64_t i = 0; i < words; ++i) host_words[i] = ref::random_word(seed, i);
    } else {
      if (auto s = fill_random_words(dev, words, seed); !s) return std::move(s).error();
      if (auto s = wait("filling the copy source"); !s) return std::move(s).error();
    }
    auto copies = [&](int count) {
      return [&, count]() -> Status {
        for (int i = 0; i < count; ++i) {
          const CUresult rc = to_device ? m_api->memcpy_htod_async(dev, host_words, bytes, m_stream)
                                        : m_api->memcpy_dtoh_async(host_words, dev, bytes, m_stream);
          if (rc != k_cuda_success) {
            return fail(to_device ? "cuMemcpyHtoDAsync_v2" : "cuMemcpyDtoHAsync_v2", rc, "copying pinned memory");
          }
        }
        return ok_status();
      };
    };
    const char* direction = to_device ? "host-to-device copy" : "device-to-host copy";
    auto warm = timed(true, std::string("warming up the ") + direction, copies(1));
    if (!warm) return std::move(warm).error();
    // About 40 ms of copies per sample.
    const int iterations = static_cast<int>(std::clamp(std::ceil(40.0 / std::max(*warm, 1e-3)), 2.0, 32.0));

    Samples result;
    result.unit = "GB/s";
    result.engine = "gpuenv";
    for (int sample = 0; sample < samples; ++sample) {
      if (to_device) {
        if (auto s = clear(dev, bytes, "clearing the copy destination"); !s) return std::move(s).error();
      } else {
        std::memset(host_words, 0, bytes);
      }
      auto ms = timed(true, direction, copies(iterations));
      if (!ms) return std::move(ms).error();
      std::uint64_t bad = 0;
      if (to_device) {
        auto counters = check_words(dev, words, ref::Pattern::random, seed, -1, "checking the copied data");
        if (!counters) return std::move(counters).error();
        bad = counters->count;
      } else {
        for (std::uint64_t i = 0; i < words; ++i) bad += host_words[i] != ref::random_word(seed, i) ? 1 : 0;
      }
      if (bad != 0) return data_mismatch(direction, bad, words);
      result.values.push_back(static_cast<double>(bytes) * iterations / (*ms * 1e6));
    }
    result.data_verified = true;
    return result;
  }

  std::shared_ptr<DriverApi> m_api;
  CudaSessionOptions m_options;
  std::string m_bus_id;
  std::mutex m_mutex;
  bool m_broken = false;
  CUdevice m_device = 0;
  CUcontext m_ctx = nullptr;
  CUmodule m_module = nullptr;
  CUstream m_stream = nullptr;
  CUevent m_start = nullptr, m_stop = nullptr;
  int* m_flags = nullptr;  // mapped pinned: [0] released by the host, [1] set by spin_wait when it timed out
  CUdeviceptr m_flags_device = 0;
  DeviceBuffer m_scratch;  // MemtestErrors at 0, a digest at 48
  Kernels m_kernels;
  bool m_have_kernels = false;
  int m_sm_count = 1, m_cc_major = 0, m_cc_minor = 0;
  std::unique_ptr<CublasApi> m_cublas;
  bool m_cublas_tried = false;
  // Why libraries of options.cublaslt_libraries / cublas_libraries that loaded were not used (passed_over).
  std::vector<std::string> m_cublaslt_rejected, m_cublas_rejected;
  std::unique_ptr<CublasLtApi> m_cublaslt;
  bool m_cublaslt_tried = false;
  DeviceBuffer m_cublaslt_workspace;  // allocated on the first cuBLASLt matmul; may stay empty (no workspace)
  bool m_cublaslt_workspace_tried = false;
};

}  // namespace

Result<std::unique_ptr<GpuSession>> open_cuda_session(const std::string& pci_bus_id,
                                                      const CudaSessionOptions& options) {
  for (const auto& [name, size] : {std::pair<const char*, int>{"consistency_gemm_size", options.consistency_gemm_size},
                                   {"tflops_gemm_size", options.tflops_gemm_size}}) {
    if (size < 32 || size > 16384 || size % 32 != 0) {
      return make_error(ErrorKind::usage, "validate.bad_request",
                        std::string(name) + " must be a multiple of 32 from 32 to 16384, got " + std::to_string(size),
                        "cuda_session", "this is a bug in the caller");
    }
  }
  try {
    auto api = load_driver(options.library);
    if (!api) return std::move(api).error();
    if (auto s = init_driver(**api); !s) return std::move(s).error();
    auto session = std::make_unique<CudaSession>(*api, options, pci_bus_id);
    if (auto s = session->start(); !s) return std::move(s).error();
    return std::unique_ptr<GpuSession>(std::move(session));
  } catch (const std::exception& e) {
    return make_error(ErrorKind::environment, "cuda.host", std::string("opening a CUDA session failed: ") + e.what(),
                      options.library, "the machine may be short of host memory");
  }
}

Result<std::vector<std::string>> cuda_device_bus_ids(const std::string& library) {
  auto api = load_driver(library);
  if (!api) return std::move(api).error();
  if (auto s = init_driver(**api); !s) return std::move(s).error();
  int count = 0;
  if (CUresult rc = (*api)->device_get_count(&count); rc != k_cuda_success) {
    return call_error(**api, "cuDeviceGetCount", rc, "counting CUDA devices");
  }
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    if (CUresult rc = (*api)->device_get(&device, i); rc != k_cuda_success) {
      return call_error(**api, "cuDeviceGet", rc, "reading CUDA device " + std::to_string(i));
    }
    char text[64] = {};
    if (CUresult rc = (*api)->device_get_pci_bus_id(text, sizeof text - 1, device); rc != k_cuda_success) {
      return call_error(**api, "cuDeviceGetPCIBusId", rc, "reading the bus id of CUDA device " + std::to_string(i));
    }
    ids.emplace_back(text);
  }
  return ids;
}

}  // namespace gpuenv::validate
