// A stand-in for libnvidia-ml.so.1 with every getter the real GpuBackend reads, answering from a static table of two
// GPUs: GPU 0 healthy (H100 SXM, 18 active NVLinks, x16), GPU 1 degraded (H200: a pending row remap, retired pages,
// PCIe at x8 of x16, ECC and MIG changes pending, no slowdown threshold, links 0-4 up but link 2 disabled).
// Struct layouts follow NVIDIA's public nvml.h.
//
// Built twice: as is, and with -DFAKE_NVML_OLD, an older library lacking nvmlDeviceGetRemappedRows,
// nvmlDeviceGetCurrentClocksEventReasons (it has only ...ThrottleReasons), nvmlDeviceGetTemperatureV (only
// nvmlDeviceGetTemperature), nvmlDeviceGetGpuFabricInfoV and nvmlSystemGetConfComputeState.
//
// Environment (read by this test double only):
//   FAKE_NVML_INIT_RC    what nvmlInit_v2 returns (9 = NVML_ERROR_DRIVER_NOT_LOADED); default 0
//   FAKE_NVML_CALL_LOG   file to which every call of a Set*/Reset*/Clear* (state-changing) function is appended
//   FAKE_NVML_FABRIC     completed (default) | in_progress | failed | unsupported: the GPUs' fabric registration
//   FAKE_NVML_LOST_GPU   index of a GPU whose health getters answer NVML_ERROR_GPU_IS_LOST
//   FAKE_NVML_MIG        1: GPU 0 has MIG on with two MIG devices in slots 0 and 2 of 7 (3g.40gb GI 2 CI 0, 1g.10gb
//                        GI 9 CI 0; slot 1 empty; 2: slot 1 holds 1c.3g.40gb GI 2 CI 1); the MIG functions are absent from the FAKE_NVML_OLD build.
//                        FAKE_NVML_MIG_LOG: file to which every MIG getter call is appended (read-only proof)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr int k_success = 0;
constexpr int k_invalid_argument = 2;
constexpr int k_not_supported = 3;
constexpr int k_insufficient_size = 7;
constexpr int k_gpu_is_lost = 15;
constexpr int k_deprecated = 26;
constexpr int k_argument_version_mismatch = 25;

struct Gpu {
  const char* name;
  const char* uuid;
  const char* bus_id;
  unsigned domain, bus;
  unsigned pci_device_id;  // device << 16 | vendor
  int cc_major, cc_minor;
  unsigned long long memory_total;
  unsigned minor_number;
  unsigned nvlinks, nvlinks_up;  // links 0..nvlinks-1 exist; the first nvlinks_up are active
  int nvlink_disabled;          // a link that answers NOT_SUPPORTED, or -1
  int ecc_current, ecc_pending;
  unsigned long long ecc[2][2];  // [NVML_MEMORY_ERROR_TYPE_CORRECTED=0 / _UNCORRECTED=1][NVML_VOLATILE_ECC=0 / NVML_AGGREGATE_ECC=1]
  unsigned remap_corrected, remap_uncorrected, remap_pending, remap_failure;
  int retired_supported;
  unsigned retired_single_bit, retired_double_bit;
  int retired_pending;
  unsigned pcie_gen, pcie_width, pcie_max_gen, pcie_max_width, pcie_replays;
  unsigned long long clock_reasons;
  unsigned temperature;
  int slowdown_supported;
  unsigned slowdown, power_mw, power_limit_mw;
  int persistence;
  unsigned mig_current, mig_pending;
};

Gpu g_gpus[2] = {
    {"NVIDIA H100 80GB HBM3", "GPU-11111111-2222-3333-4444-555555555555", "00000000:19:00.0", 0, 0x19, 0x233010deu, 9, 0,
     85520809984ull, 0, 18, 18, -1, 1, 1, {{7, 50}, {0, 0}}, 0, 0, 0, 0, 0, 0, 0, 0, 5, 16, 5, 16, 0, 0x1ull, 45, 1, 87,
     650123, 700000, 1, 0, 0},
    {"NVIDIA H200", "GPU-66666666-7777-8888-9999-000000000000", "00000000:3B:00.0", 0, 0x3b, 0x233510deu, 9, 0,
     150754820096ull, 3, 18, 5, 2, 1, 0, {{12, 345}, {2, 9}}, 1, 2, 1, 0, 1, 4, 1, 1, 5, 8, 5, 16, 17, 0x4ull | 0x40ull, 83, 0, 0,
     512500, 700000, 0, 0, 1},
};

struct PciInfo { char busIdLegacy[16]; unsigned domain, bus, device, pciDeviceId, pciSubSystemId; char busId[32]; };
struct Memory { unsigned long long total, free, used; };
struct CcState { unsigned environment, ccFeature, devToolsMode; };
struct FabricInfoV3 {
  unsigned version;
  unsigned char clusterUuid[16];
  int status;
  unsigned cliqueId;
  unsigned char state;
  unsigned healthMask;
  unsigned char healthSummary;
};
struct TemperatureV1 { unsigned version; int sensorType; int temperature; };
struct DeviceAttributes {  // nvmlDeviceAttributes_t
  unsigned multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount, sharedJpegCount,
      sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};

// MIG devices of GPU 0 (FAKE_NVML_MIG=1): NVML names them "<GPU name> MIG <profile>".
struct MigDev {
  const char* name;
  const char* uuid;
  unsigned gi, ci;
  unsigned long long memory;
  unsigned sms, gi_slices;
};
MigDev g_mig[3] = {
    {"NVIDIA H100 80GB HBM3 MIG 3g.40gb", "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", 2, 0, 42681237504ull, 60, 3},
    {"NVIDIA H100 80GB HBM3 MIG 1g.10gb", "MIG-12345678-9abc-def0-1234-56789abcdef0", 9, 0, 10468982784ull, 16, 1},
    // FAKE_NVML_MIG=2 only, in slot 1: a second compute instance of GI 2 (sharing its memory).
    {"NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb", "MIG-aaaaaaaa-bbbb-cccc-dddd-ffffffffffff", 2, 1, 42681237504ull, 20, 3},
};
MigDev* mig(void* d) {
  for (auto& m : g_mig)
    if (d == &m) return &m;
  return nullptr;
}

Gpu* gpu(void* d) { return static_cast<Gpu*>(d); }

int env_int(const char* name, int otherwise) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : otherwise;
}

bool lost(void* d) {
  const int index = env_int("FAKE_NVML_LOST_GPU", -1);
  return index >= 0 && index < 2 && gpu(d) == &g_gpus[index];
}

void record_write(const char* function) {
  const char* path = std::getenv("FAKE_NVML_CALL_LOG");
  if (!path || !*path) return;
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", function);
    std::fclose(f);
  }
}

#ifndef FAKE_NVML_OLD
std::string fabric_mode() {
  const char* v = std::getenv("FAKE_NVML_FABRIC");
  return v && *v ? v : "completed";
}
#endif

}  // namespace

#define FAKE_HEALTH_GUARD(d) \
  if (lost(d)) return k_gpu_is_lost

extern "C" {

int nvmlInit_v2() { return env_int("FAKE_NVML_INIT_RC", k_success); }
int nvmlShutdown() { return k_success; }
const char* nvmlErrorString(int rc) {
  switch (rc) {
    case k_not_supported: return "Not Supported";
    case k_gpu_is_lost: return "GPU is lost";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

int nvmlSystemGetDriverVersion(char* out, unsigned len) { std::snprintf(out, len, "%s", "550.54.15"); return k_success; }
int nvmlSystemGetCudaDriverVersion_v2(int* v) { *v = 12040; return k_success; }
int nvmlSystemGetCudaDriverVersion(int* v) { *v = 12040; return k_success; }
#ifndef FAKE_NVML_OLD
// FAKE_NVML_CC=1 turns the confidential-computing feature on; FAKE_NVML_CC_READY (0 or 1) is the GPUs' ready state.
int nvmlSystemGetConfComputeState(CcState* s) {
  s->environment = 2;
  s->ccFeature = static_cast<unsigned>(env_int("FAKE_NVML_CC", 0));
  s->devToolsMode = 0;
  return k_success;
}
int nvmlSystemGetConfComputeGpusReadyState(unsigned* accepting) {
  *accepting = static_cast<unsigned>(env_int("FAKE_NVML_CC_READY", 0));
  return k_success;
}
// FAKE_NVML_CC_REPORT / FAKE_NVML_CC_CHAIN: files whose bytes the two evidence getters return (not supported
// without them). The report gets the caller's nonce at request bytes 4..35, where a GPU puts it.
struct CcReport {
  unsigned present, size, cec_size;
  unsigned char nonce[0x20];
  unsigned char report[0x2000];
  unsigned char cec[0x1000];
};
struct CcCertificate {
  unsigned size, attestation_size;
  unsigned char chain[0x1000];
  unsigned char attestation_chain[0x1400];
};
std::size_t read_into(const char* env, unsigned char* out, std::size_t max) {
  const char* path = std::getenv(env);
  if (!path) return 0;
  FILE* f = std::fopen(path, "rb");
  if (!f) return 0;
  const std::size_t n = std::fread(out, 1, max, f);
  std::fclose(f);
  return n;
}
int nvmlDeviceGetConfComputeGpuAttestationReport(void*, CcReport* r) {
  if (!std::getenv("FAKE_NVML_CC_REPORT")) return 3;  // NVML_ERROR_NOT_SUPPORTED
  r->size = static_cast<unsigned>(read_into("FAKE_NVML_CC_REPORT", r->report, sizeof r->report));
  if (r->size >= 36) std::memcpy(r->report + 4, r->nonce, 32);
  r->present = 0;
  r->cec_size = 0;
  return k_success;
}
int nvmlDeviceGetConfComputeGpuCertificate(void*, CcCertificate* c) {
  if (!std::getenv("FAKE_NVML_CC_CHAIN")) return 3;
  c->size = 0;
  c->attestation_size = static_cast<unsigned>(read_into("FAKE_NVML_CC_CHAIN", c->attestation_chain, sizeof c->attestation_chain));
  return k_success;
}
int nvmlDeviceGetVbiosVersion(void*, char* out, unsigned len) { std::snprintf(out, len, "%s", "96.00.9F.00.04"); return k_success; }
#endif

int nvmlDeviceGetCount_v2(unsigned* n) { *n = 2; return k_success; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  if (i >= 2) return k_invalid_argument;
  *d = &g_gpus[i];
  return k_success;
}
int nvmlDeviceGetName(void* d, char* out, unsigned len) {
  std::snprintf(out, len, "%s", mig(d) ? mig(d)->name : gpu(d)->name);
  return k_success;
}
int nvmlDeviceGetUUID(void* d, char* out, unsigned len) {
  std::snprintf(out, len, "%s", mig(d) ? mig(d)->uuid : gpu(d)->uuid);
  return k_success;
}
int nvmlDeviceGetPciInfo_v3(void* d, PciInfo* p) {
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%s", gpu(d)->bus_id + 4);
  std::snprintf(p->busId, sizeof p->busId, "%s", gpu(d)->bus_id);
  p->domain = gpu(d)->domain;
  p->bus = gpu(d)->bus;
  p->pciDeviceId = gpu(d)->pci_device_id;
  p->pciSubSystemId = 0x16c110deu;
  return k_success;
}
int nvmlDeviceGetCudaComputeCapability(void* d, int* ma, int* mi) { *ma = gpu(d)->cc_major; *mi = gpu(d)->cc_minor; return k_success; }
int nvmlDeviceGetMemoryInfo(void* d, Memory* m) {
  m->total = mig(d) ? mig(d)->memory : gpu(d)->memory_total;
  m->free = m->total;
  m->used = 0;
  return k_success;
}
int nvmlDeviceGetMinorNumber(void* d, unsigned* minor) { *minor = gpu(d)->minor_number; return k_success; }
int nvmlDeviceGetNvLinkState(void* d, unsigned link, int* active) {
  if (link >= gpu(d)->nvlinks) return k_invalid_argument;
  if (static_cast<int>(link) == gpu(d)->nvlink_disabled) return k_not_supported;
  *active = link < gpu(d)->nvlinks_up ? 1 : 0;
  return k_success;
}

#ifndef FAKE_NVML_OLD
int nvmlDeviceGetGpuFabricInfoV(void*, FabricInfoV3* info) {
  if (info->version != (36u | (2u << 24)) && info->version != (40u | (3u << 24))) return k_argument_version_mismatch;
  const std::string mode = fabric_mode();
  if (mode == "unsupported") return k_not_supported;
  info->status = mode == "failed" ? 999 : k_success;
  info->state = mode == "in_progress" ? 2 : 3;
  info->cliqueId = 1;
  return k_success;
}
#endif

int nvmlDeviceGetEccMode(void* d, int* current, int* pending) {
  FAKE_HEALTH_GUARD(d);
  *current = gpu(d)->ecc_current;
  *pending = gpu(d)->ecc_pending;
  return k_success;
}
int nvmlDeviceGetTotalEccErrors(void* d, int error_type, int counter_type, unsigned long long* count) {
  FAKE_HEALTH_GUARD(d);
  if (error_type < 0 || error_type > 1 || counter_type < 0 || counter_type > 1) return k_invalid_argument;
  // The table reads {{volatile corrected, aggregate corrected}, {volatile uncorrected, aggregate uncorrected}}.
  *count = gpu(d)->ecc[error_type][counter_type];
  return k_success;
}
#ifndef FAKE_NVML_OLD
int nvmlDeviceGetRemappedRows(void* d, unsigned* corrected, unsigned* uncorrected, unsigned* pending, unsigned* failure) {
  FAKE_HEALTH_GUARD(d);
  *corrected = gpu(d)->remap_corrected;
  *uncorrected = gpu(d)->remap_uncorrected;
  *pending = gpu(d)->remap_pending;
  *failure = gpu(d)->remap_failure;
  return k_success;
}
#endif
int nvmlDeviceGetRetiredPages(void* d, int cause, unsigned* count, unsigned long long* addresses) {
  FAKE_HEALTH_GUARD(d);
  if (!gpu(d)->retired_supported) return k_not_supported;
  if (!count || !addresses) return k_invalid_argument;
  const unsigned have = cause == 0 ? gpu(d)->retired_single_bit : gpu(d)->retired_double_bit;
  const unsigned room = *count;
  *count = have;
  if (room < have) return k_insufficient_size;
  for (unsigned i = 0; i < have; ++i) addresses[i] = 0x1000ull * (i + 1);
  return k_success;
}
int nvmlDeviceGetRetiredPagesPendingStatus(void* d, int* pending) {
  FAKE_HEALTH_GUARD(d);
  if (!gpu(d)->retired_supported) return k_not_supported;
  *pending = gpu(d)->retired_pending;
  return k_success;
}
int nvmlDeviceGetCurrPcieLinkGeneration(void* d, unsigned* v) { FAKE_HEALTH_GUARD(d); *v = gpu(d)->pcie_gen; return k_success; }
int nvmlDeviceGetCurrPcieLinkWidth(void* d, unsigned* v) { FAKE_HEALTH_GUARD(d); *v = gpu(d)->pcie_width; return k_success; }
int nvmlDeviceGetMaxPcieLinkGeneration(void* d, unsigned* v) { FAKE_HEALTH_GUARD(d); *v = gpu(d)->pcie_max_gen; return k_success; }
int nvmlDeviceGetMaxPcieLinkWidth(void* d, unsigned* v) { FAKE_HEALTH_GUARD(d); *v = gpu(d)->pcie_max_width; return k_success; }
int nvmlDeviceGetPcieReplayCounter(void* d, unsigned* v) { FAKE_HEALTH_GUARD(d); *v = gpu(d)->pcie_replays; return k_success; }
#ifndef FAKE_NVML_OLD
int nvmlDeviceGetCurrentClocksEventReasons(void* d, unsigned long long* v) {
  FAKE_HEALTH_GUARD(d);
  *v = gpu(d)->clock_reasons;
  return k_success;
}
// A newer driver still exports the deprecated name; answering DEPRECATED proves the adapter prefers the new one.
int nvmlDeviceGetCurrentClocksThrottleReasons(void*, unsigned long long*) { return k_deprecated; }
int nvmlDeviceGetTemperatureV(void* d, TemperatureV1* t) {
  FAKE_HEALTH_GUARD(d);
  if (t->version != (12u | (1u << 24))) return k_argument_version_mismatch;
  if (t->sensorType != 0) return k_invalid_argument;
  t->temperature = static_cast<int>(gpu(d)->temperature);
  return k_success;
}
int nvmlDeviceGetTemperature(void*, int, unsigned*) { return k_deprecated; }
#else
int nvmlDeviceGetCurrentClocksThrottleReasons(void* d, unsigned long long* v) {
  FAKE_HEALTH_GUARD(d);
  *v = gpu(d)->clock_reasons;
  return k_success;
}
int nvmlDeviceGetTemperature(void* d, int sensor, unsigned* v) {
  FAKE_HEALTH_GUARD(d);
  if (sensor != 0) return k_invalid_argument;
  *v = gpu(d)->temperature;
  return k_success;
}
#endif
int nvmlDeviceGetTemperatureThreshold(void* d, int threshold, unsigned* v) {
  FAKE_HEALTH_GUARD(d);
  if (threshold != 1 || !gpu(d)->slowdown_supported) return k_not_supported;
  *v = gpu(d)->slowdown;
  return k_success;
}
int nvmlDeviceGetPowerUsage(void* d, unsigned* mw) { FAKE_HEALTH_GUARD(d); *mw = gpu(d)->power_mw; return k_success; }
int nvmlDeviceGetEnforcedPowerLimit(void* d, unsigned* mw) { FAKE_HEALTH_GUARD(d); *mw = gpu(d)->power_limit_mw; return k_success; }
int nvmlDeviceGetPersistenceMode(void* d, int* mode) { FAKE_HEALTH_GUARD(d); *mode = gpu(d)->persistence; return k_success; }
int nvmlDeviceGetMigMode(void* d, unsigned* current, unsigned* pending) {
  FAKE_HEALTH_GUARD(d);
  *current = gpu(d) == &g_gpus[0] && env_int("FAKE_NVML_MIG", 0) >= 1 ? 1u : gpu(d)->mig_current;
  *pending = gpu(d) == &g_gpus[0] && env_int("FAKE_NVML_MIG", 0) >= 1 ? 1u : gpu(d)->mig_pending;
  return k_success;
}

#ifndef FAKE_NVML_OLD
// MIG getters (Multi Instance GPU Management). Each call is logged to FAKE_NVML_MIG_LOG.
constexpr int k_not_found = 6;
bool mig_on(void* d) { return gpu(d) == &g_gpus[0] && env_int("FAKE_NVML_MIG", 0) >= 1; }
void log_mig(const char* function) {
  const char* path = std::getenv("FAKE_NVML_MIG_LOG");
  if (!path || !*path) return;
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", function);
    std::fclose(f);
  }
}
int nvmlDeviceGetMaxMigDeviceCount(void* d, unsigned* count) {
  log_mig("nvmlDeviceGetMaxMigDeviceCount");
  if (mig(d)) return k_invalid_argument;
  *count = mig_on(d) ? 7u : 0u;
  return k_success;
}
int nvmlDeviceGetMigDeviceHandleByIndex(void* d, unsigned index, void** out) {
  log_mig("nvmlDeviceGetMigDeviceHandleByIndex");
  if (!mig_on(d) || index >= 7) return k_invalid_argument;
  if (index == 0) *out = &g_mig[0];
  else if (index == 2) *out = &g_mig[1];
  else if (index == 1 && env_int("FAKE_NVML_MIG", 0) == 2) *out = &g_mig[2];
  else return k_not_found;
  return k_success;
}
int nvmlDeviceGetGpuInstanceId(void* d, unsigned* id) {
  log_mig("nvmlDeviceGetGpuInstanceId");
  if (!mig(d)) return k_invalid_argument;
  *id = mig(d)->gi;
  return k_success;
}
int nvmlDeviceGetComputeInstanceId(void* d, unsigned* id) {
  log_mig("nvmlDeviceGetComputeInstanceId");
  if (!mig(d)) return k_invalid_argument;
  *id = mig(d)->ci;
  return k_success;
}
int nvmlDeviceGetAttributes_v2(void* d, DeviceAttributes* a) {
  log_mig("nvmlDeviceGetAttributes_v2");
  if (!mig(d)) return k_not_supported;  // NVML supports it on MIG device handles only
  std::memset(a, 0, sizeof *a);
  a->multiprocessorCount = mig(d)->sms;
  a->gpuInstanceSliceCount = mig(d)->gi_slices;
  a->computeInstanceSliceCount = mig(d)->gi_slices;
  a->memorySizeMB = mig(d)->memory >> 20U;
  return k_success;
}
#endif

// State-changing functions. gpuenv must never call any of them; each call is recorded in FAKE_NVML_CALL_LOG.
#define FAKE_NVML_WRITER(name, ...) \
  int name(__VA_ARGS__) {           \
    record_write(#name);            \
    return k_success;               \
  }
FAKE_NVML_WRITER(nvmlDeviceSetPersistenceMode, void*, int)
FAKE_NVML_WRITER(nvmlDeviceSetEccMode, void*, int)
FAKE_NVML_WRITER(nvmlDeviceClearEccErrorCounts, void*, int)
FAKE_NVML_WRITER(nvmlDeviceSetMigMode, void*, unsigned, int*)
FAKE_NVML_WRITER(nvmlDeviceSetComputeMode, void*, int)
FAKE_NVML_WRITER(nvmlDeviceSetPowerManagementLimit, void*, unsigned)
FAKE_NVML_WRITER(nvmlDeviceSetPowerManagementLimit_v2, void*, void*)
FAKE_NVML_WRITER(nvmlDeviceSetApplicationsClocks, void*, unsigned, unsigned)
FAKE_NVML_WRITER(nvmlDeviceResetApplicationsClocks, void*)
FAKE_NVML_WRITER(nvmlDeviceSetGpuLockedClocks, void*, unsigned, unsigned)
FAKE_NVML_WRITER(nvmlDeviceResetGpuLockedClocks, void*)
FAKE_NVML_WRITER(nvmlDeviceSetMemoryLockedClocks, void*, unsigned, unsigned)
FAKE_NVML_WRITER(nvmlDeviceResetMemoryLockedClocks, void*)
FAKE_NVML_WRITER(nvmlDeviceSetAutoBoostedClocksEnabled, void*, int)
FAKE_NVML_WRITER(nvmlDeviceSetGpuOperationMode, void*, int)
FAKE_NVML_WRITER(nvmlDeviceSetTemperatureThreshold, void*, int, int*)
FAKE_NVML_WRITER(nvmlDeviceSetAccountingMode, void*, int)
FAKE_NVML_WRITER(nvmlDeviceClearAccountingPids, void*)
FAKE_NVML_WRITER(nvmlDeviceSetCpuAffinity, void*)
FAKE_NVML_WRITER(nvmlDeviceClearCpuAffinity, void*)
FAKE_NVML_WRITER(nvmlDeviceResetNvLinkErrorCounters, void*, unsigned)
FAKE_NVML_WRITER(nvmlDeviceClearFieldValues, void*, int, void*)
FAKE_NVML_WRITER(nvmlDeviceModifyDrainState, void*, int)
FAKE_NVML_WRITER(nvmlDeviceRemoveGpu_v2, void*, int, int)
FAKE_NVML_WRITER(nvmlSystemSetConfComputeGpusReadyState, unsigned)
FAKE_NVML_WRITER(nvmlDeviceCreateGpuInstance, void*, unsigned, void**)
FAKE_NVML_WRITER(nvmlDeviceCreateGpuInstanceWithPlacement, void*, unsigned, const void*, void**)
FAKE_NVML_WRITER(nvmlGpuInstanceDestroy, void*)
FAKE_NVML_WRITER(nvmlGpuInstanceCreateComputeInstance, void*, unsigned, void**)
FAKE_NVML_WRITER(nvmlComputeInstanceDestroy, void*)
#undef FAKE_NVML_WRITER

}  // extern "C"
