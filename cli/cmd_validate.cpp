// gpuenv validate, gpuenv checks, gpuenv preflight: one app:: call each (app/validate), and the report rendered.
// The judgement is validate/'s.
#include <CLI/CLI.hpp>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include <unistd.h>

#include "app/validate.hpp"
#include "app/validate_and_mark.hpp"
#include "base/duration.hpp"
#include "base/safe_text.hpp"
#include "cli/commands.hpp"
#include "validate/check.hpp"
#include "validate/report.hpp"

namespace gpuenv::cli {

app::ValidateAndMarkRequest validate_and_mark_request(const ValidateOptions& o) {
  app::ValidateAndMarkRequest rq;
  rq.validate = {o.level, o.gpus, o.lock, o.image, o.checks, o.junit, o.backend, o.thresholds, o.mig, o.attest, o.metrics, o.plain_http,
                 o.data, o.data_min, o.spec, std::nullopt, "/sys", o.cdi_dirs, o.cdi_root, o.record};
  rq.mark = o.mark;
  rq.mark_image = o.mark_image;
  rq.key_path = o.key;
  rq.valid_for = o.valid_for;
  rq.referrers = o.referrers;
  return rq;
}

int cmd_validate(const ValidateOptions& o, Context& ctx) {
  app::ValidateAndMarkRequest rq = validate_and_mark_request(o);
  const MultiNodeOptions& m = o.multi_node;
  if (!m.enabled && (!m.peers.empty() || m.rank >= 0 || !m.run_token.empty() || m.port != 0))
    return report_error(make_error(ErrorKind::usage, "validate.multi_node", "--peers, --rank, --run-token and --rendezvous-port need --multi-node",
                                   "--multi-node", "add --multi-node"),
                        o.json, ctx);
  if (m.enabled) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    auto config = multi_node_config(m, ctx.env, host);
    if (!config) return report_error(config.error(), o.json, ctx);
    rq.validate.multi_node = std::move(*config);
    // A container that mounts the host's sysfs elsewhere (as /host/sys) names it; the tests name a fixture tree.
    if (auto it = ctx.env.find("GPUENV_SYSFS_ROOT"); it != ctx.env.end() && !it->second.empty()) rq.validate.sysfs_root = it->second;
  }
  auto v = app::validate_and_mark(rq, ctx);
  if (!v) return report_error(v.error(), o.json, ctx);
  ctx.exit_now = v->hung;  // an abandoned check thread may still be inside the driver: main() exits at once
  // With --json, stdout carries exactly the report (the bytes a mark's report digest names); the mark goes to stderr.
  if (o.json) *ctx.out << v->report_bytes;
  else *ctx.out << validate::report_text(v->report, ctx.stdout_is_tty);
  if (v->record_error) (void)report_error(*v->record_error, false, ctx);
  else if (!o.record.empty()) (o.json ? *ctx.err : *ctx.out) << "recorded what the " << safe_text(v->report.backend) << " backend answered in " << safe_text(o.record) << " (replay it: --backend replay:" << safe_text(o.record) << ")\n";
  if (v->mark) print_mark_result(*v->mark, false, o.json ? *ctx.err : *ctx.out);
  if (v->mark_error) {
    (void)report_error(*v->mark_error, false, ctx);
  }
  return v->exit_code;
}

int cmd_preflight(const PreflightOptions& o, Context& ctx) {
  app::PreflightRequest rq{o.status_file, o.backend, o.lock, {}, o.metrics};
  if (!o.wait_fabric.empty()) {
    const auto wait = parse_duration(o.wait_fabric, "--wait-fabric");
    const std::optional<std::int64_t> seconds = wait ? std::optional<std::int64_t>(wait->count()) : std::nullopt;
    if (!seconds || *seconds < 0)
      return report_error(make_error(ErrorKind::usage, "preflight.wait_fabric", "--wait-fabric '" + o.wait_fabric + "' is not a duration", "--wait-fabric",
                                     "write 90s, 5m"),
                          o.json, ctx);
    rq.wait_fabric = std::chrono::seconds(*seconds);
  }
  auto done = app::preflight(rq, ctx);
  if (!done) return report_error(done.error(), o.json, ctx);
  ctx.exit_now = done->hung;
  if (o.json) *ctx.out << done->status.dump(2) << "\n";
  else *ctx.out << validate::report_text(done->report, ctx.stdout_is_tty) << "wrote " << o.status_file << "\n";
  return done->exit_code;
}

int cmd_checks(const ChecksOptions& o, Context& ctx) {
  const auto checks = validate::all_checks();
  const validate::Level levels[] = {validate::Level::quick, validate::Level::standard, validate::Level::long_};
  if (o.json) {
    auto list = nlohmann::ordered_json::array();
    for (const auto& c : checks) {
      nlohmann::ordered_json j = {{"key", c->key()}, {"category", c->category()}, {"description", c->description()}, {"uses_gpu", c->uses_gpu()}};
      auto at = nlohmann::ordered_json::array();
      auto deadlines = nlohmann::ordered_json::object();
      for (auto l : levels) {
        if (!c->runs_at(l)) continue;
        at.push_back(validate::to_string(l));
        deadlines[validate::to_string(l)] = c->deadline(l, 1).count();
      }
      j["levels"] = at;
      j["deadline_ms_one_gpu"] = deadlines;
      list.push_back(j);
    }
    *ctx.out << nlohmann::ordered_json{{"schema", "gpuenv-checks-v1"}, {"checks", list}}.dump(2) << "\n";
    return k_exit_ok;
  }
  std::size_t width = 0;
  for (const auto& c : checks) width = std::max(width, c->key().size());
  for (const auto& c : checks) {
    std::string at;
    for (auto l : levels)
      if (c->runs_at(l)) at += std::string(at.empty() ? "" : ",") + validate::to_string(l);
    *ctx.out << std::left << std::setw(static_cast<int>(width) + 2) << c->key() << std::setw(12) << c->category() << std::setw(23) << at << c->description() << "\n";
  }
  return k_exit_ok;
}

Command add_validate_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<ValidateOptions>();
  auto* sub = app.add_subcommand("validate", "Validate this machine's GPUs: software, health, kernels, memory, bandwidth, GEMM");
  sub->add_option("--level", o->level, "quick (boot pre-flight), standard or long")->check(CLI::IsMember({"quick", "standard", "long"}));
  sub->add_option("--gpus", o->gpus, "GPU indices to check, e.g. 0,1 (default: all)");
  sub->add_option("--lock", o->lock, "A gpuenv.lock: the driver floor and CUDA version to check against (default with --image: the image's own)");
  sub->add_option("--image", o->image,
                 "An image built by gpuenv (layout DIR or DIR:REF, or docker://host/repo:tag, pulled into the cache): its CUDA libraries and frameworks run inside it (libraries_load, framework_smoke, cudnn_smoke)");
  sub->add_option("--check", o->checks, "Only this check, key prefix or category; repeatable (see gpuenv checks)");
  sub->add_option("--junit", o->junit, "Also write a JUnit XML report to this file");
  sub->add_option("--metrics", o->metrics, "Also write Prometheus metrics to this file, atomically (node_exporter's textfile collector: a *.prom file)");
  sub->add_option("--backend", o->backend, "replay:FILE answers from a recorded inventory and scenario (docs/replay.md)");
  sub->add_option("--record", o->record,
                  "Also write every answer of the GPU backend (inventory, health, measurements, errors) to this file as a replay file (docs/replay.md)");
  sub->add_option("--thresholds", o->thresholds, "Per-GPU references YAML instead of the built-in one")->check(CLI::ExistingFile);
  sub->add_option("--mig", o->mig, "Expected MIG mode for mig_state: on or off")->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--cdi-dir", o->cdi_dirs,
                  "A CDI spec directory for cdi_spec, repeatable, instead of /etc/cdi, /var/run/cdi and the container toolkit's spec-dirs");
  sub->add_option("--cdi-root", o->cdi_root, "Look up the host paths CDI specs name (and the default spec directories) beneath this directory (default /)");
  sub->add_flag("--json", o->json, "Print a gpuenv-validation-v1 JSON report");
  sub->add_flag("--mark", o->mark, "When the validation passes on the real GPU, mark --image good: a signed record stored beside it (docs/mark.md)");
  sub->add_option("--key", o->key, "The private key of --mark (gpuenv key generate); default: the file GPUENV_MARK_KEY names");
  sub->add_option("--valid-for", o->valid_for, "How long the mark stays valid (notAfter): 30d, 12h, ... (default 30d)");
  sub->add_option("--mark-image", o->mark_image, "Put the mark on this copy of the image instead (docker://host/repo:tag: the same digest, pushed)");
  sub->add_flag("--plain-http", o->plain_http, "Talk to the registry of --image and --mark-image over plain HTTP (a loopback or test registry)");
  sub->add_flag("--referrers", o->referrers, "Also store the mark as an OCI 1.1 referrer holding a Sigstore bundle v0.3");
  sub->add_option("--data", o->data,
                 "data_read: a directory (gpuenv writes a test file in a directory of its own there, then removes it) or a file (only read) to measure the sequential read rate of");
  sub->add_option("--data-min", o->data_min, "data_read's threshold, e.g. 2GB/s or 1.5GiB/s (default: the --spec's validate.data_read_min; none: MEASURED)");
  sub->add_option("--spec", o->spec, "A spec whose validate.data_read_min judges data_read")->check(CLI::ExistingFile);
  add_attest_options(sub, o->attest, "--attest-policy", false);
  // Across nodes (docs/validate.md "More than one node").
  sub->add_flag("--multi-node", o->multi_node.enabled,
                "nccl_allreduce across nodes: ranks from Slurm (srun -N2 --ntasks-per-node=1) or --peers/--rank; each rank drives all its selected GPUs");
  sub->add_option("--peers", o->multi_node.peers, "With --multi-node outside Slurm: every rank's host in rank order, HOST[:PORT],HOST,... (the port on the first: where rank 0 listens)");
  sub->add_option("--rank", o->multi_node.rank, "With --peers: this process's rank (0 listens; the others connect to it)");
  sub->add_option("--run-token", o->multi_node.run_token, "With --multi-node: a text every rank of one run shares, so two runs on one port cannot cross (default: the Slurm job and step, or the --peers list)");
  sub->add_option("--rendezvous-port", o->multi_node.port, "With --multi-node: rank 0's TCP port (default 29517)");
  sub->add_option("--rendezvous-timeout", o->multi_node.timeout, "With --multi-node: how long rank 0 waits for every rank, and each rank for rank 0 (default 120s)");
  sub->add_option("--nccl-buffer", o->multi_node.buffer, "With --multi-node: the all-reduce buffer per GPU (default 256MiB; every rank uses rank 0's)");
  return {sub, [o, &g](Context& ctx) {
    (void)g;
    return cmd_validate(*o, ctx);
  }};
}

Command add_preflight_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<PreflightOptions>();
  auto* sub = app.add_subcommand("preflight", "Boot pre-flight: the quick level, with a status JSON written atomically");
  sub->add_option("--status-file", o->status_file, "Where to write the status (default /run/gpuenv/status.json)");
  sub->add_option("--metrics", o->metrics, "Also write Prometheus metrics to this file, atomically (node_exporter's textfile collector: a *.prom file)");
  sub->add_option("--wait-fabric", o->wait_fabric, "On NVSwitch systems, wait at most this long (90s, 5m) for the fabric manager to register the GPUs");
  sub->add_option("--lock", o->lock, "A gpuenv.lock to check the driver against");
  sub->add_option("--backend", o->backend, "replay:FILE (docs/replay.md)");
  sub->add_flag("--json", o->json, "Print the status JSON");
  return {sub, [o, &g](Context& ctx) {
    (void)g;
    return cmd_preflight(*o, ctx);
  }};
}

Command add_checks_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<ChecksOptions>();
  auto* sub = app.add_subcommand("checks", "List the validation checks with their levels and deadlines");
  sub->add_flag("--json", o->json, "Print a gpuenv-checks-v1 JSON document");
  return {sub, [o, &g](Context& ctx) {
    (void)g;
    return cmd_checks(*o, ctx);
  }};
}

}  // namespace gpuenv::cli
