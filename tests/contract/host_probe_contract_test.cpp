// Contract tests of the real host adapters: the dlopen NVML and libcuda probes against test doubles of the
// libraries, the real library names on this machine, and the procfs reader against temporary files.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "validate/host_probe.hpp"

namespace {

using namespace std::chrono_literals;

/// An ELF file's e_machine (little-endian; 0 when unreadable).
std::uint16_t elf_machine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char header[20] = {};
  if (!in.read(reinterpret_cast<char*>(header), sizeof header)) return 0;
  return static_cast<std::uint16_t>(header[18] | header[19] << 8);
}

TEST(NvmlProbe, ReadsDriverGpusAndCcStateThroughDlopen) {
  auto probe = gpuenv::validate::make_nvml_probe(FAKE_NVML_PATH);
  auto r = probe->probe();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_TRUE(r->has_value());
  const auto& f = **r;
  EXPECT_EQ(f.source, "nvml");
  EXPECT_EQ(f.driver->str(), "550.54.15");
  EXPECT_EQ(f.driver_cuda->str(), "12.4");
  EXPECT_EQ(f.cc_state, "on");
  ASSERT_EQ(f.gpus.size(), 2u);
  EXPECT_EQ(f.gpus[1].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(f.gpus[1].pci_device_id, "0x2330");
  EXPECT_EQ(f.gpus[1].sm, 90);
  EXPECT_EQ(f.gpus[1].uuid, "GPU-66666666-7777-8888-9999-000000000000");
  EXPECT_EQ(f.gpus[1].memory_bytes, 85520809984ull);
}

TEST(NvmlProbe, MissingLibraryMeansAbsent) {
  auto r = gpuenv::validate::make_nvml_probe("libnvidia-ml-not-here.so.1")->probe();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(NvmlProbe, LibraryWithoutNvmlSymbolsIsAnError) {
  auto r = gpuenv::validate::make_nvml_probe(FAKE_CUDA_OK_PATH)->probe();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "detect.nvml_symbols");
}

TEST(CudaDriverProbe, ReadsVersionAndGpusInAChildProcess) {
  auto r = gpuenv::validate::make_cuda_driver_probe(5000ms, FAKE_CUDA_OK_PATH)->probe();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->driver_cuda->str(), "12.4");
  ASSERT_EQ((*r)->gpus.size(), 1u);
  EXPECT_EQ((*r)->gpus[0].name, "NVIDIA L4");
  EXPECT_EQ((*r)->gpus[0].sm, 89);
}

TEST(CudaDriverProbe, HungCuInitTimesOutInsteadOfHanging) {
  const auto start = std::chrono::steady_clock::now();
  auto r = gpuenv::validate::make_cuda_driver_probe(300ms, FAKE_CUDA_HANG_PATH)->probe();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "detect.cuinit_timeout");
  EXPECT_LT(took, 5s);
}

TEST(CudaDriverProbe, ToolkitStubLibraryReportsTheDriverFailure) {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  // An x86-64 toolkit's stub cannot be loaded by an arm64 build of these tests (under qemu-user, docs/arm64.md).
  if (elf_machine(stub) != elf_machine("/proc/self/exe")) GTEST_SKIP() << "the CUDA toolkit stub at " << stub << " is for another machine";
  auto r = gpuenv::validate::make_cuda_driver_probe(5000ms, stub)->probe();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "detect.cuinit");
}

TEST(CudaDriverProbe, MissingLibraryMeansAbsent) {
  auto r = gpuenv::validate::make_cuda_driver_probe(5000ms, "libcuda-not-here.so.1")->probe();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(ProcfsProbe, ReadsTheVersionFile) {
  const auto p = std::filesystem::temp_directory_path() / ("gpuenv-nvrm-" + std::to_string(::getpid()));
  std::ofstream(p) << "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:55 UTC 2024\n";
  auto r = gpuenv::validate::make_procfs_probe(p.string())->probe();
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->driver->str(), "550.54.15");
  std::ofstream(p) << "something else\n";
  EXPECT_FALSE(gpuenv::validate::make_procfs_probe(p.string())->probe().ok());
  std::filesystem::remove(p);
  auto absent = gpuenv::validate::make_procfs_probe(p.string())->probe();
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_value());
}

}  // namespace
