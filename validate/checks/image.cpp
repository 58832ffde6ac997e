// Image checks: what runs inside the image under validation (`gpuenv validate --image`). libraries_load,
// framework_smoke and cudnn_smoke share one run of the probe (image_probe.cpp) through a cache the factory creates,
// so the image's Python starts once per validation; each check judges its part of the probe's report.
//
// The probe's report (gpuenv-image-probe-v1; every field may be missing or null, every error is a string):
//   {"schema", "python", "error", "devices": ["/dev/nvidia0", ...],
//    "libraries": {"error", "timed_out",
//                  "driver"|"cudart"|"cublas"|"cudnn": {"loaded", "path", "error", "version", "version_text",
//                                                        cudart only: "device_count", "device_error", "device_error_code"}},
//    "frameworks": {NAME: {"module", "imported", "error", "timed_out", "version", "cuda", "cudnn", "gpu_visible",
//                          "device_count", "device_name", "gpu_error",
//                          "matmul"|"conv": {"max_abs_err", "max_abs_ref", "error", conv only: "cudnn_enabled"}}}}
//
// The probe's own time is bounded (k_probe_timeout, below each check's deadline) so that a hang inside the image is
// FAIL `image_timeout` from the check rather than a watchdog `hang` that would mark the GPUs hung.
#include <algorithm>
#include <cctype>
#include <mutex>
#include <nlohmann/json.hpp>

#include "base/text.hpp"
#include "validate/checks/check_support.hpp"

namespace gpuenv::validate::checks {
namespace {

using nlohmann::json;

// Importing a framework from a cold disk and initialising CUDA takes tens of seconds; the checks' deadlines leave
// 10 s above the probe's time so that the probe's timeout, not the watchdog, ends a hang.
constexpr std::chrono::seconds k_probe_timeout_standard{90};
constexpr std::chrono::seconds k_probe_timeout_long{180};
constexpr std::chrono::seconds k_deadline_margin{10};
constexpr Budget k_standard_budget{static_cast<int>((k_probe_timeout_standard + k_deadline_margin).count() * 1000), 0};
constexpr Budget k_long_budget{static_cast<int>((k_probe_timeout_long + k_deadline_margin).count() * 1000), 0};
// The probe stops its own children this long before gpuenv kills it, so that it can still print its report.
constexpr int k_probe_inner_margin_s = 5;
// A GPU result may differ from the CPU's by this fraction of the largest reference value (float32, TF32 off).
constexpr double k_relative_tolerance = 1e-3;


/// The value of `key` in `j` as a string, or "" when missing, null or not a string.
std::string text(const json& j, const char* key) {
  if (!j.is_object()) return {};
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool flag(const json& j, const char* key) {
  if (!j.is_object()) return false;
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::optional<double> number(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

const json& member(const json& j, const char* key) {
  static const json k_null;
  if (!j.is_object()) return k_null;
  const auto it = j.find(key);
  return it == j.end() ? k_null : *it;
}

/// "2.5.1+cu124" -> "2.5.1": the local part names the build, not the release.
std::string release_of(const std::string& version) { return version.substr(0, version.find('+')); }

/// The leading numbers of a dotted version ("9.1.0" -> {9, 1, 0}; "8" -> {8}).
std::vector<long> components(const std::string& version) {
  std::vector<long> out;
  std::size_t at = 0;
  while (at < version.size() && std::isdigit(static_cast<unsigned char>(version[at]))) {
    long value = 0;
    while (at < version.size() && std::isdigit(static_cast<unsigned char>(version[at]))) {
      value = value * 10 + (version[at] - '0');
      if (value > 1000000) value = 1000000;
      ++at;
    }
    out.push_back(value);
    if (at < version.size() && version[at] == '.') ++at;
    else break;
  }
  return out;
}

/// Whether two versions agree on their first `depth` components, as far as both give them (at least the major).
bool agree(const std::string& a, const std::string& b, std::size_t depth) {
  const auto x = components(a), y = components(b);
  if (x.empty() || y.empty()) return false;
  const std::size_t n = std::min({depth, x.size(), y.size()});
  return std::equal(x.begin(), x.begin() + static_cast<long>(n), y.begin());
}

std::string scientific(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1e", value);
  return buffer;
}

std::string tail(const std::string& s, std::size_t n) {
  std::string t = s.size() > n ? "..." + s.substr(s.size() - n) : s;
  std::replace(t.begin(), t.end(), '\n', ' ');
  return t;
}

/// Problems and notes found by one check, folded into a single host-wide outcome: the worst status, the code of
/// the first problem of that status, every problem, then the notes.
class Findings {
 public:
  void add(CheckStatus status, std::string message, std::string code) {
    if (status == CheckStatus::fail && m_status != CheckStatus::fail) m_code = code;
    if (status == CheckStatus::warn && m_status == CheckStatus::pass) m_code = code;
    m_status = worse(m_status, status);
    m_problems.push_back(std::move(message));
  }
  void fail(std::string message, std::string code) { add(CheckStatus::fail, std::move(message), std::move(code)); }
  void note(std::string message) { m_notes.push_back(std::move(message)); }
  void metric(std::string name, double value, std::string unit) {
    m_metrics.push_back(Metric{std::move(name), value, std::move(unit)});
  }
  [[nodiscard]] GpuOutcome outcome() const {
    std::vector<std::string> parts = m_problems;
    parts.insert(parts.end(), m_notes.begin(), m_notes.end());
    GpuOutcome out = checks::outcome(-1, m_status, join(parts, "; "),
                                     m_status == CheckStatus::pass ? std::string_view{} : std::string_view(m_code));
    out.metrics = m_metrics;
    return out;
  }

 private:
  CheckStatus m_status = CheckStatus::pass;
  std::string m_code;
  std::vector<std::string> m_problems, m_notes;
  std::vector<Metric> m_metrics;
};

/// What the probe run gave: its report, or the outcome that ends every image check (timeout, no JSON).
struct ProbeResult {
  json report;
  std::optional<GpuOutcome> failure;
};

/// The probe's report from its standard output: the whole output, or else its last line, as a JSON object.
std::optional<json> parse_report(const std::string& out) {
  auto whole = json::parse(out, nullptr, false);
  if (!whole.is_discarded() && whole.is_object()) return whole;
  std::size_t end = out.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return std::nullopt;
  const std::size_t start = out.rfind('\n', end);
  auto last = json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1)),
                          nullptr, false);
  if (!last.is_discarded() && last.is_object()) return last;
  return std::nullopt;
}

/// Runs the probe once per validation and keeps its result for the three checks (they may run on different
/// threads, one after another; an abandoned one may still hold the lock, and then the next waits or hangs itself).
class ProbeCache {
 public:
  const ProbeResult& get(const CheckContext& context) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_result) m_result = run(context);
    return *m_result;
  }

 private:
  static ProbeResult run(const CheckContext& context) {
    const CheckInputs& in = context.inputs;
    const std::string image = in.image.empty() ? std::string("the image") : "image " + in.image;
    ProbeResult r;
    const auto cap = in.level == Level::long_ ? k_probe_timeout_long : k_probe_timeout_standard;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(context.deadline - std::chrono::steady_clock::now()) -
                      std::chrono::milliseconds(2000);
    const auto timeout = std::max(std::chrono::milliseconds(1000), std::min<std::chrono::milliseconds>(cap, left));

    json args = json::object();
    args["cuda"] = in.lock_cuda ? json(*in.lock_cuda) : json(nullptr);
    args["cudnn"] = in.lock_cudnn ? json(*in.lock_cudnn) : json(nullptr);
    args["frameworks"] = json::array();
    for (const auto& [name, version] : in.lock_frameworks) args["frameworks"].push_back(name);
    args["timeout_s"] = std::max<long long>(1, timeout.count() / 1000 - k_probe_inner_margin_s);
    if (!in.gpus.empty()) {
      // The GPUs chosen with --gpus, by UUID: CUDA numbers GPUs its own way inside the image.
      std::vector<std::string> uuids;
      for (const auto& g : context.gpus)
        if (!g.uuid.empty()) uuids.push_back(g.uuid);
      if (uuids.size() == context.gpus.size() && !uuids.empty()) args["visible_devices"] = join(uuids, ",");
    }
    const std::vector<std::string> command = {"python3", "-c", std::string(image_probe_script()), args.dump()};

    Result<ImageRun> ran = [&]() -> Result<ImageRun> {
      try {
        return in.run_in_image(command, timeout);
      } catch (const std::exception& e) {
        return make_error(ErrorKind::internal, "validate.image_run", e.what(), in.image, "");
      }
    }();
    if (!ran) {
      r.failure = outcome(-1, CheckStatus::fail, "could not run python3 in " + image + ": " + ran.error().message, "image_probe_failed");
      return r;
    }
    if (ran->timed_out) {
      r.failure = outcome(-1, CheckStatus::fail,
                          "the probe in " + image + " did not finish within " + std::to_string(timeout.count() / 1000) +
                              " s and was killed",
                          "image_timeout");
      return r;
    }
    auto report = parse_report(ran->out);
    if (!report || text(*report, "schema") != "gpuenv-image-probe-v1") {
      std::string message = "the probe in " + image + " printed no report (exit status " + std::to_string(ran->exit_code) + ")";
      std::string out = ran->out;
      out.erase(0, out.find_first_not_of(" \t\r\n"));
      message += out.empty() ? "; no output" : "; output: '" + tail(out.substr(0, 200), 200) + "'";
      if (!ran->err.empty()) message += "; stderr: '" + tail(ran->err, 300) + "'";
      if (ran->exit_code == 127) message += " (is there a python3 on the image's PATH?)";
      r.failure = outcome(-1, CheckStatus::fail, message, "image_probe_failed");
      return r;
    }
    r.report = std::move(*report);
    return r;
  }

  std::mutex m_mutex;
  std::optional<ProbeResult> m_result;
};

/// The SKIP reasons every image check shares.
std::optional<std::string> image_not_applicable(const CheckContext& context) {
  if (!context.inputs.run_in_image) return std::string("no --image given");
  if (context.backend.name() == "replay") return std::string("the replay backend does not run the image's framework");
  return needs_driver_and_gpus(context);
}

class ImageCheck : public SpecCheck {
 public:
  ImageCheck(std::string key, std::string description, std::shared_ptr<ProbeCache> probe)
      : SpecCheck({std::move(key), "image", std::move(description), std::nullopt, k_standard_budget, k_long_budget}),
        m_probe(std::move(probe)) {}
  [[nodiscard]] bool uses_gpu() const override { return true; }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const ProbeResult& probe = m_probe->get(context);
    if (probe.failure) return {*probe.failure};
    return {judge(context, probe.report)};
  }

 protected:
  [[nodiscard]] virtual GpuOutcome judge(const CheckContext& context, const json& report) const = 0;

 private:
  std::shared_ptr<ProbeCache> m_probe;
};

/// "inside the image: device nodes /dev/nvidia0, /dev/nvidiactl; libcuda.so.1: not loaded (...)": why a GPU may be
/// invisible there.
std::string inside_view(const json& report) {
  std::vector<std::string> nodes;
  for (const auto& d : member(report, "devices"))
    if (d.is_string()) nodes.push_back(d.get<std::string>());
  std::string out = "inside the image: " + (nodes.empty() ? std::string("no /dev/nvidia* device nodes") : "device nodes " + join(nodes, ", "));
  const json& driver = member(member(report, "libraries"), "driver");
  if (driver.is_object()) {
    if (flag(driver, "loaded")) out += "; libcuda.so.1 loads (driver CUDA " + text(driver, "version_text") + ")";
    else out += "; libcuda.so.1 does not load (" + text(driver, "error") + ")";
  }
  return out;
}

class LibrariesLoad final : public ImageCheck {
 public:
  explicit LibrariesLoad(std::shared_ptr<ProbeCache> probe)
      : ImageCheck("libraries_load",
                   "Inside the image, libcudart, libcublas and libcudnn load against the host driver and match the "
                   "lock's CUDA and cuDNN versions",
                   std::move(probe)) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    if (auto reason = image_not_applicable(context)) return reason;
    if (!context.inputs.lock_cuda && !context.inputs.lock_cudnn)
      return std::string("the lock names no CUDA or cuDNN version (no lock in the image and no --lock)");
    return std::nullopt;
  }

 protected:
  [[nodiscard]] GpuOutcome judge(const CheckContext& context, const json& report) const override {
    const CheckInputs& in = context.inputs;
    const json& libs = member(report, "libraries");
    Findings f;
    if (flag(libs, "timed_out")) {
      f.fail("loading the CUDA libraries in the image " + text(libs, "error"), "image_timeout");
      return f.outcome();
    }
    if (!text(libs, "error").empty() && !member(libs, "cudart").is_object()) {
      f.fail("the probe could not load the CUDA libraries: " + text(libs, "error"), "image_probe_failed");
      return f.outcome();
    }
    struct Library {
      const char* key;
      const char* name;
      std::optional<std::string> lock;  // the lock's version this library must match
      std::size_t depth;                // how many components must agree
      const char* lock_what;
    };
    const std::optional<std::string> cuda = in.lock_cuda;
    const Library wanted[] = {{"cudart", "libcudart", cuda, 2, "CUDA"},
                              {"cublas", "libcublas", cuda, 1, "CUDA"},
                              {"cudnn", "libcudnn", in.lock_cudnn, 2, "cuDNN"}};
    std::vector<std::string> good;
    for (const auto& lib : wanted) {
      const json& entry = member(libs, lib.key);
      const std::string name = lib.name;
      if (!flag(entry, "loaded")) {
        const std::string why = text(entry, "error").empty() ? std::string("not found") : text(entry, "error");
        if (lib.lock) f.fail(name + " does not load: " + why, "image_library_load_failed");
        else f.note(name + " not found (the lock names no " + lib.lock_what + " version)");
        continue;
      }
      const std::string version = text(entry, "version_text");
      const std::string where = text(entry, "path").empty() ? std::string() : " (" + text(entry, "path") + ")";
      if (version.empty()) {
        f.fail(name + where + " loads but reports no version: " + text(entry, "error"), "image_library_load_failed");
        continue;
      }
      if (lib.lock && !agree(version, *lib.lock, lib.depth)) {
        f.fail(name + " " + version + where + " does not match the lock's " + lib.lock_what + " " + *lib.lock +
                   " (major" + (lib.depth > 1 ? std::string(".minor") : std::string()) + " must agree)",
               "image_cuda_mismatch");
        continue;
      }
      good.push_back(name + " " + version);
    }
    // cudaGetDeviceCount is the first call that needs the driver: it proves the runtime works against it.
    const json& cudart = member(libs, "cudart");
    if (flag(cudart, "loaded")) {
      const auto code = number(cudart, "device_error_code");
      const std::string error = text(cudart, "device_error");
      const auto count = number(cudart, "device_count").value_or(0);
      if (code && *code == 35) {
        f.fail("libcudart cannot use the host driver: " + error, "driver_cuda_too_old");
      } else if ((code && *code == 100) || (error.empty() && count == 0)) {
        f.fail("libcudart sees no GPU" + (error.empty() ? std::string() : ": " + error) + "; " + inside_view(report), "image_no_gpu");
      } else if (!error.empty()) {
        f.fail("libcudart cannot use the GPU: " + error, "image_library_load_failed");
      } else {
        f.note(std::to_string(static_cast<long long>(count)) + " GPU(s) visible to libcudart");
        f.metric("gpus_visible", count, "count");
      }
    }
    if (!good.empty()) {
      std::string lock;
      if (in.lock_cuda) lock += "CUDA " + *in.lock_cuda;
      if (in.lock_cudnn) lock += std::string(lock.empty() ? "" : ", ") + "cuDNN " + *in.lock_cudnn;
      f.note(join(good, ", ") + " load and match the lock (" + lock + ")");
    }
    return f.outcome();
  }
};

/// The state of one framework in the probe's report, or a problem that stops every further judgement of it.
const json* usable_framework(const std::string& name, const json& report, Findings& f) {
  const json& fw = member(member(report, "frameworks"), name.c_str());
  if (!fw.is_object()) {
    f.fail("the probe reported nothing for " + name + (text(report, "error").empty() ? "" : ": " + text(report, "error")),
           "image_probe_failed");
    return nullptr;
  }
  if (flag(fw, "timed_out")) {
    f.fail(name + ": the probe " + text(fw, "error"), "image_timeout");
    return nullptr;
  }
  if (!flag(fw, "imported")) {
    f.fail("import " + (text(fw, "module").empty() ? name : text(fw, "module")) + " failed in the image: " +
               (text(fw, "error").empty() ? std::string("no error reported") : text(fw, "error")),
           "image_import_failed");
    return nullptr;
  }
  if (!text(fw, "error").empty()) {
    f.fail(name + " failed in the image: " + text(fw, "error"), "image_framework_error");
    return nullptr;
  }
  if (!flag(fw, "gpu_visible")) {
    std::string message = name + " sees no GPU in the image";
    if (!text(fw, "gpu_error").empty()) message += " (" + text(fw, "gpu_error") + ")";
    f.fail(message + "; " + inside_view(report), "image_no_gpu");
    return nullptr;
  }
  return &fw;
}

/// Judges a GPU-against-CPU comparison ("matmul" or "conv") of framework `name`; returns the relative error when
/// it was within the tolerance.
std::optional<double> judge_comparison(const std::string& name, const std::string& what, const json& cmp,
                                       const std::string& mismatch_code, Findings& f) {
  if (!cmp.is_object()) {
    f.fail(name + ": the probe did not run the " + what, "image_probe_failed");
    return std::nullopt;
  }
  if (!text(cmp, "error").empty()) {
    f.fail(name + ": the " + what + " on the GPU failed: " + text(cmp, "error"), "image_framework_error");
    return std::nullopt;
  }
  const auto err = number(cmp, "max_abs_err"), ref = number(cmp, "max_abs_ref");
  if (!err || !ref) {
    f.fail(name + ": the probe reported no result for the " + what, "image_probe_failed");
    return std::nullopt;
  }
  if (!(*ref > 0)) {
    f.fail(name + ": the CPU reference of the " + what + " is all zeros, so the comparison proves nothing", mismatch_code);
    return std::nullopt;
  }
  const double relative = *err / *ref;
  if (!(relative <= k_relative_tolerance)) {
    f.fail(name + ": the " + what + " on the GPU differs from the CPU result: max |difference| " + scientific(*err) +
               " against max |value| " + scientific(*ref) + " (relative " + scientific(relative) + " > " +
               scientific(k_relative_tolerance) + ")",
           mismatch_code);
    return std::nullopt;
  }
  return relative;
}

/// vLLM and SGLang compute through the torch they pin, which the lock lists and the probe exercises on its own.
bool is_serving_framework(const std::string& name) { return name == "vllm" || name == "sglang"; }

/// A serving framework of the lock: it imports in the image at the lock's version (no GPU is needed for that).
void judge_serving_import(const std::string& name, const std::string& lock_version, const json& report, Findings& f) {
  const json& fw = member(member(report, "frameworks"), name.c_str());
  if (!fw.is_object() || !flag(fw, "imported")) {
    const std::string why = fw.is_object() ? text(fw, "error") : text(report, "error");
    f.fail("import " + name + " failed in the image: " + (why.empty() ? std::string("no error reported") : why),
           fw.is_object() && flag(fw, "timed_out") ? "image_timeout" : "image_import_failed");
    return;
  }
  const std::string version = text(fw, "version");
  if (!lock_version.empty() && release_of(version) != release_of(lock_version)) {
    f.fail(name + " " + (version.empty() ? std::string("(no version)") : version) + " in the image, but the lock has " + lock_version,
           "image_framework_mismatch");
    return;
  }
  f.note(name + " " + version + " imports (it computes through the lock's torch, checked on its own)");
}

class FrameworkSmoke final : public ImageCheck {
 public:
  explicit FrameworkSmoke(std::shared_ptr<ProbeCache> probe)
      : ImageCheck("framework_smoke",
                   "Inside the image, each framework of the lock imports at the lock's version, sees the GPU, "
                   "computes a matmul equal to the CPU's, and reports the lock's CUDA and cuDNN",
                   std::move(probe)) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    if (auto reason = image_not_applicable(context)) return reason;
    if (context.inputs.lock_frameworks.empty())
      return std::string("the lock names no framework (torch, tensorflow, jax) to import");
    return std::nullopt;
  }

 protected:
  [[nodiscard]] GpuOutcome judge(const CheckContext& context, const json& report) const override {
    const CheckInputs& in = context.inputs;
    Findings f;
    for (const auto& [name, lock_version] : in.lock_frameworks) {
      if (is_serving_framework(name)) {
        judge_serving_import(name, lock_version, report, f);
        continue;
      }
      const json* fw = usable_framework(name, report, f);
      if (!fw) continue;
      const std::string version = text(*fw, "version");
      bool ok = true;
      if (!lock_version.empty() && release_of(version) != release_of(lock_version)) {
        f.fail(name + " " + (version.empty() ? std::string("(no version)") : version) + " in the image, but the lock has " +
                   lock_version,
               "image_framework_mismatch");
        ok = false;
      }
      const std::string cuda = text(*fw, "cuda"), cudnn = text(*fw, "cudnn");
      if (in.lock_cuda && !cuda.empty() && !agree(cuda, *in.lock_cuda, 2)) {
        f.fail(name + " was built for CUDA " + cuda + ", the lock's CUDA is " + *in.lock_cuda, "image_cuda_mismatch");
        ok = false;
      }
      if (in.lock_cudnn && !cudnn.empty() && !agree(cudnn, *in.lock_cudnn, 2)) {
        f.fail(name + " reports cuDNN " + cudnn + ", the lock's cuDNN is " + *in.lock_cudnn, "image_cuda_mismatch");
        ok = false;
      }
      const auto relative = judge_comparison(name, "256x256 matmul", member(*fw, "matmul"), "image_matmul_mismatch", f);
      if (!relative) ok = false;
      else f.metric(name + "_matmul_relative_error", *relative, "ratio");
      if (!ok) continue;
      std::string message = name + " " + version + " imports";
      const auto count = number(*fw, "device_count").value_or(0);
      message += ", sees " + std::to_string(static_cast<long long>(count)) + " GPU(s)";
      if (!text(*fw, "device_name").empty()) message += " (" + text(*fw, "device_name") + ")";
      message += ", matmul matches the CPU (relative error " + scientific(*relative) + ")";
      message += ", CUDA " + (cuda.empty() ? std::string("not reported") : cuda);
      message += ", cuDNN " + (cudnn.empty() ? std::string("not reported") : cudnn);
      f.note(message);
    }
    return f.outcome();
  }
};

class CudnnSmoke final : public ImageCheck {
 public:
  explicit CudnnSmoke(std::shared_ptr<ProbeCache> probe)
      : ImageCheck("cudnn_smoke",
                   "Inside the image, a small convolution through each framework with cuDNN enabled equals the CPU "
                   "result",
                   std::move(probe)) {}
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    if (auto reason = image_not_applicable(context)) return reason;
    if (context.inputs.lock_frameworks.empty())
      return std::string("the lock names no framework (torch, tensorflow, jax) to run a convolution with");
    if (!context.inputs.lock_cudnn) return std::string("the lock has no cuDNN");
    return std::nullopt;
  }

 protected:
  [[nodiscard]] GpuOutcome judge(const CheckContext& context, const json& report) const override {
    Findings f;
    for (const auto& [name, lock_version] : context.inputs.lock_frameworks) {
      if (is_serving_framework(name)) continue;  // its convolutions are its torch's, which the lock lists too
      const json* fw = usable_framework(name, report, f);
      if (!fw) continue;
      const json& conv = member(*fw, "conv");
      if (conv.is_object() && text(conv, "error").empty() && conv.contains("cudnn_enabled") && !flag(conv, "cudnn_enabled")) {
        f.fail(name + " reports cuDNN unavailable or disabled, so the convolution did not use it", "image_cudnn_unavailable");
        continue;
      }
      const auto relative = judge_comparison(name, "3x3 convolution", conv, "image_conv_mismatch", f);
      if (!relative) continue;
      f.metric(name + "_conv_relative_error", *relative, "ratio");
      f.note(name + ": a 3x3 convolution through cuDNN matches the CPU (relative error " + scientific(*relative) + ")");
    }
    return f.outcome();
  }
};

}  // namespace

std::vector<std::unique_ptr<Check>> image_checks() {
  auto probe = std::make_shared<ProbeCache>();
  std::vector<std::unique_ptr<Check>> out;
  out.push_back(std::make_unique<LibrariesLoad>(probe));
  out.push_back(std::make_unique<FrameworkSmoke>(probe));
  out.push_back(std::make_unique<CudnnSmoke>(probe));
  return out;
}

}  // namespace gpuenv::validate::checks
