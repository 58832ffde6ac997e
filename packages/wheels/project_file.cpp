#include "packages/wheels/project_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <set>

#include "base/file_io.hpp"
#include "base/text.hpp"
#include "base/yaml_guard.hpp"
#include "base/yaml_reader.hpp"
#include "packages/wheels/pep440.hpp"
#include "packages/wheels/project_toml.hpp"

namespace gpuenv::packages {
namespace project_file_detail {

namespace fs = std::filesystem;

const char* const k_url_hint = "gpuenv takes wheels from indexes only: name the project with a version (name==1.2.3), and serve a wheel of your own from an "
                               "index you control (sources.pip.extra_index_urls)";

Error project_error(const std::string& id, const std::string& message, const std::string& where, const std::string& hint) {
  return make_error(ErrorKind::spec, id, message, where, hint);
}

/// Where the lines of one file come from, and what following a -r/-c include needs.
struct Reader {
  const ProjectSelection* selection = nullptr;
  const ProjectLimits* limits = nullptr;
  bool follow_includes = false;
  fs::path project_dir;          ///< canonical; includes must stay beneath it
  std::vector<fs::path> chain;   ///< canonical paths of the files being read, outermost first
  int files = 0;
  Sha256 digest;                 ///< of every file's bytes, in the order read
};

/// One logical line of a requirements file: continuation lines joined, the comment removed.
struct Line {
  int number = 0;
  std::string text;
};

/// pip's logical lines: a line ending in a backslash continues on the next; "#" at the start or after whitespace
/// begins a comment.
std::vector<Line> logical_lines(std::string_view text) {
  std::vector<Line> out;
  std::string pending;
  int start = 0, number = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    std::string line(text.substr(pos, end - pos));
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (pending.empty()) start = number;
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      pending += line;
    } else {
      pending += line;
      for (std::size_t i = 0; i < pending.size(); ++i) {
        if (pending[i] == '#' && (i == 0 || pending[i - 1] == ' ' || pending[i - 1] == '\t')) {
          pending.resize(i);
          break;
        }
      }
      std::string t(text::trim(pending));
      if (!t.empty()) out.push_back({start, std::move(t)});
      pending.clear();
    }
    if (end == text.size()) break;
    pos = end + 1;
  }
  if (!text::trim(pending).empty()) out.push_back({start, std::string(text::trim(pending))});
  return out;
}


/// "--hash=sha256:HEX": the digest, or `project.hash` naming what is wrong.
Result<Digest> parse_hash(std::string_view value, const std::string& where) {
  const auto colon = value.find(':');
  const std::string algorithm = colon == std::string_view::npos ? std::string() : std::string(value.substr(0, colon));
  if (algorithm != "sha256") {
    return project_error("project.hash", "the hash '" + std::string(value.substr(0, 80)) + "' is not a sha256 digest (\"sha256:<64 hex digits>\")", where,
                         algorithm.empty() ? "write each hash as --hash=sha256:<64 hex digits>"
                                           : "gpuenv checks sha256 only, as the package indexes give it; list the files' sha256 hashes (pip hash FILE)");
  }
  const std::string_view hex = value.substr(colon + 1);
  auto d = Digest::from_hex(hex);
  if (!d) {
    return project_error("project.hash", "the sha256 hash '" + std::string(value.substr(0, 80)) + "' has " + std::to_string(hex.size()) +
                                             " characters, not 64 hexadecimal digits", where, "copy the hash again from the index or `pip hash FILE`");
  }
  return *d;
}

/// True for what pip would read as a URL or a path rather than a name: a scheme, a slash, a leading dot, an archive.
bool looks_like_location(std::string_view word) {
  if (word.find("://") != std::string_view::npos || word.find('/') != std::string_view::npos || word.find('\\') != std::string_view::npos) return true;
  if (!word.empty() && (word[0] == '.' || word[0] == '~')) return true;
  for (std::string_view ext : {".whl", ".tar.gz", ".zip", ".tar.bz2", ".tgz"})
    if (word.size() > ext.size() && word.substr(word.size() - ext.size()) == ext) return true;
  return word.rfind("file:", 0) == 0 || word.rfind("git+", 0) == 0;
}

/// A PEP 508 requirement of the project, refused when it names a URL or a path.
Result<ProjectRequirement> project_requirement(const std::string& text, const std::string& where) {
  if (text.find("${") != std::string::npos) {
    return project_error("project.variable", "'" + text + "' uses an environment variable", where,
                         "write the value itself: a lock must not depend on the environment it is made in");
  }
  auto r = parse_requirement(text);
  if (!r || !r->url.empty() || looks_like_location(text.substr(0, text.find_first_of(" ;[")))) {
    if ((r && !r->url.empty()) || looks_like_location(text.substr(0, text.find_first_of(" ;[")))) {
      return project_error("project.url_requirement", "'" + text + "' is a URL or a local path, not a project from an index", where, k_url_hint);
    }
    Error e = std::move(r).error();
    e.kind = ErrorKind::spec;
    e.id = "project.syntax";
    e.where = where;
    e.while_("reading the requirement '" + text + "'");
    e.hint = "write a PEP 508 requirement (name[extras]==version ; marker)";
    return e;
  }
  ProjectRequirement out;
  out.name = canonicalize_name(r->name);
  out.requirement = r->name;
  if (!r->extras.empty()) out.requirement += "[" + join(r->extras, ",") + "]";
  out.requirement += r->specifier.str();
  out.marker = r->marker;
  out.where = where;
  return out;
}

/// pip's options that take a value, in their short and long spellings.
struct OptionSpelling {
  std::string_view short_name, long_name;
};
constexpr std::array<OptionSpelling, 8> k_value_options = {{{"-r", "--requirement"}, {"-c", "--constraint"}, {"-e", "--editable"},
                                                             {"-i", "--index-url"}, {"", "--extra-index-url"}, {"-f", "--find-links"},
                                                             {"", "--trusted-host"}, {"", "--no-binary"}}};

/// Splits an option line "-r x", "-rx", "--requirement=x", "--requirement x" into the long name and its value.
std::pair<std::string, std::string> option_of(const std::string& line) {
  for (const auto& o : k_value_options) {
    const std::string l(o.long_name), s(o.short_name);
    if (line.rfind(l + "=", 0) == 0) return {l, std::string(text::trim(std::string_view(line).substr(l.size() + 1)))};
    if (line == l || line.rfind(l + " ", 0) == 0 || line.rfind(l + "\t", 0) == 0) return {l, std::string(text::trim(std::string_view(line).substr(l.size())))};
    if (!s.empty() && line.rfind(s, 0) == 0 && line.rfind("--", 0) != 0) return {l, std::string(text::trim(std::string_view(line).substr(s.size())))};
  }
  const auto space = line.find_first_of(" \t=");
  return {line.substr(0, space), space == std::string::npos ? std::string() : std::string(text::trim(std::string_view(line).substr(space + 1)))};
}

Status read_requirements_text(std::string_view text, const std::string& path, Reader& reader, ProjectFile& out, bool constraints);

/// Follows "-r FILE" / "-c FILE" from the file at PATH: beneath the project directory, no loop, within the limits.
Status include(const std::string& target, const std::string& path, const std::string& where, Reader& reader, ProjectFile& out, bool constraints) {
  if (!reader.follow_includes) {
    return project_error("project.include", "'" + target + "' is included, and includes are followed only when the file is read from disk", where,
                         "read the file with read_project_file");
  }
  if (looks_like_location(target) && target.find("://") != std::string::npos) {
    return project_error("project.include_outside", "the include '" + target + "' is a URL", where, "copy the file into the project directory and include it by its path");
  }
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::path(path).parent_path() / target, ec);
  const auto rel = resolved.lexically_relative(reader.project_dir);
  if (ec || rel.empty() || *rel.begin() == "..") {
    return project_error("project.include_outside", "the include '" + target + "' is outside the project directory " + reader.project_dir.string(), where,
                         "keep every included file inside the project's directory (the directory of the file the spec names)");
  }
  if (std::find(reader.chain.begin(), reader.chain.end(), resolved) != reader.chain.end()) {
    std::vector<std::string> names;
    for (const auto& p : reader.chain) names.push_back(p.lexically_relative(reader.project_dir).string());
    names.push_back(rel.string());
    return project_error("project.include_loop", "the includes loop: " + join(names, " -> "), where, "remove one of the -r lines of the loop");
  }
  if (static_cast<int>(reader.chain.size()) >= reader.limits->max_depth || ++reader.files > reader.limits->max_files) {
    return project_error("project.too_many", "the includes go deeper than " + std::to_string(reader.limits->max_depth) + " files or name more than " +
                                                 std::to_string(reader.limits->max_files) + " in all", where, "include fewer files");
  }
  auto bytes = read_file_limited(resolved.string(), reader.limits->max_bytes, TooLarge{ErrorKind::spec, "project.read", "an included file is text of a few kilobytes"});
  if (!bytes) {
    Error e = std::move(bytes).error();
    e.kind = ErrorKind::spec;
    e.id = "project.read";
    e.while_("reading " + target + ", included at " + where);
    return e;
  }
  reader.chain.push_back(resolved);
  reader.digest.update(bytes->data(), bytes->size());
  auto st = read_requirements_text(*bytes, resolved.string(), reader, out, constraints);
  reader.chain.pop_back();
  return st;
}

/// One option line of a requirements file.
Status read_option(const std::string& line, const std::string& path, const std::string& where, Reader& reader, ProjectFile& out) {
  const auto [name, value] = option_of(line);
  if (name == "--requirement" || name == "--constraint") {
    if (value.empty()) return project_error("project.syntax", name + " needs a file", where, "write " + name + " FILE");
    return include(value, path, where, reader, out, name == "--constraint");
  }
  if (name == "--index-url" || name == "--extra-index-url") {
    if (value.empty() || value.find_first_of(" \t") != std::string::npos || (value.rfind("https://", 0) != 0 && value.rfind("http://", 0) != 0)) {
      return project_error("project.index", name + " needs one http or https URL, not '" + value + "'", where, "write " + name + " https://HOST/simple");
    }
    if (value.find("${") != std::string::npos)
      return project_error("project.variable", "'" + value + "' uses an environment variable", where, "write the URL itself; credentials belong in netrc or the keyring");
    if (name == "--index-url") out.index_url = value;
    else if (std::find(out.extra_index_urls.begin(), out.extra_index_urls.end(), value) == out.extra_index_urls.end()) out.extra_index_urls.push_back(value);
    return ok_status();
  }
  if (name == "--require-hashes") {
    out.hashes_required = true;
    return ok_status();
  }
  if (name == "--prefer-binary" || (name == "--only-binary" && value == ":all:")) return ok_status();  // gpuenv takes wheels only
  if (name == "--editable") {
    return project_error("project.editable", "'" + line + "' installs a project from its source tree", where,
                         "gpuenv installs wheels only: build the project into a wheel and serve it from an index, or copy the source into the image");
  }
  return project_error("project.option", "the pip option '" + name + "' is not one gpuenv honours", where,
                       "keep -r, -c, --hash, --index-url, --extra-index-url and --require-hashes; give other sources in the spec's sources.pip");
}

/// One requirement line: the requirement, then its per-requirement options (--hash).
Status read_requirement_line(const std::string& line, const std::string& where, Reader& reader, ProjectFile& out, bool constraint) {
  auto words = text::split_blanks(line);
  std::size_t first_option = 0;
  while (first_option < words.size() && !(words[first_option].rfind("--", 0) == 0 || (words[first_option].size() == 2 && words[first_option][0] == '-'))) ++first_option;
  std::vector<std::string> req_words(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(first_option));
  GPUENV_TRY(req, project_requirement(join(req_words, " "), where));
  for (std::size_t i = first_option; i < words.size(); ++i) {
    const std::string w(words[i]);
    std::string value;
    if (w.rfind("--hash=", 0) == 0) value = w.substr(7);
    else if (w == "--hash" && i + 1 < words.size()) value = words[++i];
    else return project_error("project.option", "the option '" + w + "' after a requirement is not one gpuenv honours", where, "keep --hash=sha256:HEX after a requirement");
    GPUENV_TRY(d, parse_hash(value, where));
    if (std::find(req.hashes.begin(), req.hashes.end(), d) == req.hashes.end()) req.hashes.push_back(d);
  }
  if (!req.hashes.empty()) out.hashes_required = true;
  auto& list = constraint ? out.constraints : out.requirements;
  if (list.size() + 1 > reader.limits->max_requirements) {
    return project_error("project.too_many", "more than " + std::to_string(reader.limits->max_requirements) + " requirements", where, "split the project");
  }
  list.push_back(std::move(req));
  return ok_status();
}

Status read_requirements_text(std::string_view text, const std::string& path, Reader& reader, ProjectFile& out, bool constraints) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  for (const auto& l : logical_lines(text)) {
    const std::string where = path + ":" + std::to_string(l.number);
    if (l.text[0] == '-') GPUENV_CHECK(read_option(l.text, path, where, reader, out));
    else GPUENV_CHECK(read_requirement_line(l.text, where, reader, out, constraints));
  }
  return ok_status();
}

/// pip's hash-checking mode: once any requirement has a hash, each must be pinned with == and have its hashes.
Status check_hash_mode(const ProjectFile& file) {
  if (!file.hashes_required) return ok_status();
  for (const auto& r : file.requirements) {
    auto parsed = parse_requirement(r.requirement);
    const bool pinned = parsed && parsed->specifier.specifiers().size() == 1 &&
                        (parsed->specifier.specifiers()[0].op() == SpecOp::equal || parsed->specifier.specifiers()[0].op() == SpecOp::arbitrary) &&
                        parsed->specifier.specifiers()[0].version_text().find('*') == std::string::npos;
    if (!pinned)
      return project_error("project.hash_unpinned", "'" + r.requirement + "' is not pinned to one version, and the file checks hashes", r.where,
                           "pin it with == and list its hashes (pip-compile --generate-hashes or uv pip compile --generate-hashes write both)");
    if (r.hashes.empty())
      return project_error("project.hash_missing", "'" + r.requirement + "' has no --hash, and the file checks hashes", r.where,
                           "list the hashes of its files (--hash=sha256:HEX)");
  }
  return ok_status();
}

/// A conda environment.yml: its pip section read as a requirements file; python and pip themselves accepted; any
/// other conda package refused, all of them named.
Status read_conda(std::string_view text, const std::string& path, Reader& reader, ProjectFile& out) {
  GPUENV_CHECK(check_yaml_bytes(text, path, reader.limits->max_bytes, 64));
  GPUENV_TRY(root, load_yaml(text, path, ErrorKind::spec, "project.yaml_syntax", "fix the YAML of the environment file"));
  if (!root.IsMap()) return project_error("project.syntax", "an environment file is a mapping with `dependencies:`", path, "see conda's environment.yml format");
  const YAML::Node deps = root["dependencies"];
  if (!deps || !deps.IsSequence()) return project_error("project.syntax", "`dependencies:` must be a list", yaml_where(path, deps ? deps : root), "list the pip packages under `- pip:`");
  std::vector<std::string> conda;
  std::string conda_where;
  for (const auto& item : deps) {
    if (item.IsScalar()) {
      const std::string spec = item.Scalar();
      std::string name = spec.substr(spec.rfind("::") == std::string::npos ? 0 : spec.rfind("::") + 2);
      name = name.substr(0, name.find_first_of("=<>!~ "));
      if (name == "python" || name == "pip") continue;
      if (conda.empty()) conda_where = yaml_where(path, item);
      conda.push_back(spec);
    } else if (item.IsMap() && item.size() == 1 && item["pip"] && item["pip"].IsSequence()) {
      for (const auto& line : item["pip"]) {
        if (!line.IsScalar()) return project_error("project.syntax", "each pip entry must be a line of text", yaml_where(path, line), "write the requirement as a string");
        const std::string where = yaml_where(path, line);
        std::string t(text::trim(line.Scalar()));
        if (t.empty()) continue;
        if (t[0] == '-') GPUENV_CHECK(read_option(t, path, where, reader, out));
        else GPUENV_CHECK(read_requirement_line(t, where, reader, out, false));
      }
    } else {
      return project_error("project.syntax", "a dependency must be a conda package or `pip:` with a list", yaml_where(path, item), "see conda's environment.yml format");
    }
  }
  if (!conda.empty()) {
    return project_error("project.conda", "conda packages are not a source gpuenv takes: " + join(conda, ", "), conda_where,
                         "conda channels are not a source: take these from pip (the `pip:` list) or from Debian (packages.apt), or leave them out");
  }
  return ok_status();
}

/// Whether MARKER can hold on some Linux image: x86_64 or aarch64, CPython 3.8 to 3.14.
bool holds_on_some_linux(const std::optional<Marker>& marker) {
  if (!marker) return true;
  for (const char* machine : {"x86_64", "aarch64"}) {
    for (int minor = 8; minor <= 14; ++minor) {
      const Environment env = cpython_linux_environment(machine, "3." + std::to_string(minor));
      auto v = marker->evaluate(env);
      if (v && *v) return true;
    }
  }
  return false;
}

Result<ProjectFile> parse_with(std::string_view text, ProjectFormat format, const std::string& path, const ProjectSelection& selection,
                               const ProjectLimits& limits, Reader& reader) {
  if (text.size() > limits.max_bytes) {
    return project_error("project.read", path + " is larger than " + std::to_string(limits.max_bytes >> 20) + " MiB", path, "a project file is text of a few kilobytes; check the path");
  }
  ProjectFile out;
  switch (format) {
    case ProjectFormat::pyproject: {
      GPUENV_TRY(f, parse_pyproject(text, path, selection, limits));
      out = std::move(f);
      break;
    }
    case ProjectFormat::uv_lock: {
      GPUENV_TRY(f, parse_uv_lock(text, path, selection, limits));
      out = std::move(f);
      break;
    }
    case ProjectFormat::pylock: {
      GPUENV_TRY(f, parse_pylock(text, path, selection, limits));
      out = std::move(f);
      break;
    }
    case ProjectFormat::conda_environment: GPUENV_CHECK(read_conda(text, path, reader, out)); break;
    case ProjectFormat::requirements: GPUENV_CHECK(read_requirements_text(text, path, reader, out, false)); break;
  }
  out.format = format;
  out.path = path;
  if (reader.files == 0) reader.digest.update(text.data(), text.size());  // parse_project_text: the text is the whole input
  if (format == ProjectFormat::requirements || format == ProjectFormat::conda_environment) {
    if (!selection.extras.empty() || !selection.groups.empty()) {
      return project_error("project.unknown_extra", std::string(project_format_name(format)) + " files have no extras or dependency groups", path,
                           "leave out python_project.extras and .groups, or name a pyproject.toml, uv.lock or pylock.toml");
    }
    GPUENV_CHECK(check_hash_mode(out));
  }
  return out;
}

}  // namespace project_file_detail

std::string_view project_format_name(ProjectFormat format) {
  switch (format) {
    case ProjectFormat::requirements: return "requirements";
    case ProjectFormat::pylock: return "pylock.toml";
    case ProjectFormat::uv_lock: return "uv.lock";
    case ProjectFormat::pyproject: return "pyproject.toml";
    case ProjectFormat::conda_environment: return "environment.yml";
  }
  return "requirements";
}

ProjectFormat project_format_of(std::string_view path) {
  const std::string name = std::filesystem::path(std::string(path)).filename().string();
  if (name == "uv.lock") return ProjectFormat::uv_lock;
  if (name == "pyproject.toml") return ProjectFormat::pyproject;
  if (name == "pylock.toml" || (name.rfind("pylock.", 0) == 0 && name.size() > 12 && name.substr(name.size() - 5) == ".toml")) return ProjectFormat::pylock;
  if (name == "environment.yml" || name == "environment.yaml") return ProjectFormat::conda_environment;
  return ProjectFormat::requirements;
}

Result<ProjectFile> parse_project_text(std::string_view text, ProjectFormat format, const std::string& path, const ProjectSelection& selection,
                                       const ProjectLimits& limits) {
  project_file_detail::Reader reader;
  reader.selection = &selection;
  reader.limits = &limits;
  GPUENV_TRY(file, project_file_detail::parse_with(text, format, path, selection, limits, reader));
  file.sha256 = reader.digest.finish_digest();
  return file;
}

Result<ProjectFile> read_project_file(const std::string& path, const ProjectSelection& selection, const ProjectLimits& limits, const std::string& project_dir) {
  namespace fs = std::filesystem;
  auto bytes = read_file_limited(path, limits.max_bytes, TooLarge{ErrorKind::spec, "project.read", "a project file is text of a few kilobytes; check the path"});
  if (!bytes) {
    Error e = std::move(bytes).error();
    e.kind = ErrorKind::spec;
    if (e.id != "project.read") {
      e.id = "project.read";
      e.hint = "check python_project's path; it is relative to the spec's directory";
    }
    return e;
  }
  std::error_code ec;
  project_file_detail::Reader reader;
  reader.selection = &selection;
  reader.limits = &limits;
  reader.follow_includes = true;
  const fs::path canonical = fs::weakly_canonical(fs::path(path), ec);
  reader.project_dir = fs::weakly_canonical(project_dir.empty() ? canonical.parent_path() : fs::path(project_dir), ec);
  reader.chain.push_back(canonical);
  reader.files = 1;
  reader.digest.update(bytes->data(), bytes->size());
  GPUENV_TRY(file, project_file_detail::parse_with(*bytes, project_format_of(path), path, selection, limits, reader));
  file.sha256 = reader.digest.finish_digest();
  return file;
}

Result<std::vector<ProjectRequirement>> project_requirements(const ProjectFile& file, const Environment& env) {
  if (file.format == ProjectFormat::uv_lock || file.format == ProjectFormat::pylock) return lock_graph_requirements(file, env);
  GPUENV_CHECK(check_requires_python(file, env));
  std::vector<ProjectRequirement> out;
  for (const auto& r : file.requirements) {
    if (r.marker) {
      Environment e = env;
      e.extra.clear();
      auto applies = r.marker->evaluate(e);
      if (!applies) {
        Error err = std::move(applies).error();
        err.kind = ErrorKind::spec;
        err.id = "project.marker";
        err.where = r.where;
        err.while_("evaluating the marker of '" + r.requirement + "'");
        return err;
      }
      if (!*applies) continue;
    }
    out.push_back(r);
  }
  return out;
}

std::optional<std::string> project_pin(const ProjectFile& file, std::string_view name) {
  for (const auto& r : file.requirements) {
    if (r.name != name || !project_file_detail::holds_on_some_linux(r.marker)) continue;
    auto parsed = parse_requirement(r.requirement);
    if (!parsed || parsed->specifier.specifiers().size() != 1) continue;
    const auto& s = parsed->specifier.specifiers()[0];
    if ((s.op() == SpecOp::equal || s.op() == SpecOp::arbitrary) && s.version_text().find('*') == std::string::npos) return s.version_text();
  }
  return std::nullopt;
}

}  // namespace gpuenv::packages
