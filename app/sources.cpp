#include "app/sources.hpp"

#include "base/yaml_guard.hpp"

namespace gpuenv::app {

std::string user_config_path(const Services& services) {
  if (auto p = env_or(services, "GPUENV_CONFIG"); !p.empty()) return p;
  if (auto x = env_or(services, "XDG_CONFIG_HOME"); !x.empty()) return x + "/gpuenv/config.yaml";
  return env_or(services, "HOME") + "/.config/gpuenv/config.yaml";
}

Result<std::optional<resolver::SourcesRequest>> load_user_config(const Services& services) {
  const std::string path = user_config_path(services);
  auto text = read_yaml_file(path, resolver::k_spec_max_bytes);
  if (!text) {
    if (text.error().id == "io.not_found") return std::optional<resolver::SourcesRequest>{};
    return std::move(text).error();
  }
  GPUENV_TRY(parsed, resolver::parse_user_config(*text, path));
  return std::optional<resolver::SourcesRequest>(std::move(parsed));
}

Result<packages::SourceSet> gather_sources(const Services& services, const resolver::SourcesRequest* spec_sources, const std::string& spec_path,
                                           const std::string& host_root, CommandRunner* runner) {
  GPUENV_TRY(config, load_user_config(services));
  packages::SourceInputs in;
  in.spec = spec_sources;
  in.spec_path = spec_path;
  in.user_config = config ? &*config : nullptr;
  in.user_config_path = user_config_path(services);
  in.host_root = host_root;
  in.env = services.env;
  in.home = env_or(services, "HOME");
  in.runner = runner;
  return packages::discover_sources(in);
}

Result<packages::SourceSet> sources(const SourcesRequest& request, Services& services) {
  std::optional<resolver::Spec> spec;
  if (!request.spec_path.empty()) {
    GPUENV_TRY(text, read_yaml_file(request.spec_path, resolver::k_spec_max_bytes));
    GPUENV_TRY(parsed, resolver::parse_spec(text, request.spec_path));
    spec = std::move(parsed);
  }
  auto runner = services.make_runner ? services.make_runner() : nullptr;
  return gather_sources(services, spec ? &spec->sources : nullptr, request.spec_path, request.host_root, runner.get());
}

}  // namespace gpuenv::app
