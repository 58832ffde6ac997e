// Contract tests of the CUDA driver API session (validate/adapters/cuda_session.cpp). Without a driver only the
// failure paths and the GEMM type mapping (validate/adapters/gemm_types.hpp) run; on a machine with an NVIDIA GPU
// every method runs on GPU 0 and its answers are checked for sanity, including which GEMM engine ran. The GPU
// tests skip, saying why, when libcuda is absent or cuInit fails.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "validate/adapters/cuda_session.hpp"
#include "validate/adapters/gemm_types.hpp"

// The driver library the GPU tests use; a build may point it at a stand-in.
#ifndef GPUENV_TEST_CUDA_LIBRARY
#define GPUENV_TEST_CUDA_LIBRARY "libcuda.so.1"
#endif

namespace {

using gpuenv::validate::CudaSessionOptions;
using gpuenv::validate::GpuSession;
using gpuenv::validate::MemtestRequest;
using gpuenv::validate::open_cuda_session;
namespace gemm = gpuenv::validate::gemm;

// Whether one of `libraries` is a cuBLASLt this process can load (the session then must use it for its GEMMs).
bool cublaslt_loads(const std::vector<std::string>& libraries) {
  for (const std::string& name : libraries) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib && dlsym(lib, "cublasLtMatmul") && dlsym(lib, "cublasLtMatmulAlgoGetHeuristic")) return true;
  }
  return false;
}

TEST(GemmTypes, TflopsTypesUseTheCudaDataAndComputeTypes) {
  const auto bf16 = gemm::tflops_gemm_types("bf16");
  ASSERT_TRUE(bf16.has_value());
  EXPECT_EQ(bf16->input_type, 14);    // CUDA_R_16BF
  EXPECT_EQ(bf16->output_type, 14);
  EXPECT_EQ(bf16->compute_type, 68);  // CUBLAS_COMPUTE_32F
  EXPECT_EQ(bf16->scale_type, 0);     // CUDA_R_32F
  EXPECT_EQ(bf16->input_bytes, 2u);
  EXPECT_EQ(bf16->output_bytes, 2u);

  const auto fp16 = gemm::tflops_gemm_types("fp16");
  ASSERT_TRUE(fp16.has_value());
  EXPECT_EQ(fp16->input_type, 2);  // CUDA_R_16F
  EXPECT_EQ(fp16->output_type, 2);
  EXPECT_EQ(fp16->compute_type, 68);
  EXPECT_EQ(fp16->scale_type, 0);
  EXPECT_EQ(fp16->input_bytes, 2u);

  const auto tf32 = gemm::tflops_gemm_types("tf32");
  ASSERT_TRUE(tf32.has_value());
  EXPECT_EQ(tf32->input_type, 0);     // CUDA_R_32F
  EXPECT_EQ(tf32->output_type, 0);
  EXPECT_EQ(tf32->compute_type, 77);  // CUBLAS_COMPUTE_32F_FAST_TF32
  EXPECT_EQ(tf32->scale_type, 0);
  EXPECT_EQ(tf32->input_bytes, 4u);

  const auto fp64 = gemm::tflops_gemm_types("fp64");
  ASSERT_TRUE(fp64.has_value());
  EXPECT_EQ(fp64->input_type, 1);     // CUDA_R_64F
  EXPECT_EQ(fp64->output_type, 1);
  EXPECT_EQ(fp64->compute_type, 70);  // CUBLAS_COMPUTE_64F
  EXPECT_EQ(fp64->scale_type, 1);     // alpha and beta are doubles
  EXPECT_EQ(fp64->output_bytes, 8u);
}

TEST(GemmTypes, UnknownTflopsTypeHasNoMapping) {
  EXPECT_FALSE(gemm::tflops_gemm_types("int4").has_value());
  EXPECT_FALSE(gemm::tflops_gemm_types("").has_value());
  EXPECT_FALSE(gemm::tflops_gemm_types("BF16").has_value());
}

TEST(GemmTypes, ScaleTypeIsDoubleOnlyForDoubleCompute) {
  EXPECT_EQ(gemm::scale_type_for(gemm::k_cublas_compute_64f), gemm::k_cuda_r_64f);
  EXPECT_EQ(gemm::scale_type_for(gemm::k_cublas_compute_32f), gemm::k_cuda_r_32f);
  EXPECT_EQ(gemm::scale_type_for(gemm::k_cublas_compute_32f_tf32), gemm::k_cuda_r_32f);
}

TEST(GemmTypes, ConsistencyGemmTakesBf16OrFp32InputsAndGivesFp32) {
  const gemm::GemmTypes bf16 = gemm::consistency_gemm_types(true);
  EXPECT_EQ(bf16.input_type, gemm::k_cuda_r_16bf);
  EXPECT_EQ(bf16.input_bytes, 2u);
  const gemm::GemmTypes fp32 = gemm::consistency_gemm_types(false);
  EXPECT_EQ(fp32.input_type, gemm::k_cuda_r_32f);
  EXPECT_EQ(fp32.input_bytes, 4u);
  for (const gemm::GemmTypes& t : {bf16, fp32}) {
    EXPECT_EQ(t.output_type, gemm::k_cuda_r_32f);
    EXPECT_EQ(t.output_bytes, 4u);
    EXPECT_EQ(t.compute_type, gemm::k_cublas_compute_32f);
    EXPECT_EQ(t.scale_type, gemm::k_cuda_r_32f);
  }
}

TEST(CudaSession, DefaultOptionsTryCublasLtBeforeCublas) {
  const CudaSessionOptions options;
  ASSERT_FALSE(options.cublaslt_libraries.empty());
  EXPECT_EQ(options.cublaslt_libraries.front(), "libcublasLt.so.13");
  EXPECT_EQ(options.cublaslt_libraries.back(), "libcublasLt.so");
  EXPECT_FALSE(options.cublas_libraries.empty());
}

TEST(CudaSession, MissingDriverLibraryIsACleanError) {
  CudaSessionOptions options;
  options.library = "libcuda-not-here.so.1";
  auto r = open_cuda_session("00000000:01:00.0", options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "cuda.library");
  EXPECT_NE(r.error().message.find("libcuda-not-here.so.1"), std::string::npos);
  EXPECT_FALSE(r.error().hint.empty());
}

TEST(CudaSession, BusIdsOfAMissingDriverLibraryIsACleanError) {
  auto r = gpuenv::validate::cuda_device_bus_ids("libcuda-not-here.so.1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "cuda.library");
}

#ifdef FAKE_CUDA_OK_PATH
TEST(CudaSession, LibraryWithoutDriverEntryPointsIsAnError) {
  CudaSessionOptions options;
  options.library = FAKE_CUDA_OK_PATH;  // cuInit and a few device queries only
  auto r = open_cuda_session("00000000:01:00.0", options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "cuda.symbols");
  EXPECT_NE(r.error().message.find("cuMemAlloc_v2"), std::string::npos);
}
#endif

// Opens GPU 0 through the real driver, or skips saying why.
class CudaSessionOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    void* probe = dlopen(GPUENV_TEST_CUDA_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!probe) GTEST_SKIP() << GPUENV_TEST_CUDA_LIBRARY << " is absent: no NVIDIA driver on this machine";
    auto ids = gpuenv::validate::cuda_device_bus_ids(GPUENV_TEST_CUDA_LIBRARY);
    if (!ids.ok()) GTEST_SKIP() << "the CUDA driver does not initialise here: " << ids.error().message;
    if (ids->empty()) GTEST_SKIP() << "the CUDA driver sees no GPU";
    m_bus_id = ids->front();
    m_options.library = GPUENV_TEST_CUDA_LIBRARY;
    m_options.fatbin = gpuenv::validate::embedded_validation_fatbin();
#ifdef GPUENV_TEST_CUBLAS_LIBRARY
    m_options.cublas_libraries = {GPUENV_TEST_CUBLAS_LIBRARY};
#endif
#ifdef GPUENV_TEST_CUBLASLT_LIBRARY
    m_options.cublaslt_libraries = {GPUENV_TEST_CUBLASLT_LIBRARY};
#endif
    m_have_cublaslt = cublaslt_loads(m_options.cublaslt_libraries);
    m_options.health_reader = [this]() -> gpuenv::Result<gpuenv::validate::GpuHealth> {
      ++m_health_reads;
      gpuenv::validate::GpuHealth h;
      h.temperature_c = 41;
      return h;
    };
    auto session = open_cuda_session(m_bus_id, m_options);
    ASSERT_TRUE(session.ok()) << session.error().to_string();
    m_session = std::move(*session);
  }

  void require_kernels() {
    if (m_options.fatbin.size == 0) GTEST_SKIP() << "built without CUDA: no validation kernels embedded";
  }

  std::string m_bus_id;
  CudaSessionOptions m_options;
  std::unique_ptr<GpuSession> m_session;
  int m_health_reads = 0;
  bool m_have_cublaslt = false;  // a libcublasLt of m_options loads: the GEMMs must run through it
};

TEST_F(CudaSessionOnGpu, ComputeKernelsMatchTheHostReference) {
  require_kernels();
  auto r = m_session->compute_mismatches();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(*r, 0u);
}

TEST_F(CudaSessionOnGpu, MemtestRunsEveryPatternWithoutErrors) {
  require_kernels();
  auto r = m_session->memtest(MemtestRequest{0.05, 20000, 7});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->errors, 0u);
  EXPECT_GT(r->bytes_tested, 0u);
  EXPECT_FALSE(r->truncated_by_deadline);
  const std::vector<std::string> expected = {
      "walking_ones", "walking_zeros", "own_address", "moving_inversions", "moving_inversions_complement", "random"};
  EXPECT_EQ(r->patterns, expected);
}

TEST_F(CudaSessionOnGpu, MemtestStopsAtItsDeadline) {
  require_kernels();
  auto r = m_session->memtest(MemtestRequest{0.5, 1, 7});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->truncated_by_deadline);
  EXPECT_LT(r->patterns.size(), 6u);
}

TEST_F(CudaSessionOnGpu, RepeatedGemmsGiveIdenticalDigests) {
  require_kernels();
  auto r = m_session->gemm_consistency(3);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->result_digests.size(), 3u);
  EXPECT_EQ(std::set<std::uint64_t>(r->result_digests.begin(), r->result_digests.end()).size(), 1u);
  if (m_have_cublaslt) {
    EXPECT_EQ(r->engine, "cublasLt") << "passed over: " << r->passed_over;
  } else {
    EXPECT_TRUE(r->engine == "cublas" || r->engine == "gpuenv") << r->engine;
  }
}

TEST_F(CudaSessionOnGpu, HbmBandwidthIsPositiveAndVerified) {
  require_kernels();
  auto r = m_session->hbm_bandwidth(3);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->values.size(), 3u);
  EXPECT_GT(*std::min_element(r->values.begin(), r->values.end()), 0.0);
  EXPECT_EQ(r->unit, "GB/s");
  EXPECT_TRUE(r->data_verified);
}

TEST_F(CudaSessionOnGpu, CopyBandwidthBothWaysIsPositiveAndVerified) {
  require_kernels();
  for (bool to_device : {true, false}) {
    auto r = m_session->copy_bandwidth(to_device, 3);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(r->values.size(), 3u);
    EXPECT_GT(*std::min_element(r->values.begin(), r->values.end()), 0.0);
    EXPECT_TRUE(r->data_verified);
  }
}

TEST_F(CudaSessionOnGpu, GemmThroughputIsVerifiedOrNotSupported) {
  require_kernels();
  for (const char* dtype : {"bf16", "fp16", "tf32", "fp64"}) {
    auto r = m_session->gemm_tflops(dtype, 3);
    ASSERT_TRUE(r.ok()) << dtype << ": " << r.error().to_string();
    if (!r->has_value()) continue;  // no cuBLAS, or the GPU lacks the type
    EXPECT_EQ((*r)->values.size(), 3u) << dtype;
    EXPECT_GT((*r)->values.front(), 0.0) << dtype;
    EXPECT_EQ((*r)->unit, "TFLOPS");
    EXPECT_TRUE((*r)->data_verified);
    EXPECT_EQ((*r)->engine, m_have_cublaslt ? "cublasLt" : "cublas") << dtype << "; passed over: " << (*r)->passed_over;
  }
  auto unknown = m_session->gemm_tflops("int4", 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().id, "validate.bad_request");
}

TEST_F(CudaSessionOnGpu, WithoutCublasLtTheGemmsFallBackToCublas) {
  require_kernels();
  CudaSessionOptions options = m_options;
  options.cublaslt_libraries = {};
  auto session = open_cuda_session(m_bus_id, options);
  ASSERT_TRUE(session.ok()) << session.error().to_string();
  auto consistency = (*session)->gemm_consistency(2);
  ASSERT_TRUE(consistency.ok()) << consistency.error().to_string();
  EXPECT_TRUE(consistency->engine == "cublas" || consistency->engine == "gpuenv") << consistency->engine;
  EXPECT_EQ(std::set<std::uint64_t>(consistency->result_digests.begin(), consistency->result_digests.end()).size(),
            1u);
  auto tflops = (*session)->gemm_tflops("fp16", 1);
  ASSERT_TRUE(tflops.ok()) << tflops.error().to_string();
  if (tflops->has_value()) {
    EXPECT_EQ((*tflops)->engine, "cublas");
    EXPECT_TRUE((*tflops)->data_verified);
  }
}

TEST_F(CudaSessionOnGpu, WithoutAnyBlasLibraryConsistencyUsesTheOwnKernel) {
  require_kernels();
  CudaSessionOptions options = m_options;
  options.cublaslt_libraries = {};
  options.cublas_libraries = {};
  auto session = open_cuda_session(m_bus_id, options);
  ASSERT_TRUE(session.ok()) << session.error().to_string();
  auto consistency = (*session)->gemm_consistency(2);
  ASSERT_TRUE(consistency.ok()) << consistency.error().to_string();
  EXPECT_EQ(consistency->engine, "gpuenv");
  EXPECT_EQ(std::set<std::uint64_t>(consistency->result_digests.begin(), consistency->result_digests.end()).size(),
            1u);
  auto tflops = (*session)->gemm_tflops("bf16", 1);
  ASSERT_TRUE(tflops.ok()) << tflops.error().to_string();
  EXPECT_FALSE(tflops->has_value());
}

TEST_F(CudaSessionOnGpu, HealthComesFromTheInjectedReader) {
  auto r = m_session->health();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->temperature_c, 41);
  EXPECT_EQ(m_health_reads, 1);
}

TEST_F(CudaSessionOnGpu, MalformedRequestsAreRejected) {
  require_kernels();
  auto memtest = m_session->memtest(MemtestRequest{0.0, 1000, 1});
  ASSERT_FALSE(memtest.ok());
  EXPECT_EQ(memtest.error().id, "validate.bad_request");
  auto hbm = m_session->hbm_bandwidth(0);
  ASSERT_FALSE(hbm.ok());
  EXPECT_EQ(hbm.error().id, "validate.bad_request");
}

TEST_F(CudaSessionOnGpu, UnknownBusIdIsADeviceError) {
  auto r = open_cuda_session("00000000:FF:1F.7", m_options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "cuda.device");
}

TEST_F(CudaSessionOnGpu, WithoutKernelsTheContextOpensButKernelChecksFail) {
  CudaSessionOptions options = m_options;
  options.fatbin = {};
  auto session = open_cuda_session(m_bus_id, options);
  ASSERT_TRUE(session.ok()) << session.error().to_string();
  auto r = (*session)->compute_mismatches();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "cuda.no_kernels");
}

}  // namespace
