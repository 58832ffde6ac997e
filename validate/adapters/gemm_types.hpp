#pragma once
// The element types of the session's GEMMs as cuBLAS (cublasGemmEx) and cuBLASLt (cublasLtMatmulDescCreate,
// cublasLtMatrixLayoutCreate) take them: cudaDataType_t values of library_types.h and cublasComputeType_t values of
// cublas_api.h, declared by hand so that no CUDA header is needed. Internal to validate/adapters; header only, pure,
// so the contract tests check the mapping without a GPU.
#include <cstddef>
#include <optional>
#include <string_view>

namespace gpuenv::validate::gemm {

inline constexpr int k_cuda_r_32f = 0;                   // CUDA_R_32F
inline constexpr int k_cuda_r_64f = 1;                   // CUDA_R_64F
inline constexpr int k_cuda_r_16f = 2;                   // CUDA_R_16F
inline constexpr int k_cuda_r_16bf = 14;                 // CUDA_R_16BF
inline constexpr int k_cublas_compute_32f = 68;          // CUBLAS_COMPUTE_32F
inline constexpr int k_cublas_compute_64f = 70;          // CUBLAS_COMPUTE_64F
inline constexpr int k_cublas_compute_32f_tf32 = 77;     // CUBLAS_COMPUTE_32F_FAST_TF32

/// The types of one GEMM D = alpha * A * B + beta * C: A and B share a type, C and D share one.
struct GemmTypes {
  int input_type = k_cuda_r_32f;            ///< cudaDataType_t of A and B
  int output_type = k_cuda_r_32f;           ///< cudaDataType_t of C and D
  int compute_type = k_cublas_compute_32f;  ///< cublasComputeType_t
  int scale_type = k_cuda_r_32f;            ///< cudaDataType_t of alpha and beta (cuBLASLt's scale type)
  std::size_t input_bytes = 4, output_bytes = 4;
};

/// The scale type cuBLASLt takes with `compute_type`: CUDA_R_64F for CUBLAS_COMPUTE_64F, CUDA_R_32F for the 32F
/// compute types (and anything else).
constexpr int scale_type_for(int compute_type) {
  return compute_type == k_cublas_compute_64f ? k_cuda_r_64f : k_cuda_r_32f;
}

/// The types of gemm_tflops for `dtype`: "bf16" and "fp16" (fp32 accumulation), "tf32" (fp32 data, TF32 tensor
/// cores), "fp64"; empty for any other name.
inline std::optional<GemmTypes> tflops_gemm_types(std::string_view dtype) {
  auto make = [](int data_type, int compute_type, std::size_t bytes) {
    return GemmTypes{data_type, data_type, compute_type, scale_type_for(compute_type), bytes, bytes};
  };
  if (dtype == "bf16") return make(k_cuda_r_16bf, k_cublas_compute_32f, 2);
  if (dtype == "fp16") return make(k_cuda_r_16f, k_cublas_compute_32f, 2);
  if (dtype == "tf32") return make(k_cuda_r_32f, k_cublas_compute_32f_tf32, 4);
  if (dtype == "fp64") return make(k_cuda_r_64f, k_cublas_compute_64f, 8);
  return std::nullopt;
}

/// The types of gemm_consistency's GEMM: bf16 inputs on tensor cores, or fp32 inputs where bf16 is not supported
/// (before sm_80); fp32 output, accumulation and scalars either way.
constexpr GemmTypes consistency_gemm_types(bool bf16_inputs) {
  return GemmTypes{bf16_inputs ? k_cuda_r_16bf : k_cuda_r_32f,
                   k_cuda_r_32f,
                   k_cublas_compute_32f,
                   k_cuda_r_32f,
                   bf16_inputs ? std::size_t{2} : std::size_t{4},
                   4};
}

}  // namespace gpuenv::validate::gemm
