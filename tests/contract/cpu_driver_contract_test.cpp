// Contract tests of the real CUDA adapters (validate/adapters/cuda_session.cpp and multi_gpu.cpp) run end to end
// against the CPU test doubles of libcuda, cuBLAS/cuBLASLt and NCCL (tests/contract/cpu_cuda.cpp, cpu_cublas.cpp,
// cpu_nccl.cpp): every session method, both multi-GPU measurements, every fallback between GEMM engines, and the
// faults the doubles inject (bit flips, corrupted copies, wrong or drifting GEMMs, hung kernels) each give the
// answer or error the checks rely on. The doubles execute the embedded validation kernels' reference code, so
// these tests need a build with the kernels (nvcc); they skip, saying so, in a build without CUDA.
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fakes/scoped_env.hpp"
#include "validate/adapters/cuda_session.hpp"
#include "validate/adapters/multi_gpu.hpp"

namespace {

using namespace std::chrono_literals;
using gpuenv::validate::CudaSessionOptions;
using gpuenv::validate::GpuSession;
using gpuenv::validate::MemtestRequest;
using gpuenv::validate::MultiGpuOptions;

constexpr const char* k_gpu0 = "00000000:19:00.0";
constexpr const char* k_gpu1 = "00000000:3B:00.0";

using gpuenv::testing::ScopedEnv;

/// A counter exported by a CPU double (cpucublas_gemm_count, ...), read through dlsym on the loaded library.
unsigned long long counter(const char* library, const char* name) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) return 0;
  auto fn = reinterpret_cast<unsigned long long (*)()>(dlsym(handle, name));
  return fn ? fn() : 0;
}

class CpuDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("CPU_CUDA_FAULTS");
    ::unsetenv("CPU_CUBLAS_FAULTS");
    ::unsetenv("CPU_NCCL_FAULTS");
    if (gpuenv::validate::embedded_validation_fatbin().size == 0) {
      GTEST_SKIP() << "built without CUDA: no validation kernels embedded for the CPU driver to run";
    }
  }

  /// Options for a session on the CPU driver: small GEMMs (the CPU computes them), the CPU cuBLAS as both
  /// libraries.
  static CudaSessionOptions options() {
    CudaSessionOptions o;
    o.library = CPU_CUDA_PATH;
    o.fatbin = gpuenv::validate::embedded_validation_fatbin();
    o.cublaslt_libraries = {CPU_CUBLAS_PATH};
    o.cublas_libraries = {CPU_CUBLAS_PATH};
    o.consistency_gemm_size = 96;
    o.tflops_gemm_size = 128;
    o.operation_timeout = 20s;
    return o;
  }

  static std::unique_ptr<GpuSession> open(const CudaSessionOptions& o, const char* bus_id = k_gpu0) {
    auto session = gpuenv::validate::open_cuda_session(bus_id, o);
    EXPECT_TRUE(session.ok()) << (session.ok() ? "" : session.error().id + ": " + session.error().message);
    return session.ok() ? std::move(*session) : nullptr;
  }

  static MultiGpuOptions multi_options() {
    MultiGpuOptions o;
    o.cuda_library = CPU_CUDA_PATH;
    o.fatbin = gpuenv::validate::embedded_validation_fatbin();
    o.nccl_libraries = {CPU_NCCL_PATH};
    o.operation_timeout = 20s;
    return o;
  }
};

// ---- the doubles themselves -------------------------------------------------------------------------------------

/// Whether the ELF file at `path` (a 64-bit shared library) has a PT_TLS segment, i.e. thread_local data; an
/// unreadable or non-ELF64 file is a test failure.
bool cpu_double_has_tls_segment(const char* path) {
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr header{};
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  EXPECT_TRUE(in && std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 && header.e_ident[EI_CLASS] == ELFCLASS64)
      << path << " is not a readable 64-bit ELF file";
  if (!in) return false;
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    in.seekg(static_cast<std::streamoff>(header.e_phoff + i * static_cast<std::uint64_t>(header.e_phentsize)));
    in.read(reinterpret_cast<char*>(&segment), sizeof segment);
    EXPECT_TRUE(in) << path << ": program header " << i << " cannot be read";
    if (!in) return false;
    if (segment.p_type == PT_TLS) return true;
  }
  return false;
}

// The doubles the adapters dlopen keep per-thread state in pthread keys, never in thread_local: a dlopen'd library's
// thread_local lives in dynamic TLS, which the __tls_get_addr interceptor of the Sanitize build's runtime (LLVM 16
// and older) can misrecord, and LeakSanitizer's tracer then crashes at exit after the test passed (cpu_cuda.cpp).
TEST(TestDoubles, HaveNoThreadLocalStorage) {
  for (const char* path : {FAKE_NVML_PATH, FAKE_NVML_FULL_PATH, FAKE_NVML_FULL_OLD_PATH, FAKE_CUDA_OK_PATH,
                           FAKE_CUDA_HANG_PATH, CPU_CUDA_PATH, CPU_CUDA_LAZY_PATH, CPU_CUBLAS_PATH, CPU_NCCL_PATH}) {
    EXPECT_FALSE(cpu_double_has_tls_segment(path)) << path << " has thread_local data (a PT_TLS segment)";
  }
}

// ---- opening a session -----------------------------------------------------------------------------------------

TEST_F(CpuDriver, BusIdsComeInCudaOrder) {
  auto ids = gpuenv::validate::cuda_device_bus_ids(CPU_CUDA_PATH);
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  EXPECT_EQ(*ids, (std::vector<std::string>{k_gpu0, k_gpu1}));
}

TEST_F(CpuDriver, SessionOpensOnEitherGpuByNvmlBusId) {
  EXPECT_NE(open(options(), k_gpu0), nullptr);
  EXPECT_NE(open(options(), "00000000:3b:00.0"), nullptr);  // NVML's and CUDA's spellings differ in case only
}

TEST_F(CpuDriver, UnknownBusIdIsCudaDevice) {
  auto session = gpuenv::validate::open_cuda_session("00000000:99:00.0", options());
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.error().id, "cuda.device");
}

TEST_F(CpuDriver, FailedCuInitIsCudaInit) {
  ScopedEnv fault("CPU_CUDA_FAULTS", "init");
  auto session = gpuenv::validate::open_cuda_session(k_gpu0, options());
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.error().id, "cuda.init");
}

TEST_F(CpuDriver, AnImageThatIsNoFatbinIsCudaModule) {
  static const unsigned char not_a_fatbin[64] = {0x7f, 'E', 'L', 'F'};
  auto o = options();
  o.fatbin = gpuenv::validate::FatbinImage{not_a_fatbin, sizeof not_a_fatbin};
  auto session = gpuenv::validate::open_cuda_session(k_gpu0, o);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.error().id, "cuda.module");
  EXPECT_NE(session.error().message.find("CUDA_ERROR_INVALID_IMAGE"), std::string::npos) << session.error().message;
}

TEST_F(CpuDriver, GemmSizesMustBeWholeTiles) {
  auto o = options();
  o.consistency_gemm_size = 100;
  auto session = gpuenv::validate::open_cuda_session(k_gpu0, o);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.error().id, "validate.bad_request");
}

// ---- compute and memory ----------------------------------------------------------------------------------------

TEST_F(CpuDriver, ComputeKernelsMatchTheHostReference) {
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto mismatches = session->compute_mismatches();
  ASSERT_TRUE(mismatches.ok()) << mismatches.error().message;
  EXPECT_EQ(*mismatches, 0u);
}

TEST_F(CpuDriver, AWrongComputeWordIsCounted) {
  ScopedEnv fault("CPU_CUDA_FAULTS", "compute");
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto mismatches = session->compute_mismatches();
  ASSERT_TRUE(mismatches.ok()) << mismatches.error().message;
  EXPECT_EQ(*mismatches, 1u);
}

TEST_F(CpuDriver, MemtestRunsEveryPatternOverTheRequestedShare) {
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto result = session->memtest(MemtestRequest{0.25, 60000, 7});
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->errors, 0u);
  EXPECT_FALSE(result->truncated_by_deadline);
  EXPECT_EQ(result->patterns, (std::vector<std::string>{"walking_ones", "walking_zeros", "own_address",
                                                        "moving_inversions", "moving_inversions_complement",
                                                        "random"}));
  // A quarter of what was free: at most 128 MiB of the 512 MiB (less when earlier tests of this process hold memory).
  EXPECT_GT(result->bytes_tested, 32u << 20);
  EXPECT_LE(result->bytes_tested, 128u << 20);
}

TEST_F(CpuDriver, MemtestReportsAFlippedBitWithItsOffset) {
  ScopedEnv fault("CPU_CUDA_FAULTS", "memtest_flip");
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto result = session->memtest(MemtestRequest{0.0625, 60000, 7});
  ASSERT_TRUE(result.ok()) << result.error().message;
  // One region; the double flips its middle word after each of the five writes. The moving-inversions check
  // rewrites every word with the complement, so its second check finds nothing.
  const std::uint64_t words = result->bytes_tested / 8;
  EXPECT_EQ(result->errors, 5u);
  EXPECT_EQ(result->first_error_offset, (words / 2) * 8);
  EXPECT_EQ(result->expected ^ result->actual, 0x8u);
}

TEST_F(CpuDriver, MemtestStopsAtItsDeadline) {
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto result = session->memtest(MemtestRequest{0.9, 1, 7});
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_TRUE(result->truncated_by_deadline);
  EXPECT_LT(result->patterns.size(), 6u);
}

// ---- bandwidth -------------------------------------------------------------------------------------------------

TEST_F(CpuDriver, HbmBandwidthSamplesAreVerified) {
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto samples = session->hbm_bandwidth(3);
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  EXPECT_EQ(samples->values.size(), 3u);
  for (double v : samples->values) EXPECT_GT(v, 0);
  EXPECT_TRUE(samples->data_verified);
  EXPECT_EQ(samples->unit, "GB/s");
  EXPECT_EQ(samples->engine, "gpuenv");
}

TEST_F(CpuDriver, SiblingComputeInstancesSizeWorkBuffersFromTheirShareButMemtestFromAllFreeMemory) {
  // memory_shared_by 4 (four compute instances of one MIG GPU instance): hbm_bandwidth's buffers are a quarter of a
  // quarter of the 512 MiB, below its 64 MiB minimum, so it says so, naming the share; memtest (run from one compute
  // instance per GPU instance) still takes its fraction of all the free memory.
  CudaSessionOptions o = options();
  o.memory_shared_by = 4;
  auto session = open(o);
  ASSERT_NE(session, nullptr);
  auto hbm = session->hbm_bandwidth(1);
  ASSERT_FALSE(hbm.ok());
  EXPECT_EQ(hbm.error().id, "cuda.out_of_memory");
  EXPECT_NE(hbm.error().message.find("its 1/4 share of the free memory of a MIG GPU instance"), std::string::npos)
      << hbm.error().message;
  auto memtest = session->memtest(MemtestRequest{0.25, 60000, 7});
  ASSERT_TRUE(memtest.ok()) << memtest.error().message;
  EXPECT_GT(memtest->bytes_tested, 64u << 20) << "a quarter of all free memory, not of a quarter of it";
  o.memory_shared_by = 1;
  auto whole = open(o);
  ASSERT_NE(whole, nullptr);
  EXPECT_TRUE(whole->hbm_bandwidth(1).ok()) << "the same session on a whole GPU has room for its buffers";
}

TEST_F(CpuDriver, ACorruptedDeviceCopyIsADataMismatch) {
  ScopedEnv fault("CPU_CUDA_FAULTS", "copy_corrupt");
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto samples = session->hbm_bandwidth(3);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.error().id, "validate.data_mismatch");
}

TEST_F(CpuDriver, HostCopiesBothWaysAreVerified) {
  for (const int numa_node : {-1, 0}) {  // cuMemHostAlloc, then mmap + mbind + cuMemHostRegister
    auto o = options();
    o.numa_node = numa_node;
    auto session = open(o);
    ASSERT_NE(session, nullptr);
    for (const bool to_device : {true, false}) {
      auto samples = session->copy_bandwidth(to_device, 3);
      ASSERT_TRUE(samples.ok()) << samples.error().message;
      EXPECT_EQ(samples->values.size(), 3u);
      EXPECT_TRUE(samples->data_verified);
    }
  }
}

TEST_F(CpuDriver, UnderConfidentialComputingNoForbiddenHostMemoryPathIsTakenAndCopiesAreStillMeasured) {
  ScopedEnv cc("CPU_CUDA_FAULTS", "confidential");
  // A session that maps a spin flag into the GPU cannot open where CC forbids it: that is not the GPU's fault.
  auto plain = gpuenv::validate::open_cuda_session(k_gpu0, options());
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.error().message.find("CUDA_ERROR_NOT_SUPPORTED"), std::string::npos) << plain.error().message;
  auto o = options();
  o.confidential = true;
  o.numa_node = 0;  // no cuMemHostRegister either: host buffers come from cuMemHostAlloc
  auto session = open(o);
  ASSERT_NE(session, nullptr);
  for (const bool to_device : {true, false}) {
    auto samples = session->copy_bandwidth(to_device, 3);
    ASSERT_TRUE(samples.ok()) << samples.error().message;
    EXPECT_EQ(samples->values.size(), 3u);
    EXPECT_TRUE(samples->data_verified);
    for (double v : samples->values) EXPECT_GT(v, 0);
  }
  auto hbm = session->hbm_bandwidth(3);
  ASSERT_TRUE(hbm.ok()) << hbm.error().message;
  EXPECT_TRUE(hbm->data_verified);
  auto mismatches = session->compute_mismatches();
  ASSERT_TRUE(mismatches.ok()) << mismatches.error().message;
  EXPECT_EQ(*mismatches, 0u);
}

TEST_F(CpuDriver, CorruptedHostCopiesAreDataMismatchesBothWays) {
  ScopedEnv fault("CPU_CUDA_FAULTS", "memcpy_corrupt");
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  for (const bool to_device : {true, false}) {
    auto samples = session->copy_bandwidth(to_device, 2);
    ASSERT_FALSE(samples.ok()) << (to_device ? "h2d" : "d2h");
    EXPECT_EQ(samples.error().id, "validate.data_mismatch");
  }
}

// ---- GEMMs -----------------------------------------------------------------------------------------------------

TEST_F(CpuDriver, ConsistencyRunsOnCublasLtWhenItLoads) {
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  const auto before = counter(CPU_CUBLAS_PATH, "cpucublas_lt_matmul_count");
  auto result = session->gemm_consistency(4);
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->engine, "cublasLt");
  EXPECT_EQ(result->library, CPU_CUBLAS_PATH);
  EXPECT_EQ(result->passed_over, "");
  ASSERT_EQ(result->result_digests.size(), 4u);
  EXPECT_EQ(std::set<std::uint64_t>(result->result_digests.begin(), result->result_digests.end()).size(), 1u);
  EXPECT_GE(counter(CPU_CUBLAS_PATH, "cpucublas_lt_matmul_count") - before, 5u);  // a warm-up and four runs
}

TEST_F(CpuDriver, ConsistencyFallsBackToCublasWhenCublasLtCannotStart) {
  ScopedEnv fault("CPU_CUBLAS_FAULTS", "lt_create");
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto result = session->gemm_consistency(3);
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->engine, "cublas");
  EXPECT_EQ(std::set<std::uint64_t>(result->result_digests.begin(), result->result_digests.end()).size(), 1u);
  EXPECT_EQ(result->passed_over,
            std::string(CPU_CUBLAS_PATH) + ": cublasLtCreate failed with CUBLAS_STATUS_ALLOC_FAILED (3)");
}

TEST_F(CpuDriver, ConsistencyTakesFp32OnCublasLtWithoutBf16) {
  ScopedEnv fault("CPU_CUBLAS_FAULTS", "lt_no_bf16");
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto result = session->gemm_consistency(2);
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->engine, "cublasLt");
}

TEST_F(CpuDriver, ConsistencyWithoutAnyBlasUsesTheOwnKernel) {
  auto o = options();
  o.cublaslt_libraries = {};
  o.cublas_libraries = {};
  auto session = open(o);
  ASSERT_NE(session, nullptr);
  auto result = session->gemm_consistency(3);
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->engine, "gpuenv");
  EXPECT_EQ(result->library, "");
  EXPECT_EQ(std::set<std::uint64_t>(result->result_digests.begin(), result->result_digests.end()).size(), 1u);
}

TEST_F(CpuDriver, DriftingGemmsGiveDifferentDigests) {
  ScopedEnv fault("CPU_CUBLAS_FAULTS", "drift");
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto result = session->gemm_consistency(4);
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_GT(std::set<std::uint64_t>(result->result_digests.begin(), result->result_digests.end()).size(), 1u);
}

TEST_F(CpuDriver, TflopsOfEveryTypeAreVerifiedOnCublasLt) {
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  for (const char* dtype : {"bf16", "fp16", "tf32", "fp64"}) {
    auto samples = session->gemm_tflops(dtype, 3);
    ASSERT_TRUE(samples.ok()) << dtype << ": " << samples.error().message;
    ASSERT_TRUE(samples->has_value()) << dtype;
    EXPECT_EQ((*samples)->values.size(), 3u) << dtype;
    EXPECT_TRUE((*samples)->data_verified) << dtype;
    EXPECT_EQ((*samples)->unit, "TFLOPS");
    EXPECT_EQ((*samples)->engine, "cublasLt") << dtype;
    EXPECT_EQ((*samples)->library, CPU_CUBLAS_PATH);
  }
}

TEST_F(CpuDriver, TflopsFallBackToCublasWhenCublasLtRefusesTheMatmul) {
  ScopedEnv fault("CPU_CUBLAS_FAULTS", "lt_matmul_unsupported");
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto samples = session->gemm_tflops("bf16", 2);
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  ASSERT_TRUE(samples->has_value());
  EXPECT_EQ((*samples)->engine, "cublas");
  EXPECT_TRUE((*samples)->data_verified);
  EXPECT_NE((*samples)->passed_over.find("cublasLtMatmul answered CUBLAS_STATUS_NOT_SUPPORTED (15) for bf16"),
            std::string::npos)
      << (*samples)->passed_over;
}

TEST_F(CpuDriver, TflopsFallBackToCublasWhenCublasLtHasNoAlgorithm) {
  ScopedEnv fault("CPU_CUBLAS_FAULTS", "lt_no_algo");
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto samples = session->gemm_tflops("fp16", 2);
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  ASSERT_TRUE(samples->has_value());
  EXPECT_EQ((*samples)->engine, "cublas");
  EXPECT_EQ((*samples)->passed_over, std::string(CPU_CUBLAS_PATH) + ": no fp16 algorithm for this GPU");
}

TEST_F(CpuDriver, GemmLibrariesThatCannotStartAreNamedWithTheirErrors) {
  ScopedEnv fault("CPU_CUBLAS_FAULTS", "lt_create,create");
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto samples = session->gemm_tflops("bf16", 2);
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  EXPECT_FALSE(samples->has_value());
  EXPECT_EQ(session->gemm_library_notes(),
            std::string(CPU_CUBLAS_PATH) + ": cublasLtCreate failed with CUBLAS_STATUS_ALLOC_FAILED (3); " +
                CPU_CUBLAS_PATH + ": cublasCreate_v2 failed with CUBLAS_STATUS_ALLOC_FAILED (3)");
  auto consistency = session->gemm_consistency(2);
  ASSERT_TRUE(consistency.ok()) << consistency.error().message;
  EXPECT_EQ(consistency->engine, "gpuenv");
  EXPECT_NE(consistency->passed_over.find("cublasCreate_v2 failed"), std::string::npos) << consistency->passed_over;
}

TEST_F(CpuDriver, AbsentGemmLibrariesAreNamed) {
  auto o = options();
  o.cublaslt_libraries = {"libcublasLt-absent.so.13"};
  o.cublas_libraries = {"libcublas-absent.so.13"};
  auto session = open(o);
  ASSERT_NE(session, nullptr);
  auto samples = session->gemm_tflops("bf16", 2);
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  EXPECT_FALSE(samples->has_value());
  EXPECT_EQ(session->gemm_library_notes(), "none of libcublasLt-absent.so.13, libcublas-absent.so.13 loads");
}

TEST_F(CpuDriver, TflopsWithoutAnyBlasAreNotMeasured) {
  auto o = options();
  o.cublaslt_libraries = {};
  o.cublas_libraries = {};
  auto session = open(o);
  ASSERT_NE(session, nullptr);
  auto samples = session->gemm_tflops("bf16", 2);
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  EXPECT_FALSE(samples->has_value());
}

TEST_F(CpuDriver, AWrongGemmResultIsADataMismatch) {
  ScopedEnv fault("CPU_CUBLAS_FAULTS", "wrong");
  auto session = open(options());
  ASSERT_NE(session, nullptr);
  auto samples = session->gemm_tflops("bf16", 2);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.error().id, "validate.data_mismatch");
}

// ---- a hung kernel ---------------------------------------------------------------------------------------------

TEST_F(CpuDriver, AHungKernelTimesOutAndBreaksTheSession) {
  ScopedEnv fault("CPU_CUDA_FAULTS", "hang:stream_copy");
  auto o = options();
  o.operation_timeout = 300ms;
  auto session = open(o);
  ASSERT_NE(session, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto samples = session->hbm_bandwidth(3);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.error().id, "cuda.timeout");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  auto later = session->compute_mismatches();
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.error().id, "cuda.broken");
}

// ---- a driver without cuFuncLoad (before CUDA 12.4) and with lazy loading ---------------------------------------

/// The CPU driver's lazy variant, driven directly: a function whose first launch is queued behind a held stream
/// waits for the spin to give up. This is the trap the adapters' unheld warm-ups avoid; the test shows the double
/// springs it.
TEST_F(CpuDriver, LazyDriverStallsAFirstLaunchBehindAHeldStream) {
  void* lib = dlopen(CPU_CUDA_LAZY_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  EXPECT_EQ(dlsym(lib, "cuFuncLoad"), nullptr);
  auto sym = [lib](const char* name) { return dlsym(lib, name); };
  ASSERT_EQ(reinterpret_cast<int (*)(unsigned)>(sym("cuInit"))(0), 0);
  void* ctx = nullptr;
  ASSERT_EQ(reinterpret_cast<int (*)(void**, int)>(sym("cuDevicePrimaryCtxRetain"))(&ctx, 0), 0);
  ASSERT_EQ(reinterpret_cast<int (*)(void*)>(sym("cuCtxSetCurrent"))(ctx), 0);
  void* stream = nullptr;
  ASSERT_EQ(reinterpret_cast<int (*)(void**, unsigned)>(sym("cuStreamCreate"))(&stream, 1), 0);
  void* module = nullptr;
  const auto fatbin = gpuenv::validate::embedded_validation_fatbin();
  ASSERT_EQ(reinterpret_cast<int (*)(void**, const void*)>(sym("cuModuleLoadData"))(&module, fatbin.data), 0);
  void *spin = nullptr, *compute = nullptr;
  auto get = reinterpret_cast<int (*)(void**, void*, const char*)>(sym("cuModuleGetFunction"));
  ASSERT_EQ(get(&spin, module, "spin_wait"), 0);
  ASSERT_EQ(get(&compute, module, "compute_int"), 0);
  void* flags = nullptr;
  ASSERT_EQ(reinterpret_cast<int (*)(void**, std::size_t, unsigned)>(sym("cuMemHostAlloc"))(&flags, 64, 3), 0);
  unsigned long long flag_ptr = 0;
  ASSERT_EQ(reinterpret_cast<int (*)(unsigned long long*, void*, unsigned)>(sym("cuMemHostGetDevicePointer_v2"))(
                &flag_ptr, flags, 0),
            0);
  static_cast<volatile int*>(flags)[0] = 0;
  unsigned long long out = 0;
  ASSERT_EQ(reinterpret_cast<int (*)(unsigned long long*, std::size_t)>(sym("cuMemAlloc_v2"))(&out, 8 * 1024), 0);
  auto launch = reinterpret_cast<int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                         void*, void**, void**)>(sym("cuLaunchKernel"));
  unsigned long long timeout_ns = 300'000'000ull, n = 1024, seed = 1;
  void* spin_args[] = {&flag_ptr, &timeout_ns};
  void* compute_args[] = {&out, &n, &seed};
  const auto stalls_before = counter(CPU_CUDA_LAZY_PATH, "cpucuda_lazy_stalls");
  // The spin is its own first launch: it loads at once (the device is idle), then holds the stream.
  ASSERT_EQ(launch(spin, 1, 1, 1, 1, 1, 1, 0, stream, spin_args, nullptr), 0);
  while (__atomic_load_n(static_cast<int*>(flags) + 1, __ATOMIC_ACQUIRE) == 0 &&
         reinterpret_cast<int (*)(void*)>(sym("cuStreamQuery"))(stream) == 0) {
    std::this_thread::yield();  // until the worker has started the spin (the stream is then busy)
  }
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(launch(compute, 4, 1, 1, 256, 1, 1, 0, stream, compute_args, nullptr), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms) << "the first launch did not wait for the load";
  EXPECT_EQ(__atomic_load_n(static_cast<int*>(flags) + 1, __ATOMIC_ACQUIRE), 1)
      << "the spin gave up: nobody released it";
  EXPECT_EQ(counter(CPU_CUDA_LAZY_PATH, "cpucuda_lazy_stalls") - stalls_before, 1u);
}

TEST_F(CpuDriver, NoHeldMeasurementWaitsForALazyLoad) {
  auto o = options();
  o.library = CPU_CUDA_LAZY_PATH;
  o.cublaslt_libraries = {};  // the CPU cuBLAS runs on the other CPU driver
  o.cublas_libraries = {};
  auto session = open(o);
  ASSERT_NE(session, nullptr);
  // Each call's first launches: none may be a kernel's first launch behind a held stream (the double counts those).
  const auto stalls_before = counter(CPU_CUDA_LAZY_PATH, "cpucuda_lazy_stalls");
  EXPECT_TRUE(session->hbm_bandwidth(3).ok());
  EXPECT_TRUE(session->copy_bandwidth(true, 3).ok());
  EXPECT_TRUE(session->copy_bandwidth(false, 3).ok());
  EXPECT_TRUE(session->compute_mismatches().ok());
  EXPECT_TRUE(session->gemm_consistency(2).ok());
  auto fresh = open(o);
  ASSERT_NE(fresh, nullptr);
  EXPECT_TRUE(fresh->copy_bandwidth(false, 3).ok()) << "d2h first in a session";
  auto mo = multi_options();
  mo.cuda_library = CPU_CUDA_LAZY_PATH;
  EXPECT_TRUE(gpuenv::validate::measure_p2p_bandwidth(mo, k_gpu0, k_gpu1, 3).ok());
  EXPECT_EQ(counter(CPU_CUDA_LAZY_PATH, "cpucuda_lazy_stalls"), stalls_before);
}

// ---- multi-GPU -------------------------------------------------------------------------------------------------

TEST_F(CpuDriver, PeerCopiesAreMeasuredAndVerifiedBothWays) {
  for (const auto& [from, to] : {std::pair{k_gpu0, k_gpu1}, std::pair{k_gpu1, k_gpu0}}) {
    auto samples = gpuenv::validate::measure_p2p_bandwidth(multi_options(), from, to, 3);
    ASSERT_TRUE(samples.ok()) << samples.error().id << ": " << samples.error().message;
    ASSERT_TRUE(samples->has_value());
    EXPECT_EQ((*samples)->values.size(), 3u);
    EXPECT_TRUE((*samples)->data_verified);
    EXPECT_EQ((*samples)->unit, "GB/s");
  }
}

TEST_F(CpuDriver, PeerCopiesWithoutPeerAccessAreNotMeasured) {
  ScopedEnv fault("CPU_CUDA_FAULTS", "no_peer");
  auto samples = gpuenv::validate::measure_p2p_bandwidth(multi_options(), k_gpu0, k_gpu1, 2);
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  EXPECT_FALSE(samples->has_value());
}

TEST_F(CpuDriver, ACorruptedPeerCopyIsADataMismatch) {
  ScopedEnv fault("CPU_CUDA_FAULTS", "peer_corrupt");
  auto samples = gpuenv::validate::measure_p2p_bandwidth(multi_options(), k_gpu0, k_gpu1, 2);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.error().id, "validate.data_mismatch");
}

TEST_F(CpuDriver, NcclAllReduceIsMeasuredAndVerifiedOnOneAndTwoGpus) {
  for (const auto& ids : {std::vector<std::string>{k_gpu0}, std::vector<std::string>{k_gpu0, k_gpu1}}) {
    const auto before = counter(CPU_NCCL_PATH, "cpunccl_allreduce_count");
    auto samples = gpuenv::validate::measure_nccl_allreduce(multi_options(), ids, 3);
    ASSERT_TRUE(samples.ok()) << samples.error().id << ": " << samples.error().message;
    ASSERT_TRUE(samples->has_value());
    EXPECT_EQ((*samples)->values.size(), 3u);
    EXPECT_TRUE((*samples)->data_verified);
    EXPECT_EQ((*samples)->engine, "nccl");
    EXPECT_EQ((*samples)->library, CPU_NCCL_PATH);
    EXPECT_GT(counter(CPU_NCCL_PATH, "cpunccl_allreduce_count"), before);
  }
}

TEST_F(CpuDriver, AWrongAllReduceSumIsADataMismatch) {
  ScopedEnv fault("CPU_NCCL_FAULTS", "corrupt");
  auto samples = gpuenv::validate::measure_nccl_allreduce(multi_options(), {k_gpu0, k_gpu1}, 2);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.error().id, "validate.data_mismatch");
}

TEST_F(CpuDriver, AFailedNcclSetupIsNcclCall) {
  ScopedEnv fault("CPU_NCCL_FAULTS", "init");
  auto samples = gpuenv::validate::measure_nccl_allreduce(multi_options(), {k_gpu0, k_gpu1}, 2);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.error().id, "nccl.call");
}

TEST_F(CpuDriver, AnNcclAsyncErrorIsNcclCall) {
  ScopedEnv fault("CPU_NCCL_FAULTS", "async_error");
  auto samples = gpuenv::validate::measure_nccl_allreduce(multi_options(), {k_gpu0, k_gpu1}, 2);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.error().id, "nccl.call");
  EXPECT_NE(samples.error().message.find("ncclCommGetAsyncError"), std::string::npos) << samples.error().message;
}

TEST_F(CpuDriver, AHungAllReduceTimesOut) {
  ScopedEnv fault("CPU_NCCL_FAULTS", "hang");
  auto o = multi_options();
  o.operation_timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  auto samples = gpuenv::validate::measure_nccl_allreduce(o, {k_gpu0, k_gpu1}, 2);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.error().id, "cuda.timeout");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

// Across processes the CPU NCCL meets over TCP (ncclGetUniqueId + ncclCommInitRank); here two ranks of one run in
// threads of this process, as two nodes would run them (validate/multinode drives them across processes).
gpuenv::validate::NcclRankSpec rank_spec(const std::array<std::uint8_t, 128>& id, int rank,
                                         std::function<gpuenv::Status()> watch = {}) {
  return gpuenv::validate::NcclRankSpec{id, rank, 2, 16u << 20, std::move(watch)};
}

TEST_F(CpuDriver, NcclRanksOfOneRunAllReduceAcrossTheirCommunicators) {
  ScopedEnv root("CPU_NCCL_ROOT_ADDR", "127.0.0.1");
  auto id = gpuenv::validate::nccl_unique_id(multi_options());
  ASSERT_TRUE(id.ok() && id->has_value());
  auto other = std::async(std::launch::async, [&] {
    return gpuenv::validate::measure_nccl_allreduce_ranks(multi_options(), {k_gpu1}, rank_spec(**id, 1), 3);
  });
  auto mine = gpuenv::validate::measure_nccl_allreduce_ranks(multi_options(), {k_gpu0}, rank_spec(**id, 0), 3);
  auto theirs = other.get();
  for (const auto* r : {&mine, &theirs}) {
    ASSERT_TRUE(r->ok()) << r->error().id << ": " << r->error().message;
    ASSERT_TRUE(r->value().has_value());
    EXPECT_EQ(r->value()->values.size(), 3u);
    EXPECT_TRUE(r->value()->data_verified);  // every element checked against the sum over both ranks
  }
}

TEST_F(CpuDriver, AWrongSumAcrossRanksIsADataMismatch) {
  ScopedEnv root("CPU_NCCL_ROOT_ADDR", "127.0.0.1");
  ScopedEnv fault("CPU_NCCL_FAULTS", "corrupt");
  auto id = gpuenv::validate::nccl_unique_id(multi_options());
  ASSERT_TRUE(id.ok() && id->has_value());
  auto other = std::async(std::launch::async, [&] {
    return gpuenv::validate::measure_nccl_allreduce_ranks(multi_options(), {k_gpu1}, rank_spec(**id, 1), 2);
  });
  auto mine = gpuenv::validate::measure_nccl_allreduce_ranks(multi_options(), {k_gpu0}, rank_spec(**id, 0), 2);
  auto theirs = other.get();
  ASSERT_FALSE(theirs.ok());  // rank 1's result is the corrupted one
  EXPECT_EQ(theirs.error().id, "validate.data_mismatch");
}

TEST_F(CpuDriver, TheWatchEndsARankWhosePeerNeverCame) {
  ScopedEnv root("CPU_NCCL_ROOT_ADDR", "127.0.0.1");
  auto id = gpuenv::validate::nccl_unique_id(multi_options());
  ASSERT_TRUE(id.ok() && id->has_value());
  const auto start = std::chrono::steady_clock::now();
  auto watch = [start]() -> gpuenv::Status {
    if (std::chrono::steady_clock::now() - start < 300ms) return gpuenv::ok_status();
    return gpuenv::make_error(gpuenv::ErrorKind::environment, "multinode.peer_lost", "rank 1 (node02) died");
  };
  // Rank 1 never runs: rank 0's all-reduce waits for it until the watch says it is gone.
  auto alone = gpuenv::validate::measure_nccl_allreduce_ranks(multi_options(), {k_gpu0}, rank_spec(**id, 0, watch), 2);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.error().id, "multinode.peer_lost");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(CpuDriver, AnInitLeftBehindKeepsItsContexts) {
  ScopedEnv root("CPU_NCCL_ROOT_ADDR", "127.0.0.1");
  ScopedEnv fault("CPU_NCCL_FAULTS", "init_hang");
  auto id = gpuenv::validate::nccl_unique_id(multi_options());
  ASSERT_TRUE(id.ok() && id->has_value());
  // Warm: the adapter keeps one reference per device for the process (keep_primary_context) on first use.
  ASSERT_TRUE(gpuenv::validate::measure_nccl_allreduce(multi_options(), {k_gpu0}, 1).ok());
  const auto before = counter(CPU_CUDA_PATH, "cpucuda_primary_retained");
  const auto start = std::chrono::steady_clock::now();
  auto watch = [start]() -> gpuenv::Status {
    if (std::chrono::steady_clock::now() - start < 200ms) return gpuenv::ok_status();
    return gpuenv::make_error(gpuenv::ErrorKind::environment, "multinode.peer_lost", "rank 1 (node02) died");
  };
  // ncclCommInitRank is still running on its thread when the watch ends the wait: the run's context reference must
  // not be released under it.
  auto r = gpuenv::validate::measure_nccl_allreduce_ranks(multi_options(), {k_gpu0}, rank_spec(**id, 0, watch), 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "multinode.peer_lost");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);  // not waiting for the init
  EXPECT_EQ(counter(CPU_CUDA_PATH, "cpucuda_primary_retained"), before + 1);
  std::this_thread::sleep_for(3200ms);  // the init ends before the next test changes the faults
}

}  // namespace
