#pragma once
// What every reader of gpuenv's YAML documents (specs, locks, the catalog, thresholds, the user configuration)
// shares: loading with the syntax error's position, "file:line:col" of a node, the names of node types in
// messages, and YamlReader, the typed accessors (mappings with known keys, text, lists, numbers, booleans, keyed
// fields) whose errors carry the document's own ids. Each reader keeps the keys it knows and its own value checks.
#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.hpp"

namespace gpuenv {

/// "PATH:LINE:COL" of MARK (1-based), or PATH when the mark has no position.
inline std::string yaml_where(const std::string& path, const YAML::Mark& mark) {
  if (mark.line < 0) return path;
  return path + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}
inline std::string yaml_where(const std::string& path, const YAML::Node& node) { return yaml_where(path, node.Mark()); }

/// "a mapping", "a list", "a scalar", "nothing (null)": what a message says was found.
inline std::string yaml_type_name(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "nothing (null)";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    default: return "an undefined value";
  }
}

/// Refuses (KIND, ID) a key or value under ROOT that holds a control character other than a line break or a tab,
/// a C1 control, a bidirectional control or a line separator (base/safe_text.hpp): text that would reach a
/// terminal, a lock or a recipe and could rewrite what it shows. YAML writes them as escapes ("\v", "\N", "\L",
/// "\0"), so check_yaml_bytes cannot see them. Each node is visited once, however often aliases name it.
Status check_yaml_text(const YAML::Node& root, const std::string& path, ErrorKind kind, const std::string& id);

/// Parses TEXT (already checked by check_yaml_bytes); a syntax error is SYNTAX_ID of KIND at its position, with
/// HINT; a scalar that check_yaml_text refuses is PREFIX.unsafe_text, where SYNTAX_ID is PREFIX.yaml_syntax.
inline Result<YAML::Node> load_yaml(std::string_view text, const std::string& path, ErrorKind kind, const std::string& syntax_id,
                                    const std::string& hint) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    GPUENV_CHECK(check_yaml_text(root, path, kind, syntax_id.substr(0, syntax_id.rfind('.') + 1) + "unsafe_text"));
    return root;
  } catch (const YAML::Exception& e) {
    return make_error(kind, syntax_id, "YAML syntax error: " + e.msg, yaml_where(path, e.mark), hint);
  }
}

/// What a reader tells YamlReader about its document: where errors point, their kind and how their ids are spelled.
struct YamlDoc {
  std::string path;                       ///< the file, in every error's position
  ErrorKind kind = ErrorKind::spec;       ///< decides the exit code
  std::string id_prefix;                  ///< "spec": ids are "spec.wrong_type", "spec.unknown_key", ...
  std::string hint;                       ///< the hint of an error whose check has none of its own
  std::string wrong_type = "wrong_type";  ///< id suffix of a value of the wrong type or form ("bad_value" in locks)
  std::string missing = "missing";        ///< id suffix of a key that field() does not find
};

/// The (key node, value node) pairs of a mapping, in document order.
using YamlEntries = std::vector<std::pair<YAML::Node, YAML::Node>>;

/// Typed access to one document's nodes; every failure is an Error at the offending node's position, with the id
/// YamlDoc::id_prefix + "." + suffix. WHAT names the value in messages ("gpu.models", "sources.apt item") and is
/// quoted there.
class YamlReader {
 public:
  explicit YamlReader(YamlDoc doc) : m_doc(std::move(doc)) {}

  [[nodiscard]] const YamlDoc& doc() const { return m_doc; }

  /// "PATH:LINE:COL" of N; PATH alone when N is absent (a key its mapping lacks) or has no position.
  [[nodiscard]] std::string where(const YAML::Node& n) const;

  /// An error of this document at N: id "PREFIX.ID_SUFFIX", the document's kind, and HINT (the document's hint when
  /// not given).
  [[nodiscard]] Error error(const YAML::Node& n, std::string_view id_suffix, std::string message,
                            std::string hint) const;
  [[nodiscard]] Error error(const YAML::Node& n, std::string_view id_suffix, std::string message) const;

  /// A mapping whose keys are plain words, none given twice, and (unless ALLOWED is empty) each one of ALLOWED; an
  /// unknown key's hint names the closest allowed key. Ids: wrong_type, duplicate_key, unknown_key.
  [[nodiscard]] Result<YamlEntries> map(const YAML::Node& n, const std::string& what,
                                        const std::vector<std::string>& allowed) const;

  /// A scalar with some non-blank text (returned as written, untrimmed).
  [[nodiscard]] Result<std::string> scalar(const YAML::Node& n, const std::string& what) const;
  /// A scalar, its text possibly empty (not null, a list or a mapping).
  [[nodiscard]] Result<std::string> text(const YAML::Node& n, const std::string& what) const;
  /// N itself when it is a list.
  [[nodiscard]] Result<YAML::Node> list(const YAML::Node& n, const std::string& what) const;
  /// A list of scalar() items (WHAT + " item" in their messages); with ACCEPT_SINGLE a lone scalar is a one-item list.
  [[nodiscard]] Result<std::vector<std::string>> string_list(const YAML::Node& n, const std::string& what,
                                                             bool accept_single) const;
  /// A plain (unquoted) finite decimal number: 4800, 4.8, 1e-3; not "4800", 4800 GB/s, .inf.
  [[nodiscard]] Result<double> number(const YAML::Node& n, const std::string& what) const;
  /// A plain (unquoted) whole number that fits an int: 90, -1; not "90", 9.0, 0x5a.
  [[nodiscard]] Result<int> integer(const YAML::Node& n, const std::string& what) const;
  /// true or false.
  [[nodiscard]] Result<bool> boolean(const YAML::Node& n, const std::string& what) const;

  /// PARENT's value under KEY. PARENT must be a mapping (null counts as an empty one); a KEY it lacks is "'KEY' is
  /// missing" at PARENT (id YamlDoc::missing), and so is a null value unless NULLABLE.
  [[nodiscard]] Result<YAML::Node> field(const YAML::Node& parent, const std::string& key, bool nullable = false) const;
  /// PARENT's value under KEY as field() checks PARENT, but an absent KEY is no error: the node is then undefined
  /// (IsDefined() false).
  [[nodiscard]] Result<YAML::Node> optional_field(const YAML::Node& parent, const std::string& key) const;

 private:
  YamlDoc m_doc;
};

}  // namespace gpuenv
