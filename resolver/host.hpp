#pragma once
// Facts about the machine gpuenv runs on: driver, GPUs, confidential-computing state. Pure data.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "resolver/version.hpp"

namespace gpuenv::resolver {

struct HostGpu {
  int index = 0;
  std::string name;           ///< as the driver reports it ("NVIDIA H100 80GB HBM3")
  std::string uuid;
  std::string pci_device_id;  ///< "0x2330"
  int sm = 0;                 ///< 0 when unknown
  std::uint64_t memory_bytes = 0;
};

struct HostFacts {
  std::optional<Version> driver;       ///< kernel driver version; empty = no NVIDIA driver
  std::optional<Version> driver_cuda;  ///< newest CUDA the driver supports (12.4)
  std::vector<HostGpu> gpus;
  std::string cc_state = "unknown";    ///< on | off | devtools | unknown
  std::string source = "none";         ///< nvml | libcuda | procfs | override | none
  std::vector<std::string> notes;      ///< what each probe found or why it was skipped
};

}  // namespace gpuenv::resolver
