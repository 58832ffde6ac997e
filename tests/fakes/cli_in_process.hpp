#pragma once
// `gpuenv ARGS...` in process for the CLI tests: the real process runner and a real fetcher (two attempts a
// request), output captured, and exactly the given environment.
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/net/curl_fetcher.hpp"
#include "base/process/command_runner.hpp"
#include "cli/context.hpp"

namespace gpuenv::testing {

struct CliOutcome {
  int code = -1;
  std::string out, err;
};

/// Runs ARGS with ENV as the whole environment; ADJUST may change the context first (a clock, say).
inline CliOutcome run_cli_in_process(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                                     const std::function<void(cli::Context&)>& adjust = {}) {
  std::ostringstream o, e;
  cli::Context ctx;
  ctx.out = &o;
  ctx.err = &e;
  ctx.env = env;
  ctx.make_runner = [] { return make_process_runner(); };
  ctx.make_fetcher = [](const NetLimits& limits) {  // the limits the command read from its environment
    FetchOptions options;
    options.limits = limits;
    options.max_attempts = 2;
    return make_curl_fetcher(options);
  };
  if (adjust) adjust(ctx);
  CliOutcome r;
  r.code = cli::run(args, ctx);
  r.out = o.str();
  r.err = e.str();
  return r;
}

}  // namespace gpuenv::testing
