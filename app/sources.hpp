#pragma once
// Where packages come from: the spec's sources, the user configuration, the host's apt and pip configuration.
#include <optional>
#include <string>

#include "app/services.hpp"
#include "base/error.hpp"
#include "packages/sources.hpp"
#include "resolver/spec.hpp"

namespace gpuenv::app {

/// $GPUENV_CONFIG, else $XDG_CONFIG_HOME/gpuenv/config.yaml, else ~/.config/gpuenv/config.yaml.
std::string user_config_path(const Services& services);
/// The user configuration's sources, or nothing when the file does not exist.
Result<std::optional<resolver::SourcesRequest>> load_user_config(const Services& services);

/// The sources a workflow uses: the spec's (may be null), the user configuration, the host under HOST_ROOT;
/// RUNNER asks the local pip for its default index (may be null).
Result<packages::SourceSet> gather_sources(const Services& services, const resolver::SourcesRequest* spec_sources, const std::string& spec_path,
                                           const std::string& host_root, CommandRunner* runner);

/// `gpuenv sources`: the spec (optional) read, and the sources gathered for it.
struct SourcesRequest {
  std::string spec_path;        ///< "" for none
  std::string host_root = "/";
};
Result<packages::SourceSet> sources(const SourcesRequest& request, Services& services);

}  // namespace gpuenv::app
