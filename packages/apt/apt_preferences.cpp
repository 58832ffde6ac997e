#include "packages/apt/apt_preferences.hpp"

#include <fnmatch.h>
#include <regex.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "packages/apt/deb822.hpp"
#include "packages/apt/package_index.hpp"
#include "base/text.hpp"

namespace gpuenv::packages {
namespace {

using text::iequals;
using text::is_space;
using text::lower;
using text::trim;

constexpr int k_min_priority = -32768;
constexpr int k_max_priority = 32767;

std::string pref_line(std::string_view origin, std::uint32_t line) {
  return std::string(origin) + ":" + std::to_string(line);
}

Error preferences_error(std::string id, std::string message, std::string where, std::string hint) {
  return make_error(ErrorKind::environment, std::move(id), std::move(message), std::move(where), std::move(hint));
}

const char* const k_pin_hint =
    "write 'Pin: release a=SUITE, n=CODENAME, v=VERSION, o=ORIGIN, l=LABEL, c=COMPONENT, b=ARCH' (any of them), "
    "'Pin: origin HOST' or, for named packages, 'Pin: version VERSION' (see apt_preferences(5))";

// Case-insensitive equality of the first b.size() characters, as apt's MatchVer compares.
bool match_version_text(std::string_view a, std::string_view b, bool prefix) {
  if (a.size() < b.size() || (!prefix && a.size() != b.size())) return false;
  return iequals(a.substr(0, b.size()), b);
}

}  // namespace

// apt's ExpressionMatches: `/regex/` is a case-insensitive POSIX extended regular expression searched anywhere in
// the string; anything else is a case-insensitive glob(7) matched against the whole string.
struct AptPreferences::Pattern {
  std::string text;
  std::shared_ptr<const regex_t> regex;  // set for a /regex/; shared by copies of the preferences

  static bool is_regex(std::string_view s) { return s.size() >= 2 && s.front() == '/' && s.back() == '/'; }

  static Result<Pattern> compile(std::string text, const std::string& where) {
    Pattern p;
    if (is_regex(text)) {
      auto compiled = std::make_unique<regex_t>();
      const std::string body = text.substr(1, text.size() - 2);
      if (const int rc = regcomp(compiled.get(), body.c_str(), REG_EXTENDED | REG_ICASE | REG_NOSUB); rc != 0) {
        char why[256] = {};
        regerror(rc, compiled.get(), why, sizeof why);
        return preferences_error("apt.preferences_bad_regex",
                                 "'" + text + "' is not a POSIX extended regular expression: " + why, where,
                                 "fix the expression between the slashes, or write a glob such as 'name*'");
      }
      p.regex = std::shared_ptr<const regex_t>(compiled.release(), [](const regex_t* r) {
        regfree(const_cast<regex_t*>(r));
        delete r;
      });
    }
    p.text = std::move(text);
    return p;
  }

  [[nodiscard]] bool matches(const std::string& s) const {
    if (regex) return regexec(regex.get(), s.c_str(), 0, nullptr, 0) == 0;
    return fnmatch(text.c_str(), s.c_str(), FNM_CASEFOLD) == 0;
  }
};

struct AptPreferences::PackageWord {
  std::size_t record = 0;
  bool source = false;       // `src:name`: matches the versions built from that source package
  std::string name;          // without `src:` and `:arch`
  std::optional<Pattern> pattern;  // set for a glob or a /regex/
  std::string arch;          // "" for the native architecture, "any", or an architecture (wildcards allowed)
};

struct AptPreferences::Pin {
  PinKind kind = PinKind::release;
  // version: apt's VerStr and VerPrefixMatch.
  std::string version;
  bool version_prefix = false;
  std::optional<Pattern> version_pattern;
  // release: apt's Rel* members; absent terms are not checked.
  bool match_all = false;
  std::optional<std::string> release_version;
  bool release_version_prefix = false;
  std::optional<Pattern> release_version_pattern, origin, archive, codename, archive_or_codename, label, component,
      architecture;
  // origin
  std::optional<Pattern> site;

  // Whether the pin matches a Packages file (apt's FileMatch).
  [[nodiscard]] bool matches(const ReleaseInfo& r) const {
    auto field = [](const std::optional<Pattern>& p, const std::string& value, bool always_present = false) {
      return !p || ((always_present || !value.empty()) && p->matches(value));
    };
    switch (kind) {
      case PinKind::version:
        return false;
      case PinKind::origin:
        return site && site->matches(r.site);
      case PinKind::release:
        break;
    }
    if (match_all) return true;
    if (release_version && (r.version.empty() || (!match_version_text(r.version, *release_version,
                                                                      release_version_prefix) &&
                                                  !release_version_pattern->matches(r.version))))
      return false;
    if (!field(origin, r.origin) || !field(archive, r.archive) || !field(codename, r.codename)) return false;
    if (archive_or_codename && !field(archive_or_codename, r.archive) && !field(archive_or_codename, r.codename))
      return false;
    return field(label, r.label) && field(component, r.component, true) && field(architecture, r.architecture);
  }

  // Whether the pin matches a version (apt's VersionMatches): by its version string, or by any file listing it.
  [[nodiscard]] bool matches(const PinVersion& v) const {
    if (kind == PinKind::version) {
      const std::string text(v.version);
      return match_version_text(text, version, version_prefix) || version_pattern->matches(text);
    }
    return std::any_of(v.releases.begin(), v.releases.end(),
                       [&](const ReleaseInfo* r) { return r != nullptr && matches(*r); });
  }
};

namespace {

// The source package name of a Source field ("glibc (2.36-9)" -> "glibc"), or the package's own name.
std::string_view source_name(const PinVersion& v) {
  std::string_view s = trim(v.source);
  if (const std::size_t blank = s.find_first_of(" \t("); blank != std::string_view::npos) s = trim(s.substr(0, blank));
  return s.empty() ? v.name : s;
}

using Pattern = AptPreferences::Pattern;

Result<Pattern> pattern(std::string text, const std::string& where) { return Pattern::compile(std::move(text), where); }

// `Pin: version VERSION` (a trailing '*' makes it a prefix); only for records that name packages.
Status version_pin(AptPreferences::Pin& pin, std::string_view value, bool general, const std::string& where) {
  if (general)
    return preferences_error("apt.preferences_bad_pin",
                             "a 'Pin: version' record must name packages; 'Package: *' pins releases or origins",
                             where, "name the packages in Package:, or pin a release or an origin instead");
  if (value.empty())
    return preferences_error("apt.preferences_bad_pin", "'Pin: version' without a version", where, k_pin_hint);
  pin.version = std::string(value);
  if (pin.version.back() == '*') {
    pin.version_prefix = true;
    pin.version.pop_back();
  }
  auto p = pattern(pin.version, where);
  if (!p) return std::move(p).error();
  pin.version_pattern = std::move(*p);
  return ok_status();
}

// `Pin: origin HOST`, the host quoted or not.
Status origin_pin(AptPreferences::Pin& pin, std::string_view value, const std::string& where) {
  std::string site(value);
  if (site.size() >= 2 && site.front() == '"' && site.back() == '"') site = site.substr(1, site.size() - 2);
  auto p = pattern(std::move(site), where);
  if (!p) return std::move(p).error();
  pin.site = std::move(*p);
  return ok_status();
}

// The release version term (v=, or a bare word starting with a digit); a trailing '*' makes it a prefix.
Status set_release_version(AptPreferences::Pin& pin, std::string v, const std::string& where) {
  pin.release_version_prefix = !v.empty() && v.back() == '*';
  if (pin.release_version_prefix) v.pop_back();
  auto p = pattern(v, where);
  if (!p) return std::move(p).error();
  pin.release_version = std::move(v);
  pin.release_version_pattern = std::move(*p);
  return ok_status();
}

// One non-empty KEY=VALUE term of `Pin: release`; it replaces an earlier term of the same key, as in apt.
Status add_release_term(AptPreferences::Pin& pin, std::string_view term, const std::string& where) {
  if (term.size() < 2 || term[1] != '=')
    return preferences_error("apt.preferences_bad_pin",
                             "release term '" + std::string(term) + "' is not one of a=, n=, v=, o=, l=, c=, b=",
                             where, k_pin_hint);
  const std::string text(term.substr(2));
  if (text.empty())
    return preferences_error("apt.preferences_bad_pin", "release term '" + std::string(term) + "' has no value",
                             where, "give the term a value or remove it; apt ignores such a term");
  if (lower(term[0]) == 'v') return set_release_version(pin, text, where);
  std::optional<Pattern>* slot = nullptr;
  switch (lower(term[0])) {
    case 'o': slot = &pin.origin; break;
    case 'a': slot = &pin.archive; break;
    case 'n': slot = &pin.codename; break;
    case 'l': slot = &pin.label; break;
    case 'c': slot = &pin.component; break;
    case 'b': slot = &pin.architecture; break;
    default:
      return preferences_error("apt.preferences_bad_pin",
                               "unknown release term '" + std::string(term) + "' (a=, n=, v=, o=, l=, c=, b= are known)",
                               where, k_pin_hint);
  }
  auto p = pattern(text, where);
  if (!p) return std::move(p).error();
  *slot = std::move(*p);
  return ok_status();
}

// `Pin: release` with `*`, a bare archive, codename or version, or comma-separated key=value terms.
Status release_pin(AptPreferences::Pin& pin, std::string_view value, const std::string& where) {
  if (value.empty())
    return preferences_error("apt.preferences_bad_pin", "'Pin: release' without anything to match", where, k_pin_hint);
  if (value == "*") {
    pin.match_all = true;
    return ok_status();
  }
  if (value.find('=') == std::string_view::npos) {
    // A bare word: a release version when it starts with a digit, else an archive or codename.
    if (value.front() >= '0' && value.front() <= '9') return set_release_version(pin, std::string(value), where);
    auto p = pattern(std::string(value), where);
    if (!p) return std::move(p).error();
    pin.archive_or_codename = std::move(*p);
    return ok_status();
  }
  std::string_view rest = value;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view term = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (term.empty()) continue;
    if (auto st = add_release_term(pin, term, where); !st) return std::move(st).error();
  }
  if (!pin.release_version && !pin.origin && !pin.archive && !pin.codename && !pin.label && !pin.component &&
      !pin.architecture)
    return preferences_error("apt.preferences_bad_pin", "'Pin: release' without anything to match", where, k_pin_hint);
  return ok_status();
}

// Parses the part of a Pin line after its kind (apt's pkgVersionMatch constructor), refusing what apt would
// silently ignore.
Result<AptPreferences::Pin> compile_pin(AptPreferences::PinKind kind, std::string_view value, bool general,
                                        const std::string& where) {
  using Kind = AptPreferences::PinKind;
  AptPreferences::Pin pin;
  pin.kind = kind;
  Status st = kind == Kind::version  ? version_pin(pin, value, general, where)
              : kind == Kind::origin ? origin_pin(pin, value, where)
                                     : release_pin(pin, value, where);
  if (!st) return std::move(st).error();
  return pin;
}

// Pin-Priority: an integer in apt's range (a short), not 0; "never" for general records.
Result<int> parse_priority(std::string_view value, bool general, const std::string& where) {
  const std::string_view v = trim(value);
  if (v == "never") {
    if (general) return k_pin_never;
    return preferences_error("apt.preferences_bad_priority", "'Pin-Priority: never' is only allowed with 'Package: *'",
                             where, "give the named packages a negative priority (such as -1) to keep them out");
  }
  std::string_view digits = v;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  long long n = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  const bool integer = !digits.empty() && ec != std::errc::invalid_argument && ptr == digits.data() + digits.size();
  if (!integer)
    return preferences_error("apt.preferences_bad_priority", "Pin-Priority '" + std::string(v) + "' is not an integer",
                             where, "write a whole number such as 990, 500, 100 or -1");
  if (ec == std::errc::result_out_of_range || n < k_min_priority || n > k_max_priority)
    return preferences_error("apt.preferences_bad_priority",
                             "Pin-Priority " + std::string(v) + " is outside apt's range (-32768 to 32767)", where,
                             "priorities of 1000 and above already force a version; use a smaller number");
  if (n == 0)
    return preferences_error("apt.preferences_bad_priority", "Pin-Priority 0 is not allowed", where,
                             "apt rejects 0; use a positive priority, or a negative one to keep versions out");
  // apt keeps -32768 for `never` and silently raises a written -32768 to -32767.
  return static_cast<int>(std::max<long long>(n, k_min_priority + 1));
}

Result<AptPreferences::PackageWord> compile_word(std::string_view word, std::size_t record, const std::string& where) {
  AptPreferences::PackageWord w;
  w.record = record;
  std::string name(word);
  if (name.rfind("src:", 0) == 0) {
    w.source = true;
    name.erase(0, 4);
  }
  if (const std::size_t colon = name.rfind(':'); colon != std::string::npos) {
    w.arch = name.substr(colon + 1);
    name.erase(colon);
  }
  if (name.empty())
    return preferences_error("apt.preferences_bad_pin", "package word '" + std::string(word) + "' names no package",
                             where, "write 'name', 'name:arch', 'glob*', '/regex/' or 'src:name'");
  if (Pattern::is_regex(name) || name.find_first_of("*[?") != std::string::npos) {
    auto p = pattern(name, where);
    if (!p) return std::move(p).error();
    w.pattern = std::move(*p);
  }
  w.name = std::move(name);
  return w;
}

// One field of a preferences record while it is being read.
struct RawField {
  std::string_view name;
  std::string value;
  std::uint32_t line = 0;
};

// The Package, Pin and Pin-Priority fields of one record; each is there and not blank.
struct RecordFields {
  const RawField* package = nullptr;
  const RawField* pin = nullptr;
  const RawField* priority = nullptr;
};

// Finds the fields apt reads in a record; fails on one that appears twice or is missing or blank.
Result<RecordFields> record_fields(const std::vector<RawField>& fields, std::string_view origin) {
  const std::uint32_t first_line = fields.front().line;
  RecordFields out;
  for (const RawField& f : fields) {
    const RawField** slot = iequals(f.name, "Package")        ? &out.package
                            : iequals(f.name, "Pin")          ? &out.pin
                            : iequals(f.name, "Pin-Priority") ? &out.priority
                                                              : nullptr;
    if (slot == nullptr) continue;  // Explanation and fields apt does not read
    if (*slot != nullptr)
      return preferences_error("apt.preferences_syntax",
                               "field '" + std::string(f.name) + "' appears twice in the record starting at line " +
                                   std::to_string(first_line),
                               pref_line(origin, f.line), "a record has one Package, one Pin and one Pin-Priority");
    *slot = &f;
  }
  auto missing = [&](const char* name) {
    return preferences_error("apt.preferences_missing_field",
                             std::string("the record starting at line ") + std::to_string(first_line) + " has no " +
                                 name + " field",
                             pref_line(origin, first_line),
                             "a preferences record needs Package:, Pin: and Pin-Priority: (see apt_preferences(5))");
  };
  if (out.package == nullptr || trim(out.package->value).empty()) return missing("Package");
  if (out.pin == nullptr || trim(out.pin->value).empty()) return missing("Pin");
  if (out.priority == nullptr || trim(out.priority->value).empty()) return missing("Pin-Priority");
  return out;
}

// The kind word at the start of a Pin line.
Result<AptPreferences::PinKind> pin_kind(std::string_view kind_word, const std::string& pin_where) {
  if (iequals(kind_word, "version")) return AptPreferences::PinKind::version;
  if (iequals(kind_word, "release")) return AptPreferences::PinKind::release;
  if (iequals(kind_word, "origin")) return AptPreferences::PinKind::origin;
  return preferences_error("apt.preferences_bad_pin",
                           "unknown pin kind '" + std::string(kind_word) + "' (release, origin or version)", pin_where,
                           k_pin_hint);
}

// One record, compiled, before it joins the preferences.
struct CompiledRecord {
  AptPreferences::Record record;
  std::shared_ptr<const AptPreferences::Pin> pin;
  std::vector<std::shared_ptr<const AptPreferences::PackageWord>> words;
};

// Compiles the record of `fields` (not empty), which will be record number `index`; fails on missing or
// repeated fields, a bad pin, a bad priority or a bad package word, in that order.
Result<CompiledRecord> compile_record(const std::vector<RawField>& fields, std::size_t index, std::string_view origin) {
  auto found = record_fields(fields, origin);
  if (!found) return std::move(found).error();
  const RawField& package = *found->package;
  const RawField& pin = *found->pin;
  const RawField& priority = *found->priority;

  CompiledRecord out;
  AptPreferences::Record& record = out.record;
  record.where = pref_line(origin, fields.front().line);
  const std::string_view package_value = trim(package.value);
  const bool general = package_value == "*";
  if (!general)
    for (std::string_view w : value_words(package_value)) record.packages.emplace_back(w);

  const std::string pin_where = pref_line(origin, pin.line);
  const std::string_view pin_value = trim(pin.value);
  std::size_t kind_end = 0;
  while (kind_end < pin_value.size() && !is_space(pin_value[kind_end])) ++kind_end;
  auto kind = pin_kind(pin_value.substr(0, kind_end), pin_where);
  if (!kind) return std::move(kind).error();
  record.kind = *kind;
  record.value = std::string(trim(pin_value.substr(kind_end)));
  auto compiled = compile_pin(record.kind, record.value, general, pin_where);
  if (!compiled) return std::move(compiled).error();

  auto p = parse_priority(priority.value, general, pref_line(origin, priority.line));
  if (!p) return std::move(p).error();
  record.priority = *p;

  for (const std::string& w : record.packages) {
    auto word = compile_word(w, index, pref_line(origin, package.line));
    if (!word) return std::move(word).error();
    out.words.push_back(std::make_shared<const AptPreferences::PackageWord>(std::move(*word)));
  }
  out.pin = std::make_shared<const AptPreferences::Pin>(std::move(*compiled));
  return out;
}

// Splits a preferences line into a field; fails on a line that is not 'Name: value'.
Result<RawField> parse_field_line(std::string_view line, std::uint32_t line_no, std::string_view origin) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0 ||
      std::any_of(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(colon), [](char c) { return is_space(c); }))
    return preferences_error("apt.preferences_syntax",
                             "line '" + std::string(line.substr(0, 60)) + "' is not a 'Name: value' field",
                             pref_line(origin, line_no),
                             "preferences files hold records of Package:, Pin: and Pin-Priority: lines separated by "
                             "blank lines; '#' starts a comment line");
  return RawField{line.substr(0, colon), std::string(trim(line.substr(colon + 1))), line_no};
}

}  // namespace

int default_priority(const ReleaseInfo& release) {
  // apt 2.6 tests ButAutomaticUpgrades first, so it gives 100 even without NotAutomatic.
  if (release.but_automatic_upgrades) return 100;
  return release.not_automatic ? 1 : 500;
}

std::string uri_site(std::string_view uri) {
  const std::size_t scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return {};  // file:/path, copy:/path, cdrom:[label]/
  const std::string_view scheme = uri.substr(0, scheme_end);
  if (iequals(scheme, "file") || iequals(scheme, "copy") || iequals(scheme, "cdrom")) return {};
  std::string_view rest = uri.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find('/'));
  if (const std::size_t at_sign = rest.rfind('@'); at_sign != std::string_view::npos) rest.remove_prefix(at_sign + 1);
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
    const std::size_t close = rest.find(']');
    return std::string(rest.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  return std::string(rest.substr(0, rest.find(':')));
}

void AptPreferences::index_word(std::size_t word) {
  const PackageWord& w = *m_words[word];
  if (w.pattern) m_patterns.push_back(word);
  else (w.source ? m_by_source : m_by_name)[w.name].push_back(word);
}

void AptPreferences::append(AptPreferences later) {
  const std::size_t record_base = m_records.size();
  const std::size_t word_base = m_words.size();
  for (auto& r : later.m_records) m_records.push_back(std::move(r));
  for (auto& p : later.m_pins) m_pins.push_back(std::move(p));
  for (auto& w : later.m_words) {
    auto moved = std::make_shared<PackageWord>(*w);
    moved->record += record_base;
    m_words.push_back(std::move(moved));
  }
  for (std::size_t i = word_base; i < m_words.size(); ++i) index_word(i);
}

int AptPreferences::file_priority(const ReleaseInfo& release) const {
  int priority = default_priority(release);
  bool fixed = false;
  for (std::size_t i = 0; i < m_records.size(); ++i) {
    const Record& r = m_records[i];
    if (!r.packages.empty()) continue;
    if (priority == k_pin_never) break;
    if ((fixed && r.priority != k_pin_never) || !m_pins[i]->matches(release)) continue;
    priority = r.priority;
    fixed = true;
  }
  return priority;
}

std::optional<int> AptPreferences::specific_priority(const PinVersion& version, std::string_view native_arch) const {
  if (m_words.empty()) return std::nullopt;
  const std::string_view source = source_name(version);
  std::vector<std::size_t> words;
  if (const auto it = m_by_name.find(version.name); it != m_by_name.end())
    words.insert(words.end(), it->second.begin(), it->second.end());
  if (const auto it = m_by_source.find(source); it != m_by_source.end())
    words.insert(words.end(), it->second.begin(), it->second.end());
  if (!m_patterns.empty()) {
    const std::string name(version.name);
    const std::string src(source);
    for (std::size_t i : m_patterns)
      if (m_words[i]->pattern->matches(m_words[i]->source ? src : name)) words.push_back(i);
  }
  if (words.empty()) return std::nullopt;
  std::sort(words.begin(), words.end());
  // apt files Architecture: all packages under the native architecture.
  const std::string_view arch = version.architecture == "all" ? native_arch : version.architecture;
  for (std::size_t i : words) {
    const PackageWord& w = *m_words[i];
    const std::string_view wanted = w.arch.empty() ? native_arch : std::string_view(w.arch);
    if (!arch_matches(wanted, arch)) continue;
    if (m_pins[w.record]->matches(version)) return m_records[w.record].priority;
  }
  return std::nullopt;
}

int AptPreferences::priority(const PinVersion& version, std::span<const int> file_priorities,
                             std::string_view native_arch) const {
  const bool only_never = std::all_of(file_priorities.begin(), file_priorities.end(),
                                      [](int p) { return p == k_pin_never; });
  if (!only_never)
    if (auto specific = specific_priority(version, native_arch)) return *specific;
  if (file_priorities.empty()) return 0;
  return *std::max_element(file_priorities.begin(), file_priorities.end());
}

int AptPreferences::priority(const PinVersion& version, std::string_view native_arch) const {
  std::vector<int> files;
  files.reserve(version.releases.size());
  for (const ReleaseInfo* r : version.releases) files.push_back(r != nullptr ? file_priority(*r) : 500);
  return priority(version, files, native_arch);
}

Result<AptPreferences> parse_apt_preferences(std::string_view text, std::string_view origin) {
  AptPreferences out;
  std::vector<RawField> fields;

  auto finish = [&]() -> Status {
    if (fields.empty()) return ok_status();
    auto compiled = compile_record(fields, out.m_records.size(), origin);
    if (!compiled) return std::move(compiled).error();
    out.m_records.push_back(std::move(compiled->record));
    out.m_pins.push_back(std::move(compiled->pin));
    for (auto& w : compiled->words) {
      out.m_words.push_back(std::move(w));
      out.index_word(out.m_words.size() - 1);
    }
    fields.clear();
    return ok_status();
  };

  std::uint32_t line_no = 0;
  std::string_view rest = text;
  if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);
  while (!rest.empty()) {
    ++line_no;
    const std::size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (trim(line).empty()) {
      if (auto st = finish(); !st) return std::move(st).error();
      continue;
    }
    if (line.front() == '#') continue;
    if (is_space(line.front())) {
      if (fields.empty())
        return preferences_error("apt.preferences_syntax",
                                 "continuation line '" + std::string(trim(line)) + "' has no field to continue",
                                 pref_line(origin, line_no), "start the record with a 'Name: value' line");
      fields.back().value += "\n" + std::string(trim(line));
      continue;
    }
    auto field = parse_field_line(line, line_no, origin);
    if (!field) return std::move(field).error();
    fields.push_back(std::move(*field));
  }
  if (auto st = finish(); !st) return std::move(st).error();
  return out;
}

}  // namespace gpuenv::packages
