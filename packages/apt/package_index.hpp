#pragma once
// Binary package indexes (the Packages files of apt repositories) and the relation syntax of their Depends-like
// fields.
//
// Lifetime rule: a PackageIndex owns the text of every Packages file given to add(); the string_views of a
// BinaryPackage point into that text and stay valid for as long as the index lives (moving the index keeps them
// valid, copying is not allowed).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "packages/apt/apt_preferences.hpp"
#include "packages/apt/debian_version.hpp"
#include "base/error.hpp"

namespace gpuenv::packages {

/// One alternative of a relation field: `name[:qualifier] [(op version)]`.
struct Relation {
  std::string name;
  std::string arch_qualifier;  ///< "", "any", "native", or an architecture
  std::string op;              ///< "", "<<", "<=", "=", ">=", ">>" (the obsolete "<" and ">" read as "<=", ">=")
  std::optional<DebianVersion> version;  ///< set exactly when `op` is not empty
};

/// Alternatives separated by '|': satisfied when any one of them is.
using OrGroup = std::vector<Relation>;

/// What architecture restriction lists (`[amd64 !i386]`) and build profiles (`<!nocheck>`) are evaluated against.
struct RelationContext {
  std::string host_arch = "amd64";
  std::vector<std::string> profiles;  ///< active build profiles; none for binary packages
};

/// Parses a Depends/Pre-Depends/Conflicts/Breaks/Provides/Replaces value into its comma-separated groups.
/// Architecture restriction lists and build profiles are parsed and ignored (every alternative is kept); they
/// never appear in Packages files, where dpkg has already evaluated them. A trailing comma is allowed. Fails
/// (ErrorKind::environment, `apt.relation_syntax`, where `origin`) on a missing name, an unknown operator, an
/// unclosed bracket, a bad version or text after an alternative.
Result<std::vector<OrGroup>> parse_relations(std::string_view field, std::string_view origin);

/// As above, but evaluates restrictions the way dpkg does for `context`: an alternative whose architecture list
/// does not match `context.host_arch`, or whose build-profile formula is false for `context.profiles`, is
/// dropped, and a group left without alternatives is dropped. Fails like the two-argument overload, and on an
/// architecture list mixing negated and plain entries.
Result<std::vector<OrGroup>> parse_relations(std::string_view field, std::string_view origin,
                                             const RelationContext& context);

/// True when the Debian architecture `arch` ("amd64", "kfreebsd-amd64") matches `pattern` ("amd64", "any",
/// "linux-any", "any-amd64"), as dpkg-architecture --is does for the common wildcards.
bool arch_matches(std::string_view pattern, std::string_view arch);

/// "name:qualifier (op version)", the way the relation is written in a control file.
std::string to_string(const Relation& relation);
/// The alternatives joined by " | ".
std::string to_string(const OrGroup& group);

/// One apt repository (a suite and component of a URI) that a Packages file came from.
struct RepositoryRef {
  std::string uri;
  std::string suite;  ///< as the sources entry names it ("bookworm", "./")
  std::string component;
  std::string where;  ///< where its Packages text came from, used in error messages ("file" or URL)
  // What apt preferences match (apt_preferences.hpp), from the repository's Release file; empty when absent.
  std::string archive{};   ///< `a=`: the Release's Suite ("stable"), not the sources entry's suite
  std::string codename{};  ///< `n=`: the Release's Codename
  std::string version{};   ///< `v=`: the Release's Version ("12.5")
  std::string origin{};    ///< `o=`: the Release's Origin
  std::string label{};     ///< `l=`: the Release's Label
  std::string architecture{};            ///< `b=`: the Packages file's architecture; "" for a flat repository
  bool not_automatic = false;            ///< the Release says `NotAutomatic: yes` (priority 1)
  bool but_automatic_upgrades = false;   ///< the Release says `ButAutomaticUpgrades: yes` (priority 100)
};

/// One stanza of a Packages file. The views point into text owned by the PackageIndex; absent fields are empty.
struct BinaryPackage {
  std::string_view name;
  DebianVersion version;
  std::string_view architecture, multi_arch, priority, source, filename, sha256;
  bool essential = false;                                                        ///< `Essential: yes`
  std::uint64_t size = 0;                                                        ///< Size: of the .deb in bytes
  std::uint64_t installed_size = 0;                                              ///< Installed-Size: in KiB, as written
  std::string_view depends, pre_depends, provides, conflicts, breaks, replaces;  ///< unparsed field values
  std::size_t repository = 0;  ///< index into PackageIndex::repositories()
  std::uint32_t line = 0;      ///< 1-based line of the stanza in its Packages text
};

/// A package providing a virtual name, with the version it provides (`Provides: name (= version)`), if any.
struct Provision {
  const BinaryPackage* package = nullptr;
  std::optional<DebianVersion> version;
};

/// The binary packages of one or more Packages files, looked up by name and by provided virtual name.
///
/// Versions of a name are kept newest first (dpkg order); equal versions from several repositories stay in
/// repository order. Architectures are not told apart: index one architecture plus "all".
///
/// Each version has apt's priority (apt_preferences.hpp): its repository's default (500, or 1 and 100 for
/// NotAutomatic repositories) changed by the preferences given to set_preferences(). The candidate of each name
/// is computed when packages are added and when preferences are set, so candidate() is a lookup.
class PackageIndex {
 public:
  PackageIndex() = default;
  PackageIndex(const PackageIndex&) = delete;
  PackageIndex& operator=(const PackageIndex&) = delete;
  PackageIndex(PackageIndex&&) noexcept = default;
  PackageIndex& operator=(PackageIndex&&) noexcept = default;
  ~PackageIndex() = default;

  /// Adds the stanzas of one Packages file whose Architecture is in `architectures` (typically {"amd64", "all"}),
  /// taking ownership of the text; Provides is parsed now, the other relation fields when asked. Nothing is added
  /// when it fails (ErrorKind::environment, where "repo.where:line"): deb822 syntax errors, a stanza without
  /// Package, Version or Architecture (`apt.packages_missing_field`), a bad Version, Size or Installed-Size
  /// (`apt.packages_bad_field`), a Provides that is not a list of names with optional `(= version)`
  /// (`apt.relation_syntax`).
  Status add(std::string packages_text, RepositoryRef repo, const std::vector<std::string>& architectures);

  /// Every indexed version of the package `name`, newest first; empty when there is none.
  [[nodiscard]] std::span<const BinaryPackage* const> versions(std::string_view name) const;
  /// Packages whose Provides names `virtual_name`, sorted by name, then newest first; empty when none.
  [[nodiscard]] std::span<const BinaryPackage* const> providers(std::string_view virtual_name) const;
  /// The same providers as providers(), in the same order, each with the version it provides.
  [[nodiscard]] std::span<const Provision> provisions(std::string_view virtual_name) const;
  /// What apt would install on an empty system: the version with the highest priority above 0, the highest
  /// version among equal priorities; of identical instances of that version in several repositories, the first
  /// from a repository with the highest priority. nullptr when the name has no real package or every version's
  /// priority is 0 or below.
  [[nodiscard]] const BinaryPackage* candidate(std::string_view name) const;
  /// apt's priority of a version of this index (identical instances share the highest); 0 for a package that
  /// is not from this index.
  [[nodiscard]] int priority(const BinaryPackage& package) const;
  /// Applies apt preferences to every version, now and in later add() calls; `native_arch` is what package
  /// words without `:arch` match (packages of Architecture all count as native). Replaces earlier preferences.
  void set_preferences(AptPreferences preferences, std::string native_arch = "amd64");
  /// The preferences in force (none unless set_preferences() was called).
  [[nodiscard]] const AptPreferences& preferences() const { return m_preferences; }
  /// The names of all real packages, sorted.
  [[nodiscard]] std::vector<std::string_view> names() const;
  /// Number of indexed stanzas.
  [[nodiscard]] std::size_t size() const { return m_packages.size(); }
  /// The repositories in the order they were added.
  [[nodiscard]] const std::vector<RepositoryRef>& repositories() const { return m_repositories; }
  /// "where:line" of a package's stanza, for error messages.
  [[nodiscard]] std::string where(const BinaryPackage& package) const;

 private:
  struct NameEntry {
    std::vector<const BinaryPackage*> versions;
    std::vector<const BinaryPackage*> providers;
    std::vector<Provision> provisions;
    const BinaryPackage* candidate = nullptr;
    std::uint64_t generation = 0;  // the add() call that last touched its versions
  };

  // The priority of versions[i] (shared with its identical instances) and, through `instance`, the instance to
  // install: the first one from a repository with the highest priority.
  int version_priority(std::span<const BinaryPackage* const> versions, std::size_t i,
                       const BinaryPackage** instance) const;
  void update_candidate(NameEntry& entry) const;
  void update_repository(std::size_t repo);

  std::vector<std::unique_ptr<const std::string>> m_texts;  // heap-held so views survive moves
  std::deque<BinaryPackage> m_packages;                     // a deque keeps element addresses stable
  std::unordered_map<std::string_view, NameEntry> m_names;  // keys view m_texts
  std::vector<RepositoryRef> m_repositories;
  std::vector<ReleaseInfo> m_releases;     // per repository: what pins match
  std::vector<int> m_file_priorities;      // per repository: priority before specific pins
  AptPreferences m_preferences;
  std::string m_native_arch = "amd64";
  std::uint64_t m_generation = 0;
};

}  // namespace gpuenv::packages
