#include "validate/adapters/driver_api.hpp"

#include <mutex>
#include <set>
#include <utility>

namespace gpuenv::validate::cuda {

Error call_error(const DriverApi& api, const char* call, CUresult rc, const std::string& doing) {
  const std::string what =
      std::string(call) + " failed with " + api.error_name(rc) + " (" + std::to_string(rc) + ") while " + doing;
  if (rc == k_cuda_out_of_memory) {
    return make_error(ErrorKind::environment, "cuda.out_of_memory", what, api.library,
                      "another process may be using the GPU's memory: check nvidia-smi, or test less memory");
  }
  return make_error(ErrorKind::environment, "cuda.call", what, api.library,
                    "check dmesg for Xid errors and nvidia-smi -q for the GPU's state; a faulted GPU may need a reset");
}

// Opens the library and resolves every entry point the session uses.
Result<std::shared_ptr<DriverApi>> load_driver(const std::string& library) {
  auto api = std::make_shared<DriverApi>();
  api->library = library;
  api->handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!api->handle) {
    const char* why = dlerror();
    return make_error(ErrorKind::environment, "cuda.library",
                      "cannot load the CUDA driver library " + library + ": " + (why ? why : "unknown reason"), library,
                      "install the NVIDIA driver (it provides libcuda.so.1) or check that the library path is right");
  }
  std::vector<std::string> missing;
  void* h = api->handle;
  resolve(h, api->init, "cuInit", missing);
  resolve(h, api->get_error_name, "cuGetErrorName", missing);
  resolve(h, api->device_get_count, "cuDeviceGetCount", missing);
  resolve(h, api->device_get, "cuDeviceGet", missing);
  resolve(h, api->device_get_by_pci_bus_id, "cuDeviceGetByPCIBusId", missing);
  resolve(h, api->device_get_pci_bus_id, "cuDeviceGetPCIBusId", missing);
  resolve(h, api->device_get_attribute, "cuDeviceGetAttribute", missing);
  resolve(h, api->primary_ctx_retain, "cuDevicePrimaryCtxRetain", missing);
  resolve(h, api->primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", missing);
  resolve(h, api->ctx_set_current, "cuCtxSetCurrent", missing);
  resolve(h, api->mem_get_info, "cuMemGetInfo_v2", missing);
  resolve(h, api->mem_alloc, "cuMemAlloc_v2", missing);
  resolve(h, api->mem_free, "cuMemFree_v2", missing);
  resolve(h, api->mem_host_alloc, "cuMemHostAlloc", missing);
  resolve(h, api->mem_free_host, "cuMemFreeHost", missing);
  resolve(h, api->mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2", missing);
  resolve(h, api->mem_host_register, "cuMemHostRegister_v2", missing);
  resolve(h, api->mem_host_unregister, "cuMemHostUnregister", missing);
  resolve(h, api->memcpy_dtoh, "cuMemcpyDtoH_v2", missing);
  resolve(h, api->memcpy_htod_async, "cuMemcpyHtoDAsync_v2", missing);
  resolve(h, api->memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2", missing);
  resolve(h, api->memset_d8_async, "cuMemsetD8Async", missing);
  resolve(h, api->stream_create, "cuStreamCreate", missing);
  resolve(h, api->stream_destroy, "cuStreamDestroy_v2", missing);
  resolve(h, api->stream_query, "cuStreamQuery", missing);
  resolve(h, api->event_create, "cuEventCreate", missing);
  resolve(h, api->event_destroy, "cuEventDestroy_v2", missing);
  resolve(h, api->event_record, "cuEventRecord", missing);
  resolve(h, api->module_load_data, "cuModuleLoadData", missing);
  resolve(h, api->module_unload, "cuModuleUnload", missing);
  resolve(h, api->module_get_function, "cuModuleGetFunction", missing);
  resolve(h, api->launch_kernel, "cuLaunchKernel", missing);
  api->func_load = reinterpret_cast<decltype(api->func_load)>(dlsym(h, "cuFuncLoad"));
  api->device_can_access_peer =
      reinterpret_cast<decltype(api->device_can_access_peer)>(dlsym(h, "cuDeviceCanAccessPeer"));
  api->ctx_enable_peer_access =
      reinterpret_cast<decltype(api->ctx_enable_peer_access)>(dlsym(h, "cuCtxEnablePeerAccess"));
  api->memcpy_peer_async = reinterpret_cast<decltype(api->memcpy_peer_async)>(dlsym(h, "cuMemcpyPeerAsync"));
  // cuda.h maps cuEventElapsedTime to _v2 from CUDA 12.8; older drivers only have the first version.
  api->event_elapsed_time = reinterpret_cast<decltype(api->event_elapsed_time)>(dlsym(h, "cuEventElapsedTime_v2"));
  if (!api->event_elapsed_time) resolve(h, api->event_elapsed_time, "cuEventElapsedTime", missing);
  if (!missing.empty()) {
    std::string names;
    for (const auto& name : missing) names += (names.empty() ? "" : ", ") + name;
    return make_error(ErrorKind::environment, "cuda.symbols", library + " lacks CUDA driver API entry points: " + names,
                      library,
                      "the library is not an NVIDIA CUDA driver or is too old; install a current NVIDIA driver");
  }
  return api;
}

void keep_primary_context(const DriverApi& api, CUdevice device) {
  static std::mutex mutex;
  static std::set<std::pair<void*, CUdevice>> kept;  // (library handle, device)
  std::lock_guard lock(mutex);
  if (kept.count({api.handle, device})) return;
  CUcontext ctx = nullptr;
  if (api.primary_ctx_retain(&ctx, device) == k_cuda_success) kept.insert({api.handle, device});
}

Status init_driver(const DriverApi& api) {
  if (const CUresult rc = api.init(0); rc != k_cuda_success) {
    return make_error(ErrorKind::environment, "cuda.init",
                      "cuInit failed with " + api.error_name(rc) + " (" + std::to_string(rc) + ")", api.library,
                      "check that the NVIDIA kernel module is loaded (nvidia-smi) and /dev/nvidia* exist");
  }
  return ok_status();
}

}  // namespace gpuenv::validate::cuda
