#pragma once
// The port for running other programs (gpgv today; later mkfs, bwrap, qemu).
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace gpuenv {

struct CommandResult {
  int exit_code = 0;  ///< 128 + signal number when killed by a signal
  std::string out, err;
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  /// Runs argv (argv[0] looked up in PATH) with `input` on stdin. A missing program is "process.not_found";
  /// overrunning `timeout` kills the process group and is "process.timeout"; more output on either stream than the
  /// runner keeps kills it too and is "process.output_limit". A non-zero exit is a result.
  virtual Result<CommandResult> run(const std::vector<std::string>& argv, std::string_view input, std::chrono::milliseconds timeout) = 0;
};

/// What one stream of a child may write before it is stopped: the largest input gpuenv reads from a tool (a lock,
/// a file from a disk) is 64 MiB.
inline constexpr std::size_t k_max_child_output = std::size_t{64} << 20;

/// fork/exec with pipes, a deadline and MAX_OUTPUT bytes per stream; a child dies with gpuenv (PR_SET_PDEATHSIG).
std::unique_ptr<CommandRunner> make_process_runner(std::size_t max_output = k_max_child_output);

}  // namespace gpuenv
