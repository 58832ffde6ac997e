#include "validate/host_probe.hpp"

#include <gtest/gtest.h>

#include "fakes/fake_probe.hpp"

namespace {

using gpuenv::make_error;
using gpuenv::testing::FakeProbe;
using Answer = gpuenv::Result<std::optional<gpuenv::resolver::HostFacts>>;

TEST(DetectHost, FirstProbeWithADriverWins) {
  FakeProbe nvml("nvml", Answer(std::optional(gpuenv::testing::nvml_facts("550.54.15", "NVIDIA H100", "0x2330", 90, 1))));
  FakeProbe procfs("procfs", Answer(std::optional<gpuenv::resolver::HostFacts>{}));
  auto f = gpuenv::validate::detect_host({&nvml, &procfs});
  EXPECT_EQ(f.source, "nvml");
  EXPECT_EQ(f.driver->str(), "550.54.15");
  EXPECT_EQ(procfs.calls, 0);
}

TEST(DetectHost, FailuresBecomeNotesAndTheNextProbeIsTried) {
  FakeProbe nvml("nvml", Answer(make_error(gpuenv::ErrorKind::environment, "x", "nvmlInit failed: Driver Not Loaded")));
  gpuenv::resolver::HostFacts cuda;
  cuda.source = "libcuda";
  cuda.gpus.push_back({0, "NVIDIA L4", "", "", 89, 0});
  FakeProbe libcuda("libcuda", Answer(std::optional(cuda)));
  gpuenv::resolver::HostFacts proc;
  proc.source = "procfs";
  proc.driver = *gpuenv::resolver::Version::parse("535.183.01");
  FakeProbe procfs("procfs", Answer(std::optional(proc)));
  auto f = gpuenv::validate::detect_host({&nvml, &libcuda, &procfs});
  EXPECT_EQ(f.source, "libcuda+procfs");  // GPUs from libcuda, driver version from procfs
  EXPECT_EQ(f.driver->str(), "535.183.01");
  ASSERT_EQ(f.gpus.size(), 1u);
  ASSERT_FALSE(f.notes.empty());
  EXPECT_NE(f.notes[0].find("nvmlInit failed"), std::string::npos);
}

TEST(DetectHost, NothingFoundMeansNoDriver) {
  FakeProbe a("nvml", Answer(std::optional<gpuenv::resolver::HostFacts>{}));
  auto f = gpuenv::validate::detect_host({&a});
  EXPECT_FALSE(f.driver.has_value());
  EXPECT_EQ(f.source, "none");
  EXPECT_EQ(f.notes.back(), "no NVIDIA driver found");
}

TEST(ProcDriverVersion, ParsesProprietaryAndOpenModules) {
  EXPECT_EQ(gpuenv::validate::parse_proc_driver_version(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\nGCC version:  gcc 12\n")
                ->str(),
            "535.183.01");
  EXPECT_EQ(gpuenv::validate::parse_proc_driver_version(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Jan 23\n")
                ->str(),
            "570.86.15");
  EXPECT_FALSE(gpuenv::validate::parse_proc_driver_version("garbage\n").has_value());
  EXPECT_FALSE(gpuenv::validate::parse_proc_driver_version("").has_value());
}

}  // namespace
