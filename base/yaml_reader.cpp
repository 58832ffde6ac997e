#include "base/yaml_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "base/safe_text.hpp"
#include "base/text.hpp"

namespace gpuenv {
namespace {

std::string quoted(const std::string& what) { return "'" + what + "'"; }

/// "a list", or the text of a scalar in quotes: what a message about a wrongly written value says was found.
std::string found(const YAML::Node& n) {
  if (!n.IsScalar()) return yaml_type_name(n);
  return (n.Tag() == "!" ? "the quoted text '" : "'") + n.Scalar() + "'";
}

}  // namespace

Status check_yaml_text(const YAML::Node& root, const std::string& path, ErrorKind kind, const std::string& id) {
  // Each node once, by identity: an alias names the very node its anchor made, and yaml-cpp keeps one text per node
  // (Scalar() of a mapping or a list is that node's own, empty, text), so its address tells nodes apart where
  // positions do not (an alias of a long text, a key that is itself a list).
  std::set<const void*> seen;
  std::vector<YAML::Node> todo{root};
  while (!todo.empty()) {
    const YAML::Node n = todo.back();
    todo.pop_back();
    if (!n.IsDefined() || !seen.insert(&n.Scalar()).second) continue;
    if (n.IsScalar()) {
      if (!is_safe_text(n.Scalar(), "\n\t"))
        return make_error(kind, id,
                          "the text \"" + safe_text(n.Scalar(), 120) +
                              "\" holds a control character, a bidirectional control or bytes that are not UTF-8 (shown escaped)",
                          yaml_where(path, n), "write plain text: gpuenv copies these values into locks, labels and terminals");
    } else if (n.IsMap()) {
      for (const auto& kv : n) {
        todo.push_back(kv.first);
        todo.push_back(kv.second);
      }
    } else if (n.IsSequence()) {
      for (const auto& item : n) todo.push_back(item);
    }
  }
  return ok_status();
}

std::string YamlReader::where(const YAML::Node& n) const {
  return n.IsDefined() ? yaml_where(m_doc.path, n) : m_doc.path;
}

Error YamlReader::error(const YAML::Node& n, std::string_view id_suffix, std::string message, std::string hint) const {
  return make_error(m_doc.kind, m_doc.id_prefix + "." + std::string(id_suffix), std::move(message), where(n),
                    std::move(hint));
}

Error YamlReader::error(const YAML::Node& n, std::string_view id_suffix, std::string message) const {
  return error(n, id_suffix, std::move(message), m_doc.hint);
}

Result<YamlEntries> YamlReader::map(const YAML::Node& n, const std::string& what,
                                    const std::vector<std::string>& allowed) const {
  if (!n.IsMap()) return error(n, m_doc.wrong_type, quoted(what) + " must be a mapping, found " + yaml_type_name(n));
  YamlEntries out;
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      return error(key, m_doc.wrong_type,
                   "keys in " + quoted(what) + " must be plain words, found " + yaml_type_name(key));
    }
    const std::string& k = key.Scalar();
    if (!seen.insert(k).second) {
      return error(key, "duplicate_key", "key '" + k + "' appears twice in " + quoted(what),
                   "keep one of them; YAML would silently use only one");
    }
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      std::string hint = "allowed keys: " + join(allowed, ", ");
      if (auto guess = did_you_mean(k, allowed)) hint = "did you mean '" + *guess + "'? " + hint;
      return error(key, "unknown_key", "unknown key '" + k + "' in " + quoted(what), std::move(hint));
    }
    out.emplace_back(key, it->second);
  }
  return out;
}

Result<std::string> YamlReader::scalar(const YAML::Node& n, const std::string& what) const {
  if (!n.IsScalar() || text::trim(n.Scalar()).empty()) {
    return error(n, m_doc.wrong_type, quoted(what) + " must be a non-empty text value, found " + found(n));
  }
  return n.Scalar();
}

Result<std::string> YamlReader::text(const YAML::Node& n, const std::string& what) const {
  if (!n.IsScalar()) {
    return error(n, m_doc.wrong_type, quoted(what) + " must be a text value, found " + yaml_type_name(n));
  }
  return n.Scalar();
}

Result<YAML::Node> YamlReader::list(const YAML::Node& n, const std::string& what) const {
  if (!n.IsSequence()) return error(n, m_doc.wrong_type, quoted(what) + " must be a list, found " + yaml_type_name(n));
  return n;
}

Result<std::vector<std::string>> YamlReader::string_list(const YAML::Node& n, const std::string& what,
                                                         bool accept_single) const {
  if (accept_single && n.IsScalar()) {
    GPUENV_TRY(single, scalar(n, what));
    return std::vector<std::string>{single};
  }
  if (accept_single && !n.IsSequence()) {
    return error(n, m_doc.wrong_type, quoted(what) + " must be a list, found " + yaml_type_name(n),
                 "write it as [a, b], one '- item' per line, or a single item");
  }
  GPUENV_TRY(items, list(n, what));
  std::vector<std::string> out;
  for (const auto& item : items) {
    GPUENV_TRY(s, scalar(item, what + " item"));
    out.push_back(std::move(s));
  }
  return out;
}

Result<double> YamlReader::number(const YAML::Node& n, const std::string& what) const {
  if (!n.IsScalar()) return error(n, m_doc.wrong_type, quoted(what) + " must be a number, found " + yaml_type_name(n));
  const std::string& s = n.Scalar();
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (n.Tag() == "!" || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) {
    return error(n, m_doc.wrong_type, quoted(what) + " must be a plain number, found " + found(n),
                 "write the number alone (4800, 4.8), without quotes or a unit");
  }
  return v;
}

Result<int> YamlReader::integer(const YAML::Node& n, const std::string& what) const {
  int v = 0;
  bool ok = n.IsScalar() && n.Tag() != "!";
  if (ok) {
    const std::string& s = n.Scalar();
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    ok = ec == std::errc() && ptr == s.data() + s.size();
  }
  if (!ok) return error(n, m_doc.wrong_type, quoted(what) + " must be a whole number, found " + found(n));
  return v;
}

Result<bool> YamlReader::boolean(const YAML::Node& n, const std::string& what) const {
  if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) return n.Scalar() == "true";
  return error(n, m_doc.wrong_type, quoted(what) + " must be true or false, found " + found(n));
}

Result<YAML::Node> YamlReader::optional_field(const YAML::Node& parent, const std::string& key) const {
  if (parent.IsNull()) return YAML::Node(YAML::NodeType::Undefined);
  if (!parent.IsMap()) {
    return error(parent, m_doc.wrong_type,
                 "expected a mapping holding " + quoted(key) + ", found " + yaml_type_name(parent));
  }
  return parent[key];
}

Result<YAML::Node> YamlReader::field(const YAML::Node& parent, const std::string& key, bool nullable) const {
  GPUENV_TRY(v, optional_field(parent, key));
  if (!v.IsDefined() || (v.IsNull() && !nullable)) return error(parent, m_doc.missing, quoted(key) + " is missing");
  return v;
}

}  // namespace gpuenv
