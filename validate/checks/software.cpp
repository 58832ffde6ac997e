// Software checks: the driver, its version against the lock, conflicting modules, device nodes, persistence,
// the NVSwitch fabric manager, MIG mode against the spec, confidential computing and its attestation, and
// debugging variables. They read DriverState and idle
// health only, so they are cheap and run at every level. libraries_load, framework_smoke and cudnn_smoke need the
// image and live in image.cpp.
#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

#include "base/text.hpp"
#include "validate/checks/check_support.hpp"
#include "validate/checks/judge.hpp"

namespace gpuenv::validate::checks {
namespace {

// Pure host reads: 100 ms is generous and keeps quick's sum low.
constexpr Budget k_host_only{100, 0};
// Evidence from NVML and its verification take tens of milliseconds per GPU; RIMs fetched from a service take
// longer the first time (later runs read them from the cache). Quick keeps within its 15 s promise, so there the
// RIMs should come from a directory or the cache.
constexpr Budget k_attest_quick{400, 300};
constexpr Budget k_attest{3000, 300};
// One NVML read per GPU.
constexpr Budget k_per_gpu_read{100, 200};


class DriverLoaded final : public SpecCheck {
 public:
  DriverLoaded()
      : SpecCheck({"driver_loaded", "software", "An NVIDIA kernel driver is loaded and answers", k_host_only,
                   k_host_only, k_host_only}) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext&) const override { return std::nullopt; }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const DriverState& d = context.driver;
    if (!d.loaded) return {outcome(-1, CheckStatus::fail, "no NVIDIA driver is loaded", "no_driver")};
    std::string message = "NVIDIA driver " + (d.version.empty() ? std::string("(version unknown)") : d.version);
    const std::string cuda = cuda_version_text(d.cuda_driver_version);
    if (!cuda.empty()) message += ", CUDA " + cuda;
    message += " loaded; " + std::to_string(context.gpus.size()) + " GPU(s) selected";
    if (d.cc_state != "unknown" && d.cc_state != "off") message += "; confidential computing " + d.cc_state;
    return {outcome(-1, CheckStatus::pass, message)};
  }
};

class DriverMeetsLock final : public SpecCheck {
 public:
  DriverMeetsLock()
      : SpecCheck({"driver_meets_lock", "software",
                   "The driver is at least the lock's floor and supports the image's CUDA (or forward compatibility)",
                   k_host_only, k_host_only, k_host_only}) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    if (!context.driver.loaded) return std::string("no NVIDIA driver is loaded");
    if (!context.inputs.lock_driver_floor && !context.inputs.lock_cuda)
      return std::string(context.inputs.lock_given ? "the lock has no CUDA and no driver floor: any driver runs it"
                                                   : "no lock given (--lock): no driver floor or CUDA version to compare with");
    return std::nullopt;
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    std::vector<Verdict> verdicts;
    if (context.inputs.lock_driver_floor)
      verdicts.push_back(judge_driver_floor(context.driver.version, *context.inputs.lock_driver_floor));
    if (context.inputs.lock_cuda) {
      // CheckInputs carries no forward-compatibility fact yet, so it is "unknown": a driver too old for the image's
      // CUDA fails rather than being waved through on an assumption.
      verdicts.push_back(judge_driver_cuda(context.driver.cuda_driver_version, *context.inputs.lock_cuda, context.inputs.lock_forward_compat));
    } else {
      verdicts.push_back({CheckStatus::skip, "", "the lock has no CUDA, so the driver's CUDA version is not judged"});
    }
    CheckStatus status = CheckStatus::skip;
    std::string code;
    std::vector<std::string> parts;
    for (const auto& v : verdicts) {
      const CheckStatus before = status;
      status = worse(status, v.status);
      if (status != before && !v.code.empty()) code = v.code;
      parts.push_back(v.message);
    }
    return {outcome(-1, status, join(parts, "; "), status == CheckStatus::pass ? std::string_view{} : std::string_view(code))};
  }
};

class NouveauAbsent final : public SpecCheck {
 public:
  NouveauAbsent()
      : SpecCheck({"nouveau_absent", "software", "The nouveau driver is not loaded", k_host_only, k_host_only,
                   k_host_only}) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext&) const override { return std::nullopt; }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    if (context.driver.nouveau_loaded)
      return {outcome(-1, CheckStatus::fail, "the nouveau kernel module is loaded (/proc/modules)", "nouveau_loaded")};
    return {outcome(-1, CheckStatus::pass, "nouveau is not loaded")};
  }
};

class DeviceNodes final : public SpecCheck {
 public:
  DeviceNodes()
      : SpecCheck({"device_nodes", "software", "/dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidiaN exist", k_host_only,
                   k_host_only, k_host_only}) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    if (!context.driver.loaded) return std::string("no NVIDIA driver is loaded");
    return std::nullopt;
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const auto& missing = context.driver.device_nodes_missing;
    if (!missing.empty())
      return {outcome(-1, CheckStatus::fail, "missing device node(s): " + join(missing, ", "), "device_node_missing")};
    return {outcome(-1, CheckStatus::pass, "all NVIDIA device nodes are present")};
  }
};

class PersistenceMode final : public SpecCheck {
 public:
  PersistenceMode()
      : SpecCheck({"persistence_mode", "software", "Persistence mode is on (warns when off)", k_per_gpu_read,
                   k_per_gpu_read, k_per_gpu_read}) {}
  // Reads each GPU's state: skipped without GPUs and after a GPU hung, like the GPU checks.
  [[nodiscard]] bool uses_gpu() const override { return true; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    return needs_driver_and_gpus(context);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    std::vector<GpuOutcome> out;
    for (const auto& gpu : context.gpus) {
      if (past_deadline(context)) {
        out.push_back(out_of_time(gpu.index));
        continue;
      }
      auto health = context.backend.health(gpu.index);
      if (!health) {
        out.push_back(failed(gpu.index, "reading persistence mode", health.error()));
      } else if (!health->persistence_mode) {
        out.push_back(skipped(gpu.index, "the driver does not report persistence mode for " + gpu_label(gpu)));
      } else if (!*health->persistence_mode) {
        out.push_back(outcome(gpu.index, CheckStatus::warn, "persistence mode is off on " + gpu_label(gpu), "persistence_off"));
      } else {
        out.push_back(outcome(gpu.index, CheckStatus::pass, "persistence mode is on"));
      }
    }
    return out;
  }
};

class FabricManager final : public SpecCheck {
 public:
  FabricManager()
      : SpecCheck({"fabric_manager", "software", "The fabric manager runs on NVSwitch systems", k_host_only,
                   k_host_only, k_host_only}) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    if (!context.driver.loaded) return std::string("no NVIDIA driver is loaded");
    if (!context.driver.nvswitch_present) return std::string("no NVSwitch: the fabric manager is not needed");
    return std::nullopt;
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const auto& running = context.driver.fabric_manager_running;
    if (!running)
      return {skipped(-1, "NVSwitch present, but the driver does not report the fabric manager's state",
                      "check `systemctl status nvidia-fabricmanager`")};
    if (!*running)
      return {outcome(-1, CheckStatus::fail, "NVSwitch present and the fabric manager is not running or failed training",
                      "fabric_manager_down")};
    return {outcome(-1, CheckStatus::pass, "the fabric manager is running")};
  }
};

class MigState final : public SpecCheck {
 public:
  MigState()
      : SpecCheck({"mig_state", "software", "Each GPU's MIG mode matches the spec", k_per_gpu_read, k_per_gpu_read,
                   k_per_gpu_read}) {}
  // Reads each GPU's state: skipped without GPUs and after a GPU hung, like the GPU checks.
  [[nodiscard]] bool uses_gpu() const override { return true; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    if (!context.inputs.spec_mig) return std::string("the spec does not ask for a MIG mode");
    return needs_driver_and_gpus(context);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const bool want = context.inputs.spec_mig.value_or(false);
    const char* want_text = want ? "on" : "off";
    std::vector<GpuOutcome> out;
    for (const auto& gpu : context.gpus) {
      if (past_deadline(context)) {
        out.push_back(out_of_time(gpu.index));
        continue;
      }
      auto health = context.backend.health(gpu.index);
      if (!health) {
        out.push_back(failed(gpu.index, "reading the MIG mode", health.error()));
        continue;
      }
      const bool pending = health->mig_pending_change.value_or(false);
      if (!health->mig_enabled) {
        // No MIG mode reported: the GPU has no MIG (or the driver cannot tell), which satisfies "off" only.
        if (want)
          out.push_back(outcome(gpu.index, CheckStatus::fail,
                                "the spec asks for MIG on, but " + gpu_label(gpu) + " reports no MIG mode", "mig_mismatch"));
        else
          out.push_back(outcome(gpu.index, CheckStatus::pass, "no MIG mode reported; off, as the spec asks"));
        continue;
      }
      const bool have = *health->mig_enabled;
      const char* have_text = have ? "on" : "off";
      if (have != want) {
        std::string message = std::string("MIG is ") + have_text + " on " + gpu_label(gpu) + "; the spec asks for " + want_text;
        if (pending) message += " (a pending change applies it at the next GPU reset)";
        out.push_back(outcome(gpu.index, CheckStatus::fail, message, "mig_mismatch"));
      } else if (pending) {
        out.push_back(outcome(gpu.index, CheckStatus::warn,
                              std::string("MIG is ") + have_text + " as the spec asks, but a pending change flips it at the next GPU reset",
                              "mig_pending"));
      } else {
        out.push_back(outcome(gpu.index, CheckStatus::pass, std::string("MIG is ") + have_text + ", as the spec asks"));
      }
    }
    return out;
  }
};

// Variables that change how CUDA or NCCL run. The first ten are the list DCGM's diagnostic warns about
// (NVIDIA/DCGM nvvs/src/Software.cpp, checkForBadEnvVaribles); the rest are gpuenv's additions. A value listed as
// harmless (case-insensitive) does not warn.
struct WatchedVariable {
  const char* name;
  const char* why;
  std::vector<const char*> harmless;
};

const std::vector<WatchedVariable>& watched_variables() {
  static const std::vector<WatchedVariable> k_list = {
      {"NSIGHT_CUDA_DEBUGGER", "runs CUDA under the Nsight debugger", {}},
      {"CUDA_INJECTION32_PATH", "injects a library into every CUDA process", {}},
      {"CUDA_INJECTION64_PATH", "injects a library into every CUDA process", {}},
      {"CUDA_AUTO_BOOST", "overrides the clock boost policy", {}},
      {"CUDA_ENABLE_COREDUMP_ON_EXCEPTION", "writes GPU core dumps and slows exceptions", {"0"}},
      {"CUDA_COREDUMP_FILE", "writes GPU core dumps", {}},
      {"CUDA_DEVICE_WAITS_ON_EXCEPTION", "halts the GPU on an exception for a debugger", {"0"}},
      {"CUDA_PROFILE", "enables the legacy command-line profiler", {"0"}},
      {"COMPUTE_PROFILE", "enables the legacy command-line profiler", {"0"}},
      {"OPENCL_PROFILE", "enables the legacy command-line profiler", {"0"}},
      {"CUDA_LAUNCH_BLOCKING", "serialises every kernel launch, so throughput is wrong", {"0"}},
      {"LD_PRELOAD", "interposes libraries into every process (profilers, shims)", {}},
      {"NCCL_DEBUG", "verbose NCCL logging slows collectives", {"WARN", "VERSION"}},
      {"NCCL_P2P_DISABLE", "routes NCCL around peer-to-peer links", {"0"}},
      {"NCCL_SHM_DISABLE", "routes NCCL around shared memory", {"0"}},
      {"NCCL_IB_DISABLE", "routes NCCL around InfiniBand", {"0"}},
  };
  return k_list;
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

class EnvVars final : public SpecCheck {
 public:
  EnvVars()
      : SpecCheck({"env_vars", "software",
                   "No debugging or injection variables are set (CUDA_INJECTION64_PATH, LD_PRELOAD, "
                   "CUDA_LAUNCH_BLOCKING, ...)",
                   k_host_only, k_host_only, k_host_only}) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext&) const override { return std::nullopt; }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const auto& env = context.inputs.environment;
    std::vector<std::string> found;
    for (const auto& var : watched_variables()) {
      auto it = env.find(var.name);
      if (it == env.end() || it->second.empty()) continue;
      const bool harmless = std::any_of(var.harmless.begin(), var.harmless.end(),
                                        [&](const char* h) { return equal_ignoring_case(it->second, h); });
      if (!harmless) found.push_back(std::string(var.name) + "=" + it->second + " (" + var.why + ")");
    }
    // Reported, not judged: they decide which GPUs CUDA sees and how it numbers them, which explains a GPU that
    // NVML lists but CUDA cannot open.
    std::vector<std::string> noted;
    for (const char* name : {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}) {
      auto it = env.find(name);
      if (it != env.end()) noted.push_back(std::string(name) + "=" + it->second);
    }
    std::string note = noted.empty() ? std::string() : "; noted: " + join(noted, ", ");
    if (!found.empty()) return {outcome(-1, CheckStatus::warn, "set: " + join(found, "; ") + note, "env_debug_var")};
    return {outcome(-1, CheckStatus::pass, "no debugging or injection variables are set" + note)};
  }
};

// Confidential computing as the lock asks for it (gpu.confidential: off, allowed, required). gpuenv only reads
// the state (nvmlSystemGetConfComputeState and ...GpusReadyState); it never sets the ready state, which belongs to
// the attestation flow.
class CcMode final : public SpecCheck {
 public:
  CcMode()
      : SpecCheck({"cc_mode", "software",
                   "Confidential computing is on when the lock requires it (not in dev-tools mode), off when the lock "
                   "says off, and the GPUs accept work when it is on",
                   k_host_only, k_host_only, k_host_only}) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    if (!context.driver.loaded) return std::string("no NVIDIA driver is loaded");
    return std::nullopt;
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const DriverState& d = context.driver;
    const std::string asked = context.inputs.lock_confidential.value_or("");
    const std::string state = d.cc_state;
    std::string seen = "confidential computing " + state;
    if (state == "unknown") seen = "the driver does not report the confidential-computing state";
    if (d.cc_gpus_ready) seen += *d.cc_gpus_ready ? ", GPUs accept work" : ", GPUs do not accept work yet";
    const std::string versus = asked.empty() ? std::string("no lock given") : "the lock says " + asked;
    GpuOutcome out;
    if (asked == "required" && state == "unknown") {
      out = outcome(-1, CheckStatus::fail, seen + "; " + versus + ", so it cannot be confirmed", "cc_unknown");
    } else if (asked == "required" && state == "off") {
      out = outcome(-1, CheckStatus::fail, seen + "; " + versus, "cc_mismatch");
    } else if (asked == "required" && state == "devtools") {
      out = outcome(-1, CheckStatus::fail, seen + " (no confidentiality: memory is readable for debugging); " + versus,
                    "cc_devtools");
    } else if ((state == "on" || state == "devtools") && d.cc_gpus_ready && !*d.cc_gpus_ready) {
      out = outcome(-1, CheckStatus::fail, seen + "; " + versus + ": CUDA work is refused until attestation sets the "
                                              "ready state",
                    "cc_not_ready");
    } else if (asked == "off" && (state == "on" || state == "devtools")) {
      out = outcome(-1, CheckStatus::warn, seen + "; " + versus + " (host copies then go through encrypted bounce buffers "
                                              "and are slower)",
                    "cc_mismatch");
    } else {
      out = outcome(-1, CheckStatus::pass, seen + "; " + versus);
    }
    out.metrics = {{"cc_on", state == "on" ? 1.0 : 0.0, "bool"}};
    return {out};
  }
};

/// 32 random bytes from the kernel (getrandom), for a nonce no one could have foreseen.
std::optional<std::string> fresh_nonce() {
  std::string n(32, '\0');
  std::size_t got = 0;
  while (got < n.size()) {
    const ssize_t r = ::getrandom(n.data() + got, n.size() - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    got += static_cast<std::size_t>(r);
  }
  return n;
}

// Confidential-computing attestation of every GPU (docs/attestation.md): evidence from the backend for a fresh
// nonce, judged by the verifier the caller wires (CheckInputs::attest: signature, chain, RIMs, measurements, NVML's
// versions, CC environment and mode, by the policy). Runs at every level when the lock requires confidential
// computing; at standard and long when it is on otherwise. A failure FAILs when the lock requires CC, else WARNs.
class CcAttestation final : public SpecCheck {
 public:
  CcAttestation()
      : SpecCheck({"cc_attestation", "software",
                   "Each GPU's confidential-computing attestation (signed report, certificate chain, RIMs and golden "
                   "measurements, NVML's versions) passes the attestation policy",
                   k_attest_quick, k_attest, k_attest}) {}
  [[nodiscard]] bool uses_gpu() const override { return true; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    if (auto why = needs_driver_and_gpus(context)) return why;
    const bool required = context.inputs.lock_confidential.value_or("") == "required";
    const bool on = context.driver.cc_state == "on" || context.driver.cc_state == "devtools";
    if (!required && !on) return std::string("confidential computing is off and the lock does not require it");
    if (!required && context.inputs.level == Level::quick) return std::string("quick attests only when the lock requires confidential computing");
    if (!context.inputs.attest) return std::string("no attestation verifier is wired in this run");
    return std::nullopt;
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const bool required = context.inputs.lock_confidential.value_or("") == "required";
    const auto nonce = fresh_nonce();
    std::vector<GpuOutcome> out;
    for (const GpuInfo& gpu : context.gpus) {
      if (past_deadline(context)) break;
      if (!nonce) {
        out.push_back(outcome(gpu.index, CheckStatus::fail, "no random nonce: getrandom failed", "backend_error"));
        continue;
      }
      auto evidence = context.backend.cc_evidence(gpu.index, *nonce);
      if (!evidence) {
        out.push_back(failed(gpu.index, "reading the attestation evidence", evidence.error(), "cc_no_evidence"));
        continue;
      }
      if (!*evidence) {
        out.push_back(outcome(gpu.index, required ? CheckStatus::fail : CheckStatus::warn,
                              gpu_label(gpu) + " gives no attestation evidence (driver state: confidential computing " + context.driver.cc_state + ")",
                              "cc_no_evidence"));
        continue;
      }
      // A replay serves recorded evidence: it answers the recorded nonce, which the report then says it used.
      const bool replay = context.backend.name() == "replay";
      const std::string& expected = replay ? (*evidence)->nonce : *nonce;
      auto verdict = context.inputs.attest(**evidence, expected, context.driver);
      if (!verdict) {
        out.push_back(failed(gpu.index, "judging the attestation evidence", verdict.error(), "cc_attestation_failed"));
        continue;
      }
      GpuOutcome o;
      std::size_t passed = 0;
      for (const auto& c : verdict->claims) passed += c.status == "pass";
      const std::string counts = std::to_string(passed) + " of " + std::to_string(verdict->claims.size()) + " claims pass" +
                                 (replay ? " (recorded evidence and its nonce)" : " (fresh nonce)");
      if (verdict->pass) {
        o = outcome(gpu.index, CheckStatus::pass, "attested: " + counts);
      } else {
        o = outcome(gpu.index, required ? CheckStatus::fail : CheckStatus::warn, "not attested: " + join(verdict->reasons, "; ") + " (" + counts + ")",
                    "cc_attestation_failed");
      }
      o.metrics.push_back({"attested", verdict->pass ? 1.0 : 0.0, "bool"});
      // Each claim as a figure (1 pass, 0 fail, -1 not checked): the record of a marked image keeps the lowest.
      for (const auto& c : verdict->claims) {
        std::string name = "claim_" + c.name;
        std::replace(name.begin(), name.end(), '.', '_');
        o.metrics.push_back({name, c.status == "pass" ? 1.0 : c.status == "fail" ? 0.0 : -1.0, "claim"});
      }
      out.push_back(std::move(o));
    }
    return out;
  }
};

}  // namespace

std::vector<std::unique_ptr<Check>> software_checks() {
  std::vector<std::unique_ptr<Check>> out;
  out.push_back(std::make_unique<DriverLoaded>());
  out.push_back(std::make_unique<DriverMeetsLock>());
  out.push_back(std::make_unique<NouveauAbsent>());
  out.push_back(std::make_unique<DeviceNodes>());
  out.push_back(std::make_unique<PersistenceMode>());
  out.push_back(std::make_unique<FabricManager>());
  out.push_back(std::make_unique<MigState>());
  out.push_back(std::make_unique<CcMode>());
  out.push_back(std::make_unique<CcAttestation>());
  out.push_back(std::make_unique<EnvVars>());
  out.push_back(cdi_spec_check());
  return out;
}

}  // namespace gpuenv::validate::checks
