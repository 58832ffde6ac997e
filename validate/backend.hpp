#pragma once
// The GPU backend port: everything a validation check may ask of the machine. The real adapter answers from NVML
// and the CUDA driver API (dlopen only); the replay adapter answers from a recorded inventory and a scenario.
// The port returns raw readings and measurements; judging them (thresholds, PASS/FAIL) is the checks' job, so the
// same judgement code runs on both adapters.
//
// Conventions: std::optional empty = "this driver or GPU cannot tell us" (the check then SKIPs with a reason);
// an Error = the source exists but failed. Every method is read-only: no method changes clocks, power limits,
// ECC, MIG or persistence, or resets a GPU.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::validate {

/// The host's driver as a whole.
struct DriverState {
  bool loaded = false;               ///< an NVIDIA kernel driver answers (NVML init or /proc/driver/nvidia)
  std::string version;               ///< "550.54.15"; empty when not loaded
  int cuda_driver_version = 0;       ///< cuDriverGetVersion(): 12040 for 12.4; 0 unknown
  bool nouveau_loaded = false;       ///< /proc/modules lists nouveau
  std::optional<bool> fabric_manager_running;  ///< only asked on NVSwitch systems; empty = unknown
  bool nvswitch_present = false;     ///< NVSwitch devices (fabric manager needed)
  std::vector<std::string> device_nodes_missing;  ///< of /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidiaN
  std::string cc_state = "unknown";  ///< confidential computing: on | off | devtools | unknown
  /// With confidential computing on: whether the GPUs accept work (the ready state an attestation flow sets with
  /// nvmlSystemSetConfComputeGpusReadyState, which gpuenv never calls). Empty = not reported.
  std::optional<bool> cc_gpus_ready;
  /// nvmlSystemGetConfComputeState's environment: production | simulation | unknown.
  std::string cc_environment = "unknown";
};

/// One GPU's confidential-computing evidence (nvmlDeviceGetConfComputeGpuAttestationReport and
/// nvmlDeviceGetConfComputeGpuCertificate), and NVML's own view of its firmware to compare the report with.
struct CcEvidence {
  std::string report;           ///< the attestation report bytes (SPDM request and response)
  std::string cert_chain;       ///< the attestation certificate chain, PEM, leaf first
  std::string nonce;            ///< the 32 bytes the request carried (a replay: the recorded ones)
  std::string vbios_version;    ///< nvmlDeviceGetVbiosVersion ("96.00.9F.00.04"); empty when unknown
};

/// PCIe link: current and maximum generation and width.
struct PcieLink {
  int current_gen = 0, max_gen = 0, current_width = 0, max_width = 0;
};

/// Row remapping (Ampere and later), nvmlDeviceGetRemappedRows.
struct RowRemap {
  std::uint64_t corrected_rows = 0, uncorrected_rows = 0;
  bool pending = false, failure = false;
};

/// Retired pages (before Ampere), nvmlDeviceGetRetiredPages and ..._PendingStatus.
struct RetiredPages {
  std::uint64_t single_bit = 0, double_bit = 0;
  bool pending = false;
};

/// Health counters and state read through NVML. Each field empty when unsupported.
struct GpuHealth {
  std::optional<bool> ecc_enabled;
  std::optional<bool> ecc_pending_change;              ///< current != pending ECC mode
  std::optional<std::uint64_t> ecc_volatile_uncorrected, ecc_volatile_corrected, ecc_aggregate_uncorrected;
  std::optional<RowRemap> row_remap;
  std::optional<RetiredPages> retired_pages;
  std::optional<PcieLink> pcie_link;
  std::optional<std::uint64_t> pcie_replays;
  std::optional<std::uint64_t> clock_event_reasons;    ///< nvmlClocksEventReason* bit mask
  std::optional<int> temperature_c;
  std::optional<int> slowdown_temperature_c;           ///< NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
  std::optional<double> power_w, power_limit_w;
  std::optional<bool> persistence_mode;
  std::optional<bool> mig_enabled;                     ///< current MIG mode
  std::optional<bool> mig_pending_change;
};

/// NVML's clock event reason bits (nvml.h nvmlClocksEventReason*) used by the checks.
inline constexpr std::uint64_t k_clock_event_sw_power_cap = 0x4;
inline constexpr std::uint64_t k_clock_event_hw_slowdown = 0x8;
inline constexpr std::uint64_t k_clock_event_sw_thermal = 0x20;
inline constexpr std::uint64_t k_clock_event_hw_thermal = 0x40;
inline constexpr std::uint64_t k_clock_event_hw_power_brake = 0x80;

/// One MIG device of a GPU with MIG on: a compute instance inside a GPU instance, as NVML enumerates it
/// (nvmlDeviceGetMigDeviceHandleByIndex). gpuenv only reads the layout; it never creates or destroys instances.
struct MigDevice {
  std::string uuid;                  ///< "MIG-<8-4-4-4-12 hex>" (what CUDA_VISIBLE_DEVICES takes)
  int parent = 0;                    ///< the GPU's index
  int index = 0;                     ///< NVML's MIG device index on that GPU (0 .. nvmlDeviceGetMaxMigDeviceCount-1)
  int gpu_instance_id = 0;           ///< nvmlDeviceGetGpuInstanceId
  int compute_instance_id = 0;       ///< nvmlDeviceGetComputeInstanceId
  std::string profile;               ///< "1g.10gb", "3g.40gb" (the name NVML gives after "MIG ")
  std::uint64_t memory_bytes = 0;    ///< the instance's memory (nvmlDeviceGetMemoryInfo on the MIG handle)
  std::uint64_t parent_memory_bytes = 0;  ///< the whole GPU's memory (the share of memory slices is taken from both)
  int sm_count = 0;                  ///< multiprocessorCount (nvmlDeviceGetAttributes_v2); 0 unknown
  int gpu_instance_slices = 0;       ///< gpuInstanceSliceCount: compute slices of its GPU instance (of 7)
};

/// One GPU as enumerated (NVML order = nvidia-smi order).
struct GpuInfo {
  int index = 0;
  std::string uuid;
  std::string name;              ///< "NVIDIA H200"
  std::string pci_bus_id;        ///< "00000000:19:00.0"
  std::uint32_t pci_device_id = 0;  ///< PCI device id, 0x2335 for H200 SXM (the high 16 bits of NVML's pciDeviceId)
  int cc_major = 0, cc_minor = 0;
  std::uint64_t memory_total_bytes = 0;
  int numa_node = -1;
  int nvlink_links_active = 0;   ///< active NVLink links; 0 when none or unknown
  /// Set when this entry stands for one MIG device of the GPU (the runner makes one per instance for the checks
  /// that run per instance; memory_total_bytes is then the instance's). Empty for a whole GPU.
  std::optional<MigDevice> mig;
};

/// What a GPU memory test found.
struct MemtestResult {
  std::uint64_t bytes_tested = 0;
  std::uint64_t errors = 0;          ///< words that read back differently
  std::uint64_t first_error_offset = 0;
  std::uint64_t expected = 0, actual = 0;  ///< the first bad word
  std::vector<std::string> patterns; ///< the patterns that ran ("walking_ones", "own_address", ...)
  bool truncated_by_deadline = false;
};

/// Repeated runs of the same computation: the result digests must all be equal.
struct ConsistencyResult {
  std::vector<std::uint64_t> result_digests;  ///< one per repetition
  std::uint64_t reference_digest = 0;         ///< the host reference, 0 when none is computed
  bool has_reference = false;
  std::string engine;                          ///< "cublasLt", "cublas", "gpuenv"
  std::string library;                         ///< the library file the engine came from; empty for gpuenv's kernels
  /// Why preferred GEMM libraries were passed over for `engine` ("libcublasLt.so.13: cublasLtCreate failed with
  /// CUBLAS_STATUS_NOT_INITIALIZED (1)"); empty when the first choice ran or none was present.
  std::string passed_over;
};

/// Timed samples of one measurement, each already verified (data checked after every sample).
struct Samples {
  std::vector<double> values;  ///< in `unit`
  std::string unit;            ///< "GB/s" or "TFLOPS"
  std::string engine;          ///< what produced it ("gpuenv", "cublasLt", "nccl")
  bool data_verified = false;  ///< the moved or computed data was checked after each sample
  std::string library;         ///< the library file the engine came from ("" for gpuenv's kernels)
  std::string passed_over;     ///< why preferred libraries were passed over (ConsistencyResult::passed_over)
};

/// Work size for memory tests and timed measurements.
struct MemtestRequest {
  double fraction_of_free = 0.9;
  int deadline_ms = 10000;
  std::uint64_t seed = 1;
};

/// Per-GPU operations that need a context. Each call must return within its deadline or report an Error; the
/// runner's watchdog still guards against adapters that cannot.
class GpuSession {
 public:
  virtual ~GpuSession() = default;
  /// Integer and floating-point kernels compared with the host reference. Returns the number of mismatches.
  virtual Result<std::uint64_t> compute_mismatches() = 0;
  virtual Result<MemtestResult> memtest(const MemtestRequest& request) = 0;
  /// GEMMs repeated `repetitions` times on the same inputs.
  virtual Result<ConsistencyResult> gemm_consistency(int repetitions) = 0;
  /// Device memory read + written per second (STREAM copy), GB/s (1e9).
  virtual Result<Samples> hbm_bandwidth(int samples) = 0;
  /// Host-to-device (`to_device`) or device-to-host copy-engine bandwidth with pinned memory, GB/s.
  virtual Result<Samples> copy_bandwidth(bool to_device, int samples) = 0;
  /// Dense GEMM throughput for "bf16", "fp16", "tf32" or "fp64", TFLOPS. Empty when the type is not supported.
  virtual Result<std::optional<Samples>> gemm_tflops(const std::string& dtype, int samples) = 0;
  /// Reads health counters now (call again under load to see links and clocks under load).
  virtual Result<GpuHealth> health() = 0;
  /// What the session found of the GEMM libraries so far, when it could not use the ones it prefers: why each that
  /// loaded was passed over ("libcublasLt.so.13: cublasLtCreate failed with ..."), or that none loads. Empty when
  /// the first choice ran or no GEMM library was looked for yet. For the messages of checks that measured no GEMM.
  virtual std::string gemm_library_notes() { return {}; }
};

/// The backend: inventory, driver state and sessions.
class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  /// "nvml+cuda" for the real adapter, "replay" for recorded answers. Reports print it.
  [[nodiscard]] virtual std::string name() const = 0;
  virtual Result<DriverState> driver() = 0;
  /// Work that must happen before checks run on worker threads: the real adapter runs its child-process cuInit
  /// probe here, since fork() is only safe while the process has a single thread. The runner calls it once, on its
  /// own thread, before the first GPU check; open() reports a failure again. The default does nothing.
  virtual gpuenv::Status prepare() { return ok_status(); }
  /// The GPUs; empty when there are none or no driver.
  virtual Result<std::vector<GpuInfo>> gpus() = 0;
  virtual Result<GpuHealth> health(int gpu) = 0;
  /// Creates a context on `gpu` (the first cuInit is run in a child process with a timeout first).
  virtual Result<std::unique_ptr<GpuSession>> open(int gpu) = 0;
  /// The MIG devices of `gpu` (NVML's MIG handles), in NVML's order; empty when MIG is off, no instance exists, or
  /// the backend cannot tell. Read only. The default knows none.
  virtual Result<std::vector<MigDevice>> mig_devices(int gpu) {
    (void)gpu;
    return std::vector<MigDevice>{};
  }
  /// Creates a context on one MIG device (CUDA sees it as a device of its own, by its UUID). Errors as open(); the
  /// id `validate.mig_not_visible` means the backend cannot reach that instance (CUDA enumerates one MIG device per
  /// process), which the checks report as SKIP with the way to reach it. The default refuses.
  virtual Result<std::unique_ptr<GpuSession>> open_mig(const MigDevice& device) {
    return make_error(ErrorKind::environment, "validate.mig_not_visible",
                      "the " + name() + " backend cannot open MIG device " + device.uuid, device.uuid,
                      "run gpuenv with CUDA_VISIBLE_DEVICES=" + device.uuid);
  }
  /// Peer-to-peer copy bandwidth from `src` to `dst`, GB/s; empty when peer access is not possible.
  virtual Result<std::optional<Samples>> p2p_bandwidth(int src, int dst, int samples) = 0;
  /// NCCL all-reduce bus bandwidth across `gpus`, GB/s; empty when NCCL is not present.
  virtual Result<std::optional<Samples>> nccl_allreduce(const std::vector<int>& gpus, int samples) = 0;
  /// GPU `gpu`'s CC evidence for NONCE (32 bytes); empty when the driver or GPU offers none (CC off, no such NVML
  /// function). The default offers none.
  virtual Result<std::optional<CcEvidence>> cc_evidence(int gpu, const std::string& nonce) {
    (void)gpu;
    (void)nonce;
    return std::optional<CcEvidence>();
  }
  /// The one write of the port, only ever called by `gpuenv attest --set-ready` after every GPU passed:
  /// nvmlSystemSetConfComputeGpusReadyState(1), after which the GPUs accept CUDA work. The default refuses.
  virtual gpuenv::Status set_cc_gpus_ready() {
    return make_error(ErrorKind::environment, "attest.cannot_set_ready", "this backend cannot set the confidential-computing ready state", name(), "");
  }
};

}  // namespace gpuenv::validate
