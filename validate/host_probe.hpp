#pragma once
// The port through which gpuenv learns the host's driver and GPUs, and the order in which probes are tried.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "resolver/host.hpp"

namespace gpuenv::validate {

/// One way to learn host facts (NVML, the CUDA driver, procfs). Returns std::nullopt when its source is absent
/// (library not installed, file missing): that is an answer, not an error. An Error means the source exists
/// but failed (NVML init error, a hung cuInit).
class HostProbe {
 public:
  virtual ~HostProbe() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  virtual Result<std::optional<resolver::HostFacts>> probe() = 0;
};

/// Tries probes in order and returns the first facts found; failures and absences become notes.
/// With no facts from any probe, the answer is "no NVIDIA driver" (driver empty, source "none").
resolver::HostFacts detect_host(const std::vector<HostProbe*>& probes);

/// Parses the text of /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15 ...").
std::optional<resolver::Version> parse_proc_driver_version(std::string_view text);

/// NVML through dlopen("libnvidia-ml.so.1"). `library` may name another file (tests).
std::unique_ptr<HostProbe> make_nvml_probe(std::string library = "libnvidia-ml.so.1");
/// The CUDA driver API through dlopen("libcuda.so.1"), run in a child process killed after `timeout`.
std::unique_ptr<HostProbe> make_cuda_driver_probe(std::chrono::milliseconds timeout, std::string library = "libcuda.so.1");
/// Reads a /proc/driver/nvidia/version style file.
std::unique_ptr<HostProbe> make_procfs_probe(std::string path = "/proc/driver/nvidia/version");

}  // namespace gpuenv::validate
