// Contract tests of the multi-GPU measurements (validate/adapters/multi_gpu.cpp). Without a driver only the request
// checks and the library failure paths run (against the fake libcuda and libnvidia-ml builds, and the system's NCCL
// when one is installed); on a machine with NVIDIA GPUs the measurements run and their answers are checked for
// sanity. The GPU tests skip, saying why, when libcuda is absent, cuInit fails, or there are too few GPUs.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "validate/adapters/cuda_session.hpp"
#include "validate/adapters/multi_gpu.hpp"

// The driver library the GPU tests use; a build may point it at a stand-in.
#ifndef GPUENV_TEST_CUDA_LIBRARY
#define GPUENV_TEST_CUDA_LIBRARY "libcuda.so.1"
#endif

namespace {

using gpuenv::validate::measure_nccl_allreduce;
using gpuenv::validate::measure_p2p_bandwidth;
using gpuenv::validate::MultiGpuOptions;
using gpuenv::validate::nccl_library_status;

constexpr const char* k_a = "00000000:19:00.0";
constexpr const char* k_b = "00000000:3B:00.0";

/// Options whose libraries cannot be the cause of a failure: the request is checked before any is loaded.
MultiGpuOptions unloadable() {
  MultiGpuOptions o;
  o.cuda_library = "libcuda-not-here.so.1";
  o.nccl_libraries = {"libnccl-not-here.so.2"};
  return o;
}

/// Whether the system's NCCL loads here (it does where the CUDA toolkit's NCCL is installed).
bool system_nccl_loads() {
  void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  return h != nullptr;  // never closed: NCCL registers atexit handlers
}

TEST(MultiGpu, PeerRequestsAreChecked) {
  const MultiGpuOptions o = unloadable();
  for (int samples : {0, -3}) {
    auto r = measure_p2p_bandwidth(o, k_a, k_b, samples);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().id, "validate.bad_request") << samples;
  }
  auto same = measure_p2p_bandwidth(o, k_b, "00000000:3b:00.0", 3);
  ASSERT_FALSE(same.ok());
  EXPECT_EQ(same.error().id, "validate.bad_request");
  EXPECT_NE(same.error().message.find("twice"), std::string::npos) << same.error().message;
  auto empty = measure_p2p_bandwidth(o, "", k_b, 3);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().id, "validate.bad_request");
}

TEST(MultiGpu, NcclRequestsAreChecked) {
  const MultiGpuOptions o = unloadable();
  auto none = measure_nccl_allreduce(o, {}, 3);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().id, "validate.bad_request");
  auto zero = measure_nccl_allreduce(o, {k_a}, 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().id, "validate.bad_request");
  auto twice = measure_nccl_allreduce(o, {k_a, k_b, "00000000:19:00.0"}, 3);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().id, "validate.bad_request");
  EXPECT_NE(twice.error().message.find(k_a), std::string::npos) << twice.error().message;
}

TEST(MultiGpu, PeerWithoutDriverLibraryIsACleanError) {
  auto r = measure_p2p_bandwidth(unloadable(), k_a, k_b, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "cuda.library");
  EXPECT_NE(r.error().message.find("libcuda-not-here.so.1"), std::string::npos);
  EXPECT_FALSE(r.error().hint.empty());
}

TEST(MultiGpu, PeerWithALibraryLackingDriverEntryPointsIsAnError) {
  MultiGpuOptions o;
  o.cuda_library = FAKE_CUDA_OK_PATH;  // cuInit and a few device queries only
  auto r = measure_p2p_bandwidth(o, k_a, k_b, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "cuda.symbols");
  EXPECT_NE(r.error().message.find("cuMemAlloc_v2"), std::string::npos) << r.error().message;
}

TEST(MultiGpu, NcclAbsentIsAnEmptyAnswerBeforeTheDriverIsTouched) {
  MultiGpuOptions o = unloadable();  // no libcuda either: NCCL is looked for first
  auto r = measure_nccl_allreduce(o, {k_a, k_b}, 3);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_FALSE(r->has_value());
  o.nccl_libraries.clear();
  auto empty_list = measure_nccl_allreduce(o, {k_a}, 3);
  ASSERT_TRUE(empty_list.ok());
  EXPECT_FALSE(empty_list->has_value());
}

TEST(MultiGpu, NcclLibraryWithoutNcclEntryPointsIsAnError) {
  MultiGpuOptions o = unloadable();
  o.nccl_libraries = {"libnccl-not-here.so.2", FAKE_NVML_PATH};
  auto r = measure_nccl_allreduce(o, {k_a}, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "nccl.symbols");
  EXPECT_NE(r.error().message.find("ncclCommInitAll"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(FAKE_NVML_PATH), std::string::npos) << r.error().message;
}

TEST(MultiGpu, NcclLibraryStatusNamesWhatItFound) {
  auto none = nccl_library_status({"libnccl-not-here.so.2", "libnccl-not-here.so"});
  ASSERT_TRUE(none.ok()) << none.error().to_string();
  EXPECT_FALSE(none->has_value());
  auto empty = nccl_library_status({});
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
  auto fake = nccl_library_status({FAKE_CUDA_OK_PATH, "libnccl.so.2"});
  ASSERT_FALSE(fake.ok()) << "the first library that loads decides";
  EXPECT_EQ(fake.error().id, "nccl.symbols");
  EXPECT_NE(fake.error().message.find("ncclAllReduce"), std::string::npos) << fake.error().message;
  EXPECT_FALSE(fake.error().hint.empty());
}

TEST(MultiGpu, SystemNcclResolvesEveryEntryPoint) {
  if (!system_nccl_loads()) GTEST_SKIP() << "libnccl.so.2 is not installed here";
  auto r = nccl_library_status({"libnccl-not-here.so.2", "libnccl.so.2"});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->library, "libnccl.so.2");
  EXPECT_GE((*r)->version, 20000) << "NCCL 2.x reports e.g. 22703 for 2.27.3";
}

TEST(MultiGpu, NcclWithoutDriverLibraryIsACleanError) {
  if (!system_nccl_loads()) GTEST_SKIP() << "libnccl.so.2 is not installed here";
  MultiGpuOptions o = unloadable();
  o.nccl_libraries = {"libnccl.so.2"};
  auto r = measure_nccl_allreduce(o, {k_a}, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "cuda.library");
  o.cuda_library = FAKE_CUDA_OK_PATH;
  auto fake = measure_nccl_allreduce(o, {k_a}, 3);
  ASSERT_FALSE(fake.ok());
  EXPECT_EQ(fake.error().id, "cuda.symbols");
}

// The CUDA devices of this machine through the real driver, or a skip saying why.
class MultiGpuOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    void* probe = dlopen(GPUENV_TEST_CUDA_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!probe) GTEST_SKIP() << GPUENV_TEST_CUDA_LIBRARY << " is absent: no NVIDIA driver on this machine";
    auto ids = gpuenv::validate::cuda_device_bus_ids(GPUENV_TEST_CUDA_LIBRARY);
    if (!ids.ok()) GTEST_SKIP() << "the CUDA driver does not initialise here: " << ids.error().message;
    if (ids->empty()) GTEST_SKIP() << "the CUDA driver sees no GPU";
    m_bus_ids = *ids;
    m_options.cuda_library = GPUENV_TEST_CUDA_LIBRARY;
    m_options.fatbin = gpuenv::validate::embedded_validation_fatbin();
    m_options.operation_timeout = std::chrono::milliseconds(60000);
  }

  std::vector<std::string> m_bus_ids;
  MultiGpuOptions m_options;
};

TEST_F(MultiGpuOnGpu, UnknownBusIdIsACudaDeviceError) {
  auto r = measure_p2p_bandwidth(m_options, m_bus_ids.front(), "0000:FF:1F.7", 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "cuda.device");
  EXPECT_NE(r.error().message.find("0000:FF:1F.7"), std::string::npos) << r.error().message;
}

TEST_F(MultiGpuOnGpu, PeerCopiesBetweenTheFirstTwoGpusAreMeasuredAndVerified) {
  if (m_bus_ids.size() < 2) GTEST_SKIP() << "peer-to-peer needs two GPUs; this machine has " << m_bus_ids.size();
  if (m_options.fatbin.size == 0) GTEST_SKIP() << "built without CUDA: no validation kernels embedded";
  for (auto [src, dst] : {std::pair{0, 1}, std::pair{1, 0}}) {
    auto r = measure_p2p_bandwidth(m_options, m_bus_ids[src], m_bus_ids[dst], 3);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    if (!r->has_value()) GTEST_SKIP() << m_bus_ids[src] << " cannot reach " << m_bus_ids[dst] << " (no peer access)";
    const auto& s = **r;
    ASSERT_EQ(s.values.size(), 3u);
    for (double v : s.values) {
      EXPECT_GT(v, 1.0) << "GB/s";
      EXPECT_LT(v, 2000.0) << "GB/s: beyond any NVLink generation";
    }
    EXPECT_EQ(s.unit, "GB/s");
    EXPECT_EQ(s.engine, "gpuenv");
    EXPECT_TRUE(s.data_verified);
  }
}

TEST_F(MultiGpuOnGpu, NcclAllReduceOnOneGpuReportsVerifiedAlgorithmBandwidth) {
  if (!system_nccl_loads()) GTEST_SKIP() << "NCCL not present: libnccl.so.2 does not load";
  auto r = measure_nccl_allreduce(m_options, {m_bus_ids.front()}, 2);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_TRUE(r->has_value());
  const auto& s = **r;
  ASSERT_EQ(s.values.size(), 2u);
  for (double v : s.values) EXPECT_GT(v, 1.0) << "GB/s";
  EXPECT_EQ(s.unit, "GB/s");
  EXPECT_EQ(s.engine, "nccl");
  EXPECT_TRUE(s.data_verified);
}

TEST_F(MultiGpuOnGpu, NcclAllReduceAcrossEveryGpuReportsVerifiedBusBandwidth) {
  if (m_bus_ids.size() < 2) GTEST_SKIP() << "an all-reduce across GPUs needs two; this machine has " << m_bus_ids.size();
  if (!system_nccl_loads()) GTEST_SKIP() << "NCCL not present: libnccl.so.2 does not load";
  auto r = measure_nccl_allreduce(m_options, m_bus_ids, 2);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_TRUE(r->has_value());
  ASSERT_EQ((*r)->values.size(), 2u);
  for (double v : (*r)->values) EXPECT_GT(v, 1.0) << "GB/s";
  EXPECT_TRUE((*r)->data_verified);
}

}  // namespace
