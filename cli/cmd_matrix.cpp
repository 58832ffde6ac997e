#include <CLI/CLI.hpp>
#include <ostream>

#include "cli/commands.hpp"
#include "cli/render.hpp"

namespace gpuenv::cli {

int cmd_matrix(const MatrixOptions& o, Context& ctx) {
  auto rows = app::matrix(o.catalog_dir, o.framework);
  if (!rows) return report_error(rows.error(), o.json, ctx);
  if (o.json) *ctx.out << matrix_json(*rows).dump(2) << "\n";
  else print_matrix(*ctx.out, *rows);
  return k_exit_ok;
}

Command add_matrix_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<MatrixOptions>();
  auto* sub = app.add_subcommand("matrix", "List valid combinations (framework version, CUDA variant, cuDNN, driver, architectures)");
  sub->add_option("framework", o->framework, "torch, tensorflow, jax, vllm, sglang or cuda (default: all)")
      ->check(CLI::IsMember({"torch", "tensorflow", "jax", "vllm", "sglang", "cuda"}));
  sub->add_flag("--json", o->json, "Print a gpuenv-matrix-v1 JSON document");
  return {sub, [o, &g](Context& ctx) {
    (void)g;
    o->catalog_dir = g.catalog_dir;
    return cmd_matrix(*o, ctx);
  }};
}

}  // namespace gpuenv::cli
