#pragma once
// cuBLAS and cuBLASLt through dlopen, for the session's GEMMs (cuda_session.cpp): the entry points declared by hand
// (cublas_api.h, cublasLt.h), their loading, and the GEMM calls through them. Internal to validate/adapters; no CUDA
// header is needed, so gpuenv builds and runs without the CUDA toolkit.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "validate/adapters/driver_api.hpp"
#include "validate/adapters/gemm_types.hpp"

namespace gpuenv::validate::blas {

// cuBLAS and cuBLASLt values (cublas_api.h, cublasLt.h); the data and compute types are in gemm_types.hpp.
using cublasStatus = int;
using cublasHandle = void*;
inline constexpr int k_cublas_op_n = 0;                          // CUBLAS_OP_N
inline constexpr int k_cublas_gemm_default = -1;                 // CUBLAS_GEMM_DEFAULT
inline constexpr int k_cublas_arch_mismatch = 8;                 // CUBLAS_STATUS_ARCH_MISMATCH
inline constexpr int k_cublas_not_supported = 15;                // CUBLAS_STATUS_NOT_SUPPORTED
inline constexpr int k_cublaslt_matmul_desc_transa = 3;          // CUBLASLT_MATMUL_DESC_TRANSA
inline constexpr int k_cublaslt_matmul_desc_transb = 4;          // CUBLASLT_MATMUL_DESC_TRANSB
inline constexpr int k_cublaslt_pref_max_workspace = 1;          // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
inline constexpr std::size_t k_cublaslt_workspace = 32u << 20;  // 32 MiB, what cuBLAS's documentation advises for Hopper

/// cuBLAS through dlopen: just what the GEMMs need.
struct CublasApi {
  std::string library;
  cublasHandle handle = nullptr;
  cublasStatus (*create)(cublasHandle*) = nullptr;
  cublasStatus (*destroy)(cublasHandle) = nullptr;
  cublasStatus (*set_stream)(cublasHandle, cuda::CUstream) = nullptr;
  cublasStatus (*gemm_ex)(cublasHandle, int, int, int, int, int, const void*, const void*, int, int, const void*, int,
                          int, const void*, void*, int, int, int, int) = nullptr;
  const char* (*status_name)(cublasStatus) = nullptr;

  /// The status's name (cublasGetStatusName when the library has it) and number, e.g. "CUBLAS_STATUS_... (15)".
  [[nodiscard]] std::string name_of(cublasStatus status) const;
};

// cuBLASLt through dlopen: just what one matmul needs. Handles and descriptors are opaque pointers; enum
// arguments are passed as int, as the C ABI does.
using cublasLtHandle = void*;
using cublasLtMatmulDesc = void*;
using cublasLtMatrixLayout = void*;
using cublasLtMatmulPreference = void*;

/// cublasLtMatmulAlgo_t.
struct CublasLtMatmulAlgo {
  std::uint64_t data[8];
};

/// cublasLtMatmulHeuristicResult_t.
struct CublasLtHeuristicResult {
  CublasLtMatmulAlgo algo;
  std::size_t workspace_size;
  cublasStatus state;
  float waves_count;
  int reserved[4];
};
static_assert(sizeof(CublasLtHeuristicResult) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");

/// cuBLASLt through dlopen: just what one matmul needs.
struct CublasLtApi {
  std::string library;
  cublasLtHandle handle = nullptr;
  std::size_t (*get_version)() = nullptr;
  cublasStatus (*create)(cublasLtHandle*) = nullptr;
  cublasStatus (*destroy)(cublasLtHandle) = nullptr;
  cublasStatus (*desc_create)(cublasLtMatmulDesc*, int, int) = nullptr;
  cublasStatus (*desc_destroy)(cublasLtMatmulDesc) = nullptr;
  cublasStatus (*desc_set_attribute)(cublasLtMatmulDesc, int, const void*, std::size_t) = nullptr;
  cublasStatus (*layout_create)(cublasLtMatrixLayout*, int, std::uint64_t, std::uint64_t, std::int64_t) = nullptr;
  cublasStatus (*layout_destroy)(cublasLtMatrixLayout) = nullptr;
  cublasStatus (*pref_create)(cublasLtMatmulPreference*) = nullptr;
  cublasStatus (*pref_destroy)(cublasLtMatmulPreference) = nullptr;
  cublasStatus (*pref_set_attribute)(cublasLtMatmulPreference, int, const void*, std::size_t) = nullptr;
  cublasStatus (*get_heuristic)(cublasLtHandle, cublasLtMatmulDesc, cublasLtMatrixLayout, cublasLtMatrixLayout,
                                cublasLtMatrixLayout, cublasLtMatrixLayout, cublasLtMatmulPreference, int,
                                CublasLtHeuristicResult*, int*) = nullptr;
  cublasStatus (*matmul)(cublasLtHandle, cublasLtMatmulDesc, const void*, const void*, cublasLtMatrixLayout,
                         const void*, cublasLtMatrixLayout, const void*, const void*, cublasLtMatrixLayout, void*,
                         cublasLtMatrixLayout, const CublasLtMatmulAlgo*, void*, std::size_t,
                         cuda::CUstream) = nullptr;
  const char* (*status_name)(cublasStatus) = nullptr;  // cublasLtGetStatusName; absent in early 11.x releases

  /// The status's name (cublasLtGetStatusName when the library has it) and number.
  [[nodiscard]] std::string name_of(cublasStatus status) const;
};

/// The major version of a cublasLtGetVersion() number, which releases have encoded as major * 10000 + minor * 100 +
/// patch (12 and later) or major * 1000 + minor * 100 + patch (earlier); good enough to tell 10 from 11 and later.
constexpr std::size_t cublas_major(std::size_t version) {
  return version >= 100000 ? version / 10000 : version / 1000;
}

/// A matmul status saying this library cannot run these types on this GPU: the caller falls back.
constexpr bool unsupported(cublasStatus status) {
  return status == k_cublas_not_supported || status == k_cublas_arch_mismatch;
}

/// One planned cuBLASLt matmul D = A * B of square column-major matrices (C = D, beta = 0): the descriptor, the
/// layouts and the algorithm the heuristic chose. Destroys what it holds; descriptors live on the host, so this is
/// safe even when the session is broken.
struct CublasLtMatmul {
  explicit CublasLtMatmul(const CublasLtApi* lt) : api(lt) {}
  CublasLtMatmul(CublasLtMatmul&& other) noexcept { *this = std::move(other); }
  CublasLtMatmul& operator=(CublasLtMatmul&& other) noexcept;
  CublasLtMatmul(const CublasLtMatmul&) = delete;
  CublasLtMatmul& operator=(const CublasLtMatmul&) = delete;
  ~CublasLtMatmul() { release(); }

  /// Queues D = alpha * A * B + beta * D on `stream`; alpha and beta point to the scale type.
  cublasStatus run(const void* alpha, cuda::CUdeviceptr a, cuda::CUdeviceptr b, const void* beta, cuda::CUdeviceptr d,
                   cuda::CUstream stream) const;

  /// Destroys the descriptor, layouts and preference (never fails).
  void release();

  const CublasLtApi* api = nullptr;
  cublasLtMatmulDesc desc = nullptr;
  cublasLtMatrixLayout layout_a = nullptr, layout_b = nullptr, layout_c = nullptr;  // C and D share layout_c
  cublasLtMatmulPreference pref = nullptr;
  CublasLtMatmulAlgo algo{};
  int size = 0;
  cuda::CUdeviceptr workspace = 0;
  std::size_t workspace_bytes = 0;
};

/// What planning a cuBLASLt matmul gave: the plan (kept alive until the caller is done with it, also on failure),
/// whether the heuristic found an algorithm, and the call that failed with its status when one did.
struct LtPlan {
  explicit LtPlan(const CublasLtApi* lt) : matmul(lt) {}
  CublasLtMatmul matmul;
  bool found = false;                 ///< an algorithm for these types on this GPU
  const char* failed_call = nullptr;  ///< the cuBLASLt call that failed; null when none did
  cublasStatus status = 0;            ///< its status
};

/// Plans D = A * B for `size` x `size` column-major matrices of `types` through `lt`: no transposes, the given
/// workspace, the heuristic's first algorithm. Not found when cuBLASLt has no algorithm for these types on this
/// GPU (NOT_SUPPORTED or ARCH_MISMATCH, or no usable result); `failed_call` set when a call fails otherwise.
LtPlan plan_matmul(const CublasLtApi& lt, const gemm::GemmTypes& types, int size, cuda::CUdeviceptr workspace,
                   std::size_t workspace_bytes);

/// Queues C = alpha * A * B + beta * C through cublasGemmEx for `size` x `size` column-major matrices, no
/// transposes, the default algorithm; returns cuBLAS's status.
cublasStatus square_gemm(const CublasApi& blas, int size, const void* alpha, cuda::CUdeviceptr a, cuda::CUdeviceptr b,
                         int input_type, const void* beta, cuda::CUdeviceptr c, int output_type, int compute_type);

/// A loaded library, or none, with why the libraries that loaded were passed over.
template <class Api>
struct LoadedLibrary {
  std::unique_ptr<Api> api;            ///< null when no library was usable
  std::vector<std::string> rejected;  ///< "NAME lacks ...", "NAME: cublasCreate_v2 failed with ...", ...
};

/// Opens the first of `libraries` that loads, resolves cuBLAS's entry points, creates a handle on this driver and
/// sets `stream` on it. Libraries that do not load are skipped silently; those that load but fail are rejected.
LoadedLibrary<CublasApi> load_cublas(const std::vector<std::string>& libraries, cuda::CUstream stream);

/// Opens the first of `libraries` whose entry points resolve, whose version is 11 or newer (the cublasComputeType_t
/// interface) and whose handle can be created on this driver.
LoadedLibrary<CublasLtApi> load_cublaslt(const std::vector<std::string>& libraries);

}  // namespace gpuenv::validate::blas
