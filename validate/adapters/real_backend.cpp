// The real GpuBackend: NVML through dlopen, procfs, sysfs and /dev for what NVML does not tell, and CUDA sessions
// from an injected factory once a cuInit in a child process has shown that the driver answers.
//
// Read-only by construction: this file looks up NVML getters only. It never resolves, let alone calls, any Set*,
// Reset* or Clear* function (nor nvmlDeviceModifyDrainState or nvmlDeviceRemoveGpu), so validating a machine
// cannot change clocks, power limits, ECC, MIG or persistence, or reset a GPU. The contract test
// (tests/contract/real_backend_contract_test.cpp) checks that the fake library's writers are never called.
#include "validate/adapters/real_backend.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "validate/adapters/mig_child.hpp"
#include "validate/host_probe.hpp"

namespace gpuenv::validate {
namespace {

namespace fs = std::filesystem;

// ---- NVML declarations ------------------------------------------------------------------------------------------
// Declared here instead of including nvml.h, so gpuenv builds without the CUDA toolkit. Values and layouts are those
// of NVIDIA's public nvml.h (NVML API version 13) as vendored in github.com/NVIDIA/go-nvml, gen/nvml/nvml.h at
// commit 2f9e261fe40a7a1c54783d66805e8920564763b4; the line numbers below refer to that file. Enums are passed as
// int, which is how the C ABI passes them.

using NvmlReturn = int;                   // nvmlReturn_t, l.1295
using NvmlDevice = struct NvmlDeviceSt*;  // nvmlDevice_t, l.158 (opaque)
using NvmlEnableState = int;              // nvmlEnableState_t, l.884

constexpr NvmlReturn k_nvml_success = 0;                           // NVML_SUCCESS
constexpr NvmlReturn k_nvml_error_invalid_argument = 2;            // NVML_ERROR_INVALID_ARGUMENT
constexpr NvmlReturn k_nvml_error_not_supported = 3;               // NVML_ERROR_NOT_SUPPORTED
constexpr NvmlReturn k_nvml_error_not_found = 6;                   // NVML_ERROR_NOT_FOUND
constexpr NvmlReturn k_nvml_error_insufficient_size = 7;           // NVML_ERROR_INSUFFICIENT_SIZE
constexpr NvmlReturn k_nvml_error_driver_not_loaded = 9;           // NVML_ERROR_DRIVER_NOT_LOADED
constexpr NvmlReturn k_nvml_error_gpu_is_lost = 15;                // NVML_ERROR_GPU_IS_LOST
constexpr NvmlReturn k_nvml_error_reset_required = 16;             // NVML_ERROR_RESET_REQUIRED
constexpr NvmlReturn k_nvml_error_argument_version_mismatch = 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH

constexpr NvmlEnableState k_nvml_feature_enabled = 1;  // NVML_FEATURE_ENABLED, l.887
constexpr int k_memory_error_corrected = 0;            // NVML_MEMORY_ERROR_TYPE_CORRECTED, l.1065
constexpr int k_memory_error_uncorrected = 1;          // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int k_volatile_ecc = 0;                      // NVML_VOLATILE_ECC, l.1095
constexpr int k_aggregate_ecc = 1;                     // NVML_AGGREGATE_ECC
constexpr int k_temperature_gpu = 0;                   // NVML_TEMPERATURE_GPU, l.962
constexpr int k_temperature_threshold_slowdown = 1;    // NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, l.937
constexpr int k_retired_multiple_single_bit = 0;       // NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, l.1353
constexpr int k_retired_double_bit = 1;                // NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
constexpr unsigned k_mig_enable = 1;                   // NVML_DEVICE_MIG_ENABLE, l.12488
constexpr unsigned k_nvlink_max_links = 36;            // NVML_NVLINK_MAX_LINKS, l.455 (18 before NVML 13)
constexpr unsigned char k_fabric_state_not_supported = 0;  // NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, l.3800
constexpr unsigned char k_fabric_state_completed = 3;      // NVML_GPU_FABRIC_STATE_COMPLETED
constexpr unsigned k_nvml_text_buffer = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE (>= 80
                                             // of NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE), l.4080-4105

struct NvmlPciInfo {  // nvmlPciInfo_t, l.196, as filled by nvmlDeviceGetPciInfo_v3
  char busIdLegacy[16];
  unsigned int domain, bus, device;
  unsigned int pciDeviceId;  // device id << 16 | vendor id
  unsigned int pciSubSystemId;
  char busId[32];
};
struct NvmlMemory {  // nvmlMemory_t, l.255
  unsigned long long total, free, used;
};
// nvmlDeviceAttributes_t (nvmlDeviceGetAttributes_v2, which NVML supports on MIG device handles only):
// https://docs.nvidia.com/deploy/nvml-api/api/structnvmlDeviceAttributes__t.html
struct NvmlDeviceAttributes {
  unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount, sharedJpegCount,
      sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};
struct NvmlConfComputeSystemState {  // nvmlConfComputeSystemState_t, l.3693
  unsigned int environment, ccFeature, devToolsMode;
};
struct NvmlConfComputeGpuAttestationReport {  // nvmlConfComputeGpuAttestationReport_t (NVML_CC_GPU_* sizes)
  unsigned int isCecAttestationReportPresent, attestationReportSize, cecAttestationReportSize;
  unsigned char nonce[0x20];                   // NVML_CC_GPU_CEC_NONCE_SIZE: in, the caller's nonce
  unsigned char attestationReport[0x2000];     // NVML_CC_GPU_ATTESTATION_REPORT_SIZE
  unsigned char cecAttestationReport[0x1000];  // NVML_CC_GPU_CEC_ATTESTATION_REPORT_SIZE
};
struct NvmlConfComputeGpuCertificate {  // nvmlConfComputeGpuCertificate_t
  unsigned int certChainSize, attestationCertChainSize;
  unsigned char certChain[0x1000];             // NVML_GPU_CERT_CHAIN_SIZE
  unsigned char attestationCertChain[0x1400];  // NVML_GPU_ATTESTATION_CERT_CHAIN_SIZE: the chain verifiers use
};
struct NvmlGpuFabricInfo {  // nvmlGpuFabricInfo_t, l.3813 (nvmlDeviceGetGpuFabricInfo)
  unsigned char clusterUuid[16];
  NvmlReturn status;
  unsigned int cliqueId;
  unsigned char state;
};
struct NvmlGpuFabricInfoV3 {  // nvmlGpuFabricInfo_v3_t = nvmlGpuFabricInfoV_t, l.3942; v2 (l.3924) ends at healthMask
  unsigned int version;
  unsigned char clusterUuid[16];
  NvmlReturn status;
  unsigned int cliqueId;
  unsigned char state;
  unsigned int healthMask;
  unsigned char healthSummary;
};
struct NvmlTemperatureV1 {  // nvmlTemperature_v1_t, l.5987 (nvmlDeviceGetTemperatureV)
  unsigned int version;
  int sensorType;
  int temperature;
};

// Sizes nvml.h implies on LP64; a mismatch here would make NVML write past our structs.
static_assert(sizeof(NvmlPciInfo) == 68);
static_assert(sizeof(NvmlMemory) == 24);
static_assert(sizeof(NvmlDeviceAttributes) == 40);
static_assert(sizeof(NvmlConfComputeSystemState) == 12);
static_assert(sizeof(NvmlConfComputeGpuAttestationReport) == 12 + 0x20 + 0x2000 + 0x1000);
static_assert(sizeof(NvmlConfComputeGpuCertificate) == 8 + 0x1000 + 0x1400);
static_assert(sizeof(NvmlGpuFabricInfo) == 28);
static_assert(offsetof(NvmlGpuFabricInfoV3, healthSummary) == 36 && sizeof(NvmlGpuFabricInfoV3) == 40);
static_assert(sizeof(NvmlTemperatureV1) == 12);

/// NVML_STRUCT_VERSION(data, ver), l.141: the struct's size with the version in the top byte.
constexpr unsigned nvml_struct_version(std::size_t size, unsigned version) {
  return static_cast<unsigned>(size) | (version << 24U);
}
constexpr unsigned k_fabric_info_v2 = nvml_struct_version(36, 2);  // sizeof(nvmlGpuFabricInfo_v2_t) == 36
constexpr unsigned k_fabric_info_v3 = nvml_struct_version(sizeof(NvmlGpuFabricInfoV3), 3);
constexpr unsigned k_temperature_v1 = nvml_struct_version(sizeof(NvmlTemperatureV1), 1);

/// The NVML functions gpuenv uses: getters only. A null pointer = the installed driver does not have it.
struct NvmlApi {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned) = nullptr;
  NvmlReturn (*cuda_driver_version_v2)(int*) = nullptr;
  NvmlReturn (*cuda_driver_version)(int*) = nullptr;
  NvmlReturn (*conf_compute_state)(NvmlConfComputeSystemState*) = nullptr;
  NvmlReturn (*conf_compute_gpus_ready)(unsigned*) = nullptr;  // nvmlSystemGetConfComputeGpusReadyState
  NvmlReturn (*conf_compute_set_gpus_ready)(unsigned) = nullptr;  // nvmlSystemSetConfComputeGpusReadyState: `attest --set-ready` only
  NvmlReturn (*conf_compute_report)(NvmlDevice, NvmlConfComputeGpuAttestationReport*) = nullptr;
  NvmlReturn (*conf_compute_certificate)(NvmlDevice, NvmlConfComputeGpuCertificate*) = nullptr;
  NvmlReturn (*vbios_version)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*count)(unsigned*) = nullptr;
  NvmlReturn (*handle_by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*pci_info)(NvmlDevice, NvmlPciInfo*) = nullptr;
  NvmlReturn (*compute_capability)(NvmlDevice, int*, int*) = nullptr;
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*minor_number)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*nvlink_state)(NvmlDevice, unsigned, NvmlEnableState*) = nullptr;
  NvmlReturn (*fabric_info)(NvmlDevice, NvmlGpuFabricInfo*) = nullptr;
  NvmlReturn (*fabric_info_v)(NvmlDevice, NvmlGpuFabricInfoV3*) = nullptr;
  NvmlReturn (*ecc_mode)(NvmlDevice, NvmlEnableState*, NvmlEnableState*) = nullptr;
  NvmlReturn (*total_ecc_errors)(NvmlDevice, int, int, unsigned long long*) = nullptr;
  NvmlReturn (*remapped_rows)(NvmlDevice, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  NvmlReturn (*retired_pages)(NvmlDevice, int, unsigned*, unsigned long long*) = nullptr;
  NvmlReturn (*retired_pages_pending)(NvmlDevice, NvmlEnableState*) = nullptr;
  NvmlReturn (*curr_pcie_generation)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*curr_pcie_width)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*max_pcie_generation)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*max_pcie_width)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*pcie_replay_counter)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*clocks_event_reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*clocks_throttle_reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*temperature_v)(NvmlDevice, NvmlTemperatureV1*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*temperature_threshold)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*power_usage)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*enforced_power_limit)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*persistence_mode)(NvmlDevice, NvmlEnableState*) = nullptr;
  NvmlReturn (*mig_mode)(NvmlDevice, unsigned*, unsigned*) = nullptr;
  // The MIG devices of a GPU (Multi Instance GPU Management, https://docs.nvidia.com/deploy/nvml-api/api/group__nvmlMultiInstanceGPU.html).
  NvmlReturn (*max_mig_device_count)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*mig_device_handle_by_index)(NvmlDevice, unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*gpu_instance_id)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*compute_instance_id)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*device_attributes)(NvmlDevice, NvmlDeviceAttributes*) = nullptr;
};

template <class F>
void bind(void* handle, F& slot, const char* symbol) {
  slot = reinterpret_cast<F>(dlsym(handle, symbol));
}

void bind_all(void* h, NvmlApi& a) {
  bind(h, a.init, "nvmlInit_v2");
  bind(h, a.shutdown, "nvmlShutdown");
  bind(h, a.error_string, "nvmlErrorString");
  bind(h, a.driver_version, "nvmlSystemGetDriverVersion");
  bind(h, a.cuda_driver_version_v2, "nvmlSystemGetCudaDriverVersion_v2");
  bind(h, a.cuda_driver_version, "nvmlSystemGetCudaDriverVersion");
  bind(h, a.conf_compute_state, "nvmlSystemGetConfComputeState");
  bind(h, a.conf_compute_gpus_ready, "nvmlSystemGetConfComputeGpusReadyState");
  bind(h, a.conf_compute_set_gpus_ready, "nvmlSystemSetConfComputeGpusReadyState");
  bind(h, a.conf_compute_report, "nvmlDeviceGetConfComputeGpuAttestationReport");
  bind(h, a.conf_compute_certificate, "nvmlDeviceGetConfComputeGpuCertificate");
  bind(h, a.vbios_version, "nvmlDeviceGetVbiosVersion");
  bind(h, a.count, "nvmlDeviceGetCount_v2");
  bind(h, a.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(h, a.name, "nvmlDeviceGetName");
  bind(h, a.uuid, "nvmlDeviceGetUUID");
  bind(h, a.pci_info, "nvmlDeviceGetPciInfo_v3");
  bind(h, a.compute_capability, "nvmlDeviceGetCudaComputeCapability");
  bind(h, a.memory_info, "nvmlDeviceGetMemoryInfo");
  bind(h, a.minor_number, "nvmlDeviceGetMinorNumber");
  bind(h, a.nvlink_state, "nvmlDeviceGetNvLinkState");
  bind(h, a.fabric_info, "nvmlDeviceGetGpuFabricInfo");
  bind(h, a.fabric_info_v, "nvmlDeviceGetGpuFabricInfoV");
  bind(h, a.ecc_mode, "nvmlDeviceGetEccMode");
  bind(h, a.total_ecc_errors, "nvmlDeviceGetTotalEccErrors");
  bind(h, a.remapped_rows, "nvmlDeviceGetRemappedRows");
  bind(h, a.retired_pages, "nvmlDeviceGetRetiredPages");
  bind(h, a.retired_pages_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
  bind(h, a.curr_pcie_generation, "nvmlDeviceGetCurrPcieLinkGeneration");
  bind(h, a.curr_pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
  bind(h, a.max_pcie_generation, "nvmlDeviceGetMaxPcieLinkGeneration");
  bind(h, a.max_pcie_width, "nvmlDeviceGetMaxPcieLinkWidth");
  bind(h, a.pcie_replay_counter, "nvmlDeviceGetPcieReplayCounter");
  bind(h, a.clocks_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons");
  bind(h, a.clocks_throttle_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  bind(h, a.temperature_v, "nvmlDeviceGetTemperatureV");
  bind(h, a.temperature, "nvmlDeviceGetTemperature");
  bind(h, a.temperature_threshold, "nvmlDeviceGetTemperatureThreshold");
  bind(h, a.power_usage, "nvmlDeviceGetPowerUsage");
  bind(h, a.enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  bind(h, a.persistence_mode, "nvmlDeviceGetPersistenceMode");
  bind(h, a.mig_mode, "nvmlDeviceGetMigMode");
  bind(h, a.max_mig_device_count, "nvmlDeviceGetMaxMigDeviceCount");
  bind(h, a.mig_device_handle_by_index, "nvmlDeviceGetMigDeviceHandleByIndex");
  bind(h, a.gpu_instance_id, "nvmlDeviceGetGpuInstanceId");
  bind(h, a.compute_instance_id, "nvmlDeviceGetComputeInstanceId");
  bind(h, a.device_attributes, "nvmlDeviceGetAttributes_v2");
}

/// A loaded and initialised NVML. Shared by the backend and the health readers handed to sessions, so a session
/// can outlive the backend that opened it.
class Nvml {
 public:
  /// Loads and initialises NVML; nullptr when there is no driver here (library absent, or NVML says the kernel
  /// driver is not loaded). Fails when the library is not NVML or nvmlInit fails for another reason.
  static Result<std::shared_ptr<Nvml>> load(const std::string& library) {
    void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return std::shared_ptr<Nvml>{};
    std::shared_ptr<Nvml> nvml(new Nvml(handle, library));
    if (!nvml->m_api.init || !nvml->m_api.shutdown) {
      return make_error(ErrorKind::environment, "validate.nvml_symbols", library + " has no nvmlInit_v2 or nvmlShutdown",
                        library, "the NVML library is too old or not NVIDIA's; reinstall the NVIDIA driver");
    }
    const NvmlReturn rc = nvml->m_api.init();
    if (rc == k_nvml_error_driver_not_loaded) return std::shared_ptr<Nvml>{};
    if (rc != k_nvml_success) {
      return make_error(ErrorKind::environment, "validate.nvml_init", "nvmlInit_v2 failed: " + nvml->why(rc), library,
                        "check that the NVIDIA kernel module matches the user-space driver (nvidia-smi, dmesg | grep NVRM)");
    }
    nvml->m_initialized = true;
    return nvml;
  }

  ~Nvml() {
    if (m_initialized) m_api.shutdown();
    dlclose(m_handle);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  [[nodiscard]] const NvmlApi& api() const { return m_api; }
  [[nodiscard]] const std::string& library() const { return m_library; }

  /// NVML's words for a return code, with the code.
  [[nodiscard]] std::string why(NvmlReturn rc) const {
    const char* text = m_api.error_string ? m_api.error_string(rc) : nullptr;
    return (text ? std::string(text) : std::string("NVML error")) + " (" + std::to_string(rc) + ")";
  }

  /// The handle of GPU `index` (NVML order). Fails for an unknown index or a GPU NVML cannot open.
  [[nodiscard]] Result<NvmlDevice> device(int index) const {
    if (!m_api.handle_by_index) {
      return make_error(ErrorKind::environment, "validate.nvml_symbols", m_library + " has no nvmlDeviceGetHandleByIndex_v2",
                        m_library, "the NVML library is too old; update the NVIDIA driver");
    }
    NvmlDevice d = nullptr;
    const NvmlReturn rc = index < 0 ? k_nvml_error_invalid_argument : m_api.handle_by_index(static_cast<unsigned>(index), &d);
    if (rc != k_nvml_success) {
      return make_error(ErrorKind::environment, "validate.gpu_handle",
                        "NVML cannot open GPU " + std::to_string(index) + ": " + why(rc), m_library,
                        "list the GPUs with nvidia-smi; check dmesg for Xid errors");
    }
    return d;
  }

 private:
  Nvml(void* handle, std::string library) : m_handle(handle), m_library(std::move(library)) { bind_all(m_handle, m_api); }

  void* m_handle;
  std::string m_library;
  NvmlApi m_api;
  bool m_initialized = false;
};

/// Calls NVML getters for one GPU. A missing function or a failed call leaves the field empty; a "GPU lost" or
/// "reset required" answer is remembered so the caller can turn it into an error.
class Getter {
 public:
  template <class F, class... Args>
  bool operator()(F fn, Args... args) {
    if (fn == nullptr) return false;
    return accept(fn(args...));
  }
  /// Records a return code; true when it is NVML_SUCCESS.
  bool accept(NvmlReturn rc) {
    if (rc == k_nvml_success) return true;
    if ((rc == k_nvml_error_gpu_is_lost || rc == k_nvml_error_reset_required) && !m_fatal) m_fatal = rc;
    return false;
  }
  [[nodiscard]] std::optional<NvmlReturn> fatal() const { return m_fatal; }

 private:
  std::optional<NvmlReturn> m_fatal;
};

/// Reads every GpuHealth field NVML can give for GPU `gpu`.
Result<GpuHealth> read_health(const Nvml& nvml, int gpu) {
  auto device = nvml.device(gpu);
  if (!device) return std::move(device).error();
  const NvmlDevice d = *device;
  const NvmlApi& api = nvml.api();
  Getter get;
  GpuHealth h;

  NvmlEnableState current = 0, pending = 0;
  if (get(api.ecc_mode, d, &current, &pending)) {
    h.ecc_enabled = current == k_nvml_feature_enabled;
    h.ecc_pending_change = current != pending;
  }
  auto ecc = [&](int error_type, int counter_type) -> std::optional<std::uint64_t> {
    unsigned long long count = 0;
    if (get(api.total_ecc_errors, d, error_type, counter_type, &count)) return count;
    return std::nullopt;
  };
  h.ecc_volatile_uncorrected = ecc(k_memory_error_uncorrected, k_volatile_ecc);
  h.ecc_volatile_corrected = ecc(k_memory_error_corrected, k_volatile_ecc);
  h.ecc_aggregate_uncorrected = ecc(k_memory_error_uncorrected, k_aggregate_ecc);

  unsigned corrected_rows = 0, uncorrected_rows = 0, remap_pending = 0, remap_failure = 0;
  if (get(api.remapped_rows, d, &corrected_rows, &uncorrected_rows, &remap_pending, &remap_failure))
    h.row_remap = RowRemap{corrected_rows, uncorrected_rows, remap_pending != 0, remap_failure != 0};

  // pageCount 0 asks for the count only; NVML answers INSUFFICIENT_SIZE with the count when pages exist.
  auto retired = [&](int cause) -> std::optional<std::uint64_t> {
    if (!api.retired_pages) return std::nullopt;
    unsigned count = 0;
    unsigned long long unused[1] = {};
    const NvmlReturn rc = api.retired_pages(d, cause, &count, unused);
    if (rc == k_nvml_error_insufficient_size || get.accept(rc)) return count;
    return std::nullopt;
  };
  const auto single_bit = retired(k_retired_multiple_single_bit);
  const auto double_bit = retired(k_retired_double_bit);
  if (single_bit && double_bit) {
    RetiredPages pages{*single_bit, *double_bit, false};
    NvmlEnableState retire_pending = 0;
    if (get(api.retired_pages_pending, d, &retire_pending)) pages.pending = retire_pending == k_nvml_feature_enabled;
    h.retired_pages = pages;
  }

  unsigned gen = 0, width = 0, max_gen = 0, max_width = 0;
  if (get(api.curr_pcie_generation, d, &gen) && get(api.curr_pcie_width, d, &width) &&
      get(api.max_pcie_generation, d, &max_gen) && get(api.max_pcie_width, d, &max_width)) {
    h.pcie_link = PcieLink{static_cast<int>(gen), static_cast<int>(max_gen), static_cast<int>(width), static_cast<int>(max_width)};
  }
  unsigned replays = 0;
  if (get(api.pcie_replay_counter, d, &replays)) h.pcie_replays = replays;

  // nvmlDeviceGetCurrentClocksThrottleReasons is the pre-R535 name of the same bit mask.
  unsigned long long reasons = 0;
  if (get(api.clocks_event_reasons, d, &reasons) || get(api.clocks_throttle_reasons, d, &reasons)) h.clock_event_reasons = reasons;

  NvmlTemperatureV1 temperature{k_temperature_v1, k_temperature_gpu, 0};
  unsigned celsius = 0;
  if (get(api.temperature_v, d, &temperature)) {
    h.temperature_c = temperature.temperature;
  } else if (get(api.temperature, d, k_temperature_gpu, &celsius)) {
    h.temperature_c = static_cast<int>(celsius);
  }
  unsigned slowdown = 0;
  if (get(api.temperature_threshold, d, k_temperature_threshold_slowdown, &slowdown)) h.slowdown_temperature_c = static_cast<int>(slowdown);

  unsigned milliwatts = 0;
  if (get(api.power_usage, d, &milliwatts)) h.power_w = milliwatts / 1000.0;
  if (get(api.enforced_power_limit, d, &milliwatts)) h.power_limit_w = milliwatts / 1000.0;

  NvmlEnableState persistence = 0;
  if (get(api.persistence_mode, d, &persistence)) h.persistence_mode = persistence == k_nvml_feature_enabled;

  unsigned mig_current = 0, mig_pending = 0;
  if (get(api.mig_mode, d, &mig_current, &mig_pending)) {
    h.mig_enabled = mig_current == k_mig_enable;
    h.mig_pending_change = mig_current != mig_pending;
  }

  if (auto rc = get.fatal()) {
    return make_error(ErrorKind::environment, "validate.gpu_lost",
                      "GPU " + std::to_string(gpu) + " stopped answering NVML: " + nvml.why(*rc), nvml.library(),
                      "the GPU fell off the bus or needs a reset: check dmesg for Xid errors, drain the node and reset "
                      "the GPU or reboot");
  }
  return h;
}

/// The GPU's NVLink fabric registration: empty when it is not part of a fabric (or NVML cannot say), true when
/// its registration with the fabric manager completed successfully, false when it is pending or failed.
std::optional<bool> fabric_registered(const NvmlApi& api, NvmlDevice d) {
  unsigned char state = k_fabric_state_not_supported;
  NvmlReturn status = k_nvml_success;
  bool answered = false;
  if (api.fabric_info_v) {
    NvmlGpuFabricInfoV3 info{};
    info.version = k_fabric_info_v3;
    NvmlReturn rc = api.fabric_info_v(d, &info);
    if (rc == k_nvml_error_argument_version_mismatch) {  // a driver that knows only v2 (R535-R550)
      info = NvmlGpuFabricInfoV3{};
      info.version = k_fabric_info_v2;
      rc = api.fabric_info_v(d, &info);
    }
    if (rc == k_nvml_success) {
      state = info.state;
      status = info.status;
      answered = true;
    }
  }
  if (!answered && api.fabric_info) {
    NvmlGpuFabricInfo info{};
    if (api.fabric_info(d, &info) == k_nvml_success) {
      state = info.state;
      status = info.status;
      answered = true;
    }
  }
  if (!answered || state == k_fabric_state_not_supported) return std::nullopt;
  return state == k_fabric_state_completed && status == k_nvml_success;
}

/// A NUL-terminated string in a fixed NVML buffer, never reading past the buffer.
template <std::size_t N>
std::string c_string(const char (&buffer)[N]) {
  return std::string(buffer, std::find(buffer, buffer + N, '\0'));
}

// ---- host files -------------------------------------------------------------------------------------------------

/// The text of a small file (procfs files report size 0, so read until EOF, at most 1 MiB); empty when unreadable.
std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text;
  char buf[4096];
  while (text.size() < (1U << 20U) && in.read(buf, sizeof buf).gcount() > 0) text.append(buf, static_cast<std::size_t>(in.gcount()));
  return text;
}

bool path_exists(const fs::path& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

/// NVSwitches: the nvidia-nvswitch driver lists them under /proc/driver/nvidia-nvswitch/devices and makes
/// /dev/nvidia-nvswitchN nodes. /dev/nvidia-nvswitchctl alone (module loaded, no switch) does not count.
bool nvswitch_present(const fs::path& proc, const fs::path& dev) {
  std::error_code ec;
  fs::directory_iterator devices(proc / "driver/nvidia-nvswitch/devices", ec);
  if (!ec && devices != fs::directory_iterator()) return true;
  ec.clear();
  for (fs::directory_iterator it(dev, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    constexpr std::string_view k_prefix = "nvidia-nvswitch";
    if (name.size() > k_prefix.size() && name.compare(0, k_prefix.size(), k_prefix) == 0 &&
        std::isdigit(static_cast<unsigned char>(name[k_prefix.size()])))
      return true;
  }
  return false;
}

/// Whether a process named nv-fabricmanager runs (a /proc/<pid>/comm says so).
bool fabric_manager_process_running(const fs::path& proc) {
  std::error_code ec;
  for (fs::directory_iterator it(proc, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string pid = it->path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) continue;
    if (auto comm = read_text(it->path() / "comm"); comm && comm_is_fabric_manager(*comm)) return true;
  }
  return false;
}

/// The NUMA node of a PCI device from sysfs; -1 when unknown.
int numa_node(const fs::path& sys, const std::string& nvml_bus_id) {
  const std::string address = sysfs_pci_address(nvml_bus_id);
  if (address.empty()) return -1;
  auto text = read_text(sys / "bus/pci/devices" / address / "numa_node");
  if (!text) return -1;
  const char* begin = text->data();
  const char* end = begin + text->size();
  while (begin < end && std::isspace(static_cast<unsigned char>(*begin))) ++begin;
  int node = -1;
  if (std::from_chars(begin, end, node).ec != std::errc()) return -1;
  return node;
}

// ---- the backend ------------------------------------------------------------------------------------------------

// The profile in a MIG device's NVML name ("NVIDIA A100-SXM4-80GB MIG 1g.10gb" -> "1g.10gb"), or the name.
std::string mig_profile_of(const std::string& name) {
  const auto at = name.rfind("MIG ");
  if (at == std::string::npos) return name;
  std::string profile = name.substr(at + 4);
  if (const auto space = profile.find(' '); space != std::string::npos) profile.resize(space);
  return profile;
}

// One MIG device's identity and share, read through its MIG handle; a value NVML does not give stays 0 or empty.
MigDevice read_mig_device(const NvmlApi& api, NvmlDevice handle, int gpu, int index) {
  MigDevice m;
  m.parent = gpu;
  m.index = index;
  char text[k_nvml_text_buffer] = {};
  if (api.uuid && api.uuid(handle, text, sizeof text) == k_nvml_success) m.uuid = text;
  char name[k_nvml_text_buffer] = {};
  if (api.name && api.name(handle, name, sizeof name) == k_nvml_success) m.profile = mig_profile_of(name);
  unsigned id = 0;
  if (api.gpu_instance_id && api.gpu_instance_id(handle, &id) == k_nvml_success) m.gpu_instance_id = static_cast<int>(id);
  if (api.compute_instance_id && api.compute_instance_id(handle, &id) == k_nvml_success)
    m.compute_instance_id = static_cast<int>(id);
  NvmlMemory memory{};
  if (api.memory_info && api.memory_info(handle, &memory) == k_nvml_success) m.memory_bytes = memory.total;
  NvmlDeviceAttributes attributes{};
  if (api.device_attributes && api.device_attributes(handle, &attributes) == k_nvml_success) {
    m.sm_count = static_cast<int>(attributes.multiprocessorCount);
    m.gpu_instance_slices = static_cast<int>(attributes.gpuInstanceSliceCount);
    if (m.memory_bytes == 0) m.memory_bytes = attributes.memorySizeMB * 1024ULL * 1024ULL;
  }
  return m;
}

// The first entry of a CUDA_VISIBLE_DEVICES value, trimmed: the only MIG device CUDA enumerates.
std::string first_visible_device(const std::string& value) {
  std::string first = value.substr(0, value.find(','));
  const auto begin = first.find_first_not_of(" \t");
  if (begin == std::string::npos) return {};
  return first.substr(begin, first.find_last_not_of(" \t") - begin + 1);
}

class RealBackend final : public GpuBackend {
 public:
  explicit RealBackend(RealBackendOptions options) : m_options(std::move(options)) {}

  [[nodiscard]] std::string name() const override { return "nvml+cuda"; }

  Result<DriverState> driver() override {
    const fs::path proc(m_options.proc_root), dev(m_options.dev_root);
    DriverState s;
    if (auto modules = read_text(proc / "modules")) s.nouveau_loaded = proc_modules_list_nouveau(*modules);
    s.nvswitch_present = nvswitch_present(proc, dev);

    auto loaded = nvml();
    if (!loaded) return std::move(loaded).error();
    std::vector<unsigned> minors;
    bool fabric_gpus = false, all_registered = true;
    if (const std::shared_ptr<Nvml>& nv = *loaded) {
      const NvmlApi& api = nv->api();
      s.loaded = true;
      char text[k_nvml_text_buffer] = {};
      if (api.driver_version && api.driver_version(text, sizeof text) == k_nvml_success) s.version = text;
      int cuda = 0;
      if ((api.cuda_driver_version_v2 && api.cuda_driver_version_v2(&cuda) == k_nvml_success) ||
          (api.cuda_driver_version && api.cuda_driver_version(&cuda) == k_nvml_success))
        s.cuda_driver_version = cuda;
      NvmlConfComputeSystemState cc{};
      if (api.conf_compute_state && api.conf_compute_state(&cc) == k_nvml_success)
        s.cc_state = cc.devToolsMode ? "devtools" : (cc.ccFeature ? "on" : "off");
      // NVML_CC_SYSTEM_ENVIRONMENT_UNAVAILABLE 0, _SIM 1, _PROD 2 (nvml.h)
      if (s.cc_state != "unknown") s.cc_environment = cc.environment == 2 ? "production" : cc.environment == 1 ? "simulation" : "unknown";
      // NVML_CC_ACCEPTING_CLIENT_REQUESTS_TRUE = 1 (nvml.h); only meaningful with the feature on.
      unsigned accepting = 0;
      if (s.cc_state != "off" && s.cc_state != "unknown" && api.conf_compute_gpus_ready &&
          api.conf_compute_gpus_ready(&accepting) == k_nvml_success)
        s.cc_gpus_ready = accepting == 1;
      unsigned count = 0;
      if (api.count && api.handle_by_index && api.count(&count) == k_nvml_success) {
        for (unsigned i = 0; i < count; ++i) {
          NvmlDevice d = nullptr;
          if (api.handle_by_index(i, &d) != k_nvml_success) continue;
          unsigned minor = 0;
          if (api.minor_number && api.minor_number(d, &minor) == k_nvml_success) minors.push_back(minor);
          if (auto registered = fabric_registered(api, d)) {
            fabric_gpus = true;
            all_registered = all_registered && *registered;
          }
        }
      }
    } else if (auto text = read_text(proc / "driver/nvidia/version")) {
      // No NVML (a container without the driver's user-space libraries) but the kernel module answers.
      if (auto v = parse_proc_driver_version(*text)) {
        s.loaded = true;
        s.version = v->str();
      }
    }

    std::vector<std::string> nodes = {"nvidiactl", "nvidia-uvm"};
    for (unsigned minor : minors) nodes.push_back("nvidia" + std::to_string(minor));
    for (const auto& node : nodes)
      if (!path_exists(dev / node)) s.device_nodes_missing.push_back((dev / node).string());

    // Hopper and later GPUs report their fabric registration (done by the fabric manager) through NVML; older
    // NVSwitch systems do not, so the fabric manager's process is looked for instead.
    if (fabric_gpus) {
      s.fabric_manager_running = all_registered;
    } else if (s.nvswitch_present) {
      s.fabric_manager_running = fabric_manager_process_running(proc);
    }
    return s;
  }

  Result<std::vector<GpuInfo>> gpus() override {
    auto loaded = nvml();
    if (!loaded) return std::move(loaded).error();
    std::vector<GpuInfo> out;
    const std::shared_ptr<Nvml>& nv = *loaded;
    if (!nv) return out;
    const NvmlApi& api = nv->api();
    if (!api.count || !api.handle_by_index) {
      return make_error(ErrorKind::environment, "validate.nvml_symbols",
                        nv->library() + " has no nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2", nv->library(),
                        "the NVML library is too old; update the NVIDIA driver");
    }
    unsigned count = 0;
    if (const NvmlReturn rc = api.count(&count); rc != k_nvml_success) {
      return make_error(ErrorKind::environment, "validate.nvml_count", "nvmlDeviceGetCount_v2 failed: " + nv->why(rc),
                        nv->library(), "run nvidia-smi; check dmesg for Xid errors");
    }
    const fs::path sys(m_options.sys_root);
    for (unsigned i = 0; i < count; ++i) {
      GpuInfo g;
      g.index = static_cast<int>(i);
      NvmlDevice d = nullptr;
      // A GPU NVML cannot open stays in the list (index only), so its checks fail instead of the GPU vanishing.
      if (api.handle_by_index(i, &d) == k_nvml_success) {
        char text[k_nvml_text_buffer] = {};
        if (api.name && api.name(d, text, sizeof text) == k_nvml_success) g.name = text;
        char id[k_nvml_text_buffer] = {};
        if (api.uuid && api.uuid(d, id, sizeof id) == k_nvml_success) g.uuid = id;
        NvmlPciInfo pci{};
        if (api.pci_info && api.pci_info(d, &pci) == k_nvml_success) {
          g.pci_bus_id = c_string(pci.busId);
          g.pci_device_id = pci.pciDeviceId >> 16U;
          g.numa_node = numa_node(sys, g.pci_bus_id);
        }
        int major = 0, minor = 0;
        if (api.compute_capability && api.compute_capability(d, &major, &minor) == k_nvml_success) {
          g.cc_major = major;
          g.cc_minor = minor;
        }
        NvmlMemory memory{};
        if (api.memory_info && api.memory_info(d, &memory) == k_nvml_success) g.memory_total_bytes = memory.total;
        // Links are numbered from 0 and NVML answers INVALID_ARGUMENT past the GPU's last one. A link that answers
        // anything else (NOT_SUPPORTED for a disabled link) is skipped rather than ending the count.
        for (unsigned link = 0; api.nvlink_state && link < k_nvlink_max_links; ++link) {
          NvmlEnableState active = 0;
          const NvmlReturn rc = api.nvlink_state(d, link, &active);
          if (rc == k_nvml_error_invalid_argument) break;
          if (rc == k_nvml_success && active == k_nvml_feature_enabled) ++g.nvlink_links_active;
        }
      }
      out.push_back(std::move(g));
    }
    return out;
  }

  Result<GpuHealth> health(int gpu) override {
    auto loaded = nvml();
    if (!loaded) return std::move(loaded).error();
    if (!*loaded) return no_driver(gpu);
    return read_health(**loaded, gpu);
  }

  // Before any check thread: the cuInit probe, then one child process per MIG device this process cannot reach
  // itself (CUDA enumerates one MIG device per process), each with CUDA_VISIBLE_DEVICES naming its device.
  gpuenv::Status prepare() override {
    gpuenv::Status ready = cuda_ready();
    if (ready && m_options.session_factory) start_mig_children();
    return ready;
  }

  // Reads the MIG layout through NVML's MIG handles; it never creates or destroys an instance.
  Result<std::vector<MigDevice>> mig_devices(int gpu) override {
    auto loaded = nvml();
    if (!loaded) return std::move(loaded).error();
    std::vector<MigDevice> out;
    if (!*loaded) return out;
    const std::shared_ptr<Nvml>& nv = *loaded;
    const NvmlApi& api = nv->api();
    // An NVML without these functions predates MIG (R450): no GPU it drives has instances.
    if (!api.mig_mode || !api.max_mig_device_count || !api.mig_device_handle_by_index) return out;
    auto device = nv->device(gpu);
    if (!device) return std::move(device).error();
    unsigned current = 0, pending = 0;
    if (api.mig_mode(*device, &current, &pending) != k_nvml_success || current != k_mig_enable) return out;
    const std::string where = "GPU " + std::to_string(gpu);
    unsigned slots = 0;
    if (const NvmlReturn rc = api.max_mig_device_count(*device, &slots); rc != k_nvml_success) {
      return make_error(ErrorKind::environment, "validate.nvml_mig", "nvmlDeviceGetMaxMigDeviceCount failed on " + where + ": " + nv->why(rc),
                        nv->library(), "run nvidia-smi -L; check dmesg for Xid errors");
    }
    NvmlMemory parent_memory{};
    const bool parent_known = api.memory_info && api.memory_info(*device, &parent_memory) == k_nvml_success;
    for (unsigned i = 0; i < slots && i < 64; ++i) {
      NvmlDevice handle = nullptr;
      const NvmlReturn rc = api.mig_device_handle_by_index(*device, i, &handle);
      if (rc == k_nvml_error_not_found || rc == k_nvml_error_invalid_argument) continue;  // an empty slot
      if (rc != k_nvml_success) {
        return make_error(ErrorKind::environment, "validate.nvml_mig",
                          "nvmlDeviceGetMigDeviceHandleByIndex(" + std::to_string(i) + ") failed on " + where + ": " + nv->why(rc),
                          nv->library(), "run nvidia-smi -L; check dmesg for Xid errors");
      }
      out.push_back(read_mig_device(api, handle, gpu, static_cast<int>(i)));
      if (parent_known) out.back().parent_memory_bytes = parent_memory.total;
    }
    std::lock_guard lock(m_mig_mutex);
    for (const auto& d : out) {
      const bool known = std::any_of(m_mig_seen.begin(), m_mig_seen.end(), [&](const MigDevice& s) { return s.uuid == d.uuid; });
      if (!known && !d.uuid.empty()) m_mig_seen.push_back(d);
    }
    return out;
  }

  // With CUDA_VISIBLE_DEVICES naming this MIG device, CUDA enumerates it alone, under its GPU's PCI address; any
  // other instance this process cannot reach (CUDA enumerates one MIG device per process).
  Result<std::unique_ptr<GpuSession>> open_mig(const MigDevice& device) override {
    std::shared_ptr<MigChild> child;
    {
      std::lock_guard lock(m_mig_mutex);
      if (auto it = m_mig_children.find(device.uuid); it != m_mig_children.end()) {
        if (!it->second) return m_mig_child_errors.at(device.uuid);
        child = it->second;
      }
    }
    if (child) {
      auto loaded = nvml();
      if (!loaded) return std::move(loaded).error();
      if (!*loaded) return no_driver(device.parent);
      std::shared_ptr<Nvml> nv = *loaded;
      const int gpu = device.parent;
      return child->open([nv, gpu]() { return read_health(*nv, gpu); });
    }
    if (first_visible_device(m_options.cuda_visible_devices) != device.uuid) {
      return make_error(ErrorKind::environment, "validate.mig_not_visible",
                        "CUDA in one process reaches one MIG device, the one CUDA_VISIBLE_DEVICES names" +
                            (m_options.cuda_visible_devices.empty() ? std::string(" (it is not set)")
                                                                    : std::string(" (it names another)")),
                        device.uuid,
                        "check this instance with CUDA_VISIBLE_DEVICES=" + device.uuid + " gpuenv validate --gpus " +
                            std::to_string(device.parent) + " (NVIDIA MIG user guide, CUDA Device Enumeration)");
    }
    return open_target(device.parent, memory_sharers(device));
  }

  Result<std::unique_ptr<GpuSession>> open(int gpu) override { return open_target(gpu, 1); }

  // The compute instances of `device`'s GPU instance among the MIG devices seen (at least 1).
  int memory_sharers(const MigDevice& device) {
    std::lock_guard lock(m_mig_mutex);
    const auto n = std::count_if(m_mig_seen.begin(), m_mig_seen.end(), [&device](const MigDevice& d) {
      return d.parent == device.parent && d.gpu_instance_id == device.gpu_instance_id;
    });
    return std::max(static_cast<int>(n), 1);
  }

  // A session in this process on GPU `gpu` (or the MIG device CUDA_VISIBLE_DEVICES names on it, whose GPU instance
  // `shared_by` compute instances share).
  Result<std::unique_ptr<GpuSession>> open_target(int gpu, int shared_by) {
    const std::string where = "GPU " + std::to_string(gpu);
    if (!m_options.session_factory) {
      return make_error(ErrorKind::environment, "validate.no_cuda_session",
                        "this gpuenv was built without the CUDA session: cannot create a context on " + where, "",
                        "use a gpuenv build that includes the validation kernels");
    }
    auto loaded = nvml();
    if (!loaded) return std::move(loaded).error();
    if (!*loaded) return no_driver(gpu);
    std::shared_ptr<Nvml> nv = *loaded;
    auto pci_bus_id = nvml_bus_id(gpu);
    if (!pci_bus_id) return std::move(pci_bus_id).error();
    const std::string bus_id = *pci_bus_id;

    if (Status ready = cuda_ready(); !ready) {
      Error e = std::move(ready).error();
      e.while_("checking that cuInit returns before creating a context on " + where);
      return e;
    }
    SessionTarget target;
    target.pci_bus_id = bus_id;
    target.numa_node = numa_node(fs::path(m_options.sys_root), bus_id);
    NvmlConfComputeSystemState cc{};
    target.confidential = nv->api().conf_compute_state && nv->api().conf_compute_state(&cc) == k_nvml_success && (cc.ccFeature || cc.devToolsMode);
    target.health_reader = [nv, gpu]() { return read_health(*nv, gpu); };
    target.memory_shared_by = shared_by;
    try {
      return m_options.session_factory(std::move(target));
    } catch (const std::exception& ex) {
      return make_error(ErrorKind::internal, "validate.cuda_session", "creating the CUDA session on " + where + " threw: " + ex.what(),
                        bus_id, "report this as a gpuenv bug");
    }
  }

  // Without an injected measurement an empty answer makes the p2p_bandwidth and nccl_allreduce checks SKIP.
  Result<std::optional<Samples>> p2p_bandwidth(int src, int dst, int samples) override {
    if (!m_options.p2p_measure) return std::optional<Samples>{};
    const std::string what = "peer-to-peer bandwidth from GPU " + std::to_string(src) + " to GPU " + std::to_string(dst);
    auto from = nvml_bus_id(src);
    if (!from) return std::move(from).error();
    auto to = nvml_bus_id(dst);
    if (!to) return std::move(to).error();
    if (Status ready = cuda_ready(); !ready) {
      Error e = std::move(ready).error();
      e.while_("checking that cuInit returns before measuring " + what);
      return e;
    }
    try {
      return m_options.p2p_measure(*from, *to, samples);
    } catch (const std::exception& ex) {
      return make_error(ErrorKind::internal, "validate.multi_gpu", "measuring " + what + " threw: " + ex.what(), *from,
                        "report this as a gpuenv bug");
    }
  }

  Result<std::optional<CcEvidence>> cc_evidence(int gpu, const std::string& nonce) override {
    auto loaded = nvml();
    if (!loaded) return std::move(loaded).error();
    if (!*loaded) return no_driver(gpu);
    const std::shared_ptr<Nvml>& nv = *loaded;
    const NvmlApi& api = nv->api();
    if (!api.conf_compute_report || !api.conf_compute_certificate || nonce.size() != 32) return std::optional<CcEvidence>();
    auto device = nv->device(gpu);
    if (!device) return std::move(device).error();
    // About 20 KiB between them: on the heap, not on a check thread's stack.
    auto report = std::make_unique<NvmlConfComputeGpuAttestationReport>();
    std::memcpy(report->nonce, nonce.data(), 32);
    const std::string where = "GPU " + std::to_string(gpu);
    if (NvmlReturn rc = api.conf_compute_report(*device, report.get()); rc != k_nvml_success) {
      if (rc == k_nvml_error_not_supported) return std::optional<CcEvidence>();
      return make_error(ErrorKind::environment, "validate.cc_evidence", "nvmlDeviceGetConfComputeGpuAttestationReport failed: " + nv->why(rc), where,
                        "confidential computing must be on for this GPU (nvidia-smi conf-compute -f)");
    }
    auto cert = std::make_unique<NvmlConfComputeGpuCertificate>();
    if (NvmlReturn rc = api.conf_compute_certificate(*device, cert.get()); rc != k_nvml_success) {
      return make_error(ErrorKind::environment, "validate.cc_evidence", "nvmlDeviceGetConfComputeGpuCertificate failed: " + nv->why(rc), where, "");
    }
    if (report->attestationReportSize > sizeof report->attestationReport || cert->attestationCertChainSize > sizeof cert->attestationCertChain) {
      return make_error(ErrorKind::environment, "validate.cc_evidence", "NVML reported a report or chain larger than its own buffer", where, "");
    }
    CcEvidence e;
    e.report.assign(reinterpret_cast<const char*>(report->attestationReport), report->attestationReportSize);
    e.cert_chain.assign(reinterpret_cast<const char*>(cert->attestationCertChain), cert->attestationCertChainSize);
    e.nonce = nonce;
    char text[k_nvml_text_buffer] = {};
    if (api.vbios_version && api.vbios_version(*device, text, sizeof text) == k_nvml_success) e.vbios_version = text;
    return std::optional<CcEvidence>(std::move(e));
  }

  gpuenv::Status set_cc_gpus_ready() override {
    auto loaded = nvml();
    if (!loaded) return std::move(loaded).error();
    if (!*loaded) return make_error(ErrorKind::environment, "validate.no_driver", "no NVIDIA driver is loaded", "", "");
    const std::shared_ptr<Nvml>& nv = *loaded;
    if (!nv->api().conf_compute_set_gpus_ready)
      return make_error(ErrorKind::environment, "attest.cannot_set_ready", "this driver has no nvmlSystemSetConfComputeGpusReadyState", "", "update the driver");
    // NVML_CC_ACCEPTING_CLIENT_REQUESTS_TRUE = 1
    if (NvmlReturn rc = nv->api().conf_compute_set_gpus_ready(1); rc != k_nvml_success)
      return make_error(ErrorKind::environment, "attest.cannot_set_ready", "setting the ready state (nvmlSystemSetConfComputeGpusReadyState) failed: " + nv->why(rc), "",
                        "it needs root, and confidential computing on");
    return ok_status();
  }

  Result<std::optional<Samples>> nccl_allreduce(const std::vector<int>& gpus, int samples) override {
    if (!m_options.nccl_measure) return std::optional<Samples>{};
    std::vector<std::string> bus_ids;
    std::string names;
    for (int gpu : gpus) {
      auto id = nvml_bus_id(gpu);
      if (!id) return std::move(id).error();
      bus_ids.push_back(std::move(*id));
      names += (names.empty() ? "" : ",") + std::to_string(gpu);
    }
    const std::string what = "the NCCL all-reduce across GPUs " + names;
    if (Status ready = cuda_ready(); !ready) {
      Error e = std::move(ready).error();
      e.while_("checking that cuInit returns before measuring " + what);
      return e;
    }
    try {
      return m_options.nccl_measure(bus_ids, samples);
    } catch (const std::exception& ex) {
      return make_error(ErrorKind::internal, "validate.multi_gpu", "measuring " + what + " threw: " + ex.what(), names,
                        "report this as a gpuenv bug");
    }
  }

 private:
  /// NVML's PCI bus id of GPU `gpu` ("00000000:19:00.0"). Fails without a driver, for an unknown GPU, or when NVML
  /// cannot tell.
  Result<std::string> nvml_bus_id(int gpu) {
    auto loaded = nvml();
    if (!loaded) return std::move(loaded).error();
    if (!*loaded) return no_driver(gpu);
    const std::shared_ptr<Nvml>& nv = *loaded;
    auto device = nv->device(gpu);
    if (!device) return std::move(device).error();
    NvmlPciInfo pci{};
    if (NvmlReturn rc = nv->api().pci_info ? nv->api().pci_info(*device, &pci) : -1; rc != k_nvml_success) {
      return make_error(ErrorKind::environment, "validate.gpu_pci", "NVML cannot tell the PCI bus id of GPU " +
                        std::to_string(gpu) + (rc == -1 ? std::string(": no nvmlDeviceGetPciInfo_v3") : ": " + nv->why(rc)),
                        nv->library(), "update the NVIDIA driver; run nvidia-smi");
    }
    return c_string(pci.busId);
  }

  /// NVML, loaded on first use; the outcome (nullptr for "no driver") is kept for the backend's lifetime.
  Result<std::shared_ptr<Nvml>> nvml() {
    std::lock_guard lock(m_nvml_mutex);
    if (!m_nvml) m_nvml.emplace(Nvml::load(m_options.nvml_library));
    return *m_nvml;
  }

  /// cuInit in a child process killed after the timeout, once per backend: a hung driver fails the open instead of
  /// hanging gpuenv.
  Status cuda_ready() {
    std::lock_guard lock(m_cuda_mutex);
    if (!m_cuda_ready) {
      auto probed = make_cuda_driver_probe(m_options.cuinit_timeout, m_options.cuda_library)->probe();
      if (!probed) {
        m_cuda_ready.emplace(std::move(probed).error());
      } else if (!probed->has_value()) {
        m_cuda_ready.emplace(make_error(ErrorKind::environment, "validate.no_libcuda",
                                        "the CUDA driver library " + m_options.cuda_library + " cannot be loaded",
                                        m_options.cuda_library,
                                        "install the NVIDIA driver's libcuda (or mount it into the container)"));
      } else {
        m_cuda_ready.emplace(ok_status());
      }
    }
    return *m_cuda_ready;
  }

  Error no_driver(int gpu) const {
    return make_error(ErrorKind::environment, "validate.no_driver",
                      "no NVIDIA driver answers, so GPU " + std::to_string(gpu) + " cannot be read", m_options.nvml_library,
                      "install or load the NVIDIA driver (nvidia-smi should list the GPUs)");
  }

  // One child per MIG device that CUDA_VISIBLE_DEVICES does not name (the one it names is opened here), forked in
  // prepare() while the process has one thread. A child that could not start is kept with its error.
  void start_mig_children() {
    std::vector<MigDevice> devices;
    {
      std::lock_guard lock(m_mig_mutex);
      devices = m_mig_seen;
    }
    const std::string visible = first_visible_device(m_options.cuda_visible_devices);
    for (const auto& d : devices) {
      if (d.uuid == visible || m_mig_children.count(d.uuid)) continue;
      auto bus_id = nvml_bus_id(d.parent);
      Result<std::shared_ptr<MigChild>> child = bus_id ? start_child(d, *bus_id) : Result<std::shared_ptr<MigChild>>(bus_id.error());
      std::lock_guard lock(m_mig_mutex);
      if (child) {
        m_mig_children[d.uuid] = *child;
      } else {
        m_mig_children[d.uuid] = nullptr;
        m_mig_child_errors.emplace(d.uuid, child.error());
      }
    }
  }

  // The child's session: the factory's, on the GPU's PCI address, where CUDA shows the instance alone. Health is
  // read by the parent, so the child's session has no reader.
  Result<std::shared_ptr<MigChild>> start_child(const MigDevice& device, const std::string& bus_id) {
    SessionTarget target;
    target.pci_bus_id = bus_id;
    target.numa_node = numa_node(fs::path(m_options.sys_root), bus_id);
    target.memory_shared_by = memory_sharers(device);
    const SessionFactory factory = m_options.session_factory;
    return MigChild::start(device.uuid, [factory, target]() -> Result<std::unique_ptr<GpuSession>> {
      try {
        return factory(target);
      } catch (const std::exception& ex) {
        return make_error(ErrorKind::internal, "validate.cuda_session", std::string("creating the CUDA session threw: ") + ex.what(),
                          target.pci_bus_id, "report this as a gpuenv bug");
      }
    });
  }

  RealBackendOptions m_options;
  std::mutex m_mig_mutex;
  std::vector<MigDevice> m_mig_seen;                                 // every MIG device mig_devices() returned
  std::map<std::string, std::shared_ptr<MigChild>> m_mig_children;   // uuid -> its child (null: it failed to start)
  std::map<std::string, Error> m_mig_child_errors;                   // uuid -> why its child did not start
  std::mutex m_nvml_mutex;
  std::optional<Result<std::shared_ptr<Nvml>>> m_nvml;
  std::mutex m_cuda_mutex;
  std::optional<Status> m_cuda_ready;
};

}  // namespace

std::unique_ptr<GpuBackend> make_real_backend(const RealBackendOptions& options) {
  return std::make_unique<RealBackend>(options);
}

bool proc_modules_list_nouveau(std::string_view proc_modules_text) {
  std::size_t start = 0;
  while (start < proc_modules_text.size()) {
    std::size_t end = proc_modules_text.find('\n', start);
    if (end == std::string_view::npos) end = proc_modules_text.size();
    const std::string_view line = proc_modules_text.substr(start, end - start);
    if (line.substr(0, line.find(' ')) == "nouveau") return true;
    start = end + 1;
  }
  return false;
}

std::string sysfs_pci_address(std::string_view nvml_bus_id) {
  // NVML: "%08X:%02X:%02X.0" (nvml.h NVML_DEVICE_PCI_BUS_ID_FMT); Linux: "%04x:%02x:%02x.%d".
  const auto colon = nvml_bus_id.find(':');
  if (colon == 0 || colon == std::string_view::npos || colon > 8) return {};
  unsigned long domain = 0;
  const char* first = nvml_bus_id.data();
  if (auto r = std::from_chars(first, first + colon, domain, 16); r.ec != std::errc() || r.ptr != first + colon) return {};
  std::string rest(nvml_bus_id.substr(colon + 1));
  // bus:device.function = "xx:xx.x"
  if (rest.size() != 7 || rest[2] != ':' || rest[5] != '.') return {};
  for (std::size_t i : {0U, 1U, 3U, 4U, 6U})
    if (!std::isxdigit(static_cast<unsigned char>(rest[i]))) return {};
  std::transform(rest.begin(), rest.end(), rest.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  char head[16];
  std::snprintf(head, sizeof head, "%04lx:", domain);
  return head + rest;
}

bool comm_is_fabric_manager(std::string_view comm_text) {
  while (!comm_text.empty() && (comm_text.back() == '\n' || comm_text.back() == ' ')) comm_text.remove_suffix(1);
  // The kernel keeps 15 characters of a process name: "nv-fabricmanager" reads back as "nv-fabricmanage".
  return comm_text == "nv-fabricmanage" || comm_text == "nv-fabricmanager";
}

}  // namespace gpuenv::validate
