#include <CLI/CLI.hpp>
#include <ostream>

#include "cli/commands.hpp"
#include "cli/render.hpp"

namespace gpuenv::cli {

int cmd_detect(const DetectOptions& o, Context& ctx) {
  auto detected = app::detect(o.catalog_dir, ctx);
  if (!detected) return report_error(detected.error(), o.json, ctx);
  if (o.json) *ctx.out << host_json(detected->facts, detected->catalog.catalog).dump(2) << "\n";
  else print_host(*ctx.out, detected->facts, detected->catalog.catalog);
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
