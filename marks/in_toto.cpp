#include "marks/in_toto.hpp"

#include <nlohmann/json.hpp>

#include "base/json_field.hpp"
#include "base/safe_text.hpp"
#include "marks/statement.hpp"

namespace gpuenv::marks {
namespace {

Error bad_in_toto(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::environment, "attest.bad_statement", what, where,
                    "the record is not an in-toto Statement v1 gpuenv can read; attest the image again (gpuenv build --attest)");
}

}  // namespace

bool InTotoStatement::names(const Digest& image) const {
  for (const auto& s : subjects)
    if (s.digest == image) return true;
  return false;
}

Result<std::string> render_in_toto(const std::string& subject_name, const Digest& subject, std::string_view predicate_type,
                                   std::string_view predicate_json) {
  nlohmann::ordered_json predicate = nlohmann::ordered_json::parse(predicate_json, nullptr, false);
  if (predicate.is_discarded() || !predicate.is_object())
    return make_error(ErrorKind::internal, "attest.bad_predicate", "the " + std::string(predicate_type) + " predicate is not a JSON object", "", "");
  const nlohmann::ordered_json statement = {
      {"_type", std::string(k_statement_type)},
      {"subject", nlohmann::ordered_json::array({{{"name", subject_name}, {"digest", {{"sha256", subject.hex()}}}}})},
      {"predicateType", std::string(predicate_type)},
      {"predicate", std::move(predicate)}};
  return statement.dump();
}

Result<InTotoStatement> parse_in_toto(std::string_view json_text, const std::string& where) {
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad_in_toto("the statement is not a JSON object", where);
  for (const auto& item : j.items())
    if (item.key() != "_type" && item.key() != "subject" && item.key() != "predicateType" && item.key() != "predicate")
      return bad_in_toto("the statement has a field '" + safe_text(item.key(), 80) + "' outside in-toto's four", where);
  const auto text = [&j](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (text("_type") != k_statement_type) return bad_in_toto("not an in-toto Statement v1 (_type '" + safe_text(text("_type"), 80) + "')", where);
  InTotoStatement out;
  out.predicate_type = text("predicateType");
  if (out.predicate_type.empty()) return bad_in_toto("the statement has no predicateType", where);
  if (const auto s = j.find("subject"); s != j.end() && s->is_array())
    for (const auto& subject : *s) {
      if (!subject.is_object()) continue;
      const auto digest = subject.find("digest");
      if (digest == subject.end() || !digest->is_object()) continue;
      const auto sha = digest->find("sha256");
      if (sha == digest->end() || !sha->is_string()) continue;
      auto d = Digest::from_hex(sha->get<std::string>());
      if (!d) continue;
      const auto name = subject.find("name");
      out.subjects.push_back({name != subject.end() && name->is_string() ? name->get<std::string>() : std::string(), *d});
    }
  if (out.subjects.empty()) return bad_in_toto("the statement names no subject by sha256", where);
  const auto p = j.find("predicate");
  if (p == j.end() || !p->is_object()) return bad_in_toto("the statement's predicate is not a JSON object", where);
  out.predicate = p->dump();
  return out;
}

}  // namespace gpuenv::marks
