#pragma once
// What a command needs from the outside world, built once in main() (or by a test).
#include <chrono>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/services.hpp"

namespace gpuenv::cli {

/// The production GPU backends: replay:FILE, or NVML and CUDA (cli/app.cpp).
Result<std::unique_ptr<validate::GpuBackend>> make_gpu_backend(const std::string& choice, const std::optional<validate::ImageLibraries>& image);

/// The production multi-node NCCL (validate --multi-node): libnccl through validate/adapters/multi_gpu (cli/app.cpp).
validate::multinode::NcclRanks make_nccl_ranks(const std::vector<std::string>& bus_ids, int samples,
                                               const std::optional<validate::ImageLibraries>& image);

/// The ports (app::Services: environment, probes, runner, fetcher) and the terminal. The adapters every command
/// shares default to the production ones (the cache directory, libcurl, NVML and CUDA, the system clock); main()
/// adds the environment, probes, runner and fetcher (production_context), a test its fakes.
struct Context : app::Services {
  Context() {
    make_blob_store = [](const std::string& root) { return make_dir_blob_store(root); };
    make_http_client = [](const HttpOptions& options) { return make_curl_http_client(options); };
    make_gpu_backend = cli::make_gpu_backend;
    make_data_files = [] { return validate::make_posix_data_files(); };
    make_nccl_ranks = cli::make_nccl_ranks;
    clock = [] { return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(); };
  }
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  /// True when stderr is a terminal: progress is shown there, nothing otherwise.
  bool stderr_is_tty = false;
  /// True when stdout is a terminal: reports use colour.
  bool stdout_is_tty = false;
  /// Set by a command after a check hung: main() must exit at once (std::_Exit) once output is flushed, since
  /// an abandoned thread may still be inside the driver.
  bool exit_now = false;
};

/// Runs the gpuenv command line; returns the process exit code (docs/cli.md). Never throws.
int run(const std::vector<std::string>& args, Context& ctx);

/// The production context: std::cout/std::cerr, real environment, real probes.
Context production_context(char** envp);

}  // namespace gpuenv::cli
