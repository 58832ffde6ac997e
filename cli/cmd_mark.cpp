// gpuenv mark IMAGE --report R --key K and gpuenv verify IMAGE --key PUB...: one app:: call each (app/marks), the
// answer rendered as text or JSON (docs/mark.md).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>

#include "app/marks.hpp"
#include "app/statements.hpp"
#include "base/time.hpp"
#include "base/safe_text.hpp"
#include "cli/commands.hpp"
#include "images/plan/image_config.hpp"

namespace gpuenv::cli {
namespace {

using nlohmann::ordered_json;

struct MarkOptions {
  std::string image, report, key, valid_for = "30d";
  bool allow_replay = false, plain_http = false, json = false, referrers = false;
};

struct VerifyOptions {
  std::string image;
  std::vector<std::string> keys;
  std::string gpu = "auto", driver = "auto", cc = "auto", level, max_age, host_status;
  bool allow_replay = false, plain_http = false, json = false;
  bool sbom = false, provenance = false;  ///< check these statements instead of the marks
};

ordered_json predicate_summary(const marks::MarkPredicate& p) {
  return {{"result", p.passed ? "PASSED" : "FAILED"},
          {"level", p.level},
          {"gpu", {{"product", p.gpu_product}, {"pciDeviceId", p.gpu_pci_device_id}, {"count", p.gpu_count}}},
          {"driver", p.driver_version},
          {"cudaDriverVersion", p.cuda_driver_version},
          {"cc", p.cc_mode},
          {"backend", p.backend},
          {"timeVerified", format_rfc3339_utc(p.time_verified)},
          {"notAfter", format_rfc3339_utc(p.not_after)}};
}

/// One record's predicate on one line. Every field is the record's own text, signed by a key that may not count
/// (an unknown key's record is shown too): each is made safe, so that none can end the line or rewrite it.
std::string predicate_line_of(const marks::MarkPredicate& p) {
  return std::string(p.passed ? "PASSED " : "FAILED ") + safe_text(p.level, 40) + " on " + std::to_string(p.gpu_count) + "x " + safe_text(p.gpu_product, 120) +
         ", driver " + safe_text(p.driver_version, 60) + ", cc " + safe_text(p.cc_mode, 40) + (p.backend == "replay" ? ", REPLAY (recorded GPU answers)" : "") +
         ", verified " + format_rfc3339_utc(p.time_verified) + ", until " + format_rfc3339_utc(p.not_after);
}

}  // namespace

std::string mark_predicate_line(const marks::MarkPredicate& p) { return predicate_line_of(p); }

void print_mark_result(const app::MarkResult& m, bool json, std::ostream& out) {
  if (json) {
    out << ordered_json{{"schema", "gpuenv-mark-v1"},
                        {"image", m.image.str()},
                        {"where", m.where},
                        {"record", m.record_digest},
                        {"records", m.records},
                        {"referrer", m.referrer.empty() ? ordered_json(nullptr) : ordered_json(m.referrer)},
                        {"predicate", predicate_summary(m.predicate)}}
                   .dump(2)
        << "\n";
    return;
  }
  out << "marked " << m.image.str() << ": " << predicate_line_of(m.predicate) << "\n"
      << "  record " << m.record_digest << (m.already_there ? " (already there)" : "") << " in " << safe_text(m.where) << " (" << m.records << " record"
      << (m.records == 1 ? "" : "s") << ")\n";
  if (!m.referrer.empty()) out << "  referrer " << safe_text(m.referrer) << "\n";
}

int cmd_mark(const MarkOptions& o, Context& ctx) {
  app::MarkRequest rq;
  rq.image = o.image;
  rq.report_path = o.report;
  rq.key_path = o.key;
  rq.allow_replay = o.allow_replay;
  rq.valid_for = o.valid_for;
  rq.plain_http = o.plain_http;
  rq.referrers = o.referrers;
  auto m = app::mark(rq, ctx);
  if (!m) return report_error(m.error(), o.json, ctx);
  print_mark_result(*m, o.json, *ctx.out);
  return k_exit_ok;
}

/// verify --sbom/--provenance: whether the image's statements of those kinds exist, are signed by a key and name it.
int cmd_verify_statements(const VerifyOptions& o, Context& ctx) {
  app::VerifyStatementsRequest rq;
  rq.image = o.image;
  rq.keys = o.keys;
  rq.plain_http = o.plain_http;
  if (o.sbom) rq.kinds.push_back(app::StatementKind::sbom);
  if (o.provenance) rq.kinds.push_back(app::StatementKind::provenance);
  auto v = app::verify_statements(rq, ctx);
  if (!v) return report_error(v.error(), o.json, ctx);
  const int code = v->ok() ? k_exit_ok : k_exit_validation_failed;
  if (o.json) {
    auto records = ordered_json::array();
    for (const auto& r : v->records) {
      auto reasons = ordered_json::array();
      for (const auto& reason : r.reasons) reasons.push_back(safe_text(reason, 400));
      records.push_back({{"kind", std::string(app::to_string(r.kind))},
                         {"digest", r.digest},
                         {"counts", r.counts},
                         {"reasons", std::move(reasons)},
                         {"key", r.key >= 0 ? ordered_json(o.keys[static_cast<std::size_t>(r.key)]) : ordered_json(nullptr)},
                         {"summary", r.summary}});
    }
    auto wanted = ordered_json::array();
    for (const auto k : v->wanted) wanted.push_back(std::string(app::to_string(k)));
    *ctx.out << ordered_json{{"schema", "gpuenv-verify-statements-v1"}, {"image", v->image.str()}, {"where", safe_text(v->where)}, {"ok", v->ok()},
                             {"wanted", wanted}, {"records", records}}
                    .dump(2)
             << "\n";
    return code;
  }
  auto& out = *ctx.out;
  out << v->image.str() << " (" << safe_text(v->where) << ")\n";
  for (const auto& r : v->records) {
    out << (r.counts ? "  counts   " : "  no       ") << std::string(app::to_string(r.kind)) << " " << safe_text(r.digest.substr(0, 19));
    if (!r.summary.empty()) out << "  " << safe_text(r.summary, 200);
    out << "\n";
    for (const auto& reason : r.reasons) out << "           - " << safe_text(reason, 400) << "\n";
  }
  for (const auto kind : v->wanted) {
    int counting = 0, seen = 0;
    for (const auto& r : v->records)
      if (r.kind == kind) {
        ++seen;
        counting += r.counts ? 1 : 0;
      }
    const std::string what = kind == app::StatementKind::sbom ? "SBOM" : "provenance";
    if (seen == 0) out << "NOT verified: no " << what << " statement (gpuenv build --attest " << std::string(app::to_string(kind)) << " --key ...)\n";
    else out << (counting > 0 ? "verified: " : "NOT verified: ") << counting << " of " << seen << " " << what << " record" << (seen == 1 ? "" : "s") << " count\n";
  }
  return code;
}

int cmd_verify(const VerifyOptions& o, Context& ctx) {
  if (o.sbom || o.provenance) return cmd_verify_statements(o, ctx);
  app::VerifyRequest rq;
  rq.image = o.image;
  rq.keys = o.keys;
  rq.gpu = o.gpu == "any" ? "" : o.gpu;
  rq.driver = o.driver == "any" ? "" : o.driver;
  rq.cc = o.cc == "any" ? "" : o.cc;
  rq.level = o.level;
  rq.max_age = o.max_age;
  rq.allow_replay = o.allow_replay;
  rq.plain_http = o.plain_http;
  rq.host_status = o.host_status;
  auto v = app::verify(rq, ctx);
  if (!v) return report_error(v.error(), o.json, ctx);
  const auto& w = v->wanted;
  const int code = v->ok() ? k_exit_ok : k_exit_validation_failed;
  if (o.json) {
    auto records = ordered_json::array();
    for (const auto& r : v->records) {
      ordered_json j{{"digest", r.digest}, {"counts", r.verdict.counts}, {"reasons", r.verdict.reasons}};
      j["key"] = r.verdict.key >= 0 ? ordered_json(o.keys[static_cast<std::size_t>(r.verdict.key)]) : ordered_json(nullptr);
      j["predicate"] = r.verdict.statement ? predicate_summary(r.verdict.statement->predicate) : ordered_json(nullptr);
      records.push_back(std::move(j));
    }
    ordered_json wanted{{"gpu", w.gpu_product.empty() ? ordered_json(nullptr) : ordered_json(marks::gpu_product_label(w.gpu_product))},
                        {"driver", w.driver.empty() ? ordered_json(nullptr) : ordered_json(w.driver)},
                        {"cc", w.cc_mode.empty() ? ordered_json(nullptr) : ordered_json(w.cc_mode)},
                        {"level", w.level.empty() ? ordered_json(nullptr) : ordered_json(w.level)},
                        {"max_age_s", w.max_age_s ? ordered_json(*w.max_age_s) : ordered_json(nullptr)},
                        {"allow_replay", w.allow_replay}};
    *ctx.out << ordered_json{{"schema", "gpuenv-verify-v1"}, {"image", v->image.str()}, {"where", v->where}, {"ok", v->ok()},
                             {"wanted", wanted}, {"records", records}}
                    .dump(2)
             << "\n";
    return code;
  }
  std::string asked = w.gpu_product.empty() ? "any GPU" : safe_text(marks::gpu_product_label(w.gpu_product), 120);  // a host status file's
  asked += w.driver.empty() ? ", any driver" : ", driver " + safe_text(w.driver, 60);
  if (!w.cc_mode.empty()) asked += ", cc " + w.cc_mode;
  if (!w.level.empty()) asked += ", level " + w.level + " or above";
  auto& out = *ctx.out;
  out << v->image.str() << " (" << safe_text(v->where) << ")\n";
  if (v->records.empty()) {
    out << "no marks: the image was never marked good (gpuenv validate --image ... --mark, or gpuenv mark)\n";
    return code;
  }
  int counting = 0;
  for (const auto& r : v->records) {
    counting += r.verdict.counts ? 1 : 0;
    out << (r.verdict.counts ? "  counts   " : "  no       ") << safe_text(r.digest.substr(0, 19));
    if (r.verdict.statement) out << "  " << predicate_line_of(r.verdict.statement->predicate);
    out << "\n";
    for (const auto& reason : r.verdict.reasons) out << "           - " << safe_text(reason, 400) << "\n";
  }
  out << (counting > 0 ? "verified: " : "NOT verified: ") << counting << " of " << v->records.size() << " record" << (v->records.size() == 1 ? "" : "s")
      << " count for " << asked << "\n";
  return code;
}

Command add_mark_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto o = std::make_shared<MarkOptions>();
  auto* sub = app.add_subcommand("mark", "Mark an image good from its passing validation report: a signed record stored beside the image");
  sub->add_option("image", o->image, "The image: an OCI layout (DIR[:REF], oci:DIR[:REF]), an archive (FILE, oci-archive:FILE) or a registry image (docker://host/repo:tag)")->required();
  sub->add_option("--report", o->report, "The gpuenv-validation-v1 JSON report of the image's validation (gpuenv validate --image ... --json)")->required();
  sub->add_option("--key", o->key, "The private key (gpuenv key generate); default: the file GPUENV_MARK_KEY names");
  sub->add_option("--valid-for", o->valid_for, "How long the record stays valid (notAfter): 30d, 12h, ... (default 30d)");
  sub->add_flag("--allow-replay", o->allow_replay, "Mark from a report of the replay backend (the record says replay; verify refuses it by default)");
  sub->add_flag("--referrers", o->referrers, "Also store the record as an OCI 1.1 referrer holding a Sigstore bundle v0.3 (cosign v3's format)");
  sub->add_flag("--plain-http", o->plain_http, "Talk to the registry over plain HTTP (a loopback or test registry)");
  sub->add_flag("--json", o->json, "Print a gpuenv-mark-v1 JSON document");
  return {sub, [o](Context& ctx) { return cmd_mark(*o, ctx); }};
}

Command add_verify_command(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<VerifyOptions>();
  auto* sub = app.add_subcommand("verify", "Whether an image was marked good for this GPU and driver: exit 0 yes, 1 no, 4 could not look");
  sub->add_option("image", o->image, "The image: an OCI layout (DIR[:REF], oci:DIR[:REF]), an archive (FILE, oci-archive:FILE) or a registry image (docker://host/repo:tag)")->required();
  sub->add_option("--key", o->keys, "A public key whose signature counts (PKIX PEM, gpuenv.pub); repeatable")->required()->allow_extra_args(false);
  sub->add_option("--gpu", o->gpu, "The GPU model the record must cover: auto (this host, the default), a model ('NVIDIA H200'), or any")
      ->take_last();
  sub->add_option("--driver", o->driver, "The driver the record must cover (same version, or same branch and not older): auto, a version, or any")
      ->take_last();
  sub->add_option("--cc", o->cc, "Confidential computing the record must show: auto, on, off, devtools, or any")
      ->check(CLI::IsMember({"auto", "on", "off", "devtools", "any"}))
      ->take_last();
  sub->add_option("--level", o->level, "The least validation level: quick, standard or long")->check(CLI::IsMember({"quick", "standard", "long"}))->take_last();
  sub->add_option("--max-age", o->max_age, "Refuse records verified longer ago than this: 7d, 12h, ...")->take_last();
  sub->add_option("--host-status", o->host_status,
                  "Take auto's GPU model, driver and CC mode from this pre-flight status file (/run/gpuenv/status.json) instead of asking the driver")
      ->take_last();
  sub->add_flag("--allow-replay", o->allow_replay, "Count records made from recorded GPU answers (the replay backend)");
  sub->add_flag("--sbom", o->sbom, "Check the image's signed CycloneDX SBOM statement (gpuenv build --attest sbom) instead of its marks");
  sub->add_flag("--provenance", o->provenance, "Check the image's signed SLSA provenance statement (gpuenv build --attest provenance) instead of its marks");
  sub->add_flag("--plain-http", o->plain_http, "Talk to the registry over plain HTTP (a loopback or test registry)");
  sub->add_flag("--json", o->json, "Print a gpuenv-verify-v1 JSON document (gpuenv-verify-statements-v1 with --sbom or --provenance)");
  return {sub, [o, &global](Context& ctx) {
    (void)global;
    return cmd_verify(*o, ctx);
  }};
}

}  // namespace gpuenv::cli
