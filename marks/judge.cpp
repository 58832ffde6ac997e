#include "marks/judge.hpp"

#include <algorithm>

#include <cctype>

#include "base/time.hpp"

namespace gpuenv::marks {
namespace {

std::vector<long> numbers(std::string_view v) {
  std::vector<long> out;
  long cur = -1;
  for (char c : v) {
    if (c >= '0' && c <= '9') {
      cur = (cur < 0 ? 0 : cur * 10) + (c - '0');
      if (cur > 1000000000) return {};
    } else if (c == '.' && cur >= 0) {
      out.push_back(cur);
      cur = -1;
    } else {
      return {};
    }
  }
  if (cur < 0) return {};
  out.push_back(cur);
  return out;
}

}  // namespace

std::string gpu_product_label(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') out += c;
    else if (c == ' ') out += '-';
  }
  return out;
}

bool driver_covers(std::string_view validated, std::string_view host) {
  const auto v = numbers(validated), h = numbers(host);
  if (v.empty() || h.empty() || v.front() != h.front()) return false;
  return h >= v;  // lexicographic on the numbers: 580.82.07 >= 580.65.06
}

int level_rank(std::string_view level) {
  if (level == "quick") return 1;
  if (level == "standard") return 2;
  if (level == "long") return 3;
  return 0;
}

MarkVerdict judge_mark(std::string_view envelope_json, const std::vector<const Key*>& keys, const MarkWanted& w, const std::string& where) {
  MarkVerdict out;
  auto env = parse_envelope(envelope_json, where);
  if (!env) {
    out.reasons.push_back("its envelope is malformed: " + env.error().message);
    return out;
  }
  if (env->payload_type != k_in_toto_payload_type) out.reasons.push_back("the envelope's payloadType is '" + env->payload_type + "', not " + std::string(k_in_toto_payload_type));
  out.key = verifying_key(*env, keys);
  if (out.key < 0) out.reasons.push_back("no given key verifies its signature");
  auto st = parse_statement(env->payload, where);
  if (!st) {
    out.reasons.push_back(st.error().message);
    return out;
  }
  const MarkPredicate& p = st->predicate;
  if (st->subject != w.image) out.reasons.push_back("it is for another image (" + st->subject.str() + ")");
  if (!p.passed) out.reasons.push_back("its validation FAILED");
  if (!w.gpu_product.empty() && p.gpu_product != gpu_product_label(w.gpu_product) &&
      std::none_of(w.gpu_spellings.begin(), w.gpu_spellings.end(), [&](const std::string& s) { return p.gpu_product == gpu_product_label(s); }))
    out.reasons.push_back("it was validated on " + p.gpu_product + ", not " + gpu_product_label(w.gpu_product));
  if (!w.driver.empty() && !driver_covers(p.driver_version, w.driver))
    out.reasons.push_back("its driver " + p.driver_version + " does not cover " + w.driver + " (same version, or same branch and newer)");
  if (!w.level.empty() && level_rank(p.level) < level_rank(w.level)) out.reasons.push_back("its level " + p.level + " is below " + w.level);
  if (!w.cc_mode.empty() && p.cc_mode != w.cc_mode) out.reasons.push_back("confidential computing was " + p.cc_mode + ", not " + w.cc_mode);
  if (w.cc_mode == "on" && p.cc_mode == "on") {
    // CC on without attested GPUs proves nothing to the workload's owner: the record must show cc_attestation passed.
    const auto it = std::find_if(p.checks.begin(), p.checks.end(), [](const MarkCheck& c) { return c.id == "cc_attestation"; });
    if (it == p.checks.end() || it->status != "pass")
      out.reasons.push_back(it == p.checks.end() ? std::string("its GPUs' attestation was not verified (no cc_attestation check)")
                                                  : "its GPUs' attestation did not pass (cc_attestation " + it->status + ")");
  }
  if (w.now > p.not_after) out.reasons.push_back("it expired at " + format_rfc3339_utc(p.not_after));
  if (w.max_age_s && w.now - p.time_verified > *w.max_age_s)
    out.reasons.push_back("it was verified at " + format_rfc3339_utc(p.time_verified) + ", more than " + std::to_string(*w.max_age_s) + " s ago");
  if (p.backend == "replay" && !w.allow_replay) out.reasons.push_back("it was made from recorded GPU answers (replay backend)");
  else if (p.backend != "replay" && p.backend != "nvml+cuda") out.reasons.push_back("its backend '" + p.backend + "' is not one gpuenv writes");
  out.statement = std::move(*st);
  out.counts = out.reasons.empty();
  return out;
}

}  // namespace gpuenv::marks
