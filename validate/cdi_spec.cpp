#include "validate/cdi_spec.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <exception>
#include <nlohmann/json.hpp>

#include "base/safe_text.hpp"
#include "base/text.hpp"
#include "base/yaml_guard.hpp"
#include "base/yaml_reader.hpp"

namespace gpuenv::validate {
namespace cdi_spec_detail {

using Json = nlohmann::json;

// Untrusted text (names, paths, parser messages) is cut to this many bytes in messages.
constexpr std::size_t k_quoted_bytes = 160;

std::string cdi_quoted(std::string_view text) { return "'" + safe_text(text, k_quoted_bytes) + "'"; }

/// A YAML document as JSON values (scalars as strings), so one walker reads both formats. Every node counts
/// against the budget each time it is reached, so aliases cannot multiply the work (a "billion laughs" document
/// runs out of budget instead).
struct YamlToJson {
  std::size_t budget;
  std::string problem;

  bool convert(const YAML::Node& node, Json& out, std::size_t depth) {
    if (budget == 0 || depth > 64) {
      if (problem.empty()) problem = "the document has too many nodes or nests too deep (aliases count each time they are used)";
      return false;
    }
    --budget;
    switch (node.Type()) {
      case YAML::NodeType::Scalar: out = node.Scalar(); return true;
      case YAML::NodeType::Sequence: {
        out = Json::array();
        for (const auto& item : node) {
          Json value;
          if (!convert(item, value, depth + 1)) return false;
          out.push_back(std::move(value));
        }
        return true;
      }
      case YAML::NodeType::Map: {
        out = Json::object();
        for (const auto& entry : node) {
          if (!entry.first.IsScalar()) {
            if (problem.empty()) problem = "a mapping key at " + yaml_where("line", entry.first) + " is not text";
            return false;
          }
          Json value;
          if (!convert(entry.second, value, depth + 1)) return false;
          out[entry.first.Scalar()] = std::move(value);
        }
        return true;
      }
      default: out = nullptr; return true;
    }
  }
};

/// Reads the fields of one spec, stopping at the first problem (a place such as "devices[2].containerEdits.mounts[0]"
/// and what is wrong there).
class SpecWalker {
 public:
  explicit SpecWalker(const CdiLimits& limits) : m_limits(limits) {}

  bool walk(const Json& root, CdiParse& out) {
    if (!root.is_object()) return fail("the document", "is not a mapping");
    if (auto k = root.find("kind"); k != root.end() && k->is_string()) out.kind = k->get<std::string>();
    CdiSpec& spec = m_spec;
    auto version = root.find("cdiVersion");
    if (version == root.end()) return fail("cdiVersion", "is missing");
    if (!version->is_string()) return fail("cdiVersion", "is not text");
    spec.version = version->get<std::string>();
    if (!is_known_cdi_version(spec.version))
      return fail("cdiVersion", cdi_quoted(spec.version) + " is not a released CDI spec version gpuenv reads (0.3.0 to 1.1.0)");
    auto kind = root.find("kind");
    if (kind == root.end()) return fail("kind", "is missing");
    if (!kind->is_string()) return fail("kind", "is not text");
    spec.kind = kind->get<std::string>();
    if (!kind_has_form(spec.kind)) return fail("kind", cdi_quoted(spec.kind) + " is not of the form vendor.com/class");
    auto devices = root.find("devices");
    if (devices == root.end()) return fail("devices", "is missing");
    if (!devices->is_array() || devices->empty()) return fail("devices", "is not a list of at least one device");
    if (devices->size() > m_limits.max_devices)
      return fail("devices", "lists " + std::to_string(devices->size()) + " devices; gpuenv reads at most " + std::to_string(m_limits.max_devices));
    for (std::size_t i = 0; i < devices->size(); ++i) {
      if (!device((*devices)[i], "devices[" + std::to_string(i) + "]")) return false;
    }
    if (auto edits = root.find("containerEdits"); edits != root.end() && !edits->is_null()) {
      if (!container_edits(*edits, "containerEdits", "")) return false;
    }
    out.spec = std::move(m_spec);
    return true;
  }

  [[nodiscard]] const std::string& problem() const { return m_problem; }

 private:
  bool fail(const std::string& where, const std::string& what) {
    if (m_problem.empty()) m_problem = where + " " + what;
    return false;
  }

  static bool kind_has_form(const std::string& kind) {
    const auto slash = kind.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == kind.size() || kind.find('/', slash + 1) != std::string::npos) return false;
    return std::all_of(kind.begin(), kind.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == '/';
    });
  }

  bool device(const Json& d, const std::string& where) {
    if (!d.is_object()) return fail(where, "is not a mapping");
    auto name = d.find("name");
    if (name == d.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return fail(where + ".name", "is missing or not text");
    const std::string& n = name->get_ref<const std::string&>();
    if (n.size() > 256 || !is_safe_text(n)) return fail(where + ".name", cdi_quoted(n) + " holds control characters or is too long");
    m_spec.devices.push_back(n);
    auto edits = d.find("containerEdits");
    if (edits == d.end() || edits->is_null()) return true;
    return container_edits(*edits, where + ".containerEdits", n);
  }

  bool container_edits(const Json& e, const std::string& where, const std::string& device) {
    if (!e.is_object()) return fail(where, "is not a mapping");
    static constexpr std::array<const char*, 3> k_lists{"deviceNodes", "mounts", "hooks"};
    for (const char* key : k_lists) {
      auto list = e.find(key);
      if (list == e.end() || list->is_null()) continue;
      const std::string at = where + "." + key;
      if (!list->is_array()) return fail(at, "is not a list");
      for (std::size_t i = 0; i < list->size(); ++i) {
        if (!edit_entry((*list)[i], key, at + "[" + std::to_string(i) + "]", device)) return false;
      }
    }
    if (auto env = e.find("env"); env != e.end() && !env->is_null()) {
      if (!env->is_array()) return fail(where + ".env", "is not a list");
      for (const auto& v : *env)
        if (!v.is_string()) return fail(where + ".env", "holds an entry that is not text");
    }
    return true;
  }

  bool edit_entry(const Json& entry, std::string_view list, const std::string& where, const std::string& device) {
    if (!entry.is_object()) return fail(where, "is not a mapping");
    std::string host;
    CdiPathRole role = CdiPathRole::mount;
    if (list == "deviceNodes") {
      role = CdiPathRole::device_node;
      auto container = entry.find("path");
      if (container == entry.end() || !container->is_string()) return fail(where + ".path", "is missing or not text");
      auto host_path = entry.find("hostPath");  // from v0.5.0; the node's path when absent
      if (host_path != entry.end() && !host_path->is_null()) {
        if (!host_path->is_string()) return fail(where + ".hostPath", "is not text");
        host = host_path->get<std::string>();
      } else {
        host = container->get<std::string>();
      }
      if (!check_path(container->get<std::string>(), where + ".path")) return false;
      if (!check_path(host, where + (host_path != entry.end() ? ".hostPath" : ".path"))) return false;
    } else if (list == "mounts") {
      auto host_path = entry.find("hostPath");
      auto container = entry.find("containerPath");
      if (host_path == entry.end() || !host_path->is_string()) return fail(where + ".hostPath", "is missing or not text");
      if (container == entry.end() || !container->is_string()) return fail(where + ".containerPath", "is missing or not text");
      host = host_path->get<std::string>();
      if (!check_path(host, where + ".hostPath") || !check_path(container->get<std::string>(), where + ".containerPath")) return false;
    } else {
      role = CdiPathRole::hook;
      auto path = entry.find("path");
      if (path == entry.end() || !path->is_string()) return fail(where + ".path", "is missing or not text");
      host = path->get<std::string>();
      if (!check_path(host, where + ".path")) return false;  // the spec: a hook's path MUST be absolute
    }
    if (m_spec.paths.size() >= m_limits.max_paths)
      return fail(where, "is past the " + std::to_string(m_limits.max_paths) + " host paths gpuenv reads in one spec");
    m_spec.paths.push_back(CdiPath{device, role, std::move(host)});
    return true;
  }

  bool check_path(const std::string& p, const std::string& where) {
    if (p.size() > m_limits.max_path_bytes) return fail(where, "is longer than " + std::to_string(m_limits.max_path_bytes) + " bytes");
    if (!is_safe_text(p)) return fail(where, cdi_quoted(p) + " holds control characters");
    if (p.empty() || p.front() != '/') return fail(where, cdi_quoted(p) + " is not an absolute path");
    for (std::size_t at = 0; at < p.size();) {
      const std::size_t next = std::min(p.find('/', at), p.size());
      if (p.compare(at, next - at, "..") == 0) return fail(where, cdi_quoted(p) + " names a parent directory (..)");
      at = next + 1;
    }
    return true;
  }

  const CdiLimits& m_limits;
  CdiSpec m_spec;
  std::string m_problem;
};

/// The document as JSON values, or the problem that kept it from being read.
std::optional<Json> load_document(std::string_view text, const std::string& path, CdiFormat format, const CdiLimits& limits, std::string& problem) {
  if (auto st = check_yaml_bytes(text, path, limits.max_file_bytes, limits.max_depth); !st) {
    problem = st.error().message + (st.error().where.empty() ? std::string() : " at " + st.error().where);
    return std::nullopt;
  }
  try {
    if (format == CdiFormat::json) return Json::parse(text.begin(), text.end());
    auto root = load_yaml(text, path, ErrorKind::spec, "cdi.yaml_syntax", "");
    if (!root) {
      problem = root.error().message + " at " + root.error().where;
      return std::nullopt;
    }
    YamlToJson convert{limits.max_nodes, {}};
    Json out;
    if (!convert.convert(*root, out, 0)) {
      problem = convert.problem;
      return std::nullopt;
    }
    return out;
  } catch (const std::exception& e) {
    problem = std::string(format == CdiFormat::json ? "JSON" : "YAML") + " syntax error: " + e.what();
    return std::nullopt;
  }
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

/// "550.54.15" or "550.54": a driver's version, whose first component has three or more digits.
bool is_driver_version(std::string_view v) {
  std::size_t parts = 0;
  for (std::size_t at = 0; at <= v.size(); ++parts) {
    const std::size_t end = std::min(v.find('.', at), v.size());
    if (!all_digits(v.substr(at, end - at)) || (parts == 0 && end - at < 3)) return false;
    at = end + 1;
  }
  return parts == 2 || parts == 3;
}

bool is_driver_library_stem(std::string_view stem) {
  for (std::string_view exact : {"libcuda", "libcudadebugger", "libnvcuvid", "libnvoptix"})
    if (stem == exact) return true;
  if (stem.substr(0, 10) == "libnvidia-" && stem.size() > 10) return true;
  return stem.size() > 10 && stem.substr(0, 3) == "lib" && stem.substr(stem.size() - 7) == "_nvidia";  // libGLX_nvidia
}

/// The one key of the toolkit's config.toml that the check needs, read without a TOML library: table headers,
/// "key = value" lines, and the value as an array of basic or literal strings over one or more lines. Anything
/// else in that value is a problem, never a guess.
class ToolkitConfigReader {
 public:
  explicit ToolkitConfigReader(std::string_view text) : m_text(text) {}

  /// The key's strings; empty when the file does not set it; PROBLEM set when it is there but not readable.
  std::optional<std::vector<std::string>> spec_dirs(std::string& problem) {
    std::string table;
    for (m_at = 0; m_at < m_text.size();) {
      const std::size_t eol = std::min(m_text.find('\n', m_at), m_text.size());
      const std::string_view line = text::trim(m_text.substr(m_at, eol - m_at));
      if (!line.empty() && line.front() == '[') {
        table = line.substr(0, 2) == "[[" ? std::string("[[") : bare_key(line.substr(1, line.find(']') - 1));
      } else if (const auto eq = line.find('='); !line.empty() && line.front() != '#' && eq != std::string_view::npos) {
        const std::string key = bare_key(line.substr(0, eq));
        const std::string full = table.empty() ? key : table + "." + key;
        if (full == "nvidia-container-runtime.modes.cdi.spec-dirs") {
          m_at += static_cast<std::size_t>(line.data() - (m_text.data() + m_at)) + eq + 1;
          auto dirs = array(problem);
          if (!problem.empty()) return std::nullopt;
          return dirs;
        }
      }
      m_at = eol + 1;
    }
    return std::nullopt;
  }

 private:
  static std::string bare_key(std::string_view key) {
    std::string out;
    for (char c : key)
      if (c != ' ' && c != '\t' && c != '"' && c != '\'') out += c;
    return out;
  }

  void skip_blank() {
    while (m_at < m_text.size()) {
      const char c = m_text[m_at];
      if (c == '#') {
        m_at = std::min(m_text.find('\n', m_at), m_text.size());
      } else if (text::is_space(c)) {
        ++m_at;
      } else {
        return;
      }
    }
  }

  std::vector<std::string> array(std::string& problem) {
    std::vector<std::string> out;
    skip_blank();
    if (m_at >= m_text.size() || m_text[m_at] != '[') {
      problem = "spec-dirs is not an array of strings";
      return out;
    }
    ++m_at;
    for (;;) {
      skip_blank();
      if (m_at < m_text.size() && m_text[m_at] == ']') return out;
      std::string item;
      if (!string(item, problem)) return out;
      if (out.size() >= 64) {
        problem = "spec-dirs lists more than 64 directories";
        return out;
      }
      out.push_back(std::move(item));
      skip_blank();
      if (m_at < m_text.size() && m_text[m_at] == ',') {
        ++m_at;
        continue;
      }
      if (m_at < m_text.size() && m_text[m_at] == ']') return out;
      problem = "spec-dirs is not an array of plain strings (a ',' or ']' was expected)";
      return out;
    }
  }

  bool string(std::string& out, std::string& problem) {
    if (m_at >= m_text.size() || (m_text[m_at] != '"' && m_text[m_at] != '\'') || m_text.substr(m_at, 3) == "\"\"\"" ||
        m_text.substr(m_at, 3) == "'''") {
      problem = "spec-dirs holds something other than a one-line string";
      return false;
    }
    const char quote = m_text[m_at++];
    while (m_at < m_text.size() && m_text[m_at] != quote && m_text[m_at] != '\n' && out.size() <= 4096) {
      char c = m_text[m_at++];
      if (c == '\\' && quote == '"') {
        if (m_at >= m_text.size() || (m_text[m_at] != '\\' && m_text[m_at] != '"')) {
          problem = "spec-dirs holds an escape this reader does not take (only \\\\ and \\\")";
          return false;
        }
        c = m_text[m_at++];
      }
      out += c;
    }
    if (m_at >= m_text.size() || m_text[m_at] != quote) {
      problem = "spec-dirs holds an unterminated or over-long string";
      return false;
    }
    ++m_at;
    return true;
  }

  std::string_view m_text;
  std::size_t m_at = 0;
};

}  // namespace cdi_spec_detail

const char* to_string(CdiPathRole role) {
  switch (role) {
    case CdiPathRole::device_node: return "device node";
    case CdiPathRole::mount: return "mount";
    case CdiPathRole::hook: return "hook";
  }
  return "path";
}

CdiParse parse_cdi_spec(std::string_view text, const std::string& path, CdiFormat format, const CdiLimits& limits) {
  CdiParse out;
  std::string problem;
  auto doc = cdi_spec_detail::load_document(text, path, format, limits, problem);
  if (!doc) {
    out.problem = safe_text(problem, 400);
    return out;
  }
  cdi_spec_detail::SpecWalker walker(limits);
  if (!walker.walk(*doc, out)) out.problem = safe_text(walker.problem(), 400);
  return out;
}

bool is_known_cdi_version(std::string_view version) {
  if (!version.empty() && version.front() == 'v') version.remove_prefix(1);  // specs-go's newVersion trims it
  for (std::string_view known : {"0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"})
    if (version == known) return true;
  return false;
}

bool is_nvidia_gpu_kind(std::string_view kind) { return kind == "nvidia.com/gpu" || kind == "management.nvidia.com/gpu"; }

std::optional<std::string> driver_version_in_path(std::string_view path) {
  const auto slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (const auto so = name.find(".so."); so != std::string_view::npos) {
    const std::string_view version = name.substr(so + 4);
    if (cdi_spec_detail::is_driver_library_stem(name.substr(0, so)) && cdi_spec_detail::is_driver_version(version)) return std::string(version);
  }
  constexpr std::string_view k_firmware = "/firmware/nvidia/";
  if (const auto at = path.find(k_firmware); at != std::string_view::npos) {
    std::string_view rest = path.substr(at + k_firmware.size());
    rest = rest.substr(0, rest.find('/'));
    if (cdi_spec_detail::is_driver_version(rest)) return std::string(rest);
  }
  return std::nullopt;
}

bool is_mig_name(std::string_view name) {
  if (name.substr(0, 4) == "MIG-") return true;
  const auto colon = name.find(':');
  return colon != std::string_view::npos && cdi_spec_detail::all_digits(name.substr(0, colon)) &&
         cdi_spec_detail::all_digits(name.substr(colon + 1));
}

bool is_mig_path(std::string_view path) { return path.substr(0, 17) == "/dev/nvidia-caps/"; }

Result<std::optional<std::vector<std::string>>> toolkit_spec_dirs(std::string_view text, const std::string& path) {
  auto bad = [&](const std::string& what) {
    return make_error(ErrorKind::environment, "cdi.toolkit_config", what, path,
                      "write spec-dirs as an array of plain strings, as `nvidia-ctk config` does: spec-dirs = [\"/etc/cdi\", \"/var/run/cdi\"]");
  };
  if (text.size() > (1u << 20)) return bad("the file is larger than 1 MiB");
  if (!is_safe_text(text, "\n\t\r")) return bad("the file holds control characters or is not UTF-8");
  std::string problem;
  auto dirs = cdi_spec_detail::ToolkitConfigReader(text).spec_dirs(problem);
  if (!problem.empty()) return bad(problem);
  if (dirs) {
    for (const auto& d : *dirs)
      if (d.empty() || d.front() != '/') return bad("spec-dirs names " + cdi_spec_detail::cdi_quoted(d) + ", which is not an absolute path");
  }
  return dirs;
}

}  // namespace gpuenv::validate
