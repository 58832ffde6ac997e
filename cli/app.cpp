#include <algorithm>
#include <cstdlib>
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <iostream>
#include <memory>
#include <mutex>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/progress.hpp"
#include "base/safe_text.hpp"
#include "base/net/curl_fetcher.hpp"
#include "validate/adapters/cuda_session.hpp"
#include "validate/adapters/multi_gpu.hpp"
#include "validate/adapters/real_backend.hpp"
#include "validate/replay/replay_backend.hpp"

#ifndef GPUENV_VERSION
#define GPUENV_VERSION "0.0.0"
#endif

namespace gpuenv::cli {

/// The production GPU backends (app::Services::make_gpu_backend): a recording (replay:FILE), or NVML and CUDA with
/// gpuenv's embedded kernels. With IMAGE (the libraries of --image), the real backend's GEMMs run through the
/// image's cuBLASLt and cuBLAS only (gpuenv's own kernel when the image has none), and NCCL is the image's when it
/// ships one, the host's otherwise.
Result<std::unique_ptr<validate::GpuBackend>> make_gpu_backend(const std::string& choice, const std::optional<validate::ImageLibraries>& image) {
  if (choice.rfind("replay:", 0) == 0) {
    auto b = validate::load_replay_backend_file(choice.substr(7));
    if (!b) return std::move(b).error();
    return std::move(*b);
  }
  validate::RealBackendOptions o;
  // CUDA enumerates one MIG device per process, the one CUDA_VISIBLE_DEVICES names (the composition root reads it).
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) o.cuda_visible_devices = visible;
  o.session_factory = [image](validate::SessionTarget target) {
    validate::CudaSessionOptions so;
    so.fatbin = validate::embedded_validation_fatbin();
    so.health_reader = std::move(target.health_reader);
    so.numa_node = target.numa_node;
    so.confidential = target.confidential;
    so.memory_shared_by = target.memory_shared_by;
    if (image) {
      so.cublaslt_libraries = image->cublaslt;
      so.cublas_libraries = image->cublas;
    }
    return validate::open_cuda_session(target.pci_bus_id, so);
  };
  o.p2p_measure = [](const std::string& src_bus_id, const std::string& dst_bus_id, int samples) {
    validate::MultiGpuOptions mo;
    mo.fatbin = validate::embedded_validation_fatbin();
    return validate::measure_p2p_bandwidth(mo, src_bus_id, dst_bus_id, samples);
  };
  o.nccl_measure = [image](const std::vector<std::string>& bus_ids, int samples) {
    validate::MultiGpuOptions mo;
    mo.fatbin = validate::embedded_validation_fatbin();
    if (image && !image->nccl.empty()) mo.nccl_libraries = image->nccl;
    return validate::measure_nccl_allreduce(mo, bus_ids, samples);
  };
  return validate::make_real_backend(o);
}

validate::multinode::NcclRanks make_nccl_ranks(const std::vector<std::string>& bus_ids, int samples,
                                               const std::optional<validate::ImageLibraries>& image) {
  validate::MultiGpuOptions mo;
  if (image && !image->nccl.empty()) mo.nccl_libraries = image->nccl;
  validate::multinode::NcclRanks out;
  out.unique_id = [mo]() -> Result<validate::multinode::UniqueId> {
    auto id = validate::nccl_unique_id(mo);
    if (!id) return std::move(id).error();
    if (!*id)
      return make_error(ErrorKind::environment, "nccl.missing", "no NCCL library loads on rank 0 (tried libnccl.so.2)",
                        "libnccl", "install NCCL (libnccl2) on every node, or run with --image");
    return **id;
  };
  out.measure = [mo, bus_ids, samples](const validate::multinode::UniqueId& id, int first_rank, int total_ranks,
                                       std::uint64_t bytes, const validate::multinode::Watch& watch)
      -> Result<std::optional<validate::Samples>> {
    validate::NcclRankSpec spec{id, first_rank, total_ranks, bytes, watch};
    auto measured = validate::measure_nccl_allreduce_ranks(mo, bus_ids, spec, samples);
    if (measured && !*measured)
      return make_error(ErrorKind::environment, "nccl.missing", "no NCCL library loads on this rank",
                        "libnccl", "install NCCL (libnccl2) on every node, or run with --image");
    return measured;
  };
  return out;
}

Context production_context(char** envp) {
  Context ctx;
  ctx.out = &std::cout;
  ctx.err = &std::cerr;
  for (char** e = envp; e && *e; ++e) {
    std::string kv(*e);
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = kv.substr(0, eq);
    if (app::keep_environment_variable(name)) ctx.env[name] = kv.substr(eq + 1);
  }
  ctx.make_probes = [] {
    std::vector<std::unique_ptr<validate::HostProbe>> probes;
    probes.push_back(validate::make_nvml_probe());
    probes.push_back(validate::make_cuda_driver_probe(std::chrono::milliseconds(10000)));
    probes.push_back(validate::make_procfs_probe());
    return probes;
  };
  ctx.make_runner = [] { return gpuenv::make_process_runner(); };
  ctx.stderr_is_tty = ::isatty(2) == 1;
  ctx.stdout_is_tty = ::isatty(1) == 1;
  // Progress lines of the workflows ("unpacking 121 .debs"), only where someone watches.
  // A build downloads on one thread while it unpacks on another: a step line and the download line take turns,
  // and a step line first clears the download line it interrupts (the next update draws it again).
  auto terminal = std::make_shared<std::mutex>();
  if (ctx.stderr_is_tty)
    ctx.on_step = [err = ctx.err, terminal](const std::string& line) {
      std::lock_guard lock(*terminal);
      *err << "\r\033[Kgpuenv: " << line << "\n" << std::flush;
    };
  const std::string ca_bundle = ctx.env.count("GPUENV_CA_BUNDLE") ? ctx.env.at("GPUENV_CA_BUNDLE") : std::string();
  int jobs = 8;
  if (auto it = ctx.env.find("GPUENV_FETCH_JOBS"); it != ctx.env.end()) {
    try {
      jobs = std::clamp(std::stoi(it->second), 1, 64);
    } catch (const std::exception&) {
      // not a number: keep the default
    }
  }
  ctx.make_fetcher = [tty = ctx.stderr_is_tty, ca_bundle, jobs, terminal](const gpuenv::NetLimits& limits) {
    gpuenv::FetchOptions o;
    o.limits = limits;
    o.ca_bundle = ca_bundle;
    o.parallel = jobs;
    if (tty) {
      auto line = std::make_shared<ProgressLine>(std::cerr);
      o.on_progress = [line, terminal](const gpuenv::FetchProgress& p) {
        if (p.files_total <= 1) return;  // single documents are not worth a line
        std::lock_guard lock(*terminal);
        line->update(p);
      };
    }
    return gpuenv::make_curl_fetcher(std::move(o));
  };
  return ctx;
}

int run(const std::vector<std::string>& args, Context& ctx) {
  CLI::App app{"gpuenv: resolve, build and validate GPU software environments"};
  app.name("gpuenv");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpuenv ") + GPUENV_VERSION);
  std::string catalog_dir;
  if (auto it = ctx.env.find("GPUENV_CATALOG"); it != ctx.env.end()) catalog_dir = it->second;
  app.add_option("--catalog", catalog_dir, "Use the catalog YAML files of this directory instead of the built-in one")
      ->check(CLI::ExistingDirectory);
  app.footer(
      "Exit codes: 0 ok, 1 validation failed, 2 usage or spec error, 3 unsatisfiable,\n"
      "            4 environment/network/IO error, 5 internal error.");

  GlobalOptions global;
  const std::vector<Command> commands = {add_resolve_command(app, global), add_detect_command(app, global),    add_matrix_command(app, global),
                                         add_lock_command(app, global),    add_build_command(app, global),     add_validate_command(app, global),
                                         add_preflight_command(app, global), add_checks_command(app, global), add_inspect_command(app, global),
                                         add_run_command(app, global),     add_sources_command(app, global),   add_cache_command(app, global),
                                         add_key_command(app, global),     add_mark_command(app, global),      add_verify_command(app, global),
                                         add_attest_command(app, global),   add_status_command(app, global),
                                         add_report_command(app, global)};

  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    *ctx.out << app.help();
    return k_exit_ok;
  } catch (const CLI::CallForAllHelp&) {
    *ctx.out << app.help("", CLI::AppFormatMode::All);
    return k_exit_ok;
  } catch (const CLI::CallForVersion&) {
    *ctx.out << "gpuenv " << GPUENV_VERSION << "\n";
    return k_exit_ok;
  } catch (const CLI::ParseError& e) {
    // Subcommand help arrives as CallForHelp from the subcommand.
    *ctx.err << "error: " << e.what() << "\n  hint: run `gpuenv --help` or `gpuenv COMMAND --help`\n";
    return k_exit_usage;
  }
  global.catalog_dir = catalog_dir;
  // One set of network limits, and one network budget, for the whole command.
  auto limits = net_limits_from_env(ctx.env);
  if (!limits) return report_error(limits.error(), false, ctx);
  ctx.net = std::move(*limits);
  // Retries and Retry-After waits are always announced; on a terminal the line first clears the progress line. The
  // line carries a URL and a server's or libcurl's words: made safe before it reaches the terminal.
  ctx.net.on_notice = [err = ctx.err, tty = ctx.stderr_is_tty, mu = std::make_shared<std::mutex>()](const std::string& line) {
    std::lock_guard lock(*mu);
    *err << (tty ? "\r\033[K" : "") << "gpuenv: " << safe_text(line) << "\n";
  };
  try {
    for (const Command& c : commands)
      if (c.sub->parsed()) return c.run(ctx);
  } catch (const std::exception& e) {
    *ctx.err << "error: internal error: " << e.what() << "\n  hint: this is a bug in gpuenv; please report it with the command line\n";
    return k_exit_internal;
  }
  return k_exit_usage;
}

}  // namespace gpuenv::cli
