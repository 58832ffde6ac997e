#include <algorithm>
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/progress.hpp"
#include "base/net/curl_fetcher.hpp"

#ifndef GPUENV_VERSION
#define GPUENV_VERSION "0.0.0"
#endif

namespace gpuenv::cli {

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
  if (ctx.stderr_is_tty) ctx.on_step = [err = ctx.err](const std::string& line) { *err << "gpuenv: " << line << "\n"; };
  const std::string ca_bundle = ctx.env.count("GPUENV_CA_BUNDLE") ? ctx.env.at("GPUENV_CA_BUNDLE") : std::string();
  int jobs = 8;
  if (auto it = ctx.env.find("GPUENV_FETCH_JOBS"); it != ctx.env.end()) {
    try {
      jobs = std::clamp(std::stoi(it->second), 1, 64);
    } catch (const std::exception&) {
      // not a number: keep the default
    }
  }
  ctx.make_fetcher = [tty = ctx.stderr_is_tty, ca_bundle, jobs] {
    gpuenv::FetchOptions o;
    o.ca_bundle = ca_bundle;
    o.parallel = jobs;
    if (tty) {
      auto line = std::make_shared<ProgressLine>(std::cerr);
      o.on_progress = [line](const gpuenv::FetchProgress& p) {
        if (p.files_total > 1) line->update(p);  // single documents are not worth a line
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

  ResolveOptions resolve;
  auto* r = app.add_subcommand("resolve", "Resolve a spec to driver, CUDA, cuDNN, framework and Python versions");
  r->add_option("spec", resolve.spec_path, "Spec file (gpuenv-spec-v1 YAML)")->required();
  r->add_option("--driver", resolve.driver, "The fleet's driver version (overrides the spec and the host)");
  r->add_option("--gpu", resolve.gpus, "GPU model (H100) or architecture (sm_90); repeatable; overrides the spec and the host");
  r->add_option("--lock", resolve.lock_path, "Write the lock (gpuenv-lock-v1) to this file, atomically");
  r->add_flag("--json", resolve.json, "Print a gpuenv-resolution-v1 JSON document");

  DetectOptions detect;
  auto* d = app.add_subcommand("detect", "Show the host's NVIDIA driver, GPUs and confidential-computing state");
  d->add_flag("--json", detect.json, "Print a gpuenv-host-v1 JSON document");

  MatrixOptions matrix;
  auto* m = app.add_subcommand("matrix", "List valid combinations (framework version, CUDA variant, cuDNN, driver, architectures)");
  m->add_option("framework", matrix.framework, "torch, tensorflow, jax or cuda (default: all)")
      ->check(CLI::IsMember({"torch", "tensorflow", "jax", "cuda"}));
  m->add_flag("--json", matrix.json, "Print a gpuenv-matrix-v1 JSON document");

  LockOptions lock;
  auto* l = app.add_subcommand("lock", "Resolve a spec and pin every Debian package and wheel (url, size, sha256) into a lock");
  l->add_option("spec", lock.resolve.spec_path, "Spec file (gpuenv-spec-v1 YAML)")->required();
  l->add_option("-o,--output", lock.output, "Lock file to write (default gpuenv.lock)");
  l->add_option("--driver", lock.resolve.driver, "The fleet's driver version (overrides the spec and the host)");
  l->add_option("--gpu", lock.resolve.gpus, "GPU model or architecture; repeatable");
  l->add_option("--host-root", lock.host_root, "Read apt and pip configuration under this directory instead of /")
      ->check(CLI::ExistingDirectory);
  l->add_flag("--json", lock.resolve.json, "Print the resolution and the pinned packages as JSON");
  l->add_flag("--offline", lock.offline, "Use only what the cache holds; download nothing");

  BuildOptions build;
  auto* b = app.add_subcommand("build", "Build a reproducible OCI image from a spec (resolved and pinned first) or a lock");
  b->add_option("input", build.lock.resolve.spec_path, "Spec (gpuenv-spec-v1) or lock (gpuenv-lock-v1)")->required();
  b->add_option("-o,--output", build.output, "OCI layout directory to write (default gpuenv-out/NAME)");
  b->add_option("--format", build.format, "Output format: oci-dir")->check(CLI::IsMember({"oci-dir", "oci-archive", "docker-archive"}));
  b->add_option("--compression", build.compression, "Layer compression: gzip (default, level 6) or zstd (level 3)")
      ->check(CLI::IsMember({"gzip", "zstd"}));
  b->add_option("--tag", build.tag, "Reference name recorded in the layout (default: the spec's image.tag)");
  b->add_option("--allow-missing-lib", build.allow_missing, "A shared library the DT_NEEDED check may find absent; repeatable");
  b->add_option("--push", build.push, "Push the image to this registry reference (host[:port]/repo[:tag])");
  b->add_flag("--plain-http", build.plain_http, "Talk to the registry over plain HTTP (a loopback or test registry)");
  b->add_option("--ca-bundle", build.ca_bundle, "Extra CA certificate file for the registry's TLS")->check(CLI::ExistingFile);
  b->add_option("--threads", build.threads, "Compression threads (default: all cores)")->check(CLI::NonNegativeNumber);
  b->add_option("--driver", build.lock.resolve.driver, "The fleet's driver version (with a spec)");
  b->add_option("--gpu", build.lock.resolve.gpus, "GPU model or architecture; repeatable (with a spec)");
  b->add_option("--host-root", build.lock.host_root, "Read apt and pip configuration under this directory instead of /")
      ->check(CLI::ExistingDirectory);
  b->add_flag("--json", build.lock.resolve.json, "Print a gpuenv-build-result-v1 JSON document");
  b->add_flag("--offline", build.lock.offline, "Use only what the cache holds; download nothing");

  ValidateOptions val;
  auto* va = app.add_subcommand("validate", "Validate this machine's GPUs: software, health, kernels, memory, bandwidth, GEMM");
  va->add_option("--level", val.level, "quick (boot pre-flight), standard or long")->check(CLI::IsMember({"quick", "standard", "long"}));
  va->add_option("--gpus", val.gpus, "GPU indices to check, e.g. 0,1 (default: all)");
  va->add_option("--lock", val.lock, "A gpuenv.lock: the driver floor and CUDA version to check against (default with --image: the image's own)");
  va->add_option("--image", val.image,
                 "An image built by gpuenv (layout DIR or DIR:REF): its CUDA libraries and frameworks run inside it (libraries_load, framework_smoke, cudnn_smoke)");
  va->add_option("--check", val.checks, "Only this check, key prefix or category; repeatable (see gpuenv checks)");
  va->add_option("--junit", val.junit, "Also write a JUnit XML report to this file");
  va->add_option("--backend", val.backend, "replay:FILE answers from a recorded inventory and scenario (docs/replay.md)");
  va->add_option("--thresholds", val.thresholds, "Per-GPU references YAML instead of the built-in one")->check(CLI::ExistingFile);
  va->add_option("--mig", val.mig, "Expected MIG mode for mig_state: on or off")->check(CLI::IsMember({"on", "off"}));
  va->add_flag("--json", val.json, "Print a gpuenv-validation-v1 JSON report");

  PreflightOptions pre;
  auto* pf = app.add_subcommand("preflight", "Boot pre-flight: the quick level, with a status JSON written atomically");
  pf->add_option("--status-file", pre.status_file, "Where to write the status (default /run/gpuenv/status.json)");
  pf->add_option("--lock", pre.lock, "A gpuenv.lock to check the driver against");
  pf->add_option("--backend", pre.backend, "replay:FILE (docs/replay.md)");
  pf->add_flag("--json", pre.json, "Print the status JSON");

  ChecksOptions chk;
  auto* ck = app.add_subcommand("checks", "List the validation checks with their levels and deadlines");
  ck->add_flag("--json", chk.json, "Print a gpuenv-checks-v1 JSON document");

  InspectOptions inspect;
  auto* in = app.add_subcommand("inspect", "Show an image's layers, packages and sizes, or what changed between two images");
  in->add_option("image", inspect.image,
                 "OCI layout directory (DIR[:REF], oci:DIR[:REF]), archive (FILE, oci-archive:FILE, docker-archive:FILE) or docker://host/repo:tag")
      ->required();
  in->add_option("--diff", inspect.diff, "A second image (any of IMAGE's forms): show what changed from IMAGE to it");
  in->add_flag("--all", inspect.all, "List every package, not the five largest per layer");
  in->add_flag("--json", inspect.json, "Print a gpuenv-inspect-v1 (or -diff-v1) JSON document");
  in->add_flag("--plain-http", inspect.plain_http, "Talk to a docker:// registry over plain HTTP (a loopback or test registry)");

  RunOptions run_opts;
  auto* rn = app.add_subcommand("run", "Run a command inside a built image (bubblewrap; the host's GPUs and driver bound in)");
  rn->add_option("image", run_opts.image, "OCI layout directory (gpuenv-out/NAME), or DIR:REF")->required();
  rn->add_option("command", run_opts.command, "Command and arguments, after --");
  rn->add_flag("--no-gpu", run_opts.no_gpu, "Do not bind NVIDIA devices and driver libraries");
  rn->add_option("--bind", run_opts.binds, "HOST:DEST: make a host file or directory readable at DEST inside (repeatable)");

  SourcesOptions sources;
  auto* so = app.add_subcommand("sources", "Show where packages come from (apt repositories, pip indexes) and why");
  so->add_option("spec", sources.spec_path, "A spec whose sources: section wins over configuration");
  so->add_option("--host-root", sources.host_root, "Read apt and pip configuration under this directory instead of /")
      ->check(CLI::ExistingDirectory);
  so->add_flag("--json", sources.json, "Print a gpuenv-sources-v1 JSON document");

  CacheOptions cache;
  auto* c = app.add_subcommand("cache", "Show or prune the download cache ($GPUENV_CACHE_DIR, else $XDG_CACHE_HOME/gpuenv)");
  c->require_subcommand(1);
  auto* c_ls = c->add_subcommand("ls", "List cached blobs");
  auto* c_du = c->add_subcommand("du", "Count cached blobs and bytes");
  auto* c_prune = c->add_subcommand("prune", "Remove blobs not used for a while");
  c_prune->add_option("--older-than", cache.older_than_days, "Days since last use (default 30)")->check(CLI::NonNegativeNumber);
  c_prune->add_flag("--all", cache.all, "Remove every blob");
  for (auto* sub : {c_ls, c_du, c_prune}) sub->add_flag("--json", cache.json, "Print a gpuenv-cache-v1 JSON document");

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
  try {
    if (r->parsed()) {
      resolve.catalog_dir = catalog_dir;
      return cmd_resolve(resolve, ctx);
    }
    if (d->parsed()) {
      detect.catalog_dir = catalog_dir;
      return cmd_detect(detect, ctx);
    }
    if (so->parsed()) return cmd_sources(sources, ctx);
    if (rn->parsed()) return cmd_run(run_opts, ctx);
    if (in->parsed()) return cmd_inspect(inspect, ctx);
    if (va->parsed()) return cmd_validate(val, ctx);
    if (pf->parsed()) return cmd_preflight(pre, ctx);
    if (ck->parsed()) return cmd_checks(chk, ctx);
    if (b->parsed()) {
      build.lock.resolve.catalog_dir = catalog_dir;
      build.lock.resolve.offline = build.lock.offline;
      return cmd_build(build, ctx);
    }
    if (l->parsed()) {
      lock.resolve.catalog_dir = catalog_dir;
      lock.resolve.offline = lock.offline;
      return cmd_lock(lock, ctx);
    }
    if (c->parsed()) {
      cache.action = c_ls->parsed() ? "ls" : c_du->parsed() ? "du" : "prune";
      return cmd_cache(cache, ctx);
    }
    if (m->parsed()) {
      matrix.catalog_dir = catalog_dir;
      return cmd_matrix(matrix, ctx);
    }
  } catch (const std::exception& e) {
    *ctx.err << "error: internal error: " << e.what() << "\n  hint: this is a bug in gpuenv; please report it with the command line\n";
    return k_exit_internal;
  }
  return k_exit_usage;
}

}  // namespace gpuenv::cli
