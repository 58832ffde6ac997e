// gpuenv run IMAGE -- CMD...: flags into one app::run call (images/run/sandbox: bubblewrap, or chroot when it is
// missing, with the host's NVIDIA devices and driver libraries bound in when present), and its errors.
#include <ostream>

#include "app/run.hpp"
#include "cli/commands.hpp"

namespace gpuenv::cli {

int cmd_run(const RunOptions& o, Context& ctx) {
  app::RunRequest rq;
  rq.image = o.image;
  rq.command = o.command;
  rq.gpu = !o.no_gpu;
  rq.binds = o.binds;
  ctx.out->flush();
  auto status = app::run(rq, ctx);
  if (!status) return report_error(status.error(), false, ctx);
  return *status;
}

}  // namespace gpuenv::cli
