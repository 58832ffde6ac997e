// Contract tests of the CUDA driver API session (validate/adapters/cuda_session.cpp). Without a driver only the
// failure paths run; on a machine with an NVIDIA GPU every method runs on GPU 0 and its answers are checked for
// sanity. The GPU tests skip, saying why, when libcuda is absent or cuInit fails.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "validate/adapters/cuda_session.hpp"

// The driver library the GPU tests use; a build may point it at a stand-in.
#ifndef GPUENV_TEST_CUDA_LIBRARY
#define GPUENV_TEST_CUDA_LIBRARY "libcuda.so.1"
#endif

namespace {

using gpuenv::validate::CudaSessionOptions;
using gpuenv::validate::GpuSession;
using gpuenv::validate::MemtestRequest;
using gpuenv::validate::open_cuda_session;

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
  EXPECT_TRUE(r->engine == "cublas" || r->engine == "gpuenv") << r->engine;
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
  }
  auto unknown = m_session->gemm_tflops("int4", 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().id, "validate.bad_request");
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
