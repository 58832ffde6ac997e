#include "packages/apt/apt_sources.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "packages/apt/deb822.hpp"

#include "base/text.hpp"

namespace gpuenv::packages {
namespace {

constexpr std::uintmax_t k_max_source_file_bytes = 4 * 1024 * 1024;
constexpr std::string_view k_key_begin = "-----BEGIN PGP PUBLIC KEY BLOCK-----";
constexpr std::string_view k_key_end = "-----END PGP PUBLIC KEY BLOCK-----";

bool is_source_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }
using text::lower;
using text::lowered;
std::string_view trim_source(std::string_view s) {
  while (!s.empty() && is_source_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_source_space(s.back())) s.remove_suffix(1);
  return s;
}
std::string source_line(std::string_view origin, std::uint32_t line) { return std::string(origin) + ":" + std::to_string(line); }

Error source_syntax_error(std::string_view origin, std::uint32_t line, std::string message) {
  return make_error(ErrorKind::environment, "apt_sources.syntax", std::move(message), source_line(origin, line),
                    "fix the entry as sources.list(5) describes it, or remove the file from the image's root");
}

// apt's boolean words (StringToBool); nothing when the word is none of them.
std::optional<bool> parse_bool(std::string_view text) {
  const std::string s = lowered(trim_source(text));
  for (const char* t : {"yes", "true", "with", "on", "enable", "1"})
    if (s == t) return true;
  for (const char* f : {"no", "false", "without", "off", "disable", "0"})
    if (s == f) return false;
  return std::nullopt;
}

std::optional<AptSourceType> parse_type(std::string_view word) {
  if (word == "deb") return AptSourceType::deb;
  if (word == "deb-src") return AptSourceType::deb_src;
  return std::nullopt;
}

// A URI needs a scheme ("http:", "file:", "mirror+file:"); apt adds the final '/'.
std::optional<std::string> fixup_uri(std::string_view uri) {
  const std::size_t colon = uri.find(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  const char c0 = lower(uri[0]);
  if (c0 < 'a' || c0 > 'z') return std::nullopt;
  for (char c : uri.substr(0, colon)) {
    const char l = lower(c);
    if (!((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '+' || l == '-' || l == '.')) return std::nullopt;
  }
  std::string out(uri);
  if (out.back() != '/') out.push_back('/');
  return out;
}

// Splits on blanks and commas.
std::vector<std::string> list_words(std::string_view value) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < value.size()) {
    while (i < value.size() && (is_source_space(value[i]) || value[i] == ',')) ++i;
    const std::size_t start = i;
    while (i < value.size() && !is_source_space(value[i]) && value[i] != ',') ++i;
    if (i > start) out.emplace_back(value.substr(start, i - start));
  }
  return out;
}

// apt's ParseQuoteWord: a word ends at a blank, except inside "..." (quotes dropped) or [...] (brackets kept).
// Returns false when a quote or bracket is not closed.
bool quote_words(std::string_view line, std::vector<std::string>& out) {
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_source_space(line[i])) ++i;
    if (i == line.size()) break;
    std::string word;
    while (i < line.size() && !is_source_space(line[i])) {
      if (line[i] == '"' || line[i] == '[') {
        const char close = line[i] == '"' ? '"' : ']';
        const std::size_t end = line.find(close, i + 1);
        if (end == std::string_view::npos) return false;
        if (close == ']') word.append(line.substr(i, end - i + 1));
        else word.append(line.substr(i + 1, end - i - 1));
        i = end + 1;
        continue;
      }
      word.push_back(line[i++]);
    }
    out.push_back(std::move(word));
  }
  return true;
}

// Applies one option (`name` lower-case) to a source; options other than the three gpuenv reads are kept.
Status apply_option(AptSource& s, const std::string& name, std::string_view value, std::string_view origin,
                    std::uint32_t line, bool deb822) {
  if (name == (deb822 ? "architectures" : "arch")) {
    s.architectures = list_words(value);
  } else if (name == "signed-by") {
    const std::string_view v = trim_source(value);
    if (deb822 && v.find(k_key_begin) != std::string_view::npos) {
      // Inline key: continuation lines with their indentation removed, " ." standing for an empty line.
      std::string key;
      std::string_view rest = v;
      while (!rest.empty()) {
        const std::size_t nl = rest.find('\n');
        std::string_view l = trim_source(rest.substr(0, nl));
        rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
        if (l == ".") l = {};
        key.append(l);
        key.push_back('\n');
      }
      if (key.substr(0, k_key_begin.size()) != k_key_begin || key.find(k_key_end) == std::string::npos)
        return source_syntax_error(origin, line, "the inline key of Signed-By does not run from '" + std::string(k_key_begin) +
                                              "' to '" + std::string(k_key_end) + "'");
      s.signed_by_key = std::move(key);
    } else {
      s.signed_by = list_words(v);
      if (s.signed_by.empty()) return source_syntax_error(origin, line, "Signed-By is empty");
    }
  } else if (name == "trusted") {
    const auto b = parse_bool(value);
    if (!b) return source_syntax_error(origin, line, "trusted value '" + std::string(trim_source(value)) + "' is not yes or no");
    s.trusted = *b;
  } else {
    s.options.emplace_back(name, std::string(trim_source(value)));
  }
  return ok_status();
}

// Expands one .sources stanza into sources.
Result<std::vector<AptSource>> expand_stanza(const Stanza& st, std::string_view origin) {
  auto missing = [&](std::string_view field) -> Error {
    return make_error(ErrorKind::environment, "apt_sources.missing_field",
                      "the stanza has no " + std::string(field) + " field", source_line(origin, st.line()),
                      "a .sources stanza needs Types, URIs and Suites (and Components unless the suite ends in '/')");
  };
  AptSource base;
  base.where = source_line(origin, st.line());
  if (const Field* f = st.field("Enabled")) {
    const auto b = parse_bool(f->value);
    if (!b) return source_syntax_error(origin, f->line, "Enabled value '" + std::string(f->value) + "' is not yes or no");
    base.enabled = *b;
  }
  std::vector<AptSourceType> types;
  std::vector<std::string_view> uris;
  std::vector<std::string_view> suites;
  std::vector<std::string_view> components;
  bool has_components = false;
  for (const Field& f : st.fields()) {
    const std::string name = lowered(f.name);
    if (name == "types") {
      for (std::string_view w : value_words(f.value)) {
        const auto t = parse_type(w);
        if (!t) return source_syntax_error(origin, f.line, "type '" + std::string(w) + "' is not known (deb or deb-src)");
        types.push_back(*t);
      }
    } else if (name == "uris") {
      uris = value_words(f.value);
    } else if (name == "suites") {
      suites = value_words(f.value);
    } else if (name == "components") {
      components = value_words(f.value);
      has_components = true;
    } else if (name == "enabled") {
      // read above
    } else {
      if (auto st2 = apply_option(base, name, f.value, origin, f.line, true); !st2) return std::move(st2).error();
    }
  }
  if (types.empty()) return missing("Types");
  if (uris.empty()) return missing("URIs");
  if (suites.empty()) return missing("Suites");
  std::vector<AptSource> out;
  for (AptSourceType type : types) {
    for (std::string_view uri : uris) {
      const auto fixed = fixup_uri(uri);
      if (!fixed) return source_syntax_error(origin, st.field("URIs")->line, "'" + std::string(uri) + "' is not a URI");
      for (std::string_view suite : suites) {
        AptSource s = base;
        s.type = type;
        s.uri = *fixed;
        s.suite = std::string(suite);
        if (s.is_flat()) {
          if (has_components && !components.empty())
            return source_syntax_error(origin, st.field("Components")->line,
                                "suite '" + s.suite + "' is a flat path (it ends in '/') and takes no components");
        } else {
          if (components.empty()) return missing("Components");
          for (std::string_view c : components) s.components.emplace_back(c);
        }
        out.push_back(std::move(s));
      }
    }
  }
  return out;
}

Result<std::string> read_source_file(const std::filesystem::path& path) {
  auto fail = [&](const std::string& why) -> Error {
    return make_error(ErrorKind::environment, "apt_sources.read", "cannot read " + path.string() + ": " + why,
                      path.string(), "check the file's permissions, or remove it");
  };
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return fail(ec.message());
  if (size > k_max_source_file_bytes)
    return fail("it has " + std::to_string(size) + " bytes, more than the " + std::to_string(k_max_source_file_bytes) +
                " an apt source file may have here");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("it cannot be opened");
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) return fail("a read failed");
  return text;
}

// apt's rule for file names in sources.list.d (run-parts style): letters, digits, '_', '-', ':' and '.'.
bool apt_accepts_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == ':' || c == '.';
  });
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string_view to_string(AptSourceType type) { return type == AptSourceType::deb ? "deb" : "deb-src"; }

Result<std::vector<AptSource>> parse_sources_list(std::string_view text, std::string_view origin) {
  std::vector<AptSource> out;
  std::uint32_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    // A '#' starts a comment, unless it sits inside an open [option] block (apt keeps those).
    for (std::size_t pos = line.find('#'); pos != std::string_view::npos; pos = line.find('#', pos + 1)) {
      const auto before = line.substr(0, pos);
      if (std::count(before.begin(), before.end(), '[') > std::count(before.begin(), before.end(), ']')) continue;
      line = line.substr(0, pos);
      break;
    }
    line = trim_source(line);
    if (line.empty()) continue;

    std::size_t type_end = 0;
    while (type_end < line.size() && !is_source_space(line[type_end])) ++type_end;
    const std::string_view type_word = line.substr(0, type_end);
    const auto type = parse_type(type_word);
    if (!type) return source_syntax_error(origin, line_no, "type '" + std::string(type_word) + "' is not known (deb or deb-src)");
    AptSource s;
    s.type = *type;
    s.where = source_line(origin, line_no);
    std::string_view rest = trim_source(line.substr(type_end));

    if (!rest.empty() && rest.front() == '[') {
      const std::size_t close = rest.find(']');
      if (close == std::string_view::npos) return source_syntax_error(origin, line_no, "the option block '[' has no ']'");
      std::vector<std::string> opts;
      if (!quote_words(rest.substr(1, close - 1), opts))
        return source_syntax_error(origin, line_no, "an option has an unclosed quote");
      for (const std::string& o : opts) {
        const std::size_t eq = o.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == o.size())
          return source_syntax_error(origin, line_no, "option '" + o + "' is not name=value");
        if (auto st = apply_option(s, lowered(o.substr(0, eq)), std::string_view(o).substr(eq + 1), origin, line_no, false);
            !st)
          return std::move(st).error();
      }
      rest = rest.substr(close + 1);
    }

    std::vector<std::string> words;
    if (!quote_words(rest, words)) return source_syntax_error(origin, line_no, "a quote or '[' is not closed");
    if (words.empty()) return source_syntax_error(origin, line_no, "the entry has no URI");
    const auto uri = fixup_uri(words[0]);
    if (!uri) return source_syntax_error(origin, line_no, "'" + words[0] + "' is not a URI");
    s.uri = *uri;
    if (words.size() < 2) return source_syntax_error(origin, line_no, "the entry has no suite after its URI");
    s.suite = words[1];
    s.components.assign(words.begin() + 2, words.end());
    if (s.is_flat() && !s.components.empty())
      return source_syntax_error(origin, line_no, "suite '" + s.suite + "' is a flat path (it ends in '/') and takes no components");
    if (!s.is_flat() && s.components.empty())
      return source_syntax_error(origin, line_no, "suite '" + s.suite + "' needs at least one component (e.g. main)");
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<AptSource>> parse_sources_deb822(std::string_view text, std::string_view origin) {
  auto stanzas = parse_deb822(text, origin);
  if (!stanzas) return std::move(stanzas).error();
  std::vector<AptSource> out;
  for (const Stanza& st : *stanzas) {
    auto expanded = expand_stanza(st, origin);
    if (!expanded) {
      const auto enabled = parse_bool(st.get("Enabled"));
      if (enabled.has_value() && !*enabled) continue;  // apt does not look inside a disabled stanza
      return std::move(expanded).error();
    }
    for (AptSource& s : *expanded) out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<AptSource>> discover_apt_sources(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return make_error(ErrorKind::environment, "apt_sources.no_root", "'" + root + "' is not a directory", root,
                      "pass the root of the filesystem whose apt sources to read, e.g. /");
  const fs::path apt_dir = fs::path(root) / "etc" / "apt";
  std::vector<fs::path> files;
  const fs::path main_list = apt_dir / "sources.list";
  if (fs::is_regular_file(main_list, ec)) files.push_back(main_list);

  const fs::path dir = apt_dir / "sources.list.d";
  if (fs::is_directory(dir, ec)) {
    std::vector<std::string> names;
    fs::directory_iterator it(dir, ec);
    if (ec)
      return make_error(ErrorKind::environment, "apt_sources.read", "cannot list " + dir.string() + ": " + ec.message(),
                        dir.string(), "check the directory's permissions");
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec)
        return make_error(ErrorKind::environment, "apt_sources.read",
                          "cannot list " + dir.string() + ": " + ec.message(), dir.string(),
                          "check the directory's permissions");
      const std::string name = it->path().filename().string();
      std::error_code type_ec;
      if (!it->is_regular_file(type_ec)) continue;  // follows symlinks, as apt does
      if (!apt_accepts_name(name) || !(ends_with(name, ".list") || ends_with(name, ".sources"))) continue;
      names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) files.push_back(dir / n);
  }

  std::vector<AptSource> out;
  for (const fs::path& file : files) {
    auto text = read_source_file(file);
    if (!text) return std::move(text).error();
    const std::string origin = file.string();
    auto parsed = ends_with(origin, ".sources") ? parse_sources_deb822(*text, origin) : parse_sources_list(*text, origin);
    if (!parsed) return std::move(parsed).error().while_("reading the apt sources under " + root);
    for (AptSource& s : *parsed) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gpuenv::packages
