// gpuenv lock SPEC -o FILE: resolve, pin every package, and write the lock.
#include <CLI/CLI.hpp>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "app/lock.hpp"
#include "base/digest.hpp"
#include "cli/commands.hpp"
#include "cli/render.hpp"

namespace gpuenv::cli {

app::LockRequest lock_request(const LockOptions& o) { return {resolve_request(o.resolve), o.host_root, o.offline, o.output}; }

int report_unsatisfied(const app::PreparedResolution& p, bool json, Context& ctx) {
  if (json) *ctx.out << resolution_json(p.spec, p.resolution).dump(2) << "\n";
  else print_resolution(*ctx.out, p.spec, p.resolution);
  return k_exit_unsatisfiable;
}

int cmd_lock(const LockOptions& o, Context& ctx) {
  if (auto bad = check_project_options(o.resolve)) return report_error(*bad, o.resolve.json, ctx);
  auto made = app::lock(lock_request(o), ctx);
  if (!made) return report_error(made.error(), o.resolve.json, ctx);
  const app::PreparedResolution& p = *made->prepared;
  if (!made->satisfied()) return report_unsatisfied(p, o.resolve.json, ctx);
  if (o.resolve.json) {
    nlohmann::ordered_json j = resolution_json(p.spec, p.resolution);
    j["schema"] = "gpuenv-lock-result-v1";
    j["lock"] = {{"path", o.output}, {"sha256", sha256_hex(made->text)}};
    auto list = nlohmann::ordered_json::array();
    for (const auto& x : made->lock.packages)  // a multi-platform lock names a package once per platform: "platform" tells them apart
      list.push_back({{"name", x.name}, {"version", x.version}, {"kind", resolver::to_string(x.kind)}, {"architecture", x.architecture}, {"size", x.size},
                      {"sha256", x.sha256.hex()}, {"url", x.url}, {"source", x.source}, {"platform", x.platform.str()}});
    j["packages"] = list;
    if (!made->lock.build_packages.empty()) {  // a VM driver's build (docs/vm.md, "The driver")
      auto build = nlohmann::ordered_json::array();
      for (const auto& x : made->lock.build_packages)
        build.push_back({{"name", x.name}, {"version", x.version}, {"kind", resolver::to_string(x.kind)}, {"architecture", x.architecture}, {"size", x.size},
                         {"sha256", x.sha256.hex()}, {"url", x.url}, {"source", x.source}});
      j["build_packages"] = build;
    }
    j["wheel_requirements"] = made->wheel_requirements;
    *ctx.out << j.dump(2) << "\n";
  } else {
    print_resolution(*ctx.out, p.spec, p.resolution);
    *ctx.out << "pinned " << made->debs << " Debian packages and " << made->wheels << " wheels (" << std::fixed << std::setprecision(1)
             << static_cast<double>(made->bytes) / (1024.0 * 1024.0) << " MiB)";
    if (!made->lock.build_packages.empty()) {
      std::uint64_t build_bytes = 0;
      for (const auto& x : made->lock.build_packages) build_bytes += x.size;
      *ctx.out << ", and " << made->lock.build_packages.size() << " for the driver's build, never in the image (" << std::fixed << std::setprecision(1)
               << static_cast<double>(build_bytes) / (1024.0 * 1024.0) << " MiB)";
    }
    *ctx.out << "\nwrote " << o.output << "\n";
  }
  return k_exit_ok;
}

Command add_lock_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<LockOptions>();
  auto* sub = app.add_subcommand("lock", "Resolve a spec and pin every Debian package and wheel (url, size, sha256) into a lock");
  auto* spec = sub->add_option("spec", o->resolve.spec_path, "Spec file (gpuenv-spec-v1 YAML)")->required();
  add_project_options(sub, o->resolve, spec);
  sub->add_option("-o,--output", o->output, "Lock file to write (default gpuenv.lock)");
  sub->add_option("--driver", o->resolve.driver, "The fleet's driver version (overrides the spec and the host)");
  sub->add_option("--gpu", o->resolve.gpus, "GPU model or architecture; repeatable");
  sub->add_option("--host-root", o->host_root, "Read apt and pip configuration under this directory instead of /")
      ->check(CLI::ExistingDirectory);
  sub->add_flag("--json", o->resolve.json, "Print the resolution and the pinned packages as JSON");
  sub->add_flag("--offline", o->offline, "Use only what the cache holds; download nothing");
  return {sub, [o, &g](Context& ctx) {
    (void)g;
    o->resolve.catalog_dir = g.catalog_dir;
    o->resolve.offline = o->offline;
    return cmd_lock(*o, ctx);
  }};
}

}  // namespace gpuenv::cli
