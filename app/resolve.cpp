#include "app/resolve.hpp"

#include <algorithm>
#include <filesystem>

#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/text.hpp"
#include "base/yaml_guard.hpp"
#include "resolver/lockfile.hpp"

#ifndef GPUENV_VERSION
#define GPUENV_VERSION "0.0.0"
#endif

namespace gpuenv::app {
namespace {

const std::string k_project_spec_name = "project";

/// Reads and parses the spec; a base image is prepared, since the distribution comes from the image itself.
Status read_spec(const ResolveRequest& rq, Services& services, PreparedResolution& out) {
  if (rq.spec_path.empty() && rq.project) {  // `lock --from FILE` alone: the smallest spec
    out.spec_text = "schema: gpuenv-spec-v1\nname: " + k_project_spec_name + "\n";
  } else if (rq.spec_text && rq.spec_text->size() <= resolver::k_spec_max_bytes) {
    out.spec_text = *rq.spec_text;
  } else {  // not read yet, or too large: the file's own read says so, as for any spec
    GPUENV_TRY(text, read_yaml_file(rq.spec_path, resolver::k_spec_max_bytes));
    out.spec_text = std::move(text);
  }
  GPUENV_TRY(parsed, resolver::parse_spec(out.spec_text, rq.spec_path.empty() && rq.project ? rq.project->file : rq.spec_path));
  out.spec = std::move(parsed);
  resolver::Spec& spec = out.spec;
  if (spec.base_image.empty()) return ok_status();
  auto base = prepare_base_image(spec.base_image, rq.offline, services);
  if (!base) {
    Error e = std::move(base).error();
    if (e.where.empty()) e.where = spec.where("base");
    return e;
  }
  spec.base_distro = base->distro;
  spec.base_release = base->release;
  out.base = std::move(*base);
  return ok_status();
}

/// The host's facts, asked at most once, and only when a flag or the spec leaves something open.
class LazyHost {
 public:
  LazyHost(const Services& services, const resolver::Catalog& catalog) : m_services(services), m_catalog(catalog) {}
  Result<const resolver::HostFacts*> get() {
    if (!m_host) {
      GPUENV_TRY(h, host_facts(m_services, m_catalog));
      m_host = std::move(h);
    }
    return &*m_host;
  }

 private:
  const Services& m_services;
  const resolver::Catalog& m_catalog;
  std::optional<resolver::HostFacts> m_host;
};

/// GPUs: --gpu, else the spec, else the host.
Status choose_gpus(const ResolveRequest& rq, const resolver::Spec& spec, const resolver::Catalog& catalog, LazyHost& host, resolver::ResolveRequest& req) {
  if (!rq.gpus.empty()) {
    std::vector<std::string> models;
    std::vector<int> archs;
    for (const auto& g : rq.gpus) {
      if (auto sm = resolver::parse_arch(g)) archs.push_back(*sm);
      else models.push_back(g);
    }
    auto targets = resolver::gpu_targets(catalog, models, archs, "--gpu");
    if (!targets) {
      Error e = std::move(targets).error();
      e.kind = ErrorKind::usage;
      return e;
    }
    req.gpus = std::move(*targets);
    req.gpu_origin = "--gpu";
  } else if (!spec.gpu.models.empty() || !spec.gpu.archs.empty()) {
    const auto& pos = spec.gpu.models.empty() ? spec.gpu.archs_pos : spec.gpu.models_pos;
    GPUENV_TRY(targets, resolver::gpu_targets(catalog, spec.gpu.models, spec.gpu.archs,
                                              rq.spec_path + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column)));
    req.gpus = std::move(targets);
    req.gpu_origin = "spec";
  } else {
    GPUENV_TRY(h, host.get());
    for (const auto& g : h->gpus) {
      const resolver::GpuModel* m = g.pci_device_id.empty() ? nullptr : catalog.gpu_by_pci_id(g.pci_device_id);
      if (!m) m = catalog.gpu(g.name);
      if (m) req.gpus.push_back({m->name, m->sm, m});
      else if (g.sm) req.gpus.push_back({resolver::arch_name(g.sm), g.sm, nullptr});
    }
    req.gpu_origin = "host (" + h->source + ")";
  }
  return ok_status();
}

/// Driver: --driver, else the spec, else the host. A VM image with vm.driver carries its own: `gpuenv lock` takes its
/// module package's version from the repositories (app/lock.cpp), and the host's driver says nothing of it.
Status choose_driver(const ResolveRequest& rq, const resolver::Spec& spec, LazyHost& host, resolver::ResolveRequest& req) {
  if (spec.vm && spec.vm->driver && !rq.driver) return ok_status();
  if (rq.driver) {
    auto v = resolver::Version::parse(*rq.driver);
    if (!v) {
      Error e = v.error();
      e.kind = ErrorKind::usage;
      e.where = "--driver";
      return e;
    }
    req.driver = *resolver::Constraint::parse(v->str());
    req.driver_origin = "--driver";
  } else if (spec.gpu.driver) {
    req.driver = spec.gpu.driver;
    req.driver_origin = "spec";
  } else {
    GPUENV_TRY(h, host.get());
    if (h->driver) {
      req.driver = *resolver::Constraint::parse(h->driver->str());
      req.driver_origin = "host (" + h->source + ")";
    }
  }
  return ok_status();
}

/// The frameworks as a spec orders them (resolver/spec.cpp); others after, by name.
int framework_rank(const std::string& name) {
  static const std::vector<std::string> order = {"torch", "tensorflow", "jax"};
  return static_cast<int>(std::find(order.begin(), order.end(), name) - order.begin());
}

/// A framework the project pins with == becomes the spec's framework at that version (and, for its local label, that
/// variant; without one, the variant the Python package index serves), so that every rule of the catalog applies to
/// it. A spec that asks another version of it is refused.
Status take_project_frameworks(const resolver::Catalog& catalog, PreparedResolution& out) {
  resolver::Spec& spec = out.spec;
  for (const auto& entry : catalog.frameworks) {
    const std::string& name = entry.first;
    const auto& releases = entry.second;
    const auto pin = packages::project_pin(*out.project, name);
    if (!pin) continue;
    const std::string where = out.project->path;
    const std::string base = pin->substr(0, pin->find('+'));
    const std::string local = pin->find('+') == std::string::npos ? std::string() : pin->substr(pin->find('+') + 1);
    auto version = resolver::Version::parse(base);
    auto exact = resolver::Constraint::parse("==" + base);
    if (!version || !exact) {
      return make_error(ErrorKind::spec, "project.framework_version", out.project->path + " pins " + name + "==" + *pin + ", which is not a release version gpuenv reads",
                        where, "pin a release of " + name + " (gpuenv matrix " + name + " lists them)");
    }
    std::string variant = local;
    if (variant.empty()) {
      for (const auto& r : releases)
        if (r.version == *version) variant = r.default_variant;
    }
    auto it = std::find_if(spec.frameworks.begin(), spec.frameworks.end(), [&](const resolver::FrameworkRequest& f) { return f.name == name; });
    if (it != spec.frameworks.end() && !it->version.matches(*version)) {
      return make_error(ErrorKind::unsatisfiable, "project.framework_conflict",
                        "the spec asks " + name + " " + it->version.str() + " and " + out.project->path + " pins " + name + "==" + *pin, spec.where("frameworks"),
                        "leave " + name + " out of the spec's frameworks (the project's pin is taken), or pin a version the spec allows");
    }
    if (it == spec.frameworks.end()) {
      spec.frameworks.push_back({});
      it = std::prev(spec.frameworks.end());
      it->name = name;
      it->pos = spec.python_project ? spec.python_project->pos : resolver::SourcePos{};
    }
    it->version = *exact;
    it->variant = (name == "torch") ? variant : local;
    it->pinned_by = out.project->path + " (" + name + "==" + *pin + ")";
  }
  std::stable_sort(spec.frameworks.begin(), spec.frameworks.end(),
                   [](const resolver::FrameworkRequest& a, const resolver::FrameworkRequest& b) { return framework_rank(a.name) < framework_rank(b.name); });
  return ok_status();
}

/// Reads the project file of `--from` or packages.python_project (relative to the spec's directory).
Status read_project(const ResolveRequest& rq, const resolver::Catalog& catalog, PreparedResolution& out) {
  if (rq.project) out.spec.python_project = rq.project;
  if (!out.spec.python_project) return ok_status();
  const resolver::PythonProjectRequest& pr = *out.spec.python_project;
  namespace fs = std::filesystem;
  fs::path path(pr.file);
  // The project's directory, beneath which includes must stay: the spec's (with --from, the working directory) when
  // the file is inside it, else the file's own.
  const bool from_spec = !rq.project && !rq.spec_path.empty();
  const fs::path base = from_spec ? fs::path(rq.spec_path).parent_path() : fs::path(".");
  if (from_spec && path.is_relative()) path = base / path;
  std::error_code ec;
  const fs::path canonical_base = fs::weakly_canonical(base.empty() ? fs::path(".") : base, ec);
  const auto inside = fs::weakly_canonical(path, ec).lexically_relative(canonical_base);
  const std::string project_dir = !ec && !inside.empty() && *inside.begin() != ".." ? canonical_base.string() : std::string();
  auto project = packages::read_project_file(path.string(), packages::ProjectSelection{pr.extras, pr.groups}, {}, project_dir);
  if (!project) {
    Error e = std::move(project).error();
    if (e.where.empty()) e.where = out.spec.where("packages");
    e.while_("reading the project file " + path.string());
    return e;
  }
  out.project = std::move(*project);
  return take_project_frameworks(catalog, out);
}

/// When a framework pinned by the project breaks a rule, the nearest releases (below and above) that would fit,
/// found by resolving again with each.
void suggest_project_pins(const resolver::Catalog& catalog, PreparedResolution& out, const resolver::ResolveRequest& req) {
  if (out.resolution.ok) return;
  for (std::size_t i = 0; i < out.spec.frameworks.size(); ++i) {
    const resolver::FrameworkRequest pinned = out.spec.frameworks[i];
    if (pinned.pinned_by.empty()) continue;
    auto releases = catalog.frameworks.find(pinned.name);
    if (releases == catalog.frameworks.end()) continue;
    std::vector<std::pair<resolver::Version, std::string>> fits;
    for (const auto& r : releases->second) {
      resolver::Spec trial = out.spec;
      trial.frameworks[i].version = *resolver::Constraint::parse("==" + r.version.str());
      trial.frameworks[i].variant = pinned.name == "torch" ? r.default_variant : std::string();
      resolver::ResolveRequest again = req;
      again.spec = &trial;
      auto res = resolver::resolve(catalog, again);
      if (res && res->ok) fits.emplace_back(r.version, pinned.name + "==" + r.version.str());
    }
    const auto asked = pinned.version.lower_bound();
    // The same release as the Python package index builds it, when the pin names another variant (+cu118).
    const resolver::FrameworkRelease* same = nullptr;
    for (const auto& r : releases->second)
      if (asked && r.version == *asked && pinned.variant != r.default_variant && pinned.name == "torch") same = &r;
    if (fits.empty() || !asked) {
      out.resolution.suggestions.push_back(pinned.pinned_by + ": no release of " + pinned.name + " the catalog records fits the rest of this spec");
      continue;
    }
    // Up to two below and two above the pinned release, nearest first on each side.
    std::vector<std::string> below, above;
    for (auto it = fits.rbegin(); it != fits.rend(); ++it)
      if (it->first < *asked && below.size() < 2) below.insert(below.begin(), it->second);
    for (const auto& f : fits)
      if (*asked < f.first && above.size() < 2) above.push_back(f.second);
    if (same && std::any_of(fits.begin(), fits.end(), [&](const auto& f) { return f.first == same->version; }))
      below.push_back(pinned.name + "==" + same->version.str() + " (the " + same->default_variant + " build)");
    below.insert(below.end(), above.begin(), above.end());
    out.resolution.suggestions.push_back("the project pins " + pinned.pinned_by.substr(pinned.pinned_by.find('(') + 1, pinned.pinned_by.size() - pinned.pinned_by.find('(') - 2) +
                                         " (" + out.project->path + "); the nearest pins that fit: " + join(below, ", "));
  }
}

}  // namespace

Result<resolver::HostFacts> host_facts(const Services& services, const resolver::Catalog& catalog) {
  const auto driver_env = services.env.find("GPUENV_DRIVER");
  const auto gpus_env = services.env.find("GPUENV_GPUS");
  resolver::HostFacts facts;
  if (driver_env == services.env.end() || gpus_env == services.env.end()) {
    auto probes = services.make_probes ? services.make_probes() : std::vector<std::unique_ptr<validate::HostProbe>>{};
    std::vector<validate::HostProbe*> raw;
    for (auto& p : probes) raw.push_back(p.get());
    facts = validate::detect_host(raw);
  }
  if (driver_env != services.env.end()) {
    auto v = resolver::Version::parse(driver_env->second);
    if (!v) {
      return make_error(ErrorKind::usage, "env.bad_driver", "GPUENV_DRIVER='" + driver_env->second + "' is not a driver version",
                        "environment", "set it to a version such as 550.54.15, or unset it");
    }
    facts.driver = *v;
    facts.source = "override";
    facts.notes.push_back("driver from GPUENV_DRIVER");
  }
  if (gpus_env != services.env.end()) {
    facts.gpus.clear();
    std::string list = gpus_env->second;
    std::size_t start = 0;
    int index = 0;
    while (start <= list.size() && list != "none" && !list.empty()) {
      const auto comma = list.find(',', start);
      std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      resolver::HostGpu g;
      g.index = index++;
      if (auto sm = resolver::parse_arch(item)) {
        g.sm = *sm;
        g.name = resolver::arch_name(*sm);
      } else if (const auto* m = catalog.gpu(item)) {
        g.name = m->name;
        g.sm = m->sm;
        if (!m->pci_device_ids.empty()) g.pci_device_id = m->pci_device_ids.front();
      } else {
        return make_error(ErrorKind::usage, "env.bad_gpus", "GPUENV_GPUS names an unknown GPU '" + item + "'", "environment",
                          "use catalog model names (H100) or architectures (sm_90), separated by commas, or 'none'");
      }
      facts.gpus.push_back(std::move(g));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    facts.source = "override";
    facts.notes.push_back("GPUs from GPUENV_GPUS");
  }
  return facts;
}

std::string generator() { return std::string("gpuenv ") + GPUENV_VERSION; }

resolver::LockInputs lock_inputs(const PreparedResolution& p) {
  resolver::LockInputs in{sha256_hex(p.spec_text), p.catalog.sha256, generator(), p.base ? p.base->pinned : std::string(), {}, {}, {}};
  if (p.project) {
    in.project_file = p.spec.python_project ? p.spec.python_project->file : p.project->path;
    in.project_format = std::string(packages::project_format_name(p.project->format));
    in.project_sha256 = p.project->sha256.hex();
  }
  return in;
}

Result<Detected> detect(const std::string& catalog_dir, const Services& services) {
  Detected out;
  GPUENV_TRY(loaded, load_catalog_from(catalog_dir));
  out.catalog = std::move(loaded);
  GPUENV_TRY(facts, host_facts(services, out.catalog.catalog));
  out.facts = std::move(facts);
  return out;
}

Result<std::vector<resolver::MatrixRow>> matrix(const std::string& catalog_dir, const std::string& framework) {
  GPUENV_TRY(loaded, load_catalog_from(catalog_dir));
  return resolver::matrix(loaded.catalog, framework);
}

Result<std::unique_ptr<PreparedResolution>> resolve(const ResolveRequest& rq, Services& services) {
  auto out = std::make_unique<PreparedResolution>();
  GPUENV_TRY(loaded, load_catalog_from(rq.catalog_dir));
  out->catalog = std::move(loaded);
  const resolver::Catalog& catalog = out->catalog.catalog;
  GPUENV_CHECK(read_spec(rq, services, *out));
  GPUENV_CHECK(read_project(rq, catalog, *out));
  resolver::ResolveRequest req;
  req.spec = &out->spec;
  LazyHost host(services, catalog);
  GPUENV_CHECK(choose_gpus(rq, out->spec, catalog, host, req));
  GPUENV_CHECK(choose_driver(rq, out->spec, host, req));
  GPUENV_TRY(resolution, resolver::resolve(catalog, req));
  out->resolution = std::move(resolution);
  if (out->project) suggest_project_pins(catalog, *out, req);
  // vm.kernel's default follows the platform (image.platforms, else the GPUs' hosts, else this machine's).
  if (out->spec.vm && out->spec.vm->kernel.empty() && !out->resolution.platforms.empty())
    out->spec.vm->kernel = resolver::default_vm_kernel(out->resolution.platforms.front());
  if (out->spec.vm && out->spec.vm->driver && !rq.driver)
    out->resolution.notes.push_back("vm.driver: the image's driver is the version of its module package (" + out->spec.vm->driver->module +
                                    "), which `gpuenv lock` looks up in the apt repositories and resolves again against");
  out->request = std::move(req);
  if (!rq.lock_path.empty() && out->resolution.ok) {
    GPUENV_TRY(text, resolver::render_checked_lock(resolver::lock_of(out->spec, out->resolution, lock_inputs(*out))));
    if (auto st = write_file_atomic(rq.lock_path, text); !st) {
      Error e = st.error();
      e.while_("writing the lock");
      return e;
    }
  }
  return out;
}

}  // namespace gpuenv::app
