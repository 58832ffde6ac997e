// A stand-in for libnvidia-ml.so.1 with two GPUs, so the real NVML adapter is exercised without a driver.
// Struct layouts follow NVML's public nvml.h.
#include <cstdio>
#include <cstring>

namespace {
struct Device { const char* name; const char* uuid; unsigned pci; int major, minor; unsigned long long total; };
Device g_devices[2] = {{"NVIDIA H100 80GB HBM3", "GPU-11111111-2222-3333-4444-555555555555", 0x233010deu, 9, 0, 85520809984ull},
                       {"NVIDIA H100 80GB HBM3", "GPU-66666666-7777-8888-9999-000000000000", 0x233010deu, 9, 0, 85520809984ull}};
struct PciInfo { char busIdLegacy[16]; unsigned domain, bus, device, pciDeviceId, pciSubSystemId; char busId[32]; };
struct Memory { unsigned long long total, free, used; };
struct CcState { unsigned environment, ccFeature, devToolsMode; };
}  // namespace

extern "C" {
int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int) { return "fake error"; }
int nvmlSystemGetDriverVersion(char* out, unsigned len) { std::snprintf(out, len, "%s", "550.54.15"); return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int* v) { *v = 12040; return 0; }
int nvmlSystemGetConfComputeState(CcState* s) { s->environment = 2; s->ccFeature = 1; s->devToolsMode = 0; return 0; }
int nvmlDeviceGetCount_v2(unsigned* n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) { if (i >= 2) return 2; *d = &g_devices[i]; return 0; }
int nvmlDeviceGetName(void* d, char* out, unsigned len) { std::snprintf(out, len, "%s", static_cast<Device*>(d)->name); return 0; }
int nvmlDeviceGetUUID(void* d, char* out, unsigned len) { std::snprintf(out, len, "%s", static_cast<Device*>(d)->uuid); return 0; }
int nvmlDeviceGetPciInfo_v3(void* d, PciInfo* p) { std::memset(p, 0, sizeof *p); p->pciDeviceId = static_cast<Device*>(d)->pci; return 0; }
int nvmlDeviceGetCudaComputeCapability(void* d, int* ma, int* mi) { *ma = static_cast<Device*>(d)->major; *mi = static_cast<Device*>(d)->minor; return 0; }
int nvmlDeviceGetMemoryInfo(void* d, Memory* m) { m->total = static_cast<Device*>(d)->total; m->free = m->total; m->used = 0; return 0; }
}
