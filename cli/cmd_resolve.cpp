#include <ostream>

#include "cli/commands.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/yaml_guard.hpp"
#include "cli/render.hpp"
#include "resolver/lockfile.hpp"
#include "resolver/solver.hpp"

#ifndef GPUENV_VERSION
#define GPUENV_VERSION "0.0.0"
#endif

namespace gpuenv::cli {

int report_error(const Error& error, bool json, Context& ctx) {
  if (json) *ctx.out << error_json(error).dump(2) << "\n";
  *ctx.err << error.to_string() << "\n";
  return exit_code(error.kind);
}

Result<resolver::HostFacts> host_facts(Context& ctx, const resolver::Catalog& catalog) {
  const auto driver_env = ctx.env.find("GPUENV_DRIVER");
  const auto gpus_env = ctx.env.find("GPUENV_GPUS");
  resolver::HostFacts facts;
  if (driver_env == ctx.env.end() || gpus_env == ctx.env.end()) {
    auto probes = ctx.make_probes ? ctx.make_probes() : std::vector<std::unique_ptr<validate::HostProbe>>{};
    std::vector<validate::HostProbe*> raw;
    for (auto& p : probes) raw.push_back(p.get());
    facts = validate::detect_host(raw);
  }
  if (driver_env != ctx.env.end()) {
    auto v = resolver::Version::parse(driver_env->second);
    if (!v) {
      return make_error(ErrorKind::usage, "env.bad_driver", "GPUENV_DRIVER='" + driver_env->second + "' is not a driver version",
                        "environment", "set it to a version such as 550.54.15, or unset it");
    }
    facts.driver = *v;
    facts.source = "override";
    facts.notes.push_back("driver from GPUENV_DRIVER");
  }
  if (gpus_env != ctx.env.end()) {
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

int prepare_resolution(const ResolveOptions& o, Context& ctx, PreparedResolution& out) {
  auto loaded = load_catalog_from(o.catalog_dir);
  if (!loaded) return report_error(loaded.error(), o.json, ctx);
  out.catalog = std::move(*loaded);
  const resolver::Catalog& catalog = out.catalog.catalog;

  auto text = read_yaml_file(o.spec_path, resolver::k_spec_max_bytes);
  if (!text) return report_error(text.error(), o.json, ctx);
  out.spec_text = std::move(*text);
  auto parsed = resolver::parse_spec(out.spec_text, o.spec_path);
  if (!parsed) return report_error(parsed.error(), o.json, ctx);
  out.spec = std::move(*parsed);
  resolver::Spec* spec = &out.spec;
  if (!spec->base_image.empty()) {
    // The distribution comes from the image itself.
    auto base = prepare_base_image(spec->base_image, o.offline, ctx);
    if (!base) {
      Error e = std::move(base).error();
      if (e.where.empty()) e.where = spec->where("base");
      return report_error(e, o.json, ctx);
    }
    spec->base_distro = base->distro;
    spec->base_release = base->release;
    out.base = std::move(*base);
  }

  resolver::ResolveRequest req;
  req.spec = spec;
  std::optional<resolver::HostFacts> host;
  auto need_host = [&]() -> Status {
    if (host) return ok_status();
    auto h = host_facts(ctx, catalog);
    if (!h) return std::move(h).error();
    host = std::move(*h);
    return ok_status();
  };

  // GPUs: --gpu, else the spec, else the host.
  if (!o.gpus.empty()) {
    std::vector<std::string> models;
    std::vector<int> archs;
    for (const auto& g : o.gpus) {
      if (auto sm = resolver::parse_arch(g)) archs.push_back(*sm);
      else models.push_back(g);
    }
    auto targets = resolver::gpu_targets(catalog, models, archs, "--gpu");
    if (!targets) {
      Error e = std::move(targets).error();
      e.kind = ErrorKind::usage;
      return report_error(e, o.json, ctx);
    }
    req.gpus = std::move(*targets);
    req.gpu_origin = "--gpu";
  } else if (!spec->gpu.models.empty() || !spec->gpu.archs.empty()) {
    const auto& pos = spec->gpu.models.empty() ? spec->gpu.archs_pos : spec->gpu.models_pos;
    auto targets = resolver::gpu_targets(catalog, spec->gpu.models, spec->gpu.archs,
                                         o.spec_path + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column));
    if (!targets) return report_error(targets.error(), o.json, ctx);
    req.gpus = std::move(*targets);
    req.gpu_origin = "spec";
  } else {
    if (auto st = need_host(); !st) return report_error(st.error(), o.json, ctx);
    for (const auto& g : host->gpus) {
      const resolver::GpuModel* m = g.pci_device_id.empty() ? nullptr : catalog.gpu_by_pci_id(g.pci_device_id);
      if (!m) m = catalog.gpu(g.name);
      if (m) req.gpus.push_back({m->name, m->sm, m});
      else if (g.sm) req.gpus.push_back({resolver::arch_name(g.sm), g.sm, nullptr});
    }
    req.gpu_origin = "host (" + host->source + ")";
  }

  // Driver: --driver, else the spec, else the host.
  if (o.driver) {
    auto v = resolver::Version::parse(*o.driver);
    if (!v) {
      Error e = v.error();
      e.kind = ErrorKind::usage;
      e.where = "--driver";
      return report_error(e, o.json, ctx);
    }
    req.driver = *resolver::Constraint::parse(v->str());
    req.driver_origin = "--driver";
  } else if (spec->gpu.driver) {
    req.driver = spec->gpu.driver;
    req.driver_origin = "spec";
  } else {
    if (auto st = need_host(); !st) return report_error(st.error(), o.json, ctx);
    if (host->driver) {
      req.driver = *resolver::Constraint::parse(host->driver->str());
      req.driver_origin = "host (" + host->source + ")";
    }
  }

  auto resolution = resolver::resolve(catalog, req);
  if (!resolution) return report_error(resolution.error(), o.json, ctx);
  out.resolution = std::move(*resolution);
  out.request = std::move(req);
  return k_exit_ok;
}

int cmd_resolve(const ResolveOptions& o, Context& ctx) {
  PreparedResolution p;
  if (int rc = prepare_resolution(o, ctx, p); rc != k_exit_ok) return rc;
  if (o.json) *ctx.out << resolution_json(p.spec, p.resolution).dump(2) << "\n";
  else print_resolution(*ctx.out, p.spec, p.resolution);
  if (!p.resolution.ok) return k_exit_unsatisfiable;

  if (o.lock_path) {
    resolver::LockInputs in{sha256_hex(p.spec_text), p.catalog.sha256, std::string("gpuenv ") + GPUENV_VERSION, p.base ? p.base->pinned : std::string()};
    if (auto st = write_file_atomic(*o.lock_path, resolver::render_lock(p.spec, p.resolution, in)); !st) {
      Error e = st.error();
      e.while_("writing the lock");
      return report_error(e, false, ctx);
    }
    if (!o.json) *ctx.out << "wrote " << *o.lock_path << "\n";
  }
  return k_exit_ok;
}

}  // namespace gpuenv::cli
