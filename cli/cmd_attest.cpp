// gpuenv attest (this machine's GPUs, a fresh nonce, --set-ready) and gpuenv attest verify (saved evidence,
// offline): one app:: call each (app/attest, docs/attestation.md), the verdict as text or a gpuenv-attestation-v1
// JSON document. Exit 0 every device passes the policy, 1 one fails, 2 bad usage or unreadable evidence, 4 could not
// run.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>

#include "app/attest.hpp"
#include "base/time.hpp"
#include "base/safe_text.hpp"
#include "cli/commands.hpp"
#include "images/plan/image_config.hpp"

namespace gpuenv::cli {
namespace {

struct AttestVerifyOptions {
  app::AttestVerifyRequest rq;
  bool json = false;
};

struct AttestOptions {
  app::AttestRequest rq;
  bool json = false;
};

void print_text(const app::AttestResult& r, std::ostream& out) {
  for (std::size_t i = 0; i < r.devices.size(); ++i) {
    const auto& d = r.devices[i].appraisal;
    const auto& v = r.devices[i].verdict;
    out << "device " << i << "  " << attest::to_string(d.kind) << "  " << safe_text(attest::common_name(d.leaf_subject), 120)
        << "  driver " << (d.driver_version.empty() ? "-" : safe_text(d.driver_version, 60)) << "  VBIOS " << (d.vbios_version.empty() ? "-" : safe_text(d.vbios_version, 60)) << "  "
        << (v.pass ? "PASS" : "FAIL") << "\n";
    for (const auto& c : d.claims) {
      const std::string status(attest::to_string(c.status));
      out << "  " << status << std::string(status.size() < 12 ? 12 - status.size() : 1, ' ') << c.name << std::string(c.name.size() < 26 ? 26 - c.name.size() : 1, ' ')
          << safe_text(c.detail, 1000) << "\n";
    }
    for (const auto& reason : v.reasons) out << "  FAILS POLICY  " << safe_text(reason, 1000) << "\n";
  }
  out << (r.pass() ? "PASS" : "FAIL") << ": " << r.devices.size() << " device" << (r.devices.size() == 1 ? "" : "s") << ", policy " << safe_text(r.policy.source) << ", judged at "
      << format_rfc3339_utc(r.at) << ", nonce: " << r.nonce_source
      << (r.nonce_source == "evidence file" ? " (the file's own: it proves no freshness; give --nonce)" : "")
      << (r.nonce_source == "recorded" ? " (a replay of recorded evidence)" : "");
  if (r.rim_sources.empty()) out << ", no RIM store";
  for (const auto& s : r.rim_sources) out << ", RIMs from " << safe_text(s);
  out << "\n";
}

int print_result(const app::AttestResult& r, bool json, Context& ctx) {
  if (json) {
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : r.devices) devices.push_back(attest::to_json(d.appraisal, d.verdict, r.policy));
    nlohmann::json doc{{"schema", "gpuenv-attestation-v1"},
                       {"verdict", r.pass() ? "pass" : "fail"},
                       {"at", format_rfc3339_utc(r.at)},
                       {"policy", r.policy.source},
                       {"nonce_source", r.nonce_source},
                       {"rim_sources", r.rim_sources},
                       {"devices", std::move(devices)}};
    if (!r.backend.empty()) {
      doc["backend"] = r.backend;
      doc["ready_set"] = r.ready_set;
    }
    *ctx.out << doc.dump(2) << "\n";
  } else {
    print_text(r, *ctx.out);
    if (r.ready_set) *ctx.out << (r.backend == "replay" ? "ready state: a replay sets nothing\n" : "ready state set: the GPUs accept work\n");
  }
  return r.pass() ? k_exit_ok : k_exit_validation_failed;
}

int cmd_attest_verify(const AttestVerifyOptions& o, Context& ctx) {
  auto r = app::attest_verify(o.rq, ctx);
  if (!r) return report_error(r.error(), o.json, ctx);
  return print_result(*r, o.json, ctx);
}

int cmd_attest(const AttestOptions& o, Context& ctx) {
  auto r = app::attest_gpus(o.rq, ctx);
  if (!r) return report_error(r.error(), o.json, ctx);
  return print_result(*r, o.json, ctx);
}

}  // namespace

void add_attest_options(CLI::App* sub, app::AttestOptions& o, const std::string& policy_flag, bool offline) {
  sub->add_option("--rim-dir", o.rim_dir, "A directory of RIMs, <id>.xml or the RIM service's <id>.json (offline)");
  sub->add_option("--rim-service", o.rim_service, "The RIM service's base URL (GET URL/v1/rim/<id>; default: GPUENV_RIM_SERVICE_URL, else none)");
  if (offline) sub->add_flag("--offline", o.offline, "Take RIM service answers from the cache only");
  sub->add_option(policy_flag, o.policy_path, "An attestation policy file (YAML) over the default policy (docs/attestation.md)");
  sub->add_flag("--ocsp", o.ocsp, "Check revocation by OCSP (the network): each chain's certificates but the device leaf and the roots");
  sub->add_option("--ocsp-url", o.ocsp_url, "The OCSP responder (default: each certificate's own)");
}

Command add_attest_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto live = std::make_shared<AttestOptions>();
  auto* sub = app.add_subcommand("attest", "Confidential-computing attestation of this machine's GPUs, verified locally: exit 0 pass, 1 fail, 2 bad usage, 4 could not run");
  sub->add_option("--backend", live->rq.backend, "replay:FILE answers from recorded evidence (docs/replay.md)");
  sub->add_option("--gpus", live->rq.gpus, "GPU indices to attest, e.g. 0,1 (default: all)");
  sub->add_flag("--set-ready", live->rq.set_ready,
                "After every GPU passed, set the confidential-computing ready state so the GPUs accept work (the one write gpuenv makes to a GPU)");
  add_attest_options(sub, live->rq.options, "--policy", true);
  sub->add_flag("--json", live->json, "Print a gpuenv-attestation-v1 JSON document");

  auto o = std::make_shared<AttestVerifyOptions>();
  auto* v = sub->add_subcommand("verify", "Verify saved evidence offline: exit 0 pass, 1 fail, 2 bad usage or unreadable evidence, 4 could not run");
  v->add_option("--evidence", o->rq.evidence_path, "NVIDIA's evidence JSON (nonce, arch, evidence_list of base64 report and certificate chain)");
  v->add_option("--report", o->rq.report_path, "One attestation report (raw bytes or hex text); with --cert-chain and --nonce");
  v->add_option("--cert-chain", o->rq.chain_path, "The report's certificate chain (5 PEM certificates, leaf first)");
  v->add_option("--nonce", o->rq.nonce_hex, "The 32-byte nonce the evidence was requested with, as 64 hex digits");
  v->add_option("--driver-rim", o->rq.driver_rim, "The driver RIM file (one device)");
  v->add_option("--vbios-rim", o->rq.vbios_rim, "The VBIOS RIM file (one device)");
  v->add_option("--at", o->rq.at, "Judge certificate validity at this UTC time or date (2024-01-01) instead of now");
  add_attest_options(v, o->rq.options, "--policy", true);
  v->add_flag("--json", o->json, "Print a gpuenv-attestation-v1 JSON document");
  return {sub, [o, live, v](Context& ctx) -> int {
    if (v->parsed()) return cmd_attest_verify(*o, ctx);
    return cmd_attest(*live, ctx);
  }};
}

}  // namespace gpuenv::cli
