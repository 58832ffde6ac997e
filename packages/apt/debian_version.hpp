#pragma once
// Debian package versions ([epoch:]upstream[-revision]) parsed and ordered exactly as dpkg does it.
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.hpp"

namespace gpuenv::packages {

/// A Debian version `[epoch:]upstream_version[-debian_revision]`, split the way dpkg's parseversion() splits it:
/// the epoch is the number before the first ':', the revision is what follows the last '-'.
///
/// Acceptance follows `dpkg --compare-versions`: what dpkg reports as an *error* is rejected (empty text,
/// embedded blanks, a bad, negative or too large epoch, nothing after the colon, an empty upstream part,
/// an empty revision); what dpkg only *warns* about (upstream not starting with a digit, characters outside
/// Debian policy such as '_') is accepted, because dpkg still compares such versions, and is reported by
/// policy_warning(). Unlike `dpkg --compare-versions`, an empty argument is an error, not "no version".
class DebianVersion {
 public:
  DebianVersion() = default;
  /// Parses a version; leading and trailing blanks are ignored as dpkg ignores them. Fails (ErrorKind::spec,
  /// id `debian_version.syntax`) on everything dpkg rejects with an error; the message says which rule.
  static Result<DebianVersion> parse(std::string_view text);

  /// The epoch, 0 when absent (0 to 2147483647, as dpkg allows).
  [[nodiscard]] std::uint32_t epoch() const { return m_epoch; }
  /// The upstream part: between the epoch's colon and the last hyphen; never empty.
  [[nodiscard]] const std::string& upstream() const { return m_upstream; }
  /// The Debian revision after the last hyphen; empty when the version has no hyphen.
  [[nodiscard]] const std::string& revision() const { return m_revision; }
  /// The version as written (blanks trimmed): "1:2.36-9+deb12u4".
  [[nodiscard]] const std::string& str() const { return m_text; }
  /// What dpkg would warn about (first problem only), or nothing for a policy-conforming version.
  [[nodiscard]] std::optional<std::string> policy_warning() const;

  /// dpkg order; equal versions may be spelt differently ("1.0" and "0:1.00"), hence weak ordering.
  friend std::weak_ordering operator<=>(const DebianVersion& a, const DebianVersion& b);
  /// Equal in dpkg's order (not textual equality).
  friend bool operator==(const DebianVersion& a, const DebianVersion& b);

 private:
  std::uint32_t m_epoch = 0;
  std::string m_upstream;
  std::string m_revision;
  std::string m_text;
};

/// Compares as `dpkg --compare-versions` does: epochs numerically, then upstream, then revision, each with
/// dpkg's rule ('~' before everything, even the end; then the end; letters; then other characters;
/// digit runs numerically). Returns exactly -1, 0 or 1.
int compare_debian_versions(const DebianVersion& a, const DebianVersion& b);

/// True when `v op ref` holds for a relation operator of a Depends field: `<<`, `<=`, `=`, `>=`, `>>`, and the
/// obsolete `<` and `>` which mean `<=` and `>=` as dpkg and apt read them. An unknown operator gives false.
bool satisfies(const DebianVersion& v, std::string_view op, const DebianVersion& ref);

}  // namespace gpuenv::packages
