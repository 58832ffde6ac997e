#pragma once
// What a command needs from the outside world, built once in main() (or by a test).
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/net/fetcher.hpp"
#include "base/process/command_runner.hpp"
#include "validate/host_probe.hpp"

namespace gpuenv::cli {

struct Context {
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  /// The process environment, read once in main(); only gpuenv's variables matter (GPUENV_*).
  std::map<std::string, std::string> env;
  /// Builds the host probes in the order they are tried (NVML, libcuda, procfs in production).
  std::function<std::vector<std::unique_ptr<validate::HostProbe>>()> make_probes;
  /// Builds the process runner (gpgv, the local pip).
  std::function<std::unique_ptr<gpuenv::CommandRunner>()> make_runner;
  /// True when stderr is a terminal: progress is shown there, nothing otherwise.
  bool stderr_is_tty = false;
  /// True when stdout is a terminal: reports use colour.
  bool stdout_is_tty = false;
  /// Set by a command after a check hung: main() must exit at once (std::_Exit) once output is flushed, since
  /// an abandoned thread may still be inside the driver.
  bool exit_now = false;
  /// Builds the network adapter.
  std::function<std::unique_ptr<gpuenv::Fetcher>()> make_fetcher;
};

/// Runs the gpuenv command line; returns the process exit code (docs/cli.md). Never throws.
int run(const std::vector<std::string>& args, Context& ctx);

/// The production context: std::cout/std::cerr, real environment, real probes.
Context production_context(char** envp);

}  // namespace gpuenv::cli
