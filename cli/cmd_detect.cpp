#include <CLI/CLI.hpp>
#include <ostream>

#include "cli/commands.hpp"
#include "cli/render.hpp"

namespace gpuenv::cli {

int cmd_detect(const DetectOptions& o, Context& ctx) {
  auto loaded = load_catalog_from(o.catalog_dir);
  if (!loaded) return report_error(loaded.error(), o.json, ctx);
  auto facts = host_facts(ctx, loaded->catalog);
  if (!facts) return report_error(facts.error(), o.json, ctx);
  if (o.json) *ctx.out << host_json(*facts, loaded->catalog).dump(2) << "\n";
  else print_host(*ctx.out, *facts, loaded->catalog);
  return k_exit_ok;  // "no driver" is a valid answer
}

Command add_detect_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<DetectOptions>();
  auto* sub = app.add_subcommand("detect", "Show the host's NVIDIA driver, GPUs and confidential-computing state");
  sub->add_flag("--json", o->json, "Print a gpuenv-host-v1 JSON document");
  return {sub, [o, &g](Context& ctx) {
    (void)g;
    o->catalog_dir = g.catalog_dir;
    return cmd_detect(*o, ctx);
  }};
}

}  // namespace gpuenv::cli
