// gpuenv resolve SPEC [--lock FILE]: the versions a spec resolves to, and why.
#include <CLI/CLI.hpp>
#include <ostream>

#include "app/resolve.hpp"
#include "cli/commands.hpp"
#include "cli/render.hpp"

namespace gpuenv::cli {

int report_error(const Error& error, bool json, Context& ctx) {
  if (json) *ctx.out << error_json(error).dump(2) << "\n";
  *ctx.err << error.to_string() << "\n";
  return exit_code(error.kind);
}

app::ResolveRequest resolve_request(const ResolveOptions& o) {
  app::ResolveRequest r{o.spec_path, o.driver, o.gpus, o.catalog_dir, o.offline, o.lock_path.value_or(""), std::nullopt, std::nullopt};
  if (!o.project_from.empty()) r.project = resolver::PythonProjectRequest{o.project_from, o.project_extras, o.project_groups, {}};
  return r;
}

void add_project_options(CLI::App* sub, ResolveOptions& o, CLI::Option* spec) {
  auto* from = sub->add_option("--from", o.project_from,
                               "A project file to take the Python packages from: requirements.txt, pylock.toml, uv.lock, pyproject.toml or environment.yml "
                               "(instead of the spec's packages.python_project; without a spec, the smallest spec)");
  sub->add_option("--extra", o.project_extras, "An extra (optional dependencies) of the project file; repeatable");
  sub->add_option("--group", o.project_groups, "A dependency group of the project file; repeatable");
  spec->required(false);
  (void)from;
}

std::optional<Error> check_project_options(const ResolveOptions& o) {
  if (o.spec_path.empty() && o.project_from.empty())
    return make_error(ErrorKind::usage, "cli.no_spec", "name a spec, or a project file with --from", {}, "gpuenv lock SPEC, or gpuenv lock --from requirements.txt --gpu H100");
  if (o.project_from.empty() && (!o.project_extras.empty() || !o.project_groups.empty()))
    return make_error(ErrorKind::usage, "cli.extra_without_from", "--extra and --group choose parts of the project file of --from", {},
                      "add --from FILE, or write the extras and groups in the spec's packages.python_project");
  return std::nullopt;
}

int cmd_resolve(const ResolveOptions& o, Context& ctx) {
  if (auto bad = check_project_options(o)) return report_error(*bad, o.json, ctx);
  auto prepared = app::resolve(resolve_request(o), ctx);
  if (!prepared) return report_error(prepared.error(), o.json, ctx);
  const app::PreparedResolution& p = **prepared;
  if (o.json) *ctx.out << resolution_json(p.spec, p.resolution).dump(2) << "\n";
  else print_resolution(*ctx.out, p.spec, p.resolution);
  if (!p.resolution.ok) return k_exit_unsatisfiable;
  if (o.lock_path && !o.json) *ctx.out << "wrote " << *o.lock_path << "\n";
  return k_exit_ok;
}

Command add_resolve_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<ResolveOptions>();
  auto* sub = app.add_subcommand("resolve", "Resolve a spec to driver, CUDA, cuDNN, framework and Python versions");
  auto* spec = sub->add_option("spec", o->spec_path, "Spec file (gpuenv-spec-v1 YAML)")->required();
  add_project_options(sub, *o, spec);
  sub->add_option("--driver", o->driver, "The fleet's driver version (overrides the spec and the host)");
  sub->add_option("--gpu", o->gpus, "GPU model (H100) or architecture (sm_90); repeatable; overrides the spec and the host");
  sub->add_option("--lock", o->lock_path, "Write the lock (gpuenv-lock-v1) to this file, atomically");
  sub->add_flag("--json", o->json, "Print a gpuenv-resolution-v1 JSON document");
  return {sub, [o, &g](Context& ctx) {
    (void)g;
    o->catalog_dir = g.catalog_dir;
    return cmd_resolve(*o, ctx);
  }};
}

}  // namespace gpuenv::cli
