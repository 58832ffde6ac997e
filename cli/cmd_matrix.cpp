#include <ostream>

#include "cli/commands.hpp"
#include "cli/render.hpp"

namespace gpuenv::cli {

int cmd_matrix(const MatrixOptions& o, Context& ctx) {
  auto loaded = load_catalog_from(o.catalog_dir);
  if (!loaded) return report_error(loaded.error(), o.json, ctx);
  auto rows = resolver::matrix(loaded->catalog, o.framework);
  if (!rows) return report_error(rows.error(), o.json, ctx);
  if (o.json) *ctx.out << matrix_json(*rows).dump(2) << "\n";
  else print_matrix(*ctx.out, *rows);
  return k_exit_ok;
}

}  // namespace gpuenv::cli
