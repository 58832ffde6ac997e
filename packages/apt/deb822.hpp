#pragma once
// deb822 control-file stanzas (Packages, Release, InRelease bodies, .sources files) and Release files.
//
// Lifetime rule: parse_deb822() does not copy the text. Every Field name and value is a string_view into the
// `text` argument, so that text must stay alive and unchanged for as long as the stanzas are used. The one
// exception is a value interrupted by '#' comment lines (only seen in .sources files): the parser joins its
// pieces into a string owned by the Stanza, which copies and moves keep valid.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.hpp"
#include "base/error.hpp"

namespace gpuenv::packages {

/// One `Name: value` field. `value` has the blanks after the colon and at the very end removed; a multi-line
/// value keeps its line breaks and each continuation line's leading blank ("line one\n line two\n .").
struct Field {
  std::string_view name;
  std::string_view value;
  std::uint32_t line = 0;  ///< 1-based line of the field name
};

/// A paragraph of fields in file order, with case-insensitive lookup (field names are case-insensitive).
class Stanza {
 public:
  /// 1-based line of the stanza's first field, for error messages.
  [[nodiscard]] std::uint32_t line() const { return m_line; }
  /// Every field in file order.
  [[nodiscard]] std::span<const Field> fields() const { return m_fields; }
  /// The field called `name` (any case), or nullptr.
  [[nodiscard]] const Field* field(std::string_view name) const;
  /// The value of `name` (any case), or nothing when the field is absent.
  [[nodiscard]] std::optional<std::string_view> find(std::string_view name) const;
  /// The value of `name` (any case), or "" when the field is absent.
  [[nodiscard]] std::string_view get(std::string_view name) const;
  /// True when the stanza has a field called `name` (any case).
  [[nodiscard]] bool has(std::string_view name) const { return field(name) != nullptr; }

 private:
  friend class Deb822Parser;
  std::uint32_t m_line = 0;
  std::vector<Field> m_fields;
  std::vector<std::shared_ptr<const std::string>> m_owned;  // values joined around comment lines
};

/// Splits `text` into stanzas separated by blank (or blank-only) lines. Lines starting with '#' are comments and
/// are skipped anywhere; lines starting with a space or tab continue the previous field; CR before LF is
/// ignored. Fails (ErrorKind::environment) with `deb822.syntax` on a line that is neither (no colon, bad field
/// name, continuation without a field) and with `deb822.duplicate_field` on a repeated field; `where` is
/// "origin:line". See the lifetime rule at the top of this header.
Result<std::vector<Stanza>> parse_deb822(std::string_view text, std::string_view origin);

/// The lines of a multi-line value with their surrounding blanks removed, empty lines dropped
/// ("a\n b\n\n c" -> {"a", "b", "c"}); the views point where `value` points.
std::vector<std::string_view> value_lines(std::string_view value);

/// The words of a value separated by blanks and line breaks ("amd64 arm64" -> {"amd64", "arm64"}).
std::vector<std::string_view> value_words(std::string_view value);

/// If `text` is an OpenPGP clear-signed message (an InRelease file), its signed body with dash-escaping
/// undone; otherwise `text` unchanged. The signature is NOT checked here. Fails (ErrorKind::environment,
/// `release.bad_clearsign`) on a clear-signed message without its signature block.
Result<std::string> clearsigned_body(std::string_view text, std::string_view origin);

/// One line of a Release file's SHA256 list.
struct ReleaseEntry {
  Digest sha256;
  std::uint64_t size = 0;
  std::string path;  ///< relative to the suite's directory, e.g. "main/binary-amd64/Packages.xz"
};

/// What gpuenv uses from a Release or InRelease file.
struct ReleaseFile {
  std::string origin;
  std::string label;
  std::string suite;
  std::string codename;
  std::string version;      ///< Version, e.g. "12.5"; empty when absent
  std::string date;         ///< as written, e.g. "Sat, 09 Nov 2024 10:05:58 UTC"
  std::string valid_until;  ///< as written; empty when absent
  std::optional<std::int64_t> date_unix;         ///< Date in seconds since 1970 (UTC)
  std::optional<std::int64_t> valid_until_unix;  ///< Valid-Until in seconds since 1970 (UTC)
  std::vector<std::string> architectures;
  std::vector<std::string> components;
  bool acquire_by_hash = false;
  bool not_automatic = false;           ///< `NotAutomatic: yes`: apt gives its packages priority 1
  bool but_automatic_upgrades = false;  ///< `ButAutomaticUpgrades: yes`: apt gives its packages priority 100
  std::vector<ReleaseEntry> sha256;  ///< in file order

  /// The SHA256 entry for `path`, or nullptr.
  [[nodiscard]] const ReleaseEntry* find(std::string_view path) const;
};

/// Parses a Release file, or an InRelease file (its clear-signed body; the signature is not checked here).
/// Fails (ErrorKind::environment) on deb822 syntax errors, on a file without exactly one stanza
/// (`release.syntax`), on a missing or malformed SHA256 list (`release.missing_sha256`, `release.bad_entry`)
/// and on a Date or Valid-Until that is not an RFC 2822 date (`release.bad_date`).
Result<ReleaseFile> parse_release(std::string_view text, std::string_view origin);

/// Parses an RFC 2822 date as Release files write it ("Sat, 09 Nov 2024 10:05:58 UTC", "... +0000", weekday
/// optional) into seconds since 1970 (UTC); nothing when it is not one.
std::optional<std::int64_t> parse_release_date(std::string_view text);

}  // namespace gpuenv::packages
