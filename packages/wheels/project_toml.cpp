// pyproject.toml, uv.lock and pylock.toml read with toml++ (header-only, here only), strictly and within bounds.
#include "packages/wheels/project_toml.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "packages/wheels/pep440.hpp"

// No formatters (gpuenv never writes TOML) and a tighter bound on nested arrays and inline tables than toml++'s
// 256: a hostile file must not recurse deeply in the parser or in the tree's destructor.
#define TOML_HEADER_ONLY 1
#define TOML_ENABLE_FORMATTERS 0
#define TOML_MAX_NESTED_VALUES 64
#include <toml++/toml.h>

namespace gpuenv::packages {
namespace project_toml_detail {

// Dotted keys and table headers nest tables without toml++'s bound on nested values; a line may hold at most this
// many dots outside strings and comments.
constexpr std::size_t k_max_key_dots = 64;
// Untrusted text quoted in messages is cut to this many bytes.
constexpr std::size_t k_max_quoted = 200;

constexpr const char* k_url_hint =
    "gpuenv takes wheels from indexes only; serve that wheel from an index you control and name the index";

std::string quoted(std::string_view text) {
  if (text.size() <= k_max_quoted) return "'" + std::string(text) + "'";
  return "'" + std::string(text.substr(0, k_max_quoted)) + "...'";
}

/// The file being read: its path and format, for messages.
struct Doc {
  const std::string& path;
  ProjectFormat format;
};

std::string hint_of(const Doc& doc) {
  switch (doc.format) {
    case ProjectFormat::uv_lock:
      return "write uv.lock with uv (uv lock) rather than by hand, and give gpuenv the file uv wrote";
    case ProjectFormat::pylock:
      return "write pylock.toml as PEP 751 describes (uv export --format pylock.toml, pip lock)";
    default:
      return "write pyproject.toml as PEP 621 and PEP 735 describe";
  }
}

std::string where_of(const Doc& doc, const toml::node* node) {
  if (node == nullptr || node->source().begin.line == 0) return doc.path;
  return doc.path + ":" + std::to_string(node->source().begin.line);
}

Error syntax_error(const Doc& doc, const toml::node* node, const std::string& message) {
  return make_error(ErrorKind::spec, "project.syntax", message, where_of(doc, node), hint_of(doc));
}

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date or time";
  }
}

Error type_error(const Doc& doc, const toml::node& node, std::string_view key, std::string_view context,
                 std::string_view expected) {
  return syntax_error(doc, &node, "'" + std::string(key) + "' " + std::string(context) + " must be " +
                                      std::string(expected) + ", not " + std::string(type_name(node)));
}

// The node of KEY in TABLE when it has TYPE, nullptr when absent; an error naming KEY and CONTEXT otherwise.
Result<const toml::node*> typed(const Doc& doc, const toml::table& table, std::string_view key, toml::node_type type,
                                std::string_view context, std::string_view expected) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return node;
  if (node->type() != type) return type_error(doc, *node, key, context, expected);
  return node;
}

Result<const toml::table*> get_table(const Doc& doc, const toml::table& t, std::string_view key, std::string_view ctx) {
  GPUENV_TRY(node, typed(doc, t, key, toml::node_type::table, ctx, "a table"));
  return node == nullptr ? nullptr : node->as_table();
}

Result<const toml::array*> get_array(const Doc& doc, const toml::table& t, std::string_view key, std::string_view ctx) {
  GPUENV_TRY(node, typed(doc, t, key, toml::node_type::array, ctx, "an array"));
  return node == nullptr ? nullptr : node->as_array();
}

Result<std::optional<std::string>> get_string(const Doc& doc, const toml::table& t, std::string_view key,
                                              std::string_view ctx) {
  GPUENV_TRY(node, typed(doc, t, key, toml::node_type::string, ctx, "a string"));
  if (node == nullptr) return std::optional<std::string>();
  return std::optional<std::string>(node->as_string()->get());
}

Result<std::string> need_string(const Doc& doc, const toml::table& t, std::string_view key, std::string_view ctx) {
  GPUENV_TRY(value, get_string(doc, t, key, ctx));
  if (!value) return syntax_error(doc, &t, std::string(ctx) + " has no '" + std::string(key) + "'");
  return std::move(*value);
}

Result<bool> get_bool(const Doc& doc, const toml::table& t, std::string_view key, std::string_view ctx) {
  GPUENV_TRY(node, typed(doc, t, key, toml::node_type::boolean, ctx, "true or false"));
  return node != nullptr && node->as_boolean()->get();
}

// The strings of the array KEY (absent: none), each with its node for messages.
Result<std::vector<std::pair<std::string, const toml::node*>>> get_strings(const Doc& doc, const toml::table& t,
                                                                           std::string_view key, std::string_view ctx) {
  std::vector<std::pair<std::string, const toml::node*>> out;
  GPUENV_TRY(array, get_array(doc, t, key, ctx));
  if (array == nullptr) return out;
  for (const toml::node& item : *array) {
    if (!item.is_string()) return type_error(doc, item, key, ctx, "an array of strings");
    out.emplace_back(item.as_string()->get(), &item);
  }
  return out;
}

// The tables of the array KEY (absent: none).
Result<std::vector<const toml::table*>> get_tables(const Doc& doc, const toml::table& t, std::string_view key,
                                                   std::string_view ctx) {
  std::vector<const toml::table*> out;
  GPUENV_TRY(array, get_array(doc, t, key, ctx));
  if (array == nullptr) return out;
  for (const toml::node& item : *array) {
    if (!item.is_table()) return type_error(doc, item, key, ctx, "an array of tables");
    out.push_back(item.as_table());
  }
  return out;
}

// Counts the dots of each line outside strings and comments: a deeper nesting of keys is refused before toml++
// builds it. Multi-line strings are followed across lines; escapes only in basic strings.
Status check_key_depth(std::string_view text, const Doc& doc) {
  enum class In { code, basic, literal, ml_basic, ml_literal, comment } in = In::code;
  std::size_t dots = 0, line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const std::string_view rest = text.substr(i);
    if (c == '\n') {
      ++line;
      dots = 0;
      if (in == In::comment || in == In::basic || in == In::literal) in = In::code;
      continue;
    }
    switch (in) {
      case In::code:
        if (rest.starts_with("\"\"\"")) in = In::ml_basic, i += 2;
        else if (rest.starts_with("'''")) in = In::ml_literal, i += 2;
        else if (c == '"') in = In::basic;
        else if (c == '\'') in = In::literal;
        else if (c == '#') in = In::comment;
        else if (c == '.' && ++dots > k_max_key_dots) {
          return make_error(ErrorKind::spec, "project.syntax",
                            "more than " + std::to_string(k_max_key_dots) + " dotted keys nested on one line",
                            doc.path + ":" + std::to_string(line), hint_of(doc));
        }
        break;
      case In::basic:
      case In::ml_basic:
        if (c == '\\') ++i;
        else if (in == In::basic && c == '"') in = In::code;
        else if (in == In::ml_basic && rest.starts_with("\"\"\"")) in = In::code, i += 2;
        break;
      case In::literal:
        if (c == '\'') in = In::code;
        break;
      case In::ml_literal:
        if (rest.starts_with("'''")) in = In::code, i += 2;
        break;
      case In::comment:
        break;
    }
  }
  return ok_status();
}

Result<toml::table> parse_document(std::string_view text, const Doc& doc) {
  GPUENV_CHECK(check_key_depth(text, doc));
  try {
    return toml::parse(text, doc.path);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    return make_error(ErrorKind::spec, "project.syntax", "not valid TOML: " + std::string(e.description()),
                      doc.path + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column), hint_of(doc));
  } catch (const std::exception& e) {
    return make_error(ErrorKind::environment, "project.read", std::string("reading TOML failed: ") + e.what(),
                      doc.path);
  }
}

// "sha256" and 64 hex digits (either case); another algorithm or length is refused, naming PACKAGE.
Result<Digest> parse_hash(const Doc& doc, const toml::node* node, std::string_view algorithm, std::string hex,
                          const std::string& package) {
  const std::string hint = "gpuenv checks sha256 digests only; lock again with a tool that records sha256 hashes";
  if (algorithm != "sha256") {
    return make_error(ErrorKind::spec, "project.hash",
                      "package " + quoted(package) + " lists a " + quoted(algorithm) + " hash; only sha256 is taken",
                      where_of(doc, node), hint);
  }
  std::transform(hex.begin(), hex.end(), hex.begin(), [](char c) { return c >= 'A' && c <= 'F' ? static_cast<char>(c - 'A' + 'a') : c; });
  auto digest = Digest::from_hex(hex);
  if (!digest) {
    return make_error(ErrorKind::spec, "project.hash",
                      "package " + quoted(package) + " lists the sha256 " + quoted(hex) + ", which is not 64 hex digits",
                      where_of(doc, node), hint);
  }
  return std::move(*digest);
}

// The file name a wheel URL or path ends with, %-escapes decoded ("torch-2.5.1%2Bcu118-...whl").
Result<std::string> wheel_filename(const Doc& doc, const toml::node* node, std::string_view location,
                                   const std::string& package) {
  std::string_view tail = location.substr(0, location.find_first_of("?#"));
  tail = tail.substr(tail.find_last_of('/') == std::string_view::npos ? 0 : tail.find_last_of('/') + 1);
  std::string name;
  for (std::size_t i = 0; i < tail.size(); ++i) {
    auto bytes = tail[i] == '%' && i + 2 < tail.size() ? from_hex(tail.substr(i + 1, 2)) : std::nullopt;
    if (bytes && !bytes->empty() && (*bytes)[0] != '/' && (*bytes)[0] != '\0') {
      name += (*bytes)[0];
      i += 2;
    } else {
      name += tail[i];
    }
  }
  if (!name.ends_with(".whl") || name.size() <= 4 || name.find('/') != std::string::npos) {
    return syntax_error(doc, node, "package " + quoted(package) + ": the wheel " + quoted(location) +
                                       " does not end in a wheel file name");
  }
  return name;
}

// PEP 508 text without the marker: "name[a,b]>=1,<2".
std::string requirement_text(const Requirement& r) {
  std::string text = r.name;
  if (!r.extras.empty()) {
    text += '[';
    for (std::size_t i = 0; i < r.extras.size(); ++i) text += (i ? "," : "") + r.extras[i];
    text += ']';
  }
  return text + r.specifier_text;
}

Result<std::string> normalized_version(const Doc& doc, const toml::node* node, const std::string& text,
                                       const std::string& package) {
  auto version = Pep440Version::parse(text);
  if (!version) {
    return syntax_error(doc, node, "package " + quoted(package) + ": version " + quoted(text) +
                                       " is not a PEP 440 version");
  }
  return version->str();
}

Result<std::optional<Marker>> parse_marker(const Doc& doc, const toml::node* node, const std::string& text,
                                           const std::string& context) {
  auto marker = Marker::parse(text);
  if (!marker) return syntax_error(doc, node, context + ": marker " + quoted(text) + ": " + marker.error().message);
  return std::optional<Marker>(std::move(*marker));
}

// A and B both; either may be absent.
Result<std::optional<Marker>> and_markers(const std::optional<Marker>& a, const std::optional<Marker>& b) {
  if (!a) return b;
  if (!b) return a;
  auto both = Marker::parse("(" + a->str() + ") and (" + b->str() + ")");
  if (!both) return std::move(both).error();
  return std::optional<Marker>(std::move(*both));
}

Status check_count(const Doc& doc, std::size_t count, const ProjectLimits& limits) {
  if (count <= limits.max_requirements) return ok_status();
  return make_error(ErrorKind::spec, "project.too_many",
                    "more than " + std::to_string(limits.max_requirements) + " requirements or packages", doc.path,
                    "split the project, or raise the limit if the file is genuine");
}

Error unknown_extra(const Doc& doc, std::string_view kind, const std::string& name,
                    const std::vector<std::string>& known) {
  std::string list;
  for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
  return make_error(ErrorKind::spec, "project.unknown_extra",
                    std::string(kind) + " " + quoted(name) + " is not defined by the project" +
                        (known.empty() ? " (it defines none)" : " (it defines: " + list + ")"),
                    doc.path, "choose among the defined ones in python_project's extras/groups");
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The most used index first, the others after it in their order of appearance.
void set_indexes(ProjectFile& file) {
  std::vector<std::string> order;
  std::map<std::string, std::size_t> uses;
  for (const ProjectRequirement& r : file.requirements) {
    if (r.index.empty()) continue;
    if (uses[r.index]++ == 0) order.push_back(r.index);
  }
  if (order.empty()) return;
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) { return uses[a] > uses[b]; });
  file.index_url = order.front();
  file.extra_index_urls.assign(order.begin() + 1, order.end());
}

Status check_requires_python(const Doc& doc, const toml::node* node, const std::string& text) {
  if (Pep440SpecifierSet::parse(text)) return ok_status();
  return syntax_error(doc, node, "requires-python " + quoted(text) + " is not a PEP 440 specifier set");
}

// ---- pyproject.toml ----

// A requirement as written in pyproject.toml, with the extras it names (canonical) for self-references.
struct Entry {
  ProjectRequirement req;
  std::vector<std::string> extras;
};

// An item of a dependency group: a requirement, or `{include-group = NAME}`.
struct GroupItem {
  std::optional<Entry> entry;
  std::string include;
  const toml::node* node = nullptr;
};

// One [tool.uv.sources] entry of a package.
struct UvSource {
  std::string index_url;
  std::string direct;  // "git = URL", "path = P", "url = U", "workspace": not an index
  std::optional<Marker> marker;
  std::string extra, group;
  const toml::node* node = nullptr;
};

struct Pyproject {
  const Doc& doc;
  const ProjectLimits& limits;
  std::string name;  // canonical; "" without [project]
  bool dynamic_optional = false;
  std::vector<Entry> dependencies;
  std::map<std::string, std::vector<Entry>> optional;
  std::vector<std::string> extras;  // in file order
  std::map<std::string, std::vector<GroupItem>> groups;
  std::vector<std::string> group_names;
  std::map<std::string, std::string> index_by_name;
  std::map<std::string, std::vector<UvSource>> sources;
  ProjectFile file;
};

Result<Entry> read_entry(const Doc& doc, const toml::node& node, const std::string& context) {
  if (!node.is_string()) {
    return syntax_error(doc, &node, context + " holds " + std::string(type_name(node)) + "; requirements are strings");
  }
  const std::string& text = node.as_string()->get();
  auto req = parse_requirement(text);
  if (!req) return syntax_error(doc, &node, context + ": " + req.error().message);
  if (!req->url.empty()) {
    return make_error(ErrorKind::spec, "project.url_requirement",
                      context + ": " + quoted(text) + " is a URL or local path requirement", where_of(doc, &node),
                      k_url_hint);
  }
  Entry entry;
  entry.req.name = canonicalize_name(req->name);
  entry.req.requirement = requirement_text(*req);
  entry.req.marker = req->marker;
  entry.req.where = where_of(doc, &node);
  for (const std::string& extra : req->extras) entry.extras.push_back(canonicalize_name(extra));
  return entry;
}

Result<std::vector<Entry>> read_entries(const Doc& doc, const toml::node& node, const std::string& context) {
  std::vector<Entry> out;
  if (!node.is_array()) return syntax_error(doc, &node, context + " must be an array of requirement strings");
  for (const toml::node& item : *node.as_array()) {
    GPUENV_TRY(entry, read_entry(doc, item, context));
    out.push_back(std::move(entry));
  }
  return out;
}

Status read_project_table(const toml::table& root, Pyproject& p) {
  GPUENV_TRY(project, get_table(p.doc, root, "project", "in pyproject.toml"));
  if (project == nullptr) return ok_status();
  GPUENV_TRY(name, get_string(p.doc, *project, "name", "in [project]"));
  p.name = name ? canonicalize_name(*name) : std::string();
  GPUENV_TRY(dynamic, get_strings(p.doc, *project, "dynamic", "in [project]"));
  for (const auto& field : dynamic) {
    if (field.first == "dependencies") {
      return make_error(ErrorKind::spec, "project.dynamic",
                        "[project] declares its dependencies dynamic: only the build backend knows them",
                        where_of(p.doc, field.second),
                        "gpuenv does not run build backends; lock the project (uv lock, or uv export --format "
                        "pylock.toml) and give gpuenv the lock");
    }
    p.dynamic_optional = p.dynamic_optional || field.first == "optional-dependencies";
  }
  GPUENV_TRY(python, get_string(p.doc, *project, "requires-python", "in [project]"));
  if (python) {
    GPUENV_CHECK(check_requires_python(p.doc, project->get("requires-python"), *python));
    p.file.requires_python = *python;
  }
  if (const toml::node* deps = project->get("dependencies")) {
    GPUENV_TRY(entries, read_entries(p.doc, *deps, "[project] dependencies"));
    p.dependencies = std::move(entries);
  }
  GPUENV_TRY(optional, get_table(p.doc, *project, "optional-dependencies", "in [project]"));
  if (optional == nullptr) return ok_status();
  for (const auto& [key, value] : *optional) {
    const std::string extra = canonicalize_name(key.str());
    if (p.optional.count(extra) != 0) {
      return syntax_error(p.doc, &value, "the extra " + quoted(key.str()) + " is defined twice (names normalized)");
    }
    GPUENV_TRY(entries, read_entries(p.doc, value, "the extra " + quoted(key.str())));
    p.optional[extra] = std::move(entries);
    p.extras.push_back(extra);
  }
  return ok_status();
}

Result<GroupItem> read_group_item(const Doc& doc, const toml::node& item, const std::string& context) {
  GroupItem out;
  out.node = &item;
  if (const toml::table* include = item.as_table()) {
    GPUENV_TRY(name, get_string(doc, *include, "include-group", context));
    if (!name || include->size() != 1) {
      return syntax_error(doc, &item, context + ": a table item must be exactly {include-group = \"NAME\"}");
    }
    out.include = canonicalize_name(*name);
    return out;
  }
  GPUENV_TRY(entry, read_entry(doc, item, context));
  out.entry = std::move(entry);
  return out;
}

Status add_group_items(Pyproject& p, const std::string& group, const toml::node& list, const std::string& context) {
  if (!list.is_array()) return syntax_error(p.doc, &list, context + " must be an array");
  if (!contains(p.group_names, group)) p.group_names.push_back(group);
  for (const toml::node& item : *list.as_array()) {
    GPUENV_TRY(parsed, read_group_item(p.doc, item, context));
    p.groups[group].push_back(std::move(parsed));
  }
  return ok_status();
}

Status read_groups(const toml::table& root, const toml::table* tool_uv, Pyproject& p) {
  GPUENV_TRY(groups, get_table(p.doc, root, "dependency-groups", "in pyproject.toml"));
  if (groups != nullptr) {
    for (const auto& [key, value] : *groups) {
      const std::string group = canonicalize_name(key.str());
      if (p.groups.count(group) != 0) {
        return syntax_error(p.doc, &value, "the dependency group " + quoted(key.str()) + " is defined twice (names normalized)");
      }
      GPUENV_CHECK(add_group_items(p, group, value, "the dependency group " + quoted(key.str())));
    }
  }
  // uv's older spelling of the "dev" group; uv merges the two.
  if (tool_uv != nullptr) {
    if (const toml::node* dev = tool_uv->get("dev-dependencies")) {
      GPUENV_CHECK(add_group_items(p, "dev", *dev, "[tool.uv] dev-dependencies"));
    }
  }
  return ok_status();
}

Status read_uv_indexes(const toml::table& tool_uv, Pyproject& p) {
  GPUENV_TRY(indexes, get_tables(p.doc, tool_uv, "index", "in [tool.uv]"));
  for (const toml::table* index : indexes) {
    GPUENV_TRY(url, need_string(p.doc, *index, "url", "a [[tool.uv.index]]"));
    GPUENV_TRY(name, get_string(p.doc, *index, "name", "in [[tool.uv.index]]"));
    GPUENV_TRY(is_default, get_bool(p.doc, *index, "default", "in [[tool.uv.index]]"));
    GPUENV_TRY(is_explicit, get_bool(p.doc, *index, "explicit", "in [[tool.uv.index]]"));
    if (name) p.index_by_name[*name] = url;
    if (is_default && p.file.index_url.empty()) {
      p.file.index_url = url;
    } else if (!is_explicit && !is_default) {
      p.file.extra_index_urls.push_back(url);
    }
  }
  return ok_status();
}

Result<UvSource> read_uv_source(const Pyproject& p, const toml::table& entry, const std::string& context) {
  UvSource source;
  source.node = &entry;
  GPUENV_TRY(index, get_string(p.doc, entry, "index", context));
  if (index) {
    auto it = p.index_by_name.find(*index);
    if (it == p.index_by_name.end()) {
      return syntax_error(p.doc, &entry, context + " names the index " + quoted(*index) + ", which no [[tool.uv.index]] names");
    }
    source.index_url = it->second;
  }
  for (const char* kind : {"git", "path", "url"}) {
    GPUENV_TRY(value, get_string(p.doc, entry, kind, context));
    if (value) source.direct = std::string(kind) + " = " + *value;
  }
  GPUENV_TRY(workspace, get_bool(p.doc, entry, "workspace", context));
  if (workspace) source.direct = "workspace = true";
  GPUENV_TRY(marker, get_string(p.doc, entry, "marker", context));
  if (marker) {
    GPUENV_TRY(parsed, parse_marker(p.doc, entry.get("marker"), *marker, context));
    source.marker = std::move(parsed);
  }
  GPUENV_TRY(extra, get_string(p.doc, entry, "extra", context));
  GPUENV_TRY(group, get_string(p.doc, entry, "group", context));
  source.extra = extra ? canonicalize_name(*extra) : std::string();
  source.group = group ? canonicalize_name(*group) : std::string();
  return source;
}

Status read_uv_sources(const toml::table& tool_uv, Pyproject& p) {
  GPUENV_TRY(sources, get_table(p.doc, tool_uv, "sources", "in [tool.uv]"));
  if (sources == nullptr) return ok_status();
  for (const auto& [key, value] : *sources) {
    const std::string context = "[tool.uv.sources] " + quoted(key.str());
    std::vector<const toml::table*> entries;
    if (const toml::table* one = value.as_table()) entries.push_back(one);
    if (const toml::array* many = value.as_array()) {
      for (const toml::node& item : *many) {
        if (!item.is_table()) return type_error(p.doc, item, key.str(), "in [tool.uv.sources]", "a table or an array of tables");
        entries.push_back(item.as_table());
      }
    }
    if (entries.empty() && !value.is_array()) return type_error(p.doc, value, key.str(), "in [tool.uv.sources]", "a table or an array of tables");
    std::vector<UvSource>& out = p.sources[canonicalize_name(key.str())];
    for (const toml::table* entry : entries) {
      GPUENV_TRY(source, read_uv_source(p, *entry, context));
      out.push_back(std::move(source));
    }
  }
  return ok_status();
}

Status add_extra(Pyproject& p, const std::string& extra, const std::optional<Marker>& when, int depth,
                 std::vector<ProjectRequirement>& out);

// ENTRIES under WHEN; the project's own name ("proj[a,b]") stands for its extras a and b.
Status add_entries(Pyproject& p, const std::vector<Entry>& entries, const std::optional<Marker>& when, int depth,
                   std::vector<ProjectRequirement>& out) {
  for (const Entry& entry : entries) {
    GPUENV_TRY(marker, and_markers(when, entry.req.marker));
    if (!p.name.empty() && entry.req.name == p.name) {
      for (const std::string& extra : entry.extras) GPUENV_CHECK(add_extra(p, extra, marker, depth + 1, out));
      continue;
    }
    out.push_back(entry.req);
    out.back().marker = std::move(marker);
    GPUENV_CHECK(check_count(p.doc, out.size(), p.limits));
  }
  return ok_status();
}

Status add_extra(Pyproject& p, const std::string& extra, const std::optional<Marker>& when, int depth,
                 std::vector<ProjectRequirement>& out) {
  if (p.dynamic_optional) {
    return make_error(ErrorKind::spec, "project.dynamic",
                      "[project] declares its optional-dependencies dynamic, so the extra " + quoted(extra) +
                          " is known only to the build backend",
                      p.doc.path, "gpuenv does not run build backends; lock the project and give gpuenv the lock");
  }
  auto it = p.optional.find(extra);
  if (it == p.optional.end()) return unknown_extra(p.doc, "the extra", extra, p.extras);
  if (depth > p.limits.max_depth) {
    return make_error(ErrorKind::spec, "project.too_many",
                      "extras that name the project's own extras nest deeper than " + std::to_string(p.limits.max_depth),
                      p.doc.path, "name the extras directly");
  }
  return add_entries(p, it->second, when, depth, out);
}

Status add_group(Pyproject& p, const std::string& group, std::vector<std::string>& stack,
                 std::vector<ProjectRequirement>& out) {
  if (contains(stack, group)) {
    std::string chain;
    for (const std::string& g : stack) chain += g + " -> ";
    return make_error(ErrorKind::spec, "project.include_loop", "dependency groups include each other: " + chain + group,
                      p.doc.path, "remove one of the include-group items of that loop");
  }
  if (static_cast<int>(stack.size()) >= p.limits.max_depth) {
    return make_error(ErrorKind::spec, "project.too_many",
                      "dependency groups include each other deeper than " + std::to_string(p.limits.max_depth),
                      p.doc.path, "include fewer levels of groups");
  }
  stack.push_back(group);
  for (const GroupItem& item : p.groups[group]) {
    if (item.entry) {
      GPUENV_CHECK(add_entries(p, {*item.entry}, std::nullopt, static_cast<int>(stack.size()), out));
      continue;
    }
    if (p.groups.count(item.include) == 0) {
      return syntax_error(p.doc, item.node, "the dependency group " + quoted(group) + " includes " +
                                                 quoted(item.include) + ", which is not defined");
    }
    GPUENV_CHECK(add_group(p, item.include, stack, out));
  }
  stack.pop_back();
  return ok_status();
}

// [tool.uv.sources]: the index a requirement comes from, or its refusal when it is not an index.
Result<std::vector<ProjectRequirement>> apply_sources(const Pyproject& p, const ProjectSelection& selection,
                                                      std::vector<ProjectRequirement> requirements) {
  std::vector<ProjectRequirement> out;
  for (ProjectRequirement& req : requirements) {
    auto it = p.sources.find(req.name);
    std::size_t applied = 0;
    for (const UvSource& source : it == p.sources.end() ? std::vector<UvSource>() : it->second) {
      if (!source.extra.empty() && !contains(selection.extras, source.extra)) continue;
      if (!source.group.empty() && !contains(selection.groups, source.group)) continue;
      if (!source.direct.empty()) {
        return make_error(ErrorKind::spec, "project.url_requirement",
                          "[tool.uv.sources] gives " + quoted(req.name) + " from " + quoted(source.direct),
                          where_of(p.doc, source.node), k_url_hint);
      }
      out.push_back(req);
      out.back().index = source.index_url;
      GPUENV_TRY(marker, and_markers(req.marker, source.marker));
      out.back().marker = std::move(marker);
      ++applied;
    }
    if (applied == 0) out.push_back(std::move(req));
  }
  return out;
}

Result<std::vector<std::string>> canonical_selection(const Doc& doc, std::string_view kind,
                                                     const std::vector<std::string>& wanted,
                                                     const std::vector<std::string>& known) {
  std::vector<std::string> out;
  for (const std::string& name : wanted) {
    const std::string canonical = canonicalize_name(name);
    if (!contains(known, canonical)) return unknown_extra(doc, kind, name, known);
    if (!contains(out, canonical)) out.push_back(canonical);
  }
  return out;
}

Result<std::vector<ProjectRequirement>> pyproject_requirements(Pyproject& p, const ProjectSelection& selection) {
  GPUENV_TRY(extras, canonical_selection(p.doc, "the extra", selection.extras, p.extras));
  GPUENV_TRY(groups, canonical_selection(p.doc, "the dependency group", selection.groups, p.group_names));
  std::vector<ProjectRequirement> out;
  GPUENV_CHECK(add_entries(p, p.dependencies, std::nullopt, 0, out));
  for (const std::string& extra : extras) GPUENV_CHECK(add_extra(p, extra, std::nullopt, 0, out));
  for (const std::string& group : groups) {
    std::vector<std::string> stack;
    GPUENV_CHECK(add_group(p, group, stack, out));
  }
  return apply_sources(p, ProjectSelection{extras, groups}, std::move(out));
}

}  // namespace project_toml_detail

Result<ProjectFile> parse_pyproject(std::string_view text, const std::string& path, const ProjectSelection& selection,
                                    const ProjectLimits& limits) {
  using namespace project_toml_detail;
  const Doc doc{path, ProjectFormat::pyproject};
  GPUENV_TRY(root, parse_document(text, doc));
  Pyproject p{doc, limits, {}, false, {}, {}, {}, {}, {}, {}, {}, {}};
  p.file.format = ProjectFormat::pyproject;
  p.file.path = path;
  GPUENV_CHECK(read_project_table(root, p));
  GPUENV_TRY(tool, get_table(doc, root, "tool", "in pyproject.toml"));
  const toml::table* tool_uv = nullptr;
  if (tool != nullptr) {
    GPUENV_TRY(uv, get_table(doc, *tool, "uv", "in [tool]"));
    tool_uv = uv;
  }
  GPUENV_CHECK(read_groups(root, tool_uv, p));
  if (tool_uv != nullptr) {
    GPUENV_CHECK(read_uv_indexes(*tool_uv, p));
    GPUENV_CHECK(read_uv_sources(*tool_uv, p));
  }
  GPUENV_TRY(requirements, pyproject_requirements(p, selection));
  p.file.requirements = std::move(requirements);
  p.file.extras = p.extras;
  p.file.groups = p.group_names;
  return std::move(p.file);
}

}  // namespace gpuenv::packages

// ---- uv.lock ----
namespace gpuenv::packages {
namespace project_toml_detail {

// The uv.lock sources that are not an index, as uv writes them.
constexpr std::array<std::string_view, 6> k_uv_direct_sources = {"git", "path", "directory", "url", "editable", "virtual"};

bool is_root_source(const std::string& source) {
  return source == "editable = ." || source == "virtual = ." || source == "directory = .";
}

// Walked through, never installed: the project itself and virtual workspace members (dependencies only).
bool is_walked_through(const std::string& source) { return is_root_source(source) || source.starts_with("virtual = "); }

Result<LockEdge> read_edge(const Doc& doc, const toml::node& node, const std::string& context) {
  if (!node.is_table()) return syntax_error(doc, &node, context + " holds " + std::string(type_name(node)) + ", not a table");
  const toml::table& t = *node.as_table();
  LockEdge edge;
  GPUENV_TRY(name, need_string(doc, t, "name", context));
  edge.name = canonicalize_name(name);
  GPUENV_TRY(version, get_string(doc, t, "version", context));
  if (version) {
    GPUENV_TRY(normalized, normalized_version(doc, t.get("version"), *version, name));
    edge.version = std::move(normalized);
  }
  GPUENV_TRY(extras, get_strings(doc, t, "extra", context));
  for (const auto& extra : extras) edge.extras.push_back(canonicalize_name(extra.first));
  GPUENV_TRY(marker, get_string(doc, t, "marker", context));
  if (marker) {
    GPUENV_TRY(parsed, parse_marker(doc, t.get("marker"), *marker, context));
    edge.marker = std::move(parsed);
  }
  GPUENV_TRY(source, get_table(doc, t, "source", context));
  (void)source;
  return edge;
}

Result<std::vector<LockEdge>> read_edges(const Doc& doc, const toml::node& node, const std::string& context) {
  std::vector<LockEdge> out;
  if (!node.is_array()) return syntax_error(doc, &node, context + " must be an array of tables");
  for (const toml::node& item : *node.as_array()) {
    GPUENV_TRY(edge, read_edge(doc, item, context));
    out.push_back(std::move(edge));
  }
  return out;
}

// A table of name -> edges: [package.optional-dependencies], [package.dev-dependencies].
Result<std::map<std::string, std::vector<LockEdge>>> read_edge_table(const Doc& doc, const toml::table& package,
                                                                     std::string_view key, const std::string& context) {
  std::map<std::string, std::vector<LockEdge>> out;
  GPUENV_TRY(table, get_table(doc, package, key, context));
  if (table == nullptr) return out;
  for (const auto& [name, edges] : *table) {
    GPUENV_TRY(read, read_edges(doc, edges, context + " " + std::string(key) + " " + quoted(name.str())));
    out[canonicalize_name(name.str())] = std::move(read);
  }
  return out;
}

// "sha256:<hex>" as uv writes it.
Result<Digest> read_uv_hash(const Doc& doc, const toml::table& t, const std::string& package) {
  GPUENV_TRY(hash, get_string(doc, t, "hash", "in package " + quoted(package)));
  if (!hash) {
    return make_error(ErrorKind::spec, "project.hash", "package " + quoted(package) + " has a file without a hash",
                      where_of(doc, &t), "lock from an index that gives sha256 hashes");
  }
  const std::size_t colon = hash->find(':');
  if (colon == std::string::npos) return parse_hash(doc, &t, "(none)", *hash, package);
  return parse_hash(doc, &t, std::string_view(*hash).substr(0, colon), hash->substr(colon + 1), package);
}

Status read_uv_wheels(const Doc& doc, const toml::table& package, ProjectRequirement& req) {
  const std::string context = "in package " + quoted(req.name);
  GPUENV_TRY(wheels, get_tables(doc, package, "wheels", context));
  for (const toml::table* wheel : wheels) {
    GPUENV_TRY(url, get_string(doc, *wheel, "url", context));
    GPUENV_TRY(path, get_string(doc, *wheel, "path", context));
    GPUENV_TRY(filename, get_string(doc, *wheel, "filename", context));
    if (!url && path && req.direct_source.empty()) req.direct_source = "path = " + *path;
    if (!url && !path && !filename) return syntax_error(doc, wheel, "a wheel of " + quoted(req.name) + " has no url");
    GPUENV_TRY(name, wheel_filename(doc, wheel, filename ? *filename : url ? *url : *path, req.name));
    GPUENV_TRY(digest, read_uv_hash(doc, *wheel, req.name));
    req.hashes.push_back(digest);
    req.wheels[name] = digest;
  }
  GPUENV_TRY(sdist, get_table(doc, package, "sdist", context));
  if (sdist != nullptr && sdist->get("hash") != nullptr) GPUENV_CHECK(read_uv_hash(doc, *sdist, req.name));
  return ok_status();
}

Result<ProjectRequirement> read_uv_package(const Doc& doc, const toml::table& package) {
  ProjectRequirement req;
  GPUENV_TRY(name, need_string(doc, package, "name", "a [[package]]"));
  req.name = canonicalize_name(name);
  req.where = where_of(doc, &package);
  const std::string context = "package " + quoted(name);
  GPUENV_TRY(version, get_string(doc, package, "version", "in " + context));
  if (version) {
    GPUENV_TRY(normalized, normalized_version(doc, package.get("version"), *version, name));
    req.requirement = req.name + "==" + normalized;
  }
  GPUENV_TRY(source, get_table(doc, package, "source", "in " + context));
  if (source == nullptr) return syntax_error(doc, &package, context + " has no source");
  GPUENV_TRY(registry, get_string(doc, *source, "registry", "in the source of " + context));
  for (std::string_view kind : k_uv_direct_sources) {
    GPUENV_TRY(value, get_string(doc, *source, kind, "in the source of " + context));
    if (value) req.direct_source = std::string(kind) + " = " + *value;
  }
  if (registry) req.index = *registry;
  if (!registry && req.direct_source.empty()) return syntax_error(doc, source, context + ": a source uv does not write");
  if (req.direct_source.empty() && !version) return syntax_error(doc, &package, context + " from an index has no version");
  if (req.requirement.empty()) req.requirement = req.name;
  GPUENV_CHECK(read_uv_wheels(doc, package, req));
  if (const toml::node* deps = package.get("dependencies")) {
    GPUENV_TRY(edges, read_edges(doc, *deps, context + " dependencies"));
    req.dependencies = std::move(edges);
  }
  GPUENV_TRY(optional, read_edge_table(doc, package, "optional-dependencies", context));
  req.optional_dependencies = std::move(optional);
  return req;
}

// The version a uv.lock requirement pins ("name==1.0" -> "1.0"), "" for direct sources without one.
std::string pinned_version(const ProjectRequirement& req) {
  const std::size_t eq = req.requirement.find("==");
  return eq == std::string::npos ? std::string() : req.requirement.substr(eq + 2);
}

// The package an edge names: its name, and its version when the lock has several.
Result<std::size_t> edge_target(const ProjectFile& file, const std::multimap<std::string, std::size_t>& by_name,
                                const LockEdge& edge, const std::string& from) {
  auto [first, last] = by_name.equal_range(edge.name);
  std::optional<std::size_t> found;
  std::size_t candidates = 0;
  for (auto it = first; it != last; ++it) {
    ++candidates;
    if (edge.version.empty() || pinned_version(file.requirements[it->second]) == edge.version) {
      if (found) {
        return make_error(ErrorKind::spec, "project.syntax",
                          from + " depends on " + quoted(edge.name) + " without the version that tells apart its " +
                              std::to_string(candidates) + " versions in the lock",
                          file.path, "lock again with uv");
      }
      found = it->second;
    }
  }
  if (found) return *found;
  return make_error(ErrorKind::spec, "project.syntax",
                    from + " depends on " + quoted(edge.name + (edge.version.empty() ? "" : " " + edge.version)) +
                        ", which the lock does not hold",
                    file.path, "lock again with uv");
}

std::multimap<std::string, std::size_t> packages_by_name(const ProjectFile& file) {
  std::multimap<std::string, std::size_t> out;
  for (std::size_t i = 0; i < file.requirements.size(); ++i) out.emplace(file.requirements[i].name, i);
  return out;
}

// Every edge names a package of the lock, unambiguously.
Status check_edges(const ProjectFile& file) {
  const auto by_name = packages_by_name(file);
  for (const ProjectRequirement& req : file.requirements) {
    for (const LockEdge& edge : req.dependencies) GPUENV_CHECK(edge_target(file, by_name, edge, "package " + quoted(req.name)));
    for (const auto& entry : req.optional_dependencies) {
      for (const LockEdge& edge : entry.second) GPUENV_CHECK(edge_target(file, by_name, edge, "package " + quoted(req.name)));
    }
  }
  for (const LockEdge& edge : file.roots) GPUENV_CHECK(edge_target(file, by_name, edge, "the project"));
  return ok_status();
}

Status read_uv_header(const Doc& doc, const toml::table& root, ProjectFile& file) {
  const toml::node* version = root.get("version");
  if (version == nullptr || !version->is_integer() || version->as_integer()->get() != 1) {
    return syntax_error(doc, version, "uv.lock version must be 1, the one gpuenv reads");
  }
  const toml::node* revision = root.get("revision");
  if (revision != nullptr && (!revision->is_integer() || revision->as_integer()->get() < 0)) {
    return syntax_error(doc, revision, "uv.lock revision must be a non-negative integer");
  }
  GPUENV_TRY(python, get_string(doc, root, "requires-python", "in uv.lock"));
  if (python) {
    GPUENV_CHECK(check_requires_python(doc, root.get("requires-python"), *python));
    file.requires_python = *python;
  }
  return ok_status();
}

// The names the root defines: extras (provides-extras, else those with dependencies) and groups.
Status read_root_names(const Doc& doc, const toml::table& package, const ProjectRequirement& root, ProjectFile& file,
                       const std::map<std::string, std::vector<LockEdge>>& dev) {
  for (const auto& entry : root.optional_dependencies) file.extras.push_back(entry.first);
  for (const auto& entry : dev) file.groups.push_back(entry.first);
  GPUENV_TRY(metadata, get_table(doc, package, "metadata", "in the project's package"));
  if (metadata == nullptr) return ok_status();
  GPUENV_TRY(provides, get_strings(doc, *metadata, "provides-extras", "in [package.metadata]"));
  for (const auto& extra : provides) {
    if (!contains(file.extras, canonicalize_name(extra.first))) file.extras.push_back(canonicalize_name(extra.first));
  }
  GPUENV_TRY(requires_dev, get_table(doc, *metadata, "requires-dev", "in [package.metadata]"));
  if (requires_dev != nullptr) {
    for (const auto& entry : *requires_dev) {
      if (!contains(file.groups, canonicalize_name(entry.first.str()))) file.groups.push_back(canonicalize_name(entry.first.str()));
    }
  }
  return ok_status();
}

// roots: the root's dependencies, its selected extras' and groups'; marker_extras: the values uv's conflict markers
// give `extra` for that selection ("extra-<length of the name>-<name>-<extra>", "group-...").
Status select_uv_roots(const Doc& doc, const toml::table& package, std::size_t root_index, const ProjectSelection& selection,
                       ProjectFile& file) {
  const ProjectRequirement& root = file.requirements[root_index];
  GPUENV_TRY(dev, read_edge_table(doc, package, "dev-dependencies", "the project's package"));
  GPUENV_CHECK(read_root_names(doc, package, root, file, dev));
  GPUENV_TRY(extras, canonical_selection(doc, "the extra", selection.extras, file.extras));
  GPUENV_TRY(groups, canonical_selection(doc, "the dependency group", selection.groups, file.groups));
  file.roots = root.dependencies;
  const std::string prefix = std::to_string(root.name.size()) + "-" + root.name + "-";
  for (const std::string& extra : extras) {
    auto it = root.optional_dependencies.find(extra);
    if (it != root.optional_dependencies.end()) file.roots.insert(file.roots.end(), it->second.begin(), it->second.end());
    file.marker_extras.push_back("extra-" + prefix + extra);
  }
  for (const std::string& group : groups) {
    auto it = dev.find(group);
    if (it != dev.end()) file.roots.insert(file.roots.end(), it->second.begin(), it->second.end());
    file.marker_extras.push_back("group-" + prefix + group);
  }
  return ok_status();
}

}  // namespace project_toml_detail

Result<ProjectFile> parse_uv_lock(std::string_view text, const std::string& path, const ProjectSelection& selection,
                                  const ProjectLimits& limits) {
  using namespace project_toml_detail;
  const Doc doc{path, ProjectFormat::uv_lock};
  GPUENV_TRY(root, parse_document(text, doc));
  ProjectFile file;
  file.format = ProjectFormat::uv_lock;
  file.path = path;
  file.hashes_required = true;
  GPUENV_CHECK(read_uv_header(doc, root, file));
  GPUENV_TRY(packages, get_tables(doc, root, "package", "in uv.lock"));
  GPUENV_CHECK(check_count(doc, packages.size(), limits));
  std::optional<std::size_t> root_index;
  for (const toml::table* package : packages) {
    GPUENV_TRY(req, read_uv_package(doc, *package));
    if (is_root_source(req.direct_source)) {
      if (root_index) return syntax_error(doc, package, "uv.lock has two packages whose source is the project's own directory");
      root_index = file.requirements.size();
    }
    file.requirements.push_back(std::move(req));
  }
  if (!root_index) {
    return make_error(ErrorKind::spec, "project.syntax",
                      "uv.lock has no package for the project itself (source editable, virtual or directory \".\")",
                      path, "give gpuenv the uv.lock of a project with a [project] table, as uv lock writes it");
  }
  GPUENV_CHECK(select_uv_roots(doc, *packages[*root_index], *root_index, selection, file));
  GPUENV_CHECK(check_edges(file));
  set_indexes(file);
  return file;
}

}  // namespace gpuenv::packages

// ---- pylock.toml ----
namespace gpuenv::packages {
namespace project_toml_detail {

const toml::table k_no_hashes;

// `hashes = { sha256 = "..." }`: sha256 only, and at least it.
Result<Digest> read_pylock_hashes(const Doc& doc, const toml::table& file, const std::string& package) {
  GPUENV_TRY(hashes, get_table(doc, file, "hashes", "in a file of package " + quoted(package)));
  std::optional<Digest> sha256;
  if (hashes == nullptr) hashes = &k_no_hashes;
  for (const auto& [algorithm, value] : *hashes) {
    if (!value.is_string()) return type_error(doc, value, algorithm.str(), "in hashes", "a string of hex digits");
    GPUENV_TRY(digest, parse_hash(doc, &value, algorithm.str(), value.as_string()->get(), package));
    sha256 = digest;
  }
  if (!sha256) {
    return make_error(ErrorKind::spec, "project.hash", "package " + quoted(package) + " has a file without a sha256 hash",
                      where_of(doc, &file), "lock with a tool that records sha256 hashes");
  }
  return *sha256;
}

Status read_pylock_wheels(const Doc& doc, const toml::table& package, ProjectRequirement& req) {
  const std::string context = "in package " + quoted(req.name);
  GPUENV_TRY(wheels, get_tables(doc, package, "wheels", context));
  for (const toml::table* wheel : wheels) {
    GPUENV_TRY(url, get_string(doc, *wheel, "url", context));
    GPUENV_TRY(path, get_string(doc, *wheel, "path", context));
    GPUENV_TRY(name, get_string(doc, *wheel, "name", context));
    if (!url && path && req.direct_source.empty()) req.direct_source = "path = " + *path;
    if (!url && !path) return syntax_error(doc, wheel, "a wheel of " + quoted(req.name) + " has neither url nor path");
    GPUENV_TRY(filename, wheel_filename(doc, wheel, name ? *name : url ? *url : *path, req.name));
    GPUENV_TRY(digest, read_pylock_hashes(doc, *wheel, req.name));
    req.hashes.push_back(digest);
    req.wheels[filename] = digest;
  }
  GPUENV_TRY(sdist, get_table(doc, package, "sdist", context));
  if (sdist != nullptr) GPUENV_CHECK(read_pylock_hashes(doc, *sdist, req.name));
  return ok_status();
}

// vcs, directory and archive: a package not from an index, described for the refusal.
Status read_pylock_direct(const Doc& doc, const toml::table& package, ProjectRequirement& req) {
  for (const char* kind : {"vcs", "directory", "archive"}) {
    GPUENV_TRY(table, get_table(doc, package, kind, "in package " + quoted(req.name)));
    if (table == nullptr) continue;
    GPUENV_TRY(url, get_string(doc, *table, "url", std::string("in ") + kind));
    GPUENV_TRY(path, get_string(doc, *table, "path", std::string("in ") + kind));
    if (!url && !path) return syntax_error(doc, table, std::string(kind) + " of " + quoted(req.name) + " has neither url nor path");
    req.direct_source = std::string(kind) + " = " + (url ? *url : *path);
  }
  return ok_status();
}

Result<ProjectRequirement> read_pylock_package(const Doc& doc, const toml::table& package) {
  ProjectRequirement req;
  GPUENV_TRY(name, need_string(doc, package, "name", "a [[packages]]"));
  req.name = canonicalize_name(name);
  req.where = where_of(doc, &package);
  const std::string context = "package " + quoted(name);
  GPUENV_TRY(version, get_string(doc, package, "version", "in " + context));
  req.requirement = req.name;
  if (version) {
    GPUENV_TRY(normalized, normalized_version(doc, package.get("version"), *version, name));
    req.requirement += "==" + normalized;
  }
  GPUENV_TRY(marker, get_string(doc, package, "marker", "in " + context));
  if (marker) {
    GPUENV_TRY(parsed, parse_marker(doc, package.get("marker"), *marker, context));
    req.marker = std::move(parsed);
  }
  GPUENV_TRY(python, get_string(doc, package, "requires-python", "in " + context));
  if (python) GPUENV_CHECK(check_requires_python(doc, package.get("requires-python"), *python));
  GPUENV_TRY(index, get_string(doc, package, "index", "in " + context));
  req.index = index.value_or(std::string());
  GPUENV_CHECK(read_pylock_direct(doc, package, req));
  GPUENV_CHECK(read_pylock_wheels(doc, package, req));
  if (!version && req.direct_source.empty()) return syntax_error(doc, &package, context + " has no version");
  return req;
}

Status read_pylock_header(const Doc& doc, const toml::table& root, ProjectFile& file) {
  GPUENV_TRY(version, need_string(doc, root, "lock-version", "pylock.toml"));
  if (version != "1" && !version.starts_with("1.")) {
    return syntax_error(doc, root.get("lock-version"), "lock-version " + quoted(version) + " is not 1.x, the one gpuenv reads");
  }
  GPUENV_TRY(environments, get_strings(doc, root, "environments", "in pylock.toml"));
  for (const auto& environment : environments) {
    GPUENV_TRY(marker, parse_marker(doc, environment.second, environment.first, "environments"));
    file.environments.push_back(std::move(*marker));
  }
  GPUENV_TRY(python, get_string(doc, root, "requires-python", "in pylock.toml"));
  if (python) {
    GPUENV_CHECK(check_requires_python(doc, root.get("requires-python"), *python));
    file.requires_python = *python;
  }
  return ok_status();
}

// extras, dependency-groups and default-groups against the selection: the sets the markers see.
Status select_pylock(const Doc& doc, const toml::table& root, const ProjectSelection& selection, ProjectFile& file) {
  GPUENV_TRY(extras, get_strings(doc, root, "extras", "in pylock.toml"));
  GPUENV_TRY(groups, get_strings(doc, root, "dependency-groups", "in pylock.toml"));
  GPUENV_TRY(defaults, get_strings(doc, root, "default-groups", "in pylock.toml"));
  for (const auto& extra : extras) file.extras.push_back(canonicalize_name(extra.first));
  for (const auto& group : groups) file.groups.push_back(canonicalize_name(group.first));
  GPUENV_TRY(selected_extras, canonical_selection(doc, "the extra", selection.extras, file.extras));
  GPUENV_TRY(selected_groups, canonical_selection(doc, "the dependency group", selection.groups, file.groups));
  file.marker_extras = std::move(selected_extras);
  file.marker_groups = std::move(selected_groups);
  // PEP 751: without groups asked for, the default ones.
  if (selection.groups.empty()) {
    for (const auto& group : defaults) file.marker_groups.push_back(canonicalize_name(group.first));
  }
  return ok_status();
}

}  // namespace project_toml_detail

Result<ProjectFile> parse_pylock(std::string_view text, const std::string& path, const ProjectSelection& selection,
                                 const ProjectLimits& limits) {
  using namespace project_toml_detail;
  const Doc doc{path, ProjectFormat::pylock};
  GPUENV_TRY(root, parse_document(text, doc));
  ProjectFile file;
  file.format = ProjectFormat::pylock;
  file.path = path;
  file.hashes_required = true;
  GPUENV_CHECK(read_pylock_header(doc, root, file));
  GPUENV_CHECK(select_pylock(doc, root, selection, file));
  GPUENV_TRY(packages, get_tables(doc, root, "packages", "in pylock.toml"));
  if (root.get("packages") == nullptr) return syntax_error(doc, nullptr, "pylock.toml has no [[packages]]");
  GPUENV_CHECK(check_count(doc, packages.size(), limits));
  for (const toml::table* package : packages) {
    GPUENV_TRY(req, read_pylock_package(doc, *package));
    file.requirements.push_back(std::move(req));
  }
  set_indexes(file);
  return file;
}

// ---- choosing a lock's packages for one environment ----
namespace project_toml_detail {

Error marker_error(const ProjectFile& file, const ProjectRequirement* req, const Marker& marker, const Error& why) {
  return make_error(ErrorKind::spec, "project.marker",
                    (req ? "package " + quoted(req->name) + ": " : std::string()) + "the marker " + quoted(marker.str()) +
                        " cannot be evaluated: " + why.message,
                    req ? req->where : file.path, "lock the project again, with markers PEP 508 defines");
}

// A package the image would get: from an index, with wheels.
Status check_installable(const ProjectFile& file, const ProjectRequirement& req) {
  if (!req.direct_source.empty()) {
    return make_error(ErrorKind::spec, "project.url_requirement",
                      quoted(req.name) + " comes from " + quoted(req.direct_source) + ", not from an index",
                      req.where.empty() ? file.path : req.where, k_url_hint);
  }
  if (req.wheels.empty()) {
    return make_error(ErrorKind::spec, "project.sdist_only",
                      quoted(req.requirement) + " is locked as a source distribution only: gpuenv installs wheels and "
                          "never builds one",
                      req.where.empty() ? file.path : req.where,
                      "build the wheel and serve it from an index you control, then lock again");
  }
  return ok_status();
}

// The packages chosen, in the lock's order; two versions of one name are an error.
Result<std::vector<ProjectRequirement>> take(const ProjectFile& file, const std::vector<bool>& chosen) {
  std::vector<ProjectRequirement> out;
  std::map<std::string, std::string> versions;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    const ProjectRequirement& req = file.requirements[i];
    if (!chosen[i] || is_walked_through(req.direct_source)) continue;
    GPUENV_CHECK(check_installable(file, req));
    auto [it, fresh] = versions.emplace(req.name, req.requirement);
    if (!fresh) {
      return make_error(ErrorKind::spec, "project.ambiguous",
                        "both " + quoted(it->second) + " and " + quoted(req.requirement) + " apply to this environment",
                        file.path, "lock the project again: one version of a package may apply to an environment");
    }
    out.push_back(req);
    out.back().marker.reset();
  }
  return out;
}

// Breadth first from the roots; a (package, extra) is followed once.
class UvWalk {
 public:
  UvWalk(const ProjectFile& file, const Environment& env) : m_file(file), m_env(env), m_by_name(packages_by_name(file)) {}

  Result<std::vector<bool>> run() {
    GPUENV_CHECK(follow(m_file.roots, nullptr));
    for (std::size_t next = 0; next < m_queue.size(); ++next) {
      const std::size_t index = m_queue[next].first;
      const std::string extra = m_queue[next].second;
      const ProjectRequirement& req = m_file.requirements[index];
      if (extra.empty()) {
        GPUENV_CHECK(follow(req.dependencies, &req));
        continue;
      }
      auto it = req.optional_dependencies.find(extra);
      if (it != req.optional_dependencies.end()) GPUENV_CHECK(follow(it->second, &req));
    }
    std::vector<bool> reached(m_file.requirements.size());
    for (const auto& entry : m_seen) reached[entry.first] = true;
    return reached;
  }

 private:
  Status follow(const std::vector<LockEdge>& edges, const ProjectRequirement* from) {
    for (const LockEdge& edge : edges) {
      if (edge.marker) {
        auto holds = edge.marker->evaluate(m_env);
        if (!holds) return marker_error(m_file, from, *edge.marker, holds.error());
        if (!*holds) continue;
      }
      GPUENV_TRY(target, edge_target(m_file, m_by_name, edge, from ? "package " + quoted(from->name) : "the project"));
      activate(target, {});
      for (const std::string& extra : edge.extras) activate(target, extra);
    }
    return ok_status();
  }
  void activate(std::size_t index, const std::string& extra) {
    if (m_seen.emplace(index, extra).second) m_queue.emplace_back(index, extra);
  }

  const ProjectFile& m_file;
  const Environment& m_env;
  std::multimap<std::string, std::size_t> m_by_name;
  std::set<std::pair<std::size_t, std::string>> m_seen;
  std::vector<std::pair<std::size_t, std::string>> m_queue;
};

Result<std::vector<bool>> pylock_chosen(const ProjectFile& file, const Environment& env) {
  bool any_environment = file.environments.empty();
  for (const Marker& environment : file.environments) {
    auto holds = environment.evaluate(env);
    if (!holds) return marker_error(file, nullptr, environment, holds.error());
    any_environment = any_environment || *holds;
  }
  if (!any_environment) {
    std::string list;
    for (const Marker& environment : file.environments) list += (list.empty() ? "" : "; ") + environment.str();
    return make_error(ErrorKind::spec, "project.environment",
                      "the lock is for other environments than this image's (" + list + ")", file.path,
                      "lock the project for this image's platform and Python");
  }
  std::vector<bool> chosen(file.requirements.size());
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    const ProjectRequirement& req = file.requirements[i];
    if (!req.marker) {
      chosen[i] = true;
      continue;
    }
    auto holds = req.marker->evaluate(env);
    if (!holds) return marker_error(file, &req, *req.marker, holds.error());
    chosen[i] = *holds;
  }
  return chosen;
}

}  // namespace project_toml_detail

Status check_requires_python(const ProjectFile& file, const Environment& env) {
  using namespace project_toml_detail;
  const std::string& python = env.python_full_version.empty() ? env.python_version : env.python_full_version;
  if (file.requires_python.empty() || python.empty()) return ok_status();
  auto specifiers = Pep440SpecifierSet::parse(file.requires_python);
  auto version = Pep440Version::parse(python);
  if (!specifiers || !version || specifiers->contains(*version, true)) return ok_status();
  return make_error(ErrorKind::spec, "project.python",
                    "the image's Python " + quoted(python) + " is outside the project's requires-python " +
                        quoted(file.requires_python),
                    file.path, "choose a Python the project supports, or lock the project for this one");
}

Result<std::vector<ProjectRequirement>> lock_graph_requirements(const ProjectFile& file, const Environment& env) {
  using namespace project_toml_detail;
  GPUENV_CHECK(check_requires_python(file, env));
  Environment lock_env = env;
  lock_env.extra.clear();
  if (file.format == ProjectFormat::uv_lock) {
    lock_env.active_extras = file.marker_extras;
    GPUENV_TRY(reached, UvWalk(file, lock_env).run());
    return take(file, reached);
  }
  if (file.format != ProjectFormat::pylock) {
    return make_error(ErrorKind::internal, "project.internal", "lock_graph_requirements takes a uv.lock or a pylock.toml",
                      file.path);
  }
  lock_env.extras = file.marker_extras;
  lock_env.dependency_groups = file.marker_groups;
  GPUENV_TRY(chosen, pylock_chosen(file, lock_env));
  return take(file, chosen);
}

}  // namespace gpuenv::packages
