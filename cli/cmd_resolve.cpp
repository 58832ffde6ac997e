// gpuenv resolve SPEC [--lock FILE]: the versions a spec resolves to, and why.
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
  return {o.spec_path, o.driver, o.gpus, o.catalog_dir, o.offline, o.lock_path.value_or("")};
}

int cmd_resolve(const ResolveOptions& o, Context& ctx) {
  auto prepared = app::resolve(resolve_request(o), ctx);
  if (!prepared) return report_error(prepared.error(), o.json, ctx);
  const app::PreparedResolution& p = **prepared;
  if (o.json) *ctx.out << resolution_json(p.spec, p.resolution).dump(2) << "\n";
  else print_resolution(*ctx.out, p.spec, p.resolution);
  if (!p.resolution.ok) return k_exit_unsatisfiable;
  if (o.lock_path && !o.json) *ctx.out << "wrote " << *o.lock_path << "\n";
  return k_exit_ok;
}

}  // namespace gpuenv::cli
