#pragma once
// apt source definitions: one-line sources.list entries and deb822 .sources stanzas, and finding them on a root.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::packages {

/// The kind of archive an entry points at; only `deb` (binary packages) is used by gpuenv.
enum class AptSourceType { deb, deb_src };

/// One repository as apt sees it: one type, one URI and one suite. A .sources stanza with several Types, URIs
/// or Suites gives one AptSource per combination, in the order apt uses (types, then URIs, then suites).
struct AptSource {
  AptSourceType type = AptSourceType::deb;
  bool enabled = true;  ///< false for a .sources stanza with `Enabled: no`
  std::string uri;      ///< as written, with a '/' added at the end if missing (as apt does)
  std::string suite;    ///< "bookworm", or for a flat repository a path ending in '/' ("/", "./", "subdir/")
  std::vector<std::string> components;     ///< empty exactly for a flat repository
  std::vector<std::string> architectures;  ///< arch= / Architectures:; empty means the host's
  std::vector<std::string> signed_by;      ///< keyring paths or fingerprints from signed-by= / Signed-By:
  std::string signed_by_key;  ///< an inline ASCII-armored key from Signed-By: (".sources" only), else empty
  std::optional<bool> trusted;  ///< trusted= / Trusted:; nothing when absent
  /// Every other option, in the order written: lower-case name and value ("pdiffs", "no"; "arch-", "i386").
  std::vector<std::pair<std::string, std::string>> options;
  std::string where;  ///< "file:line" of the entry or of the stanza

  /// True for a flat repository (`deb URI dir/`), whose Release and Packages sit at URI + suite.
  [[nodiscard]] bool is_flat() const { return !suite.empty() && suite.back() == '/'; }
  /// True for entries gpuenv fetches from: type `deb` and enabled. Others stay listed, marked skipped.
  [[nodiscard]] bool is_used() const { return type == AptSourceType::deb && enabled; }
};

/// "deb" or "deb-src".
std::string_view to_string(AptSourceType type);

/// Parses the one-line format of sources.list(5): `deb [opt=value ...] URI suite [component ...]`, '#' starting a
/// comment anywhere on a line. Fails (ErrorKind::environment, `apt_sources.syntax`, where "origin:line") on an
/// unknown type, a broken option block, a missing URI or suite, a flat suite with components, or a non-flat
/// suite without any.
Result<std::vector<AptSource>> parse_sources_list(std::string_view text, std::string_view origin);

/// Parses the deb822 format of sources.list(5) (a .sources file): Types, URIs, Suites, Components, Signed-By
/// (paths/fingerprints or an inline key), Architectures, Trusted, Enabled, other options kept. Fails
/// (ErrorKind::environment) on deb822 syntax errors, on a missing field (`apt_sources.missing_field`) and on bad
/// values (`apt_sources.syntax`); a stanza with `Enabled: no` is listed if it parses and ignored if it does not,
/// as apt ignores it.
Result<std::vector<AptSource>> parse_sources_deb822(std::string_view text, std::string_view origin);

/// Reads `<root>/etc/apt/sources.list` and the `*.list` and `*.sources` files of `<root>/etc/apt/sources.list.d`
/// (names made of letters, digits, '_', '-', ':' and '.', as apt requires; others are ignored as apt ignores them),
/// in apt's order: sources.list, then the directory's files sorted by name, each file's entries in file order.
/// Missing files and directories give no entries. Fails (ErrorKind::environment) when `root` is not a directory
/// (`apt_sources.no_root`), when a file cannot be read (`apt_sources.read`) and on any parse error.
Result<std::vector<AptSource>> discover_apt_sources(const std::string& root);

}  // namespace gpuenv::packages
