// gpuenv status: the last pre-flight's verdict from its status file (app/status, docs/fleet.md), fast and without
// touching a GPU. Exit 0 healthy, 1 failed, 4 missing, unreadable, stale or could not run.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>

#include "app/status.hpp"
#include "base/duration.hpp"
#include "base/file_io.hpp"
#include "base/safe_text.hpp"
#include "cli/commands.hpp"
#include "marks/from_report.hpp"

namespace gpuenv::cli {
namespace {

struct StatusOptions {
  app::StatusRequest rq;
  std::string node_features;       ///< write NFD's local feature file here
  std::string feature_ttl = "2h";  ///< its lines' expiry
  bool taints = false;             ///< print kubectl taint arguments
  bool drain_reason = false;       ///< print the scheduler's drain reason
  bool json = false;
};

int cmd_status(const StatusOptions& o, Context& ctx) {
  auto s = app::node_status(o.rq, ctx);
  if (!s) return report_error(s.error(), o.json, ctx);
  if (!o.node_features.empty()) {
    const auto ttl_d = parse_duration(o.feature_ttl, "--feature-ttl");
    const std::optional<std::int64_t> ttl = ttl_d ? std::optional<std::int64_t>(ttl_d->count()) : std::nullopt;
    if (!ttl || *ttl <= 0)
      return report_error(make_error(ErrorKind::usage, "status.feature_ttl", "--feature-ttl '" + o.feature_ttl + "' is not a duration", "--feature-ttl", "write 30m, 2h"),
                          o.json, ctx);
    // Written whatever the state (a missing or stale status is a label too), atomically: nfd-worker may read it any time.
    if (auto st = write_file_atomic(o.node_features, app::node_features(*s, app::now_seconds(ctx), *ttl)); !st) return report_error(st.error(), o.json, ctx);
  }
  const std::vector<std::string> taints = o.taints ? app::taint_args(*s) : std::vector<std::string>{};
  if (o.json) {
    nlohmann::ordered_json failed = nlohmann::ordered_json::array();
    for (const auto& f : s->failed)
      failed.push_back({{"check", f.check}, {"gpu", f.gpu < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.gpu)}, {"code", f.code}, {"message", f.message}});
    *ctx.out << nlohmann::ordered_json{{"schema", "gpuenv-status-v1"},
                                       {"state", s->state},
                                       {"exit_code", s->exit_code},
                                       {"reason", s->reason},
                                       {"status_file", s->status_file},
                                       {"verified_at", s->verified_at.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s->verified_at)},
                                       {"age_s", s->age_s ? nlohmann::ordered_json(*s->age_s) : nlohmann::ordered_json(nullptr)},
                                       {"level", s->level},
                                       {"backend", s->backend},
                                       {"driver", s->driver},
                                       {"cc_state", s->cc_state},
                                       {"gpus", s->gpu_models},
                                       {"drain_reason", app::drain_reason(*s)},
                                       {"failed", std::move(failed)},
                                       {"taints", taints}}
                    .dump(2)
             << "\n";
    return s->exit_code;
  }
  auto& out = *ctx.out;
  if (o.drain_reason) {  // one line for `scontrol update NodeName=N State=DRAIN Reason=...`; nothing when healthy
    if (const std::string r = app::drain_reason(*s); !r.empty()) out << r << "\n";
    return s->exit_code;
  }
  if (o.taints) {  // only the arguments, one per line, for `kubectl taint node NODE ARG --overwrite`
    for (const auto& t : taints) out << t << "\n";
    return s->exit_code;
  }
  // The status file's text is whoever wrote the file's: every field made safe to print.
  out << safe_text(s->state, 40) << ": " << safe_text(s->reason, 400);
  if (s->age_s)
    out << " (" << (s->level.empty() ? "" : safe_text(s->level, 40) + ", ") << *s->age_s << " s ago" << (s->backend == "replay" ? ", recorded answers" : "") << ")";
  out << "\n";
  for (const auto& f : s->failed)
    out << "  " << safe_text(f.check, 80) << (f.gpu >= 0 ? " GPU " + std::to_string(f.gpu) : std::string()) << (f.code.empty() ? "" : " [" + safe_text(f.code, 80) + "]")
        << (f.message.empty() ? "" : ": " + safe_text(f.message, 400)) << "\n";
  return s->exit_code;
}

}  // namespace

Command add_status_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto o = std::make_shared<StatusOptions>();
  auto* sub = app.add_subcommand("status", "The last pre-flight's verdict from its status file, without touching a GPU: exit 0 healthy, 1 failed, 4 missing or stale");
  sub->add_option("--status-file", o->rq.status_file, "The file gpuenv preflight wrote (default /run/gpuenv/status.json)");
  sub->add_option("--max-age", o->rq.max_age, "Older than this (30m, 24h, 7d) is stale: exit 4 (default: any age)");
  sub->add_option("--node-features", o->node_features, "Also write Node Feature Discovery's local feature file here (gpuenv.dev/status, level, driver, cc, failed-check)");
  sub->add_option("--feature-ttl", o->feature_ttl, "How long the feature file's labels live (default 2h): a node whose status stops being refreshed loses them");
  auto* taints = sub->add_flag("--taints", o->taints, "Print what the node's taints must become, as kubectl taint arguments, one per line (JSON: taints)");
  sub->add_flag("--drain-reason", o->drain_reason,
                "Print only the reason a scheduler records when it drains the node, 'gpuenv: CHECK: MESSAGE', one line; nothing when healthy (JSON: drain_reason)")
      ->excludes(taints);
  sub->add_flag("--json", o->json, "Print a gpuenv-status-v1 JSON document");
  return {sub, [o](Context& ctx) { return cmd_status(*o, ctx); }};
}

}  // namespace gpuenv::cli
