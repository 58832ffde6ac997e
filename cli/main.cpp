#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/context.hpp"

int main(int argc, char** argv, char** envp) {
  gpuenv::cli::Context ctx = gpuenv::cli::production_context(envp);
  const int code = gpuenv::cli::run(std::vector<std::string>(argv + 1, argv + argc), ctx);
  if (ctx.exit_now) {
    // A check hung: its thread may still be inside the driver, so static destructors must not run.
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}
