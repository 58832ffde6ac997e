#include "app/validate.hpp"
#include "marks/statement.hpp"

#include <algorithm>
#include <thread>

#include <filesystem>
#include <sstream>

#include "app/run.hpp"
#include "base/byte_rate.hpp"
#include "base/time.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/yaml_guard.hpp"
#include "images/run/sandbox.hpp"
#include "recipes/embedded.hpp"
#include "resolver/lockfile.hpp"
#include "resolver/spec.hpp"
#include "validate/adapters/image_libraries.hpp"
#include "validate/cdi_spec.hpp"
#include "validate/check.hpp"
#include "validate/metrics.hpp"
#include "validate/replay/recorder.hpp"
#include "validate/replay/replay_backend.hpp"
#include "validate/report.hpp"
#include "validate/runner.hpp"
#include "validate/thresholds.hpp"

#ifndef GPUENV_VERSION
#define GPUENV_VERSION "0.0.0"
#endif

namespace gpuenv::app {
namespace {

namespace fs = std::filesystem;

Result<validate::ThresholdTable> load_thresholds(const std::string& path) {
  if (path.empty()) return validate::parse_thresholds(recipes::thresholds_yaml(), "recipes/gpus/thresholds.yaml (built in)");
  auto text = read_yaml_file(path, 1u << 20);
  if (!text) return std::move(text).error();
  return validate::parse_thresholds(*text, path);
}


bool has_hang(const validate::Report& r) {
  for (const auto& c : r.checks)
    for (const auto& g : c.results)
      if (g.code == validate::k_code_hang) return true;
  return false;
}

/// Where `gpuenv build` puts the lock inside an image.
constexpr const char* k_image_lock = "usr/share/gpuenv/gpuenv.lock";

/// The lock's facts the checks compare with.
void apply_lock(const resolver::Lock& lock, validate::CheckInputs& inputs) {
  inputs.lock_given = true;
  if (!lock.driver_min.empty()) inputs.lock_driver_floor = lock.driver_min;
  if (!lock.cuda.empty()) inputs.lock_cuda = lock.cuda;
  if (!lock.cudnn.empty()) inputs.lock_cudnn = lock.cudnn;
  inputs.lock_forward_compat = lock.forward_compat;
  if (!lock.confidential.empty()) inputs.lock_confidential = lock.confidential;
  for (const auto& f : lock.frameworks) inputs.lock_frameworks.emplace_back(f.name, f.version);
}

/// data_read's inputs: the path, the port, and the threshold (--data-min, else the spec's validate.data_read_min).
Status prepare_data(const ValidateRequest& o, Services& ctx, validate::CheckInputs& inputs) {
  if (o.data.empty() && !o.data_min.empty())
    return make_error(ErrorKind::usage, "validate.data_min", "--data-min " + o.data_min + " given without --data", "--data-min",
                      "name the directory or file to measure: --data /path/to/dataset --data-min " + o.data_min);
  if (!o.data_min.empty()) {
    GPUENV_TRY(rate, parse_byte_rate(o.data_min, "--data-min"));
    inputs.data_read_min = rate;
  } else if (!o.spec.empty()) {
    GPUENV_TRY(text, read_yaml_file(o.spec, 1u << 20));
    GPUENV_TRY(spec, resolver::parse_spec(text, o.spec));
    inputs.data_read_min = spec.validate_data_read_min;
  }
  if (o.data.empty()) return ok_status();
  inputs.data_path = o.data;
  inputs.data_files = ctx.make_data_files ? ctx.make_data_files() : nullptr;
  if (!inputs.data_files)
    return make_error(ErrorKind::internal, "cli.no_adapters", "no file-system adapter configured for data_read", {}, "");
  return ok_status();
}

/// The NVIDIA container toolkit's config (cmd/nvidia-container-runtime/README.md in NVIDIA/nvidia-container-toolkit:
/// /etc/nvidia-container-runtime/config.toml); its
/// [nvidia-container-runtime.modes.cdi] spec-dirs (api/config/v1/runtime.go) name the directories its runtime reads.
constexpr const char* k_toolkit_config = "/etc/nvidia-container-runtime/config.toml";

/// Where the cdi_spec check looks: --cdi-dir, else CDI's default directories (/etc/cdi, /var/run/cdi:
/// pkg/cdi/spec-dirs.go) and the toolkit's spec-dirs, each beneath ROOT.
Result<validate::CdiSearch> cdi_search(const std::vector<std::string>& dirs, const std::string& root) {
  validate::CdiSearch search;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return make_error(ErrorKind::usage, "validate.cdi_root", "--cdi-root is not a directory", root,
                      "give the directory a host's file system is mounted at (default /)");
  }
  search.host_root = root;
  if (!dirs.empty()) {
    search.dirs = dirs;
    search.named = true;
    return search;
  }
  const std::string prefix = root == "/" ? std::string() : fs::path(root).lexically_normal().string();
  auto beneath = [&](const std::string& path) { return prefix.empty() ? path : (fs::path(prefix) / path.substr(1)).string(); };
  search.dirs = {beneath("/etc/cdi"), beneath("/var/run/cdi")};
  const std::string config = beneath(k_toolkit_config);
  if (!fs::exists(config, ec)) return search;
  auto text = read_file_limited(config, 1u << 20);
  auto extra = text ? validate::toolkit_spec_dirs(*text, config) : Result<std::optional<std::vector<std::string>>>(text.error());
  if (!extra) {
    search.notes.push_back("the container toolkit's spec-dirs were not read (" + extra.error().message + ": " + config + ")");
    return search;
  }
  if (!*extra) return search;
  for (const auto& d : **extra) {
    const std::string dir = beneath(d);
    if (std::find(search.dirs.begin(), search.dirs.end(), dir) == search.dirs.end()) search.dirs.push_back(dir);
  }
  search.notes.push_back("spec-dirs of " + config + " included");
  return search;
}

struct Prepared {
  std::unique_ptr<validate::GpuBackend> backend;
  std::unique_ptr<validate::ThresholdTable> thresholds;
  validate::CheckInputs inputs;
  std::string image_digest;  ///< the manifest digest of --image
  std::string lock_sha256;   ///< of the lock's bytes
  std::unique_ptr<AttestSetup> attest;  ///< what the cc_attestation check's verifier uses
  std::chrono::milliseconds extra_deadline{0};  ///< --multi-node: added to nccl_allreduce's deadline
  std::optional<validate::BackendRecorder> recorder;  ///< --record: what the backend answered
};

/// --record: the backend wrapped so that its answers are kept. A directory that is not there is refused before the
/// run rather than after it, so a machine's measurements are never thrown away at the end.
Status record_answers(const std::string& path, Prepared& p) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    return make_error(ErrorKind::usage, "validate.record", "--record's directory does not exist", path,
                      "create " + parent.string() + " first, or record into an existing directory");
  if (fs::is_directory(path, ec))
    return make_error(ErrorKind::usage, "validate.record", "--record names a directory, not a file", path,
                      "name the file to write, e.g. " + (fs::path(path) / "recorded.yaml").string());
  auto [wrapped, recorder] = validate::record_backend(std::move(p.backend));
  p.backend = std::move(wrapped);
  p.recorder = recorder;
  return ok_status();
}

Status prepare(const ValidateRequest& o, Services& ctx, Prepared& p) {
  auto level = validate::parse_level(o.level);
  if (!level) {
    return make_error(ErrorKind::usage, "validate.level", "unknown level '" + o.level + "'", "--level", "use quick, standard or long");
  }
  p.inputs.level = *level;
  if (!o.gpus.empty()) {
    auto list = validate::parse_gpu_list(o.gpus);
    if (!list) return list.error();
    p.inputs.gpus = *list;
  }
  GPUENV_CHECK(prepare_data(o, ctx, p.inputs));
  std::optional<images::UnpackedImage> image;
  if (!o.image.empty()) {
    auto unpacked = unpack_image_argument(o.image, ctx, o.plain_http);
    if (!unpacked) {
      Error e = unpacked.error();
      e.while_("unpacking the image of --image");
      return e;
    }
    image = std::move(*unpacked);
  }
  // The lock: --lock, else the one `gpuenv build` put into the image.
  std::string lock_path = o.lock;
  if (lock_path.empty() && image) {
    const fs::path in_image = fs::path(image->rootfs) / k_image_lock;
    std::error_code ec;
    if (fs::is_regular_file(in_image, ec)) lock_path = in_image.string();
  }
  if (!lock_path.empty()) {
    auto text = read_yaml_file(lock_path, 64u << 20);
    if (!text) return text.error();
    auto lock = resolver::parse_lock(*text, lock_path);
    if (!lock) {
      Error e = lock.error();
      if (o.lock.empty()) e.while_("reading the lock inside the image " + o.image + " (give one with --lock)");
      return e;
    }
    apply_lock(*lock, p.inputs);
    p.lock_sha256 = Digest::of(*text).hex();
  }
  if (image) {
    p.inputs.image = o.image;
    p.image_digest = image->manifest_digest;
    // The devices and driver libraries are looked up once, here; each run copies the sandbox with its command.
    const images::SandboxRequest sandbox = images::image_sandbox(*image, {}, true);
    p.inputs.run_in_image = [sandbox, make_runner = ctx.make_runner](const std::vector<std::string>& command, std::chrono::milliseconds timeout) -> Result<validate::ImageRun> {
      images::SandboxRequest rq = sandbox;
      rq.command = command;
      auto runner = make_runner ? make_runner() : nullptr;
      if (!runner) return make_error(ErrorKind::internal, "cli.no_adapters", "no process runner configured", {}, "");
      GPUENV_TRY(ran, images::run_sandbox_captured(rq, timeout, *runner));
      return validate::ImageRun{ran.exit_code, std::move(ran.out), std::move(ran.err), ran.timed_out};
    };
  }
  if (!o.mig.empty()) p.inputs.spec_mig = o.mig == "on";
  GPUENV_TRY(cdi, cdi_search(o.cdi_dirs, o.cdi_root));
  p.inputs.cdi = std::move(cdi);
  // Variables that change how CUDA, NCCL or the loader behave, for the env_vars check.
  for (const auto& [k, v] : ctx.env)
    if (validate::is_gpu_environment_variable(k)) p.inputs.environment[k] = v;
  auto table = load_thresholds(o.thresholds);
  if (!table) return table.error();
  p.thresholds = std::make_unique<validate::ThresholdTable>(std::move(*table));
  p.inputs.thresholds = p.thresholds.get();
  std::optional<validate::ImageLibraries> image_libraries;
  if (image) image_libraries = validate::find_image_libraries(image->rootfs);
  GPUENV_TRY(attest, AttestSetup::open(o.attest, ctx));
  p.attest = std::move(attest);
  p.inputs.attest = attest_function(*p.attest, ctx);
  if (o.multi_node) {
    if (!ctx.make_nccl_ranks)
      return make_error(ErrorKind::internal, "cli.no_adapters", "no multi-node NCCL configured", {}, "");
    p.inputs.multi_node = [config = *o.multi_node, make = ctx.make_nccl_ranks, image_libraries, sysfs = o.sysfs_root,
                           level = o.level](const std::vector<std::string>& bus_ids, int samples) {
      const validate::multinode::NicSummary nics = validate::multinode::read_nics(sysfs);
      validate::multinode::NodeConfig rank = config;  // rank 0 refuses a rank of another level
      rank.samples = samples;
      rank.level = level;
      return validate::multinode::run_rank(rank, static_cast<int>(bus_ids.size()), nics,
                                           make(bus_ids, samples, image_libraries));
    };
    // The rendezvous may wait its whole timeout (a peer waits for rank 0 twice that), then rank 0 for the results.
    p.extra_deadline = 2 * o.multi_node->rendezvous_timeout + o.multi_node->result_timeout;
  }
  auto backend = open_gpu_backend(o.backend, ctx, image_libraries);
  if (!backend) return backend.error();
  p.backend = std::move(*backend);
  if (!o.record.empty()) return record_answers(o.record, p);
  return ok_status();
}

/// --record: what the backend answered, written as a replay file once it is known to load back.
Status write_recording(const ValidateRequest& o, const Prepared& p, const validate::Report& report) {
  GPUENV_TRY(recording, p.recorder->recording());
  std::string selection = " --level " + o.level;
  if (!o.gpus.empty()) selection += " --gpus " + o.gpus;
  for (const auto& c : o.checks) selection += " --check " + c;
  const std::string command = "gpuenv validate" + selection;
  const std::string header =
      "gpuenv-replay-v1 recording: what the " + report.backend + " backend answered during `" + command + "`,\n" +
      "made by gpuenv " + GPUENV_VERSION + ", the run started at " + report.started_at + ".\n" +
      "Measured on that machine, not illustrative. Each value is the first answer of its call; the health under load\n" +
      "is every reading of the run folded; an error is an error fault, a call that never returned a hang fault.\n" +
      "Calls the run did not make are absent: replay it as it ran (docs/replay.md),\n" +
      "  gpuenv validate --backend replay:FILE" + selection;
  const std::string text = validate::render_replay(recording, header);
  if (auto read = validate::parse_replay_recording(text, o.record); !read) {
    return make_error(ErrorKind::internal, "validate.record_invalid",
                      "the recording would not load back: " + read.error().message, o.record,
                      "report this as a bug; the run's report still holds its figures");
  }
  if (auto st = write_file_atomic(o.record, text); !st) {
    Error e = st.error();
    e.while_("writing the recording of --record");
    return e;
  }
  return ok_status();
}

/// Runs and keeps what abandoned threads may still use alive when a check hung (the caller then exits at once).
Result<validate::Report> run_checks(Prepared& p, const std::vector<std::string>& filter, Services& ctx, bool& hung) {
  validate::RunOptions ro;
  ro.filter = filter;
  if (p.extra_deadline.count() > 0) ro.extra_deadline["nccl_allreduce"] = p.extra_deadline;
  ro.started_at = format_rfc3339_utc(now_seconds(ctx));  // the injected clock
  if (ctx.on_step) {
    ro.progress = [&](const std::string& key, validate::CheckStatus status, int done, int total) {
      ctx.step("[" + std::to_string(done) + "/" + std::to_string(total) + "] " + key + " " + validate::to_string(status));
    };
  }
  auto report = validate::run_validation(*p.backend, p.inputs, validate::all_checks(), ro);
  if (report) {
    report->image = p.inputs.image;
    report->image_digest = p.image_digest;
    report->lock_sha256 = p.lock_sha256;
  }
  if (report && has_hang(*report)) {
    // A hung check's thread may still be inside the driver: never destroy what it uses, and leave quickly.
    (void)p.backend.release();
    (void)p.thresholds.release();
    hung = true;
  }
  return report;
}

}  // namespace

/// The report as Prometheus metrics at PATH (node_exporter's textfile collector reads *.prom there), written
/// atomically so the collector never reads half a file; nothing when PATH is empty.
Status write_metrics(const std::string& path, const validate::Report& report) {
  if (path.empty()) return ok_status();
  const std::int64_t started = parse_rfc3339_utc(report.started_at).value_or(0);
  if (auto st = write_file_atomic(path, validate::report_metrics(report, started)); !st) {
    Error e = st.error();
    e.while_("writing the Prometheus metrics");
    return e;
  }
  return ok_status();
}

Result<Validation> validate(const ValidateRequest& request, Services& services) {
  Prepared p;
  GPUENV_CHECK(prepare(request, services, p));
  Validation out;
  GPUENV_TRY(report, run_checks(p, request.checks, services, out.hung));
  out.report = std::move(report);
  if (p.recorder) {
    if (auto st = write_recording(request, p, out.report); !st) out.record_error = st.error();
  }
  if (!request.junit.empty()) {
    if (auto st = write_file_atomic(request.junit, validate::report_junit(out.report)); !st) {
      Error e = st.error();
      e.while_("writing the JUnit report");
      return e;
    }
  }
  GPUENV_CHECK(write_metrics(request.metrics, out.report));
  return out;
}

Result<Preflight> preflight(const PreflightRequest& request, Services& services) {
  ValidateRequest v;
  v.level = "quick";
  v.backend = request.backend;
  v.lock = request.lock;
  Prepared p;
  GPUENV_CHECK(prepare(v, services, p));
  Preflight out;
  // NVSwitch systems: CUDA fails to start (cudaErrorSystemNotReady) until the fabric manager has registered the GPUs.
  std::string waited;
  if (request.wait_fabric.count() > 0) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      auto d = p.backend->driver();
      const bool ready = !d || !d->loaded || !d->nvswitch_present || d->fabric_manager_running.value_or(false);
      const auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start);
      if (ready || elapsed >= request.wait_fabric) {
        if (d && d->nvswitch_present)
          waited = ready ? "the NVSwitch fabric was up after " + std::to_string(elapsed.count()) + " s"
                         : "waited " + std::to_string(elapsed.count()) + " s for the NVSwitch fabric, and it is not up";
        break;
      }
      services.step("waiting for the NVSwitch fabric (" + std::to_string(elapsed.count()) + " s)");
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  GPUENV_TRY(report, run_checks(p, {}, services, out.hung));
  out.report = std::move(report);
  if (!waited.empty()) out.report.notes.push_back(waited);
  GPUENV_CHECK(write_metrics(request.metrics, out.report));
  out.exit_code = validate::exit_code(out.report);
  out.status = validate::report_json(out.report);
  out.status["exit_code"] = out.exit_code;
  std::error_code ec;
  if (fs::path(request.status_file).has_parent_path()) fs::create_directories(fs::path(request.status_file).parent_path(), ec);
  if (auto st = write_file_atomic(request.status_file, out.status.dump(2) + "\n"); !st) {
    Error e = st.error();
    e.while_("writing the pre-flight status");
    return e;
  }
  return out;
}

}  // namespace gpuenv::app
