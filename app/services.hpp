#pragma once
// The ports a workflow uses, built once by the composition root (cli/app.cpp) or by a test with fakes.
//
// Every app:: workflow takes a Services and returns a Result value; none prints. Progress goes to on_step.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/cache/blob_store.hpp"
#include "base/net/fetcher.hpp"
#include "base/net/http_client.hpp"
#include "base/process/command_runner.hpp"
#include "validate/adapters/image_libraries.hpp"
#include "validate/backend.hpp"
#include "validate/data_files.hpp"
#include "validate/host_probe.hpp"
#include "validate/multinode/rendezvous.hpp"

namespace gpuenv::app {

struct Services {
  /// The process environment, read once at start-up and filtered by keep_environment_variable().
  std::map<std::string, std::string> env;
  /// Builds the host probes in the order they are tried (NVML, libcuda, procfs in production).
  std::function<std::vector<std::unique_ptr<validate::HostProbe>>()> make_probes;
  /// Builds the process runner (gpgv, the local pip, bubblewrap).
  std::function<std::unique_ptr<CommandRunner>()> make_runner;
  /// Builds the network adapter, under the command's network limits (`net`).
  std::function<std::unique_ptr<Fetcher>(const NetLimits&)> make_fetcher;
  /// Builds the HTTP client registries are reached with (libcurl in production; open_http_client fills the options).
  std::function<std::unique_ptr<HttpClient>(const HttpOptions&)> make_http_client;
  /// Builds the GPU backend a validation, a pre-flight or an attestation runs on. CHOICE is what --backend or
  /// GPUENV_BACKEND says, already checked by open_gpu_backend: "replay:FILE" (a recorded machine, docs/replay.md),
  /// or "", "real" or "nvml+cuda" for this machine's GPUs (NVML and CUDA in production). IMAGE, when given, are the
  /// libraries of `validate --image`: the real backend's GEMMs and NCCL run through them.
  std::function<Result<std::unique_ptr<validate::GpuBackend>>(const std::string& choice, const std::optional<validate::ImageLibraries>& image)>
      make_gpu_backend;
  /// `validate --multi-node`: NCCL's side of the all-reduce across nodes on the GPUs at BUS_IDS, SAMPLES samples
  /// (libnccl through validate/adapters/multi_gpu in production, the image's NCCL with IMAGE; doubles in tests).
  std::function<validate::multinode::NcclRanks(const std::vector<std::string>& bus_ids, int samples,
                                               const std::optional<validate::ImageLibraries>& image)>
      make_nccl_ranks;
  /// Timeouts, rate rule, deadlines, the command's network budget and where retries are announced; read from
  /// the environment by the composition root (net_limits_from_env), the defaults in tests.
  NetLimits net;
  /// Opens the content-addressed cache under a cache root (the directory store in production).
  std::function<std::unique_ptr<BlobStore>(const std::string& root)> make_blob_store;
  /// Builds the file-system port of validate's data_read check (POSIX calls in production).
  std::function<std::shared_ptr<validate::DataFiles>()> make_data_files;
  /// The clock: seconds since the epoch (the system clock in production; tests set a fixed time).
  std::function<std::int64_t()> clock;
  /// Receives progress lines ("unpacking 121 .debs"); may be empty.
  std::function<void(const std::string&)> on_step;

  void step(const std::string& line) const {
    if (on_step) on_step(line);
  }
};

/// Whether gpuenv reads the environment variable NAME: its own (GPUENV_*), the cache and config locations, pip's
/// index configuration, SOURCE_DATE_EPOCH, and what the validator's env_vars check judges
/// (validate::is_gpu_environment_variable). Everything else is dropped at start-up.
bool keep_environment_variable(const std::string& name);

/// services.clock(), or the system clock when none is set.
std::int64_t now_seconds(const Services& services);

/// The value of an environment variable read at start-up, or "" when unset.
std::string env_or(const Services& services, const char* name);

/// The cache directory from GPUENV_CACHE_DIR, XDG_CACHE_HOME or HOME.
std::string cache_root(const Services& services);

/// The blob store of the cache at ROOT (services.make_blob_store). Errors: `cli.no_adapters` when none is configured.
Result<std::unique_ptr<BlobStore>> open_blob_store(const Services& services, const std::string& root);

/// The fetcher of a command: the services' network adapter under the command's limits, or with OFFLINE the one that
/// refuses every request (make_offline_fetcher: only the cache answers). Errors: `cli.no_adapters` when none is
/// configured.
Result<std::unique_ptr<Fetcher>> open_fetcher(const Services& services, bool offline);

/// An HTTP client for registries (services.make_http_client), under the command's network limits, trusting
/// CA_BUNDLE as an extra CA (GPUENV_CA_BUNDLE when empty). Errors: `cli.no_adapters` when none is configured.
Result<std::unique_ptr<HttpClient>> open_http_client(const Services& services, const std::string& ca_bundle = {});

/// The backend --backend (FLAG) or GPUENV_BACKEND names (services.make_gpu_backend): "replay:FILE", or the real
/// NVML + CUDA adapter when neither names one. Errors: `validate.backend` (usage) for another name,
/// `cli.no_adapters`, and the backend's own.
Result<std::unique_ptr<validate::GpuBackend>> open_gpu_backend(const std::string& flag, const Services& services,
                                                               const std::optional<validate::ImageLibraries>& image);

}  // namespace gpuenv::app
