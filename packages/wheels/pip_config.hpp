#pragma once
// Where pip's package index configuration comes from, found the way pip itself finds it
// (pip/_internal/configuration.py and cli/parser.py): config files global < user < site < PIP_CONFIG_FILE,
// later files within one kind over earlier ones, then sections [global] < [install] < PIP_* environment variables.
// No index host is built in: when nothing is configured the result is empty and the caller asks the local pip.
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::packages {

/// One index URL and where it was configured: an environment variable name ("PIP_INDEX_URL") or "file:line".
struct PipIndexUrl {
  std::string url;
  std::string origin;
};

/// The index configuration pip's `install` command would use.
struct PipIndexConfig {
  PipIndexUrl index_url;                     ///< url is empty when nothing sets index-url
  std::vector<PipIndexUrl> extra_index_urls;  ///< in pip's order
  std::vector<std::string> files_read;        ///< config files that existed, in the order pip loads them
};

/// One option of a pip configuration file.
struct PipConfigOption {
  std::string section;  ///< as written ("global", "install")
  std::string key;      ///< normalized as pip does: lowercase, '_' as '-', no leading "--" ("index-url")
  std::string value;    ///< configparser's value: continuation lines joined with '\n', trailing space removed
  int line = 0;         ///< line of the key
  /// Each non-empty line of the value with its line number (the key line first when it holds text).
  std::vector<std::pair<int, std::string>> value_lines;
};

/// Parses the text of a pip configuration file as configparser.RawConfigParser does (sections, `key = value` or
/// `key: value`, indented continuation lines, '#'/';' comment lines, [DEFAULT] values copied into every section).
/// Fails with `pip_config.syntax` naming `path:line` for text before any section, a line without '=' or ':',
/// an empty key, or a section or key given twice.
Result<std::vector<PipConfigOption>> parse_pip_config(std::string_view text, const std::string& path);

/// Finds pip's index-url and extra-index-urls. `env` is the process environment (PIP_INDEX_URL,
/// PIP_EXTRA_INDEX_URL split on whitespace, PIP_CONFIG_FILE ("/dev/null" disables all files), XDG_CONFIG_DIRS,
/// XDG_CONFIG_HOME, VIRTUAL_ENV); `home` is the user's home directory; `root` is prefixed to the system-wide
/// files (/etc/xdg/pip/pip.conf, /etc/pip.conf) and may be empty; `site_prefix` is sys.prefix of the pip that
/// will run (empty: VIRTUAL_ENV, and no site file when that is unset). Missing files are skipped, as pip does;
/// fails with `pip_config.read` for an unreadable or oversized file, `pip_config.syntax` for a malformed one and
/// `pip_config.index_url` for a blank or multi-word index-url.
Result<PipIndexConfig> discover_pip_indexes(const std::map<std::string, std::string>& env, const std::string& home,
                                            const std::string& root, const std::string& site_prefix = {});

}  // namespace gpuenv::packages
