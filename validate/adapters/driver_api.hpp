#pragma once
// The CUDA driver API as gpuenv uses it, internal to validate/adapters: the few types and constants of cuda.h,
// declared by hand, and the entry points resolved by dlsym from libcuda.so.1 (never linked), so gpuenv builds and
// runs without the CUDA toolkit or a driver. Shared by the per-GPU session (cuda_session.cpp) and the multi-GPU
// measurements (multi_gpu.cpp).
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::validate::cuda {

// The few driver API types, as cuda.h declares them (opaque handles are pointers; CUdeviceptr is 64-bit).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUevent = void*;

constexpr CUresult k_cuda_success = 0;
constexpr CUresult k_cuda_out_of_memory = 2;       // CUDA_ERROR_OUT_OF_MEMORY
constexpr CUresult k_cuda_not_ready = 600;         // CUDA_ERROR_NOT_READY
constexpr CUresult k_cuda_peer_access_already_enabled = 704;  // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
constexpr int k_attr_multiprocessor_count = 16;    // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int k_attr_cc_major = 75;                // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int k_attr_cc_minor = 76;                // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr unsigned k_host_alloc_portable = 0x01;   // CU_MEMHOSTALLOC_PORTABLE
constexpr unsigned k_host_alloc_devicemap = 0x02;  // CU_MEMHOSTALLOC_DEVICEMAP
constexpr unsigned k_stream_non_blocking = 0x01;   // CU_STREAM_NON_BLOCKING


/// The entry points, resolved once per library with dlsym. Versioned names where cuda.h maps to them.
struct DriverApi {
  std::string library;
  void* handle = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*get_error_name)(CUresult, const char**) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_by_pci_bus_id)(CUdevice*, const char*) = nullptr;
  CUresult (*device_get_pci_bus_id)(char*, int, CUdevice) = nullptr;
  CUresult (*device_get_attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*primary_ctx_release)(CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*mem_get_info)(std::size_t*, std::size_t*) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, std::size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*mem_host_alloc)(void**, std::size_t, unsigned) = nullptr;
  CUresult (*mem_free_host)(void*) = nullptr;
  CUresult (*mem_host_get_device_pointer)(CUdeviceptr*, void*, unsigned) = nullptr;
  CUresult (*mem_host_register)(void*, std::size_t, unsigned) = nullptr;
  CUresult (*mem_host_unregister)(void*) = nullptr;
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, std::size_t) = nullptr;
  CUresult (*memcpy_htod_async)(CUdeviceptr, const void*, std::size_t, CUstream) = nullptr;
  CUresult (*memcpy_dtoh_async)(void*, CUdeviceptr, std::size_t, CUstream) = nullptr;
  CUresult (*memset_d8_async)(CUdeviceptr, unsigned char, std::size_t, CUstream) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_destroy)(CUstream) = nullptr;
  CUresult (*stream_query)(CUstream) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_elapsed_time)(float*, CUevent, CUevent) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*func_load)(CUfunction) = nullptr;  // CUDA 12.4+; absent before (then kernels load at first launch)
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                            void**, void**) = nullptr;
  // Optional (plain dlsym, never in `missing`): only the multi-GPU measurements need them, and they check.
  CUresult (*device_can_access_peer)(int*, CUdevice, CUdevice) = nullptr;
  CUresult (*ctx_enable_peer_access)(CUcontext, unsigned) = nullptr;
  CUresult (*memcpy_peer_async)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, std::size_t, CUstream) = nullptr;

  [[nodiscard]] std::string error_name(CUresult rc) const {
    const char* name = nullptr;
    if (get_error_name && get_error_name(rc, &name) == k_cuda_success && name) return name;
    return "CUDA error";
  }
};

// How the validation kernels (validate/kernels) are launched, shared by the adapters that run them.
constexpr unsigned k_block = 256;                              // threads per block of the one-dimensional kernels
constexpr unsigned k_blocks_per_sm = 8;                        // one full wave at 2048 threads per SM
constexpr std::uint64_t k_spin_timeout_ns = 5'000'000'000ull;  // spin_wait gives up after 5 s
constexpr std::uint64_t k_mib = 1024ull * 1024ull;

/// Writes word `index` of the mapped spin flag (spin_wait's handshake: [0] released by the host, [1] set by the
/// kernel when it gave up) with a sequentially consistent atomic store, so neither the compiler nor the CPU moves it
/// across the work queued around it. The GPU reads the word through the mapping as volatile.
inline void set_spin_flag(int* flags, int index, int value) {
  __atomic_store_n(&flags[index], value, __ATOMIC_SEQ_CST);
}

/// Resolves `name` in `handle` into `fn`; a missing name is added to `missing`.
template <class F>
bool resolve(void* handle, F& fn, const char* name, std::vector<std::string>& missing) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!fn) missing.emplace_back(name);
  return fn != nullptr;
}

/// An Error naming the call, the CUresult (cuGetErrorName) and what was being done: `cuda.out_of_memory` or
/// `cuda.call`.
Error call_error(const DriverApi& api, const char* call, CUresult rc, const std::string& doing);

/// Opens `library` and resolves every entry point the adapters use. Fails with `cuda.library` (cannot be loaded)
/// or `cuda.symbols` (names the missing entry points).
Result<std::shared_ptr<DriverApi>> load_driver(const std::string& library);

/// Takes one more reference on `device`'s primary context (already retained by the caller) and keeps it until the
/// process exits, once per library and device: each check opens its own session, and without this the context
/// would be destroyed and created again (0.1 to 0.5 s each on a large GPU) between checks. Thread-safe.
void keep_primary_context(const DriverApi& api, CUdevice device);

/// cuInit(0) in this process; `cuda.init` when it fails.
Status init_driver(const DriverApi& api);

}  // namespace gpuenv::validate::cuda
