#include "packages/wheels/pip_config.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

namespace gpuenv::packages {
namespace {

constexpr std::uintmax_t k_max_config_bytes = 1U << 20;

bool is_config_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view strip(std::string_view s) {
  while (!s.empty() && is_config_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_config_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string config_lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return out;
}

// pip's _normalize_name.
std::string normalize_key(std::string_view name) {
  std::string out = config_lowered(name);
  for (char& c : out) c = c == '_' ? '-' : c;
  if (out.starts_with("--")) out.erase(0, 2);
  return out;
}

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_config_space(s[i])) ++i;
    const std::size_t start = i;
    while (i < s.size() && !is_config_space(s[i])) ++i;
    if (i > start) out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

// Python's universal newlines: \n, \r\n and \r all end a line.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    lines.push_back(text.substr(start, i - start));
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

struct RawOption {
  std::string name;
  int line = 0;
  std::vector<std::pair<int, std::string>> lines;  // including empty continuation lines
};

struct RawSection {
  std::string name;
  std::vector<RawOption> options;
  RawOption* find(const std::string& key) {
    for (RawOption& o : options) {
      if (o.name == key) return &o;
    }
    return nullptr;
  }
};

Error config_syntax_error(const std::string& path, int line, const std::string& why) {
  return make_error(ErrorKind::environment, "pip_config.syntax", "pip configuration file: " + why,
                    path + ":" + std::to_string(line),
                    "fix the file (pip cannot read it either) or point PIP_CONFIG_FILE elsewhere");
}

PipConfigOption finish(const std::string& section, const RawOption& raw) {
  PipConfigOption out;
  out.section = section;
  out.key = normalize_key(raw.name);
  out.line = raw.line;
  for (std::size_t i = 0; i < raw.lines.size(); ++i) {
    if (i > 0) out.value += '\n';
    out.value += raw.lines[i].second;
    if (!raw.lines[i].second.empty()) out.value_lines.push_back(raw.lines[i]);
  }
  while (!out.value.empty() && is_config_space(out.value.back())) out.value.pop_back();
  return out;
}

// A value and where its words come from.
struct Setting {
  std::string value;
  std::string origin;              // where the key was set
  std::vector<PipIndexUrl> words;  // url = one whitespace-separated word, origin = its source
};

bool file_exists(const std::string& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::exists(path, ec);
}

Result<std::string> read_file(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    return make_error(ErrorKind::environment, "pip_config.read", "cannot read pip configuration: " + ec.message(),
                      path, "check the file's permissions and that it is a regular file");
  }
  if (size > k_max_config_bytes) {
    return make_error(ErrorKind::environment, "pip_config.read",
                      "pip configuration file is " + std::to_string(size) + " bytes, more than the " +
                          std::to_string(k_max_config_bytes) + " gpuenv reads",
                      path, "check that PIP_CONFIG_FILE or the file names a pip configuration");
  }
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<std::size_t>(size), '\0');
  if (!in || !in.read(text.data(), static_cast<std::streamsize>(text.size()))) {
    return make_error(ErrorKind::environment, "pip_config.read", "cannot read pip configuration", path,
                      "check the file's permissions");
  }
  return text;
}

std::string under_root(const std::string& root, const std::string& path) {
  if (root.empty() || path.empty() || path.front() != '/') return path;
  std::string r = root;
  while (!r.empty() && r.back() == '/') r.pop_back();
  return r + path;
}

std::string env_or(const std::map<std::string, std::string>& env, const std::string& key, const std::string& fallback) {
  auto it = env.find(key);
  return it == env.end() ? fallback : it->second;
}

}  // namespace

Result<std::vector<PipConfigOption>> parse_pip_config(std::string_view text, const std::string& path) {
  std::vector<RawSection> sections;
  RawSection defaults{"DEFAULT", {}};
  RawSection* cursect = nullptr;
  RawOption* option = nullptr;
  std::size_t indent_level = 0;
  std::set<std::string> seen_sections;
  int lineno = 0;
  for (std::string_view line : split_lines(text)) {
    ++lineno;
    const std::string_view value = strip(line);
    const bool comment = value.starts_with('#') || value.starts_with(';');
    if (value.empty() || comment) {
      // Empty lines may belong to a multi-line value; comment lines never do and never end one.
      if (!comment && cursect != nullptr && option != nullptr) option->lines.emplace_back(lineno, "");
      continue;
    }
    std::size_t indent = 0;
    while (indent < line.size() && is_config_space(line[indent])) ++indent;
    if (cursect != nullptr && option != nullptr && indent > indent_level) {
      option->lines.emplace_back(lineno, std::string(value));
      continue;
    }
    indent_level = indent;
    const std::size_t close = value.rfind(']');
    if (value.front() == '[' && close != std::string_view::npos && close >= 2) {
      // configparser matches \[(?P<header>.+)\] at the start: the header runs to the last ']'.
      const std::string name(value.substr(1, close - 1));
      if (name == "DEFAULT") {
        cursect = &defaults;
      } else {
        if (!seen_sections.insert(name).second) return config_syntax_error(path, lineno, "section [" + name + "] given twice");
        sections.push_back(RawSection{name, {}});
        cursect = &sections.back();
      }
      option = nullptr;
      continue;
    }
    if (cursect == nullptr) {
      return config_syntax_error(path, lineno, "'" + std::string(value) + "' comes before any [section] header");
    }
    const std::size_t delim = value.find_first_of("=:");
    if (delim == std::string_view::npos) {
      return config_syntax_error(path, lineno, "'" + std::string(value) + "' is neither 'key = value' nor a [section]");
    }
    const std::string key = config_lowered(strip(value.substr(0, delim)));
    if (key.empty()) return config_syntax_error(path, lineno, "'" + std::string(value) + "' has no key before '='");
    if (cursect->find(key) != nullptr) {
      return config_syntax_error(path, lineno, "key '" + key + "' given twice in [" + cursect->name + "]");
    }
    cursect->options.push_back(RawOption{key, lineno, {{lineno, std::string(strip(value.substr(delim + 1)))}}});
    option = &cursect->options.back();
  }
  // configparser's items(section): the [DEFAULT] keys first (overridden by the section's), then the section's.
  std::vector<PipConfigOption> out;
  for (RawSection& section : sections) {
    for (const RawOption& d : defaults.options) {
      const RawOption* own = section.find(d.name);
      out.push_back(finish(section.name, own != nullptr ? *own : d));
    }
    for (const RawOption& o : section.options) {
      if (defaults.find(o.name) == nullptr) out.push_back(finish(section.name, o));
    }
  }
  return out;
}

Result<PipIndexConfig> discover_pip_indexes(const std::map<std::string, std::string>& env, const std::string& home,
                                            const std::string& root, const std::string& site_prefix) {
  PipIndexConfig result;
  // One dictionary per kind, merged global < user < site < PIP_CONFIG_FILE < environment (pip's OVERRIDE_ORDER).
  std::map<std::string, Setting> merged;

  const auto config_file_it = env.find("PIP_CONFIG_FILE");
  const bool has_config_file = config_file_it != env.end();
  const std::string config_file = has_config_file ? config_file_it->second : std::string();

  if (!(has_config_file && config_file == "/dev/null")) {
    std::vector<std::string> files;
    std::string xdg_dirs = env_or(env, "XDG_CONFIG_DIRS", "");
    if (strip(xdg_dirs).empty()) xdg_dirs = "/etc/xdg";
    std::size_t start = 0;
    for (;;) {
      const std::size_t colon = xdg_dirs.find(':', start);
      std::string dir = xdg_dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      if (dir == "~" || dir.starts_with("~/")) dir = home + dir.substr(1);
      files.push_back(under_root(root, dir + "/pip/pip.conf"));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    files.push_back(under_root(root, "/etc/pip.conf"));
    // The user's files are skipped when PIP_CONFIG_FILE names an existing file.
    if (!(!config_file.empty() && file_exists(config_file))) {
      files.push_back(home + "/.pip/pip.conf");
      std::string xdg_home = env_or(env, "XDG_CONFIG_HOME", "");
      if (strip(xdg_home).empty()) xdg_home = home + "/.config";
      files.push_back(xdg_home + "/pip/pip.conf");
    }
    const std::string prefix = site_prefix.empty() ? env_or(env, "VIRTUAL_ENV", "") : site_prefix;
    if (!prefix.empty()) files.push_back(prefix + "/pip.conf");
    if (has_config_file) files.push_back(config_file);

    for (const std::string& file : files) {
      if (!file_exists(file)) continue;
      auto text = read_file(file);
      if (!text.ok()) return std::move(text).error();
      auto options = parse_pip_config(*text, file);
      if (!options.ok()) return std::move(options).error();
      result.files_read.push_back(file);
      for (const PipConfigOption& o : *options) {
        Setting s;
        s.value = o.value;
        s.origin = file + ":" + std::to_string(o.line);
        for (const auto& [line, value_line] : o.value_lines) {
          for (std::string& word : split_words(value_line)) {
            s.words.push_back(PipIndexUrl{std::move(word), file + ":" + std::to_string(line)});
          }
        }
        merged[o.section + "." + o.key] = std::move(s);
      }
    }
  }
  for (const auto& [name, value] : env) {
    if (!name.starts_with("PIP_")) continue;
    const std::string key = normalize_key(name.substr(4));
    if (key == "version" || key == "help") continue;
    Setting s;
    s.value = value;
    s.origin = name;
    for (std::string& word : split_words(value)) s.words.push_back(PipIndexUrl{std::move(word), name});
    merged[":env:." + key] = std::move(s);
  }

  // pip applies sections in the order [global], [install], environment; empty values are ignored.
  const Setting* index_url = nullptr;
  const Setting* extra_index_url = nullptr;
  for (const char* section : {"global", "install", ":env:"}) {
    const std::string prefix = std::string(section) + ".";
    if (auto it = merged.find(prefix + "index-url"); it != merged.end() && !it->second.value.empty()) {
      index_url = &it->second;
    }
    if (auto it = merged.find(prefix + "extra-index-url"); it != merged.end() && !it->second.value.empty()) {
      extra_index_url = &it->second;
    }
  }
  if (index_url != nullptr) {
    if (index_url->words.size() != 1) {
      return make_error(ErrorKind::environment, "pip_config.index_url",
                        "index-url must be one URL, got '" + index_url->value + "'", index_url->origin,
                        "give index-url a single URL and list further indexes under extra-index-url");
    }
    result.index_url = index_url->words[0];
  }
  if (extra_index_url != nullptr) result.extra_index_urls = extra_index_url->words;
  return result;
}

}  // namespace gpuenv::packages
