#pragma once
// The real GpuSession: the CUDA driver API by dlopen of libcuda.so.1 (never linked), the validation kernels from
// the embedded fatbin (validate/kernels), and for the GEMMs cuBLASLt by dlopen when a libcublasLt is found, else
// cuBLAS when a libcublas is found. Every driver error becomes an Error naming the call and the CUresult
// (cuGetErrorName); every wait on the GPU is bounded.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "validate/backend.hpp"

/// The validation kernels' fatbin, defined by the library gpuenv_kernels_embedded (validate/kernels/kernels.cmake)
/// or, in a build without CUDA, by validate/kernels/no_fatbin.cpp with size 0.
extern const unsigned char gpuenv_validation_fatbin[];
extern const std::size_t gpuenv_validation_fatbin_size;

namespace gpuenv::validate {

/// A fatbin image in memory, not owned. Size 0 = no kernels (a build without CUDA).
struct FatbinImage {
  const void* data = nullptr;
  std::size_t size = 0;
};

/// The fatbin embedded in this binary (needs gpuenv_kernels_embedded or no_fatbin.cpp at link time).
inline FatbinImage embedded_validation_fatbin() {
  return FatbinImage{gpuenv_validation_fatbin, gpuenv_validation_fatbin_size};
}

/// How a CUDA session is opened. The CLI (composition root) fills it; nothing here reads the environment.
struct CudaSessionOptions {
  std::string library = "libcuda.so.1";  ///< the driver library, by name or path
  FatbinImage fatbin;                    ///< the validation kernels; size 0 makes kernel methods fail `cuda.no_kernels`
  /// Reads NVML health for this GPU; health() calls it (also while kernels run on another thread). Empty: every
  /// health field is unknown.
  std::function<Result<GpuHealth>()> health_reader;
  /// cuBLASLt libraries tried in order for gemm_consistency and gemm_tflops, before cuBLAS; the first whose entry
  /// points resolve and whose handle can be created on this driver is used. Empty: never use cuBLASLt.
  std::vector<std::string> cublaslt_libraries = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11",
                                                 "libcublasLt.so"};
  /// cuBLAS libraries tried in order for gemm_consistency and gemm_tflops when cuBLASLt is absent or cannot run a
  /// GEMM on this GPU; the first whose handle can be created on this driver is used. Empty: never use cuBLAS.
  std::vector<std::string> cublas_libraries = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"};
  int numa_node = -1;  ///< NUMA node of the GPU: pinned host buffers are placed there when >= 0
  /// Confidential computing is on: the GPU cannot read host memory mapped into it and host memory cannot be
  /// registered (cuMemHostRegister), so no spin flag holds the stream, host buffers come from cuMemHostAlloc only,
  /// and timed work is measured by the host's clock from queueing to completion (errs low, never high).
  bool confidential = false;
  /// Edge of gemm_consistency's square GEMM. A multiple of 32 from 32 to 16384; 2048 keeps a GEMM a few ms long
  /// on a GPU (the contract tests on the CPU driver make it small).
  int consistency_gemm_size = 2048;
  /// Largest edge of gemm_tflops's square GEMMs, a multiple of 32 from 32 to 16384: halved while the three matrices
  /// would take more than half of the free memory or a warm-up GEMM takes over 250 ms, down to 2048 (or this size
  /// when it is smaller).
  int tflops_gemm_size = 8192;
  /// Sessions that may run at once on the same memory: the compute instances of one MIG GPU instance (each sees
  /// the GPU instance's free memory). The work buffers sized from free memory (hbm_bandwidth, gemm_tflops, copy
  /// bandwidth, the cuBLASLt workspace) take 1/memory_shared_by of it so that siblings cannot crowd each other
  /// out; memtest takes its fraction of all of it (the check runs it from one compute instance per GPU instance).
  int memory_shared_by = 1;
  /// Longest a single GPU operation may run before the session reports `cuda.timeout` and stops using the GPU.
  std::chrono::milliseconds operation_timeout{30000};
  std::uint64_t seed = 1;  ///< seeds the compute kernels and the data of the bandwidth measurements
};

/// Opens a session on the GPU at `pci_bus_id` ("00000000:19:00.0"): loads the driver library, runs cuInit in this
/// process (the caller has already survived one in a child process), retains the device's primary context and
/// loads the kernels. Fails with `cuda.library` (library absent), `cuda.symbols`, `cuda.init`, `cuda.device`
/// (no such bus id), `cuda.context` or `cuda.module` (the fatbin has no code this GPU or driver can run).
Result<std::unique_ptr<GpuSession>> open_cuda_session(const std::string& pci_bus_id, const CudaSessionOptions& options);

/// The PCI bus ids of the CUDA devices in CUDA's order, through `library` (runs cuInit in this process). Fails
/// like open_cuda_session does before it picks a device.
Result<std::vector<std::string>> cuda_device_bus_ids(const std::string& library);

}  // namespace gpuenv::validate
