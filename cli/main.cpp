#include "cli/context.hpp"

int main(int argc, char** argv, char** envp) {
  gpuenv::cli::Context ctx = gpuenv::cli::production_context(envp);
  return gpuenv::cli::run(std::vector<std::string>(argv + 1, argv + argc), ctx);
}
