#pragma once
// The port for running other programs (gpgv today; later mkfs, bwrap, qemu).
#include <chrono>
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
  /// overrunning `timeout` kills the process group and is "process.timeout". A non-zero exit is a result.
  virtual Result<CommandResult> run(const std::vector<std::string>& argv, std::string_view input, std::chrono::milliseconds timeout) = 0;
};

/// fork/exec with pipes and a deadline.
std::unique_ptr<CommandRunner> make_process_runner();

}  // namespace gpuenv
