#include "marks/statement.hpp"


#include <nlohmann/json.hpp>

#include "base/time.hpp"
#include "base/json_field.hpp"
#include "base/safe_text.hpp"

namespace gpuenv::marks {
namespace {

using ojson = nlohmann::ordered_json;
using nlohmann::json;

Error bad_statement(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::environment, "mark.bad_statement", what, where, "the record is not a gpuenv validation mark of this version; mark the image again");
}

/// Reads the predicate's fields, each of its own type; the first that is wrong names itself.
class Fields {
 public:
  Fields(const json& j, const std::string& where) : m_j(j), m_where(where) {}
  const json* at(std::initializer_list<const char*> path) const {
    const json* p = &m_j;
    for (const char* k : path) {
      if (!p->is_object() || !p->contains(k)) return nullptr;
      p = &(*p)[k];
    }
    return p;
  }
  Status text(std::initializer_list<const char*> path, std::string& out, bool optional = false) const {
    const json* p = at(path);
    if (p == nullptr && optional) return ok_status();
    if (p == nullptr || !p->is_string()) return bad_statement("predicate." + name(path) + " is missing or not a string", m_where);
    out = p->get<std::string>();
    return ok_status();
  }
  Status time(std::initializer_list<const char*> path, std::int64_t& out) const {
    std::string t;
    GPUENV_CHECK(text(path, t));
    auto v = parse_rfc3339_utc(t);
    if (!v) return bad_statement("predicate." + name(path) + " '" + t + "' is not an RFC 3339 UTC time (2026-12-01T12:00:00Z)", m_where);
    out = *v;
    return ok_status();
  }
  static std::string name(std::initializer_list<const char*> path) {
    std::string s;
    for (const char* k : path) s += (s.empty() ? "" : ".") + std::string(k);
    return s;
  }

 private:
  const json& m_j;
  const std::string& m_where;
};

}  // namespace

std::string render_statement(const std::string& subject_name, const Digest& manifest, const MarkPredicate& p) {
  ojson passed = ojson::array(), warned = ojson::array(), failed = ojson::array(), check_list = ojson::array();
  for (const auto& c : p.checks) {
    if (c.status == "pass") passed.push_back(c.id);
    else if (c.status == "warn") warned.push_back(c.id);
    else if (c.status == "fail" || c.status == "error") failed.push_back(c.id);
    ojson metrics = ojson::object();
    for (const auto& [k, v] : c.metrics) metrics[k] = v;
    check_list.push_back({{"id", c.id}, {"status", c.status}, {"metrics", std::move(metrics)}});
  }
  const ojson predicate = {
      {"result", p.passed ? "PASSED" : "FAILED"},
      {"level", p.level},
      {"configuration", ojson::array({{{"name", "gpuenv.lock"}, {"digest", {{"sha256", p.lock_sha256}}}}})},
      {"passedTests", passed},
      {"warnedTests", warned},
      {"failedTests", failed},
      {"checks", check_list},
      {"gpu", {{"product", p.gpu_product}, {"pciDeviceId", p.gpu_pci_device_id}, {"count", p.gpu_count}}},
      {"driver", {{"version", p.driver_version}}},
      {"cuda", {{"driverVersion", p.cuda_driver_version}}},
      {"cc", {{"mode", p.cc_mode}}},
      {"report", {{"digest", {{"sha256", p.report_sha256}}}, {"mediaType", std::string(k_report_media_type)}}},
      {"verifier", {{"id", "gpuenv"}, {"version", p.verifier_version}}},
      {"backend", p.backend},
      {"timeVerified", format_rfc3339_utc(p.time_verified)},
      {"notAfter", format_rfc3339_utc(p.not_after)}};
  const ojson statement = {{"_type", std::string(k_statement_type)},
                           {"subject", ojson::array({{{"name", subject_name}, {"digest", {{"sha256", manifest.hex()}}}}})},
                           {"predicateType", std::string(k_predicate_type)},
                           {"predicate", predicate}};
  return statement.dump();
}

Result<MarkStatement> parse_statement(std::string_view json_text, const std::string& where) {
  const json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad_statement("the statement is not a JSON object", where);
  for (const auto& [k, v] : j.items())
    if (k != "_type" && k != "subject" && k != "predicateType" && k != "predicate") return bad_statement("the statement has a field '" + k + "' outside in-toto's four", where);
  if (string_field(j, "_type") != k_statement_type) return bad_statement("not an in-toto Statement v1 (_type '" + safe_text(string_field(j, "_type", "?"), 80) + "')", where);
  if (string_field(j, "predicateType") != k_predicate_type) return bad_statement("not a gpuenv validation mark (predicateType '" + safe_text(string_field(j, "predicateType", "?"), 80) + "')", where);
  MarkStatement out;
  bool found = false;
  if (j.contains("subject") && j["subject"].is_array())
    for (const auto& s : j["subject"]) {
      if (!s.is_object() || !s.contains("digest") || !s["digest"].is_object() || !s["digest"].contains("sha256") || !s["digest"]["sha256"].is_string()) continue;
      auto d = Digest::from_hex(s["digest"]["sha256"].get<std::string>());
      if (!d) continue;
      out.subject = *d;
      out.subject_name = string_field(s, "name");
      found = true;
      break;
    }
  if (!found) return bad_statement("the statement names no image by sha256", where);
  if (!j.contains("predicate") || !j["predicate"].is_object()) return bad_statement("the statement has no predicate", where);
  const json& pj = j["predicate"];
  const Fields f(pj, where);
  MarkPredicate& p = out.predicate;
  std::string result;
  GPUENV_CHECK(f.text({"result"}, result));
  if (result != "PASSED" && result != "FAILED") return bad_statement("predicate.result '" + result + "' is neither PASSED nor FAILED", where);
  p.passed = result == "PASSED";
  GPUENV_CHECK(f.text({"level"}, p.level));
  GPUENV_CHECK(f.text({"gpu", "product"}, p.gpu_product));
  GPUENV_CHECK(f.text({"gpu", "pciDeviceId"}, p.gpu_pci_device_id, true));
  if (const json* c = f.at({"gpu", "count"}); c != nullptr) {
    if (!c->is_number_unsigned()) return bad_statement("predicate.gpu.count is not a count", where);
    p.gpu_count = c->get<int>();
  }
  GPUENV_CHECK(f.text({"driver", "version"}, p.driver_version));
  GPUENV_CHECK(f.text({"cuda", "driverVersion"}, p.cuda_driver_version, true));
  GPUENV_CHECK(f.text({"cc", "mode"}, p.cc_mode));
  GPUENV_CHECK(f.text({"backend"}, p.backend));
  GPUENV_CHECK(f.text({"verifier", "version"}, p.verifier_version, true));
  GPUENV_CHECK(f.text({"report", "digest", "sha256"}, p.report_sha256, true));
  if (const json* conf = f.at({"configuration"}); conf != nullptr && conf->is_array())
    for (const auto& c : *conf)
      if (string_field(c, "name") == "gpuenv.lock" && !string_field(field_of_type(c, "digest", json::value_t::object), "sha256").empty())
        p.lock_sha256 = c["digest"]["sha256"].get<std::string>();
  GPUENV_CHECK(f.time({"timeVerified"}, p.time_verified));
  GPUENV_CHECK(f.time({"notAfter"}, p.not_after));
  if (const json* checks = f.at({"checks"}); checks != nullptr) {
    if (!checks->is_array()) return bad_statement("predicate.checks is not a list", where);
    for (const auto& c : *checks) {
      if (!c.is_object() || !c.contains("id") || !c["id"].is_string() || !c.contains("status") || !c["status"].is_string())
        return bad_statement("a check of predicate.checks lacks its id or status", where);
      MarkCheck mc{c["id"].get<std::string>(), c["status"].get<std::string>(), {}};
      if (c.contains("metrics") && c["metrics"].is_object())
        for (const auto& [k, v] : c["metrics"].items())
          if (v.is_number()) mc.metrics[k] = v.get<double>();
      p.checks.push_back(std::move(mc));
    }
  }
  return out;
}

}  // namespace gpuenv::marks
