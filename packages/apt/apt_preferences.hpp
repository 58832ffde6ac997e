#pragma once
// apt preferences (apt_preferences(5)): the records of /etc/apt/preferences and preferences.d, and the priority
// apt 2.6 gives each package version from them, for a system with nothing installed.
//
// The rules, as apt's policy code applies them (the manual page says "maximum" for general records; apt takes
// the first):
// - A Packages file's priority is 500; 1 when its Release says `NotAutomatic: yes`; 100 when it says
//   `ButAutomaticUpgrades: yes` (apt 2.6 gives 100 for ButAutomaticUpgrades even without NotAutomatic, although
//   the manual page describes only the pair). Then the FIRST general record (`Package: *`) whose pin matches the
//   file replaces it; a general `Pin-Priority: never` replaces even that.
// - A version's priority is that of the first specific record (named packages, globs, /regex/, `src:` names)
//   whose pin matches it, unless every file that lists it is pinned `never`; otherwise the highest priority of
//   the files listing it (identical instances of one version in several repositories are one version to apt).
// - The candidate for a fresh install is the version with the highest priority above 0; among equal priorities
//   the highest version.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::packages {

/// `Pin-Priority: never` (only for `Package: *`): the files it matches are never used, whatever else pins them.
inline constexpr int k_pin_never = -32768;

/// What pins see of one Packages file: its Release file's fields and where it was fetched from. An empty field
/// counts as absent (a pin on it never matches), except `component` and `site`, which are always present.
struct ReleaseInfo {
  std::string archive;       ///< `a=`: the Release's Suite (or Archive), e.g. "stable"
  std::string codename;      ///< `n=`: the Release's Codename
  std::string version;       ///< `v=`: the Release's Version, e.g. "12.5"
  std::string origin;        ///< `o=`: the Release's Origin
  std::string label;         ///< `l=`: the Release's Label
  std::string component;     ///< `c=`: the Packages file's component; "" for a flat repository
  std::string architecture;  ///< `b=`: the Packages file's architecture; "" (absent) for a flat repository
  std::string site;          ///< `Pin: origin`: the host of the repository's URI, "" for file: URIs
  bool not_automatic = false;           ///< `NotAutomatic: yes`
  bool but_automatic_upgrades = false;  ///< `ButAutomaticUpgrades: yes`
};

/// apt's priority for a file before preferences: 500, 1 (NotAutomatic), 100 (ButAutomaticUpgrades, with or
/// without NotAutomatic).
int default_priority(const ReleaseInfo& release);

/// The host apt matches `Pin: origin` against for a repository URI: "example.com" for
/// "https://user@example.com:8080/debian/", "" for file:, copy: and cdrom: URIs.
std::string uri_site(std::string_view uri);

/// One version of a package as specific records see it.
struct PinVersion {
  std::string_view name;          ///< binary package name
  std::string_view version;       ///< as written in the Packages file, epoch included
  std::string_view architecture;  ///< "all" counts as the native architecture, as apt files it
  std::string_view source;        ///< the Source field ("name" or "name (version)"); "" means the package's name
  std::span<const ReleaseInfo* const> releases;  ///< every Packages file that lists this version
};

/// The records of one or more preferences files in the order apt reads them, with their patterns compiled.
/// Copies share the compiled regular expressions (they are never modified).
class AptPreferences {
 public:
  /// What a `Pin:` line matches.
  enum class PinKind { version, release, origin };

  /// A compiled glob or /regex/ (apt's ExpressionMatches); defined in apt_preferences.cpp.
  struct Pattern;
  /// One package word of a record's Package field: `name`, `glob*`, `/regex/`, `src:name`, each with an
  /// optional `:arch` (`:any` for all architectures; the native one when absent); defined in apt_preferences.cpp.
  struct PackageWord;
  /// One compiled pin (apt's pkgVersionMatch); defined in apt_preferences.cpp.
  struct Pin;

  /// One record.
  struct Record {
    std::vector<std::string> packages;  ///< the Package field's words as written; empty for `Package: *`
    PinKind kind = PinKind::release;
    std::string value;  ///< what follows the kind on the Pin line: "a=stable, n=bookworm", "1.2*", "\"example.com\""
    int priority = 0;   ///< -32767 to 32767, never 0, or k_pin_never
    std::string where;  ///< "origin:line" of the record
  };

  /// The records in the order apt applies them.
  [[nodiscard]] const std::vector<Record>& records() const { return m_records; }
  /// True when there is no record: every version has its file's default priority.
  [[nodiscard]] bool empty() const { return m_records.empty(); }
  /// True when some record names packages (so versions may differ from their files' priorities).
  [[nodiscard]] bool has_specific() const { return !m_words.empty(); }
  /// Appends the records of `later` (a file apt reads after these).
  void append(AptPreferences later);

  /// The priority of the versions of a Packages file before specific records: the first general record whose
  /// pin matches (a `never` one even after another), else default_priority().
  [[nodiscard]] int file_priority(const ReleaseInfo& release) const;
  /// The priority of the first specific record that matches `version`, or nothing.
  [[nodiscard]] std::optional<int> specific_priority(const PinVersion& version,
                                                     std::string_view native_arch = "amd64") const;
  /// apt's priority of `version` given the file_priority() of each file in `version.releases` (same order).
  [[nodiscard]] int priority(const PinVersion& version, std::span<const int> file_priorities,
                             std::string_view native_arch = "amd64") const;
  /// As above, computing the file priorities.
  [[nodiscard]] int priority(const PinVersion& version, std::string_view native_arch = "amd64") const;

 private:
  friend Result<AptPreferences> parse_apt_preferences(std::string_view text, std::string_view origin);

  std::vector<Record> m_records;
  std::vector<std::shared_ptr<const Pin>> m_pins;  // one per record
  // Specific records, one entry per package word, in record order.
  std::vector<std::shared_ptr<const PackageWord>> m_words;
  // Exact binary or source names to the indexes of their entries in m_words, and the pattern entries.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  using NameMap = std::unordered_map<std::string, std::vector<std::size_t>, NameHash, std::equal_to<>>;
  NameMap m_by_name;
  NameMap m_by_source;
  std::vector<std::size_t> m_patterns;

  void index_word(std::size_t word);
};

/// Parses a preferences file: stanzas of `Package:` (space-separated names, globs, /regex/, `src:` names, each
/// with an optional `:arch`; `*` alone for a general record), `Pin:` (`release` with comma-separated
/// a=, n=, v=, o=, l=, c=, b= terms or a bare archive, codename or version; `origin` and a host, quoted or not;
/// `version` and a version, `*` at the end for a prefix), `Pin-Priority:` (an integer from -32768 to 32767 other
/// than 0, or `never` for a general record) and any number of `Explanation:` lines; `#` starts a comment line;
/// other fields are ignored, as apt ignores them. Fails (ErrorKind::environment, where "origin:line") with
/// `apt.preferences_syntax` on a line that is not a field, `apt.preferences_missing_field` on a record without
/// Package, Pin or Pin-Priority, `apt.preferences_bad_priority`, `apt.preferences_bad_pin` on an unknown pin kind,
/// an unknown or empty release term or a version pin in a general record, and `apt.preferences_bad_regex`.
/// apt only warns about an unknown pin kind and skips a record without Pin; gpuenv refuses both.
Result<AptPreferences> parse_apt_preferences(std::string_view text, std::string_view origin);

}  // namespace gpuenv::packages
