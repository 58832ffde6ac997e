#pragma once
// PEP 440 versions and specifiers with the semantics of the `packaging` library (packaging.version.Version,
// packaging.specifiers.Specifier/SpecifierSet), checked line by line against an oracle corpus that
// scripts/gen_pep440_corpus.py records from packaging itself.
//
// Numbers are kept as canonical decimal strings (no leading zeros), so arbitrarily long components compare
// exactly as Python's integers do. Only ASCII is recognised as whitespace or letters.
#include <compare>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::packages {

/// Pre-release kinds in their normalized spelling; the order is the PEP 440 order (a < b < rc).
enum class PreKind { a, b, rc };

/// Pre-release segment: kind and number ("rc1" is {rc, "1"}).
struct PreRelease {
  PreKind kind = PreKind::a;
  std::string number = "0";
  friend bool operator==(const PreRelease&, const PreRelease&) = default;
};

/// One dot-separated part of a local version label: numeric parts compare as numbers, others as lowercase text.
struct LocalPart {
  bool numeric = false;
  std::string text;  ///< canonical digits when numeric, lowercase text otherwise
  friend bool operator==(const LocalPart&, const LocalPart&) = default;
};

/// A PEP 440 version, normalized as packaging does ("1.0-alpha1" is 1.0a1, "1.0.post" is 1.0.post0).
class Pep440Version {
 public:
  Pep440Version() = default;  ///< the version 0
  /// Parses any spelling packaging.version.Version accepts; fails with `pep440.syntax` otherwise.
  static Result<Pep440Version> parse(std::string_view text);

  /// Normalized form, as str(Version(...)).
  [[nodiscard]] std::string str() const;
  /// Normalized form without the local label (Version.public).
  [[nodiscard]] std::string public_str() const;
  /// Epoch and release only (Version.base_version).
  [[nodiscard]] std::string base_str() const;
  /// packaging.utils.canonicalize_version: like str() but trailing ".0" release parts removed when asked.
  [[nodiscard]] std::string canonical_str(bool strip_trailing_zero = true) const;

  [[nodiscard]] const std::string& epoch() const { return m_epoch; }
  [[nodiscard]] const std::vector<std::string>& release() const { return m_release; }
  [[nodiscard]] const std::optional<PreRelease>& pre() const { return m_pre; }
  [[nodiscard]] const std::optional<std::string>& post() const { return m_post; }
  [[nodiscard]] const std::optional<std::string>& dev() const { return m_dev; }
  [[nodiscard]] const std::vector<LocalPart>& local_parts() const { return m_local; }
  /// The local label joined with dots ("ubuntu.1"), empty when there is none.
  [[nodiscard]] std::string local() const;
  [[nodiscard]] bool has_local() const { return !m_local.empty(); }

  /// True for dev releases and pre-releases (Version.is_prerelease).
  [[nodiscard]] bool is_prerelease() const { return m_dev.has_value() || m_pre.has_value(); }
  [[nodiscard]] bool is_postrelease() const { return m_post.has_value(); }
  [[nodiscard]] bool is_devrelease() const { return m_dev.has_value(); }

  /// This version without its local label.
  [[nodiscard]] Pep440Version public_version() const;
  /// Epoch and release only.
  [[nodiscard]] Pep440Version base_version() const;

  /// PEP 440 total order, equal to comparing packaging's _cmpkey (so 1.0 == 1.0.0, 1.0+a.01 == 1.0+A-1).
  friend std::strong_ordering operator<=>(const Pep440Version& a, const Pep440Version& b);
  friend bool operator==(const Pep440Version& a, const Pep440Version& b) { return (a <=> b) == 0; }

 private:
  std::string m_epoch = "0";
  std::vector<std::string> m_release{"0"};
  std::optional<PreRelease> m_pre;
  std::optional<std::string> m_post;
  std::optional<std::string> m_dev;
  std::vector<LocalPart> m_local;
};

/// Comparison operator of one specifier clause.
enum class SpecOp { compatible, equal, not_equal, less_equal, greater_equal, less, greater, arbitrary };

/// One clause such as ">=1.0", "==1.2.*", "~=2.2", "===foo" (packaging.specifiers.Specifier).
class Pep440Specifier {
 public:
  /// Parses one clause with packaging's grammar (local versions only with ==/!=, wildcards only with ==/!=,
  /// ~= needs two release parts); fails with `pep440.specifier_syntax`.
  static Result<Pep440Specifier> parse(std::string_view text);

  [[nodiscard]] SpecOp op() const { return m_op; }
  /// Operator as written ("~=", "==", ...).
  [[nodiscard]] std::string_view op_str() const;
  /// The version text after the operator, trimmed but not normalized ("1.2.*", "v1.0-alpha1").
  [[nodiscard]] const std::string& version_text() const { return m_version; }
  /// Operator followed by the version text, as str(Specifier(...)).
  [[nodiscard]] std::string str() const;
  /// Whether the clause admits pre-releases by itself (Specifier.prereleases): true when the operator is one of
  /// ==, >=, <=, ~=, === and its version is a pre-release. An === clause whose text is no PEP 440 version
  /// (packaging raises there) counts as not a pre-release.
  [[nodiscard]] bool prereleases() const;
  /// Specifier.contains: pre-releases are rejected unless `prereleases` (or, when absent, prereleases()) says
  /// otherwise; then the operator decides, including packaging's rules for < and > around pre-, post- and local
  /// releases of the boundary and its string algorithm for wildcards.
  [[nodiscard]] bool contains(const Pep440Version& version, std::optional<bool> prereleases = std::nullopt) const;

 private:
  SpecOp m_op = SpecOp::equal;
  std::string m_version;
  bool m_wildcard = false;
  std::optional<Pep440Version> m_parsed;  // the version (without ".*"), absent only for === on non-PEP 440 text
};

/// A comma-separated conjunction of clauses ("" matches every final release), as packaging's SpecifierSet.
class Pep440SpecifierSet {
 public:
  Pep440SpecifierSet() = default;
  /// Splits on commas, ignores empty pieces and parses each clause; the error names the offending clause.
  static Result<Pep440SpecifierSet> parse(std::string_view text);

  [[nodiscard]] const std::vector<Pep440Specifier>& specifiers() const { return m_specs; }
  [[nodiscard]] bool empty() const { return m_specs.empty(); }
  /// Clauses sorted and joined with commas, duplicates (equal after canonicalization) dropped, as packaging prints.
  [[nodiscard]] std::string str() const;
  /// True when any clause admits pre-releases by itself; nullopt for an empty set (SpecifierSet.prereleases).
  [[nodiscard]] std::optional<bool> prereleases() const;
  /// SpecifierSet.contains(version, prereleases): pre-releases are rejected unless allowed explicitly or by a
  /// clause; then every clause must contain the version.
  [[nodiscard]] bool contains(const Pep440Version& version, std::optional<bool> prereleases = std::nullopt) const;

 private:
  std::vector<Pep440Specifier> m_specs;
};

/// Length of the clause that packaging's unanchored specifier regex (the PEP 508 tokenizer's SPECIFIER token)
/// matches at `pos` of `source`, or 0 when no clause starts there.
std::size_t match_specifier_prefix(std::string_view source, std::size_t pos);

}  // namespace gpuenv::packages
