#include "app/services.hpp"

#include <chrono>

#include "base/cache/blob_store.hpp"
#include "validate/check.hpp"

namespace gpuenv::app {

bool keep_environment_variable(const std::string& name) {
  // Only what gpuenv uses: its own variables, the cache and config locations, pip's index configuration, PATH
  // (where `run` finds a user-mode emulator).
  for (const char* p : {"GPUENV_", "PIP_", "XDG_"})
    if (name.rfind(p, 0) == 0) return true;
  for (const char* n : {"HOME", "VIRTUAL_ENV", "SOURCE_DATE_EPOCH", "TMPDIR", "DOCKER_CONFIG", "PATH"})
    if (name == n) return true;
  // validate --multi-node under srun: the rank, the task count, the nodes and the job and step (the run token).
  for (const char* n : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_JOB_ID",
                        "SLURM_STEP_ID"})
    if (name == n) return true;
  return validate::is_gpu_environment_variable(name);
}

std::int64_t now_seconds(const Services& services) {
  if (services.clock) return services.clock();
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string env_or(const Services& services, const char* name) {
  auto it = services.env.find(name);
  return it == services.env.end() ? std::string() : it->second;
}

std::string cache_root(const Services& services) {
  return default_cache_root(env_or(services, "GPUENV_CACHE_DIR"), env_or(services, "XDG_CACHE_HOME"), env_or(services, "HOME"));
}

Result<std::unique_ptr<BlobStore>> open_blob_store(const Services& services, const std::string& root) {
  if (!services.make_blob_store) return make_error(ErrorKind::internal, "cli.no_adapters", "no blob store configured", {}, "");
  return services.make_blob_store(root);
}

Result<std::unique_ptr<Fetcher>> open_fetcher(const Services& services, bool offline) {
  if (offline) return make_offline_fetcher();
  if (!services.make_fetcher) return make_error(ErrorKind::internal, "cli.no_adapters", "no fetcher configured", {}, "");
  return services.make_fetcher(services.net);
}

Result<std::unique_ptr<HttpClient>> open_http_client(const Services& services, const std::string& ca_bundle) {
  if (!services.make_http_client) return make_error(ErrorKind::internal, "cli.no_adapters", "no HTTP client configured", {}, "");
  HttpOptions options;
  options.limits = services.net;
  options.ca_bundle = ca_bundle.empty() ? env_or(services, "GPUENV_CA_BUNDLE") : ca_bundle;
  return services.make_http_client(options);
}

Result<std::unique_ptr<validate::GpuBackend>> open_gpu_backend(const std::string& flag, const Services& services,
                                                               const std::optional<validate::ImageLibraries>& image) {
  const std::string choice = !flag.empty() ? flag : env_or(services, "GPUENV_BACKEND");
  if (!choice.empty() && choice.rfind("replay:", 0) != 0 && choice != "real" && choice != "nvml+cuda") {
    return make_error(ErrorKind::usage, "validate.backend", "unknown backend '" + choice + "'", flag.empty() ? "GPUENV_BACKEND" : "--backend",
                      "use replay:FILE (a recorded inventory and scenario, docs/replay.md) or leave it out for the real GPU");
  }
  if (!services.make_gpu_backend) return make_error(ErrorKind::internal, "cli.no_adapters", "no GPU backend configured", {}, "");
  return services.make_gpu_backend(choice, image);
}

}  // namespace gpuenv::app
