#pragma once
// Test double for the CommandRunner port: scripted answers by program name; records every command line.
#include <map>

#include "base/process/command_runner.hpp"

namespace gpuenv::testing {

class FakeRunner final : public gpuenv::CommandRunner {
 public:
  std::map<std::string, gpuenv::CommandResult> answers;  ///< by argv[0]; missing = "process.not_found"
  std::vector<std::vector<std::string>> commands;

  Result<gpuenv::CommandResult> run(const std::vector<std::string>& argv, std::string_view, std::chrono::milliseconds) override {
    commands.push_back(argv);
    auto it = answers.find(argv.empty() ? "" : argv[0]);
    if (it == answers.end()) return make_error(ErrorKind::environment, "process.not_found", "no such program", argv.empty() ? "" : argv[0], "");
    return it->second;
  }
};

}  // namespace gpuenv::testing
