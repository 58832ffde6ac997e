#pragma once
// Where packages come from: the spec's `sources:`, else the user's gpuenv configuration, else the host's apt
// and pip configuration; and, when pip has no index configured, the local pip's own default, asked at run
// time (no index host is written into gpuenv).
#include <map>
#include <string>
#include <vector>

#include "packages/apt/apt_sources.hpp"
#include "base/process/command_runner.hpp"
#include "packages/wheels/pip_config.hpp"
#include "resolver/spec.hpp"

namespace gpuenv::packages {

struct SourceInputs {
  const resolver::SourcesRequest* spec = nullptr;         ///< the spec's sources (may be null)
  std::string spec_path;
  const resolver::SourcesRequest* user_config = nullptr;  ///< ~/.config/gpuenv/config.yaml (may be null)
  std::string user_config_path;
  std::string host_root = "/";                            ///< prefix of /etc/apt and /etc/pip.conf
  std::map<std::string, std::string> env;                 ///< PIP_*, XDG_*, VIRTUAL_ENV
  std::string home;
  CommandRunner* runner = nullptr;                        ///< to ask the local pip; null: do not ask
};

struct SourceSet {
  std::vector<AptSource> apt;  ///< every entry found, including skipped ones (is_used() tells)
  std::string apt_origin;      ///< "spec FILE", "user config FILE" or "host ROOT/etc/apt"
  /// The host's apt preferences (etc/apt/preferences, then preferences.d/* in name order, files apt would
  /// read), joined; only when the host's apt sources are used, since pins name those repositories.
  std::string apt_preferences;
  std::string apt_preferences_origin;  ///< the files, for error messages
  PipIndexConfig pip;
  std::string pip_origin;
  std::vector<std::string> notes;
};

/// Gathers the sources. Errors come from the host's files (malformed sources.list, pip.conf).
Result<SourceSet> discover_sources(const SourceInputs& in);

/// Converts a spec's repository entry into apt's model.
AptSource to_apt_source(const resolver::AptSourceRequest& r, const std::string& where);

}  // namespace gpuenv::packages
