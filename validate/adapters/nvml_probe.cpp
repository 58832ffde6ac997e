// Host facts from NVML, loaded with dlopen so gpuenv runs (and says so) on machines without a driver.
// Only the few NVML types used here are declared, matching the layouts of NVML's public nvml.h.
#include <dlfcn.h>

#include <cstdio>

#include "validate/host_probe.hpp"

namespace gpuenv::validate {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t k_probe_nvml_success = 0;
constexpr unsigned k_probe_nvml_buffer = 96;

struct ProbeNvmlPciInfoV3 {  // nvmlPciInfo_t, as returned by nvmlDeviceGetPciInfo_v3
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct ProbeNvmlMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
struct ProbeNvmlCcState {  // nvmlConfComputeSystemState_t
  unsigned int environment, ccFeature, devToolsMode;
};

/// Owns a dlopen handle.
class Library {
 public:
  explicit Library(const std::string& name) : m_handle(dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (m_handle) dlclose(m_handle);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  [[nodiscard]] bool loaded() const { return m_handle != nullptr; }
  template <class F>
  F sym(const char* name) const {
    return reinterpret_cast<F>(dlsym(m_handle, name));
  }

 private:
  void* m_handle;
};

class NvmlProbe final : public HostProbe {
 public:
  explicit NvmlProbe(std::string library) : m_library(std::move(library)) {}
  [[nodiscard]] std::string name() const override { return "nvml"; }

  Result<std::optional<resolver::HostFacts>> probe() override {
    Library lib(m_library);
    if (!lib.loaded()) return std::optional<resolver::HostFacts>{};
    auto init = lib.sym<nvmlReturn_t (*)()>("nvmlInit_v2");
    auto shutdown = lib.sym<nvmlReturn_t (*)()>("nvmlShutdown");
    auto error_string = lib.sym<const char* (*)(nvmlReturn_t)>("nvmlErrorString");
    auto driver_version = lib.sym<nvmlReturn_t (*)(char*, unsigned)>("nvmlSystemGetDriverVersion");
    if (!init || !shutdown || !driver_version) {
      return make_error(ErrorKind::environment, "detect.nvml_symbols", m_library + " lacks nvmlInit_v2 or nvmlSystemGetDriverVersion",
                        m_library, "the NVML library is too old or not NVIDIA's; reinstall the driver");
    }
    auto why = [&](nvmlReturn_t rc) { return error_string ? std::string(error_string(rc)) : "error " + std::to_string(rc); };
    if (nvmlReturn_t rc = init(); rc != k_probe_nvml_success) {
      return make_error(ErrorKind::environment, "detect.nvml_init", "nvmlInit failed: " + why(rc), m_library,
                        "check that the NVIDIA kernel module is loaded (nvidia-smi, dmesg | grep NVRM)");
    }
    resolver::HostFacts f;
    f.source = "nvml";
    char buf[k_probe_nvml_buffer] = {};
    if (driver_version(buf, sizeof buf) == k_probe_nvml_success) {
      if (auto v = resolver::Version::parse(buf)) f.driver = *v;
    }
    if (auto cuda_v2 = lib.sym<nvmlReturn_t (*)(int*)>("nvmlSystemGetCudaDriverVersion_v2")) {
      int v = 0;
      if (cuda_v2(&v) == k_probe_nvml_success && v > 0)
        f.driver_cuda = resolver::Version::of({static_cast<std::uint32_t>(v / 1000), static_cast<std::uint32_t>(v % 1000 / 10)});
    }
    if (auto cc = lib.sym<nvmlReturn_t (*)(ProbeNvmlCcState*)>("nvmlSystemGetConfComputeState")) {
      ProbeNvmlCcState s{};
      if (cc(&s) == k_probe_nvml_success)
        f.cc_state = s.devToolsMode ? "devtools" : (s.ccFeature ? "on" : "off");
    } else {
      f.notes.push_back("nvml: this driver has no confidential-computing query");
    }
    auto count = lib.sym<nvmlReturn_t (*)(unsigned*)>("nvmlDeviceGetCount_v2");
    auto handle = lib.sym<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex_v2");
    auto dev_name = lib.sym<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>("nvmlDeviceGetName");
    auto uuid = lib.sym<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>("nvmlDeviceGetUUID");
    auto pci = lib.sym<nvmlReturn_t (*)(nvmlDevice_t, ProbeNvmlPciInfoV3*)>("nvmlDeviceGetPciInfo_v3");
    auto capability = lib.sym<nvmlReturn_t (*)(nvmlDevice_t, int*, int*)>("nvmlDeviceGetCudaComputeCapability");
    auto memory = lib.sym<nvmlReturn_t (*)(nvmlDevice_t, ProbeNvmlMemory*)>("nvmlDeviceGetMemoryInfo");
    unsigned n = 0;
    if (count && handle && count(&n) == k_probe_nvml_success) {
      for (unsigned i = 0; i < n; ++i) {
        nvmlDevice_t d = nullptr;
        if (handle(i, &d) != k_probe_nvml_success) {
          f.notes.push_back("nvml: GPU " + std::to_string(i) + " could not be opened");
          continue;
        }
        resolver::HostGpu g;
        g.index = static_cast<int>(i);
        char text[k_probe_nvml_buffer] = {};
        if (dev_name && dev_name(d, text, sizeof text) == k_probe_nvml_success) g.name = text;
        char id[k_probe_nvml_buffer] = {};
        if (uuid && uuid(d, id, sizeof id) == k_probe_nvml_success) g.uuid = id;
        ProbeNvmlPciInfoV3 p{};
        if (pci && pci(d, &p) == k_probe_nvml_success) {
          char hex[16];
          std::snprintf(hex, sizeof hex, "0x%04x", p.pciDeviceId >> 16);
          g.pci_device_id = hex;
        }
        int major = 0, minor = 0;
        if (capability && capability(d, &major, &minor) == k_probe_nvml_success) g.sm = major * 10 + minor;
        ProbeNvmlMemory m{};
        if (memory && memory(d, &m) == k_probe_nvml_success) g.memory_bytes = m.total;
        f.gpus.push_back(std::move(g));
      }
    }
    shutdown();
    return std::optional<resolver::HostFacts>(std::move(f));
  }

 private:
  std::string m_library;
};

}  // namespace

std::unique_ptr<HostProbe> make_nvml_probe(std::string library) { return std::make_unique<NvmlProbe>(std::move(library)); }

}  // namespace gpuenv::validate
