#include "cli/render.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "base/text.hpp"

namespace gpuenv::cli {
namespace {

using json = nlohmann::ordered_json;
using resolver::arch_name;

json opt(const std::optional<resolver::Version>& v) { return v ? json(v->str()) : json(nullptr); }

json archs(const std::vector<int>& sm) {
  json a = json::array();
  for (int s : sm) a.push_back(arch_name(s));
  return a;
}

std::string arch_text(const std::vector<int>& sm) {
  std::string out;
  for (std::size_t i = 0; i < sm.size(); ++i) out += (i ? "," : "") + std::to_string(sm[i]);
  return out;
}

std::string gib(std::uint64_t bytes) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1024.0 * 1024 * 1024) << " GiB";
  return o.str();
}

const resolver::GpuModel* model_of(const resolver::HostGpu& g, const resolver::Catalog& c) {
  if (!g.pci_device_id.empty())
    if (const auto* m = c.gpu_by_pci_id(g.pci_device_id)) return m;
  return c.gpu(g.name);
}

}  // namespace

json resolution_json(const resolver::Spec& spec, const resolver::Resolution& r) {
  json j;
  j["schema"] = "gpuenv-resolution-v1";
  j["status"] = r.ok ? "ok" : "unsatisfiable";
  j["spec"] = {{"path", spec.path}, {"name", spec.name}};
  j["base"] = r.base;
  j["cuda"] = {{"version", opt(r.cuda)}};
  j["cudnn"] = {{"version", opt(r.cudnn)}};
  json floor = json::array();
  for (const auto& f : r.driver_floor) floor.push_back({{"driver", f.driver.str()}, {"why", f.why}});
  j["driver"] = {{"min", r.ok && !r.driver_min.empty() ? json(r.driver_min.str()) : json(nullptr)},
                 {"fleet", opt(r.driver)},
                 {"origin", r.driver ? json(r.driver_origin) : json(nullptr)},
                 {"floor", floor}};
  j["python"] = {{"version", opt(r.python)}};
  json fw = json::object();
  for (const auto& f : r.frameworks) {
    fw[f.name] = {{"version", f.version.str()}, {"variant", f.variant},     {"cuda", f.cuda.str()},
                  {"cudnn", opt(f.cudnn)},      {"default_variant", f.is_default}, {"archs", archs(f.sm)},
                  {"ptx", archs(f.ptx)}};
    if (!f.pinned_by.empty()) fw[f.name]["pinned_by"] = f.pinned_by;
  }
  j["frameworks"] = fw;
  j["gpu"] = {{"archs", archs(r.archs)}, {"models", r.gpu_models}, {"origin", r.gpu_origin}};
  j["forward_compat"] = r.forward_compat;
  if (!r.driver_mode.empty()) j["driver_mode"] = r.driver_mode;
  if (r.cuda) j["cuda_native_driver"] = r.cuda_native_driver.str();
  j["compat_package"] = r.compat_package ? json("cuda-compat-" + std::to_string(r.compat_package->major()) + "-" +
                                                std::to_string(r.compat_package->minor()))
                                         : json(nullptr);
  json conflicts = json::array();
  for (const auto& c : r.conflicts) conflicts.push_back({{"rule", std::string(resolver::rule_name(c.rule))}, {"message", c.message}});
  j["conflicts"] = conflicts;
  j["suggestions"] = r.suggestions;
  j["notes"] = r.notes;
  return j;
}

void print_resolution(std::ostream& out, const resolver::Spec& spec, const resolver::Resolution& r) {
  if (!r.ok) {
    out << "unsatisfiable: no combination for " << spec.name << " (" << spec.path << ") satisfies every rule\n";
    for (const auto& c : r.conflicts) out << "  - " << c.message << "\n";
    if (!r.suggestions.empty()) {
      out << "what would work:\n";
      for (const auto& s : r.suggestions) out << "  - " << s << "\n";
    }
    for (const auto& n : r.notes) out << "note: " << n << "\n";
    return;
  }
  auto row = [&](const std::string& k, const std::string& v) { out << "  " << std::left << std::setw(12) << k << v << "\n"; };
  out << spec.name << " (" << spec.path << ")\n";
  row("base", r.base);
  for (const auto& f : r.frameworks)
    row(f.name, f.version.str() + "+" + f.variant + (f.is_default ? " (default variant)" : "") +
                    (f.pinned_by.empty() ? "" : " (pinned by " + f.pinned_by + ")"));
  row("cuda", r.cuda ? r.cuda->str() : "-");
  row("cudnn", r.cudnn ? r.cudnn->str() : "-");
  row("python", r.python ? r.python->str() : "-");
  std::string gpus;
  for (std::size_t i = 0; i < r.gpu_models.size(); ++i) gpus += (i ? ", " : "") + r.gpu_models[i];
  std::string arch;
  for (std::size_t i = 0; i < r.archs.size(); ++i) arch += (i ? ", " : "") + arch_name(r.archs[i]);
  row("gpu", r.gpu_models.empty() ? "not given" : gpus + " (" + arch + ", from " + r.gpu_origin + ")");
  std::string driver = r.driver_min.empty() ? std::string("any (no CUDA, and no GPU that needs a floor)") : ">= " + r.driver_min.str();
  if (r.driver && r.cuda) {
    const std::string cuda = "CUDA " + r.cuda->truncated(2).str();
    if (r.driver_mode == "forward_compat")
      driver += "; fleet " + r.driver->str() + " runs " + cuda + " only with forward compatibility (cuda-compat)";
    else if (r.driver_mode == "native")
      driver += "; fleet " + r.driver->str() + " runs " + cuda + " natively";
    else
      driver += "; fleet " + r.driver->str() + " runs " + cuda + " only through minor-version compatibility (natively from " +
                r.cuda_native_driver.str() + "; PTX newer than the driver is not JIT-compiled)";
  }
  row("driver", driver);
  for (const auto& f : r.driver_floor) out << "    " << std::left << std::setw(12) << f.driver.str() << f.why << "\n";
  if (r.compat_package)
    row("compat", "cuda-compat-" + std::to_string(r.compat_package->major()) + "-" + std::to_string(r.compat_package->minor()));
  for (const auto& n : r.notes) out << "note: " << n << "\n";
}

json host_json(const resolver::HostFacts& f, const resolver::Catalog& catalog) {
  json j;
  j["schema"] = "gpuenv-host-v1";
  j["driver"] = {{"present", f.driver.has_value() || !f.gpus.empty()}, {"version", opt(f.driver)}, {"cuda", opt(f.driver_cuda)}};
  json gpus = json::array();
  for (const auto& g : f.gpus) {
    const auto* m = model_of(g, catalog);
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"model", m ? json(m->name) : json(nullptr)},
                    {"uuid", g.uuid},
                    {"pci_device_id", g.pci_device_id},
                    {"compute_capability", g.sm ? json(std::to_string(g.sm / 10) + "." + std::to_string(g.sm % 10)) : json(nullptr)},
                    {"arch", g.sm ? json(arch_name(g.sm)) : json(nullptr)},
                    {"memory_bytes", g.memory_bytes}});
  }
  j["gpus"] = gpus;
  j["confidential_computing"] = f.cc_state;
  j["source"] = f.source;
  j["notes"] = f.notes;
  return j;
}

void print_host(std::ostream& out, const resolver::HostFacts& f, const resolver::Catalog& catalog) {
  if (!f.driver && f.gpus.empty()) {
    out << "No NVIDIA driver: none of NVML, libcuda or /proc/driver/nvidia answered.\n";
  } else {
    out << "driver      " << (f.driver ? f.driver->str() : "unknown") << " (from " << f.source << ")\n";
    out << "cuda        " << (f.driver_cuda ? "up to " + f.driver_cuda->str() : "unknown") << "\n";
    out << "confidential computing: " << f.cc_state << "\n";
    out << "gpus        " << f.gpus.size() << "\n";
    for (const auto& g : f.gpus) {
      const auto* m = model_of(g, catalog);
      out << "  [" << g.index << "] " << (g.name.empty() ? "unnamed" : g.name) << (m ? " = " + m->name : "")
          << (g.sm ? ", " + arch_name(g.sm) : "") << (g.memory_bytes ? ", " + gib(g.memory_bytes) : "")
          << (g.pci_device_id.empty() ? "" : ", pci " + g.pci_device_id) << (g.uuid.empty() ? "" : ", " + g.uuid) << "\n";
    }
  }
  for (const auto& n : f.notes) out << "note: " << n << "\n";
}

json matrix_json(const std::vector<resolver::MatrixRow>& rows) {
  json j;
  j["schema"] = "gpuenv-matrix-v1";
  json list = json::array();
  for (const auto& r : rows) {
    json e = {{"framework", r.framework}, {"version", r.version.str()}, {"variant", r.variant}, {"cuda", r.cuda.str()},
              {"cudnn", opt(r.cudnn)},    {"driver_min", r.driver_min.str()}, {"driver_native", r.driver_native.str()},
              {"archs", archs(r.sm)},     {"ptx", archs(r.ptx)},        {"default_variant", r.is_default}};
    if (r.framework != "cuda") e["python"] = {{"min", r.python_min.str()}, {"max", r.python_max.str()}};
    if (r.torch) e["torch"] = r.torch->str();
    if (!r.pins_without_wheel.empty()) e["pins_without_wheel"] = r.pins_without_wheel;
    list.push_back(std::move(e));
  }
  j["rows"] = list;
  return j;
}

void print_matrix(std::ostream& out, const std::vector<resolver::MatrixRow>& rows) {
  out << std::left << std::setw(11) << "framework" << std::setw(9) << "version" << std::setw(8) << "variant" << std::setw(8) << "cuda"
      << std::setw(8) << "cudnn" << std::setw(11) << "python" << std::setw(11) << "driver>=" << std::setw(11) << "native>="
      << "sm (ptx)\n";
  for (const auto& r : rows) {
    out << std::left << std::setw(11) << r.framework << std::setw(9) << r.version.str() << std::setw(8)
        << (r.variant.empty() ? "-" : r.variant + (r.is_default ? "*" : "")) << std::setw(8) << r.cuda.truncated(2).str() << std::setw(8)
        << (r.cudnn ? r.cudnn->str() : "-") << std::setw(11)
        << (r.framework == "cuda" ? "-" : r.python_min.str() + "-" + r.python_max.str()) << std::setw(11) << r.driver_min.str()
        << std::setw(11) << r.driver_native.str() << arch_text(r.sm) << (r.ptx.empty() ? "" : " (" + arch_text(r.ptx) + ")")
        << (r.torch ? "  torch==" + r.torch->str() : "")
        << (r.pins_without_wheel.empty() ? "" : "  not installable, no wheel of: " + join(r.pins_without_wheel, ", ")) << "\n";
  }
  out << "* = the variant a plain `pip install` gets. driver>= uses minor-version compatibility; native>= is needed for PTX JIT.\n";
  if (std::any_of(rows.begin(), rows.end(), [](const resolver::MatrixRow& r) { return r.torch.has_value(); }))
    out << "torch== is the torch release a framework pins; its cuDNN and Python range are that torch's too.\n";
}

json error_json(const Error& e) {
  json j;
  j["schema"] = "gpuenv-error-v1";
  j["status"] = "error";
  j["error"] = {{"id", e.id}, {"message", e.message}, {"where", e.where}, {"hint", e.hint}, {"context", e.context}};
  return j;
}

}  // namespace gpuenv::cli
