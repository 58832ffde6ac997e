// gpuenv run IMAGE -- CMD...: flags into one app::run call (images/run/sandbox: bubblewrap, or chroot when it is
// missing, with the host's NVIDIA devices and driver libraries bound in when present), and its errors.
#include <CLI/CLI.hpp>
#include <ostream>

#include "app/run.hpp"
#include "base/safe_text.hpp"
#include "cli/commands.hpp"

namespace gpuenv::cli {

int cmd_run(const RunOptions& o, Context& ctx) {
  app::RunRequest rq;
  rq.image = o.image;
  rq.command = o.command;
  rq.gpu = !o.no_gpu;
  rq.binds = o.binds;
  rq.plain_http = o.plain_http;
  rq.emulator = o.emulator;
  if (!o.platform.empty()) {
    auto p = resolver::parse_platform(o.platform);
    if (!p) {
      Error e = std::move(p).error();
      e.kind = ErrorKind::usage;
      e.where = "--platform";
      return report_error(e, false, ctx);
    }
    rq.platform = *p;
  }
  auto plan = app::plan_run(rq, ctx);
  if (!plan) return report_error(plan.error(), false, ctx);
  for (const auto& n : plan->notes) *ctx.err << "note: " << safe_text(n) << "\n";
  ctx.out->flush();
  ctx.err->flush();
  auto status = images::run_sandbox_interactive(plan->sandbox);
  if (!status) return report_error(status.error(), false, ctx);
  return *status;
}

Command add_run_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<RunOptions>();
  auto* sub = app.add_subcommand("run", "Run a command inside a built image (bubblewrap; the host's GPUs and driver bound in)");
  sub->add_option("image", o->image, "OCI layout directory (gpuenv-out/NAME), DIR:REF or oci:DIR[:REF], or a registry image (docker://host/repo:tag, pulled into the cache)")->required();
  sub->add_option("command", o->command, "Command and arguments, after --");
  sub->add_flag("--no-gpu", o->no_gpu, "Do not bind NVIDIA devices and driver libraries");
  sub->add_option("--bind", o->binds, "HOST:DEST: make a host file or directory readable at DEST inside (repeatable)");
  sub->add_flag("--plain-http", o->plain_http, "Pull a registry image over plain HTTP (a loopback or test registry)");
  sub->add_option("--platform", o->platform, "The image of this platform from a multi-platform image (linux/amd64, linux/arm64; default: this machine's); "
                                             "another architecture's runs through qemu-user");
  sub->add_option("--emulator", o->emulator, "The static user-mode emulator for another architecture (default: qemu-aarch64-static or qemu-x86_64-static on PATH)");
  return {sub, [o, &g](Context& ctx) {
    (void)g;
    return cmd_run(*o, ctx);
  }};
}

}  // namespace gpuenv::cli
