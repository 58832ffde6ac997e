#pragma once
// The real GpuBackend: NVML (dlopen of libnvidia-ml.so.1) for inventory, driver state and health counters, procfs,
// sysfs and /dev for what NVML does not say, and an injected factory for CUDA sessions (the CLI wires
// validate/adapters/cuda_session.hpp into it). Read-only: it calls NVML getters only, never a Set*, Reset* or
// Clear* function. A machine without the driver is an answer (DriverState::loaded = false), not an error.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "validate/backend.hpp"

namespace gpuenv::validate {

/// The GPU a session is made for, as the backend knows it.
struct SessionTarget {
  std::string pci_bus_id;  ///< "00000000:19:00.0"
  int numa_node = -1;      ///< the GPU's NUMA node from sysfs; -1 unknown (pinned host memory is then not placed)
  bool confidential = false;  ///< NVML reports confidential computing on (or dev-tools): CudaSessionOptions::confidential
  /// For a MIG device: the compute instances of its GPU instance (the backend's MIG devices), which share that GPU
  /// instance's memory and may all run at once: CudaSessionOptions::memory_shared_by. 1 for a whole GPU.
  int memory_shared_by = 1;
  /// Reads that GPU's health through NVML (GpuSession::health() returns it, also while kernels run).
  std::function<Result<GpuHealth>()> health_reader;
};

/// Makes a CUDA session on a GPU. Fails with the CUDA error when no context can be made.
using SessionFactory = std::function<Result<std::unique_ptr<GpuSession>>(SessionTarget target)>;

/// Measures peer-to-peer copy bandwidth from the GPU at `src_bus_id` to the one at `dst_bus_id` (GpuBackend::p2p_bandwidth
/// with NVML's bus ids). Empty when peer access is not possible.
using P2pMeasure = std::function<Result<std::optional<Samples>>(const std::string& src_bus_id,
                                                                const std::string& dst_bus_id, int samples)>;

/// Measures NCCL all-reduce bus bandwidth across the GPUs at `bus_ids` (GpuBackend::nccl_allreduce with NVML's bus
/// ids). Empty when NCCL is not present.
using NcclMeasure = std::function<Result<std::optional<Samples>>(const std::vector<std::string>& bus_ids, int samples)>;

/// Where the real backend finds its libraries and host files; every path can point at a test fixture.
struct RealBackendOptions {
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string cuda_library = "libcuda.so.1";
  std::chrono::milliseconds cuinit_timeout{15000};  ///< the child-process cuInit is killed after this
  std::string proc_root = "/proc";                   ///< modules, driver/nvidia*, <pid>/comm
  std::string dev_root = "/dev";                     ///< nvidiactl, nvidia-uvm, nvidiaN, nvidia-nvswitchN
  std::string sys_root = "/sys";                     ///< bus/pci/devices/<address>/numa_node
  SessionFactory session_factory;                    ///< empty: open() fails ("built without the CUDA session")
  P2pMeasure p2p_measure;                            ///< empty: p2p_bandwidth is not measured (empty answer)
  NcclMeasure nccl_measure;                          ///< empty: nccl_allreduce is not measured (empty answer)
  /// The process's CUDA_VISIBLE_DEVICES as the CLI read it: open_mig() opens the MIG device it names first in this
  /// process (CUDA then enumerates that instance alone); every other instance through a child process that
  /// prepare() forked for it (validate/adapters/mig_child.hpp), or, without one, `validate.mig_not_visible`.
  std::string cuda_visible_devices;
};

/// The NVML + CUDA backend ("nvml+cuda"). mig_devices() reads NVML's MIG handles; prepare() forks one child per MIG
/// device it returned (except the one CUDA_VISIBLE_DEVICES names), which open_mig() then forwards sessions to.
/// Construction never fails; NVML is loaded on first use. p2p_bandwidth and nccl_allreduce map the GPU indices to
/// NVML's PCI bus ids, run the child-process cuInit probe, then call the injected p2p_measure / nccl_measure (validate/adapters/multi_gpu.hpp in the CLI); without one they return an
/// empty optional, so those checks SKIP. They fail like open() for an unknown GPU or a driver that does not answer,
/// and with `validate.multi_gpu` when the injected function throws.
std::unique_ptr<GpuBackend> make_real_backend(const RealBackendOptions& options);

/// Whether the text of /proc/modules lists the nouveau module. Never fails.
bool proc_modules_list_nouveau(std::string_view proc_modules_text);

/// The sysfs name of a PCI device from NVML's bus id: "00000000:3B:00.0" -> "0000:3b:00.0" (domain printed with at
/// least 4 hex digits, lower case, as Linux names /sys/bus/pci/devices entries). Empty when the id is malformed.
std::string sysfs_pci_address(std::string_view nvml_bus_id);

/// Whether a /proc/<pid>/comm text names NVIDIA's fabric manager (comm is truncated to 15 characters:
/// "nv-fabricmanage"). Never fails.
bool comm_is_fabric_manager(std::string_view comm_text);

}  // namespace gpuenv::validate
