#pragma once
// What every reader of gpuenv's YAML documents (specs, locks, the catalog, thresholds, the user configuration)
// shares: loading with the syntax error's position, "file:line:col" of a node, and the names of node types in
// messages. Each reader keeps its own error ids and the keys it knows.
#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

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

/// Parses TEXT (already checked by check_yaml_bytes); a syntax error is SYNTAX_ID of KIND at its position, with HINT.
inline Result<YAML::Node> load_yaml(std::string_view text, const std::string& path, ErrorKind kind, const std::string& syntax_id,
                                    const std::string& hint) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return make_error(kind, syntax_id, "YAML syntax error: " + e.msg, yaml_where(path, e.mark), hint);
  }
}

}  // namespace gpuenv
