#pragma once
// The commands of gpuenv: each turns its options into one library call and renders the result.
#include <chrono>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "app/attest.hpp"
#include "app/base_image.hpp"
#include "app/catalog.hpp"
#include "app/lock.hpp"
#include "cli/multi_node.hpp"
#include "app/marks.hpp"
#include "app/resolve.hpp"
#include "app/run.hpp"
#include "app/sources.hpp"
#include "app/validate_and_mark.hpp"
#include "cli/context.hpp"
#include "images/registry/registry_client.hpp"
#include "images/run/unpack.hpp"
#include "packages/sources.hpp"
#include "resolver/catalog.hpp"
#include "resolver/lockfile.hpp"
#include "resolver/solver.hpp"
#include "resolver/spec.hpp"
#include "validate/check.hpp"
#include "validate/report.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gpuenv::cli {

/// What every command may read of the global flags (set once the command line is parsed).
struct GlobalOptions {
  std::string catalog_dir;  ///< --catalog, else GPUENV_CATALOG; "" for the built-in catalog
};

/// A command on the command line: its CLI11 subcommand, and what runs it once it is the one parsed.
struct Command {
  CLI::App* sub = nullptr;
  std::function<int(Context&)> run;
};

/// Each command's file registers its own subcommand and flags (cli/app.cpp lists them in help order).
Command add_resolve_command(CLI::App& app, const GlobalOptions& global);
Command add_detect_command(CLI::App& app, const GlobalOptions& global);
Command add_matrix_command(CLI::App& app, const GlobalOptions& global);
Command add_lock_command(CLI::App& app, const GlobalOptions& global);
Command add_build_command(CLI::App& app, const GlobalOptions& global);
Command add_validate_command(CLI::App& app, const GlobalOptions& global);
Command add_preflight_command(CLI::App& app, const GlobalOptions& global);
Command add_checks_command(CLI::App& app, const GlobalOptions& global);
Command add_inspect_command(CLI::App& app, const GlobalOptions& global);
Command add_run_command(CLI::App& app, const GlobalOptions& global);
Command add_sources_command(CLI::App& app, const GlobalOptions& global);
Command add_cache_command(CLI::App& app, const GlobalOptions& global);
Command add_key_command(CLI::App& app, const GlobalOptions& global);
Command add_mark_command(CLI::App& app, const GlobalOptions& global);
Command add_verify_command(CLI::App& app, const GlobalOptions& global);
Command add_attest_command(CLI::App& app, const GlobalOptions& global);
Command add_status_command(CLI::App& app, const GlobalOptions& global);
Command add_report_command(CLI::App& app, const GlobalOptions& global);

using app::load_catalog_from;
using app::LoadedCatalog;

struct ResolveOptions {
  std::string spec_path;
  std::optional<std::string> driver;
  std::vector<std::string> gpus;
  std::optional<std::string> lock_path;
  bool json = false;
  std::string catalog_dir;
  bool offline = false;  ///< a base image comes from the cache only
  std::string project_from;  ///< --from: a project file (requirements, pylock.toml, uv.lock, pyproject.toml, environment.yml)
  std::vector<std::string> project_extras, project_groups;  ///< --extra, --group
};
/// --from FILE, --extra, --group on SUB (resolve, lock); the spec becomes optional when --from is given.
void add_project_options(CLI::App* sub, ResolveOptions& o, CLI::Option* spec);
/// The usage error of --extra/--group without --from, or of neither a spec nor --from; nullopt when the options agree.
std::optional<Error> check_project_options(const ResolveOptions& o);
int cmd_resolve(const ResolveOptions& options, Context& ctx);
/// The app:: request of resolve's options.
app::ResolveRequest resolve_request(const ResolveOptions& options);

struct ValidateOptions {
  std::string level = "standard";   ///< quick | standard | long
  std::string gpus;                 ///< "0,1"; empty = all
  std::string lock;                 ///< a lock whose driver floor and CUDA version the checks compare with
  std::string image;                ///< DIR[:REF]: run libraries_load, framework_smoke, cudnn_smoke inside it
  std::vector<std::string> checks;  ///< --check KEY|PREFIX|CATEGORY, repeatable
  std::string junit;                ///< write JUnit XML here
  std::string backend;              ///< "replay:FILE"; empty = GPUENV_BACKEND, else the real GPU
  std::string thresholds;           ///< a thresholds YAML instead of the built-in one
  std::string mig;                  ///< "on" | "off": what mig_state expects; empty = not checked
  std::string record;               ///< --record FILE: the backend's answers written as a replay file
  bool json = false;
  bool mark = false;                ///< mark --image good when the validation passed (docs/mark.md)
  std::string key;                  ///< the signing key for --mark ("" for GPUENV_MARK_KEY)
  std::string mark_image;           ///< where the mark goes: "" for --image itself (build --push: the registry image)
  std::string valid_for = "30d";    ///< the mark's validity
  bool plain_http = false;          ///< the registry of mark_image over plain HTTP
  bool referrers = false;           ///< the mark also as an OCI 1.1 referrer
  app::AttestOptions attest;        ///< RIMs, policy and revocation of cc_attestation
  std::string metrics;              ///< --metrics FILE: Prometheus textfile
  std::string data;                 ///< --data DIR|FILE: what data_read measures
  std::string data_min;             ///< --data-min RATE: data_read's threshold
  std::string spec;                 ///< --spec FILE: its validate.data_read_min
  MultiNodeOptions multi_node;      ///< --multi-node and its flags
  std::vector<std::string> cdi_dirs;  ///< --cdi-dir DIR, repeatable: the cdi_spec check's spec directories
  std::string cdi_root = "/";         ///< --cdi-root DIR: where the specs' host paths are looked up
};
int cmd_validate(const ValidateOptions& options, Context& ctx);

/// Registers --rim-dir, --rim-service, --offline (unless OFFLINE is false), POLICY_FLAG, --ocsp and --ocsp-url on SUB.
void add_attest_options(CLI::App* sub, app::AttestOptions& options, const std::string& policy_flag, bool offline);

/// The app request of validate's options (validate, and mark when --mark asks).
app::ValidateAndMarkRequest validate_and_mark_request(const ValidateOptions& options);

struct PreflightOptions {
  std::string status_file = "/run/gpuenv/status.json";
  std::string backend;
  std::string lock;
  std::string wait_fabric;  ///< "5m": wait that long at most for the NVSwitch fabric ("" : no wait)
  std::string metrics;      ///< --metrics FILE: Prometheus textfile
  bool json = false;
};
int cmd_preflight(const PreflightOptions& options, Context& ctx);

struct ChecksOptions {
  bool json = false;
};
int cmd_checks(const ChecksOptions& options, Context& ctx);

using app::BaseImage;
using app::prepare_base_image;
using app::registry_options;

struct LockOptions {
  ResolveOptions resolve;        ///< spec, --driver, --gpu, --json, catalog
  std::string output = "gpuenv.lock";
  std::string host_root = "/";
  bool offline = false;  ///< use only the cache
};
int cmd_lock(const LockOptions& options, Context& ctx);
/// The app:: request of lock's options.
app::LockRequest lock_request(const LockOptions& options);
/// Prints a resolution that no combination satisfies (JSON when asked) and returns exit code 3.
int report_unsatisfied(const app::PreparedResolution& prepared, bool json, Context& ctx);

struct BuildOptions {
  LockOptions lock;           ///< lock.resolve.spec_path is the SPEC or LOCK argument; --host-root, --offline, --json
  std::string output;         ///< layout directory; default ./gpuenv-out/NAME
  std::string format;                ///< oci-dir | oci-archive | docker-archive; "" for the spec's image.format
  std::string compression = "gzip";  ///< layer compression: gzip or zstd
  std::string tag;
  std::vector<std::string> allow_missing;
  std::vector<std::string> allow_record_mismatch;
  unsigned threads = 0;
  std::string push;         ///< registry reference to push to; "" for none
  bool plain_http = false;  ///< talk to the registry over http:// (a loopback test registry)
  std::string ca_bundle;    ///< extra CA for the registry's TLS
  std::string vm_gpuenv;    ///< --vm-gpuenv: a VM disk's /usr/bin/gpuenv
  std::string cache;        ///< --cache: the registry build cache ("" for GPUENV_BUILD_CACHE, if set)
  std::string cache_key;    ///< --cache-key: its key ("" for GPUENV_BUILD_CACHE_KEY)
  bool validate = false;    ///< validate the built image on this machine's GPUs (needs an oci-dir output)
  std::string level = "standard";  ///< the level of --validate
  bool mark = false;        ///< mark it good when the validation passed (in the registry when pushed)
  std::string key;          ///< the signing key of --mark and --attest ("" for GPUENV_MARK_KEY)
  std::string valid_for = "30d";
  bool referrers = false;   ///< the mark also as an OCI 1.1 referrer
  std::string attest;       ///< --attest sbom,provenance: "" for none
};
int cmd_build(const BuildOptions& options, Context& ctx);

struct InspectOptions {
  std::string image;  ///< DIR[:REF], oci:DIR[:REF], oci-archive:FILE, docker-archive:FILE, a tar FILE, or docker://REF
  std::string diff;   ///< a second image to compare with; "" for none
  bool json = false;
  bool all = false;   ///< every package, not the five largest per layer
  bool plain_http = false;  ///< talk to a docker:// registry over plain HTTP
};
int cmd_inspect(const InspectOptions& options, Context& ctx);

struct RunOptions {
  std::string image;                 ///< an OCI layout directory, DIR:REF, oci:DIR[:REF], or docker://REF
  std::vector<std::string> command;  ///< after "--"; empty: the image's own command
  bool no_gpu = false;
  bool plain_http = false;
  std::vector<std::string> binds;    ///< HOST:DEST, bound read-only
  std::string platform;              ///< --platform: "" for this machine's
  std::string emulator;              ///< --emulator PATH
};
/// Returns the command's exit status (128 + signal when killed), or a gpuenv exit code when it cannot start.
int cmd_run(const RunOptions& options, Context& ctx);

using app::unpack_image_argument;    // app/run.hpp
using images::image_sandbox;         // images/run/sandbox.hpp
using images::run_sandbox_captured;  // images/run/sandbox.hpp (was run_in_image_captured)

struct DetectOptions {
  bool json = false;
  std::string catalog_dir;
};
int cmd_detect(const DetectOptions& options, Context& ctx);

struct MatrixOptions {
  std::string framework;  ///< torch | tensorflow | jax | cuda | "" (all)
  bool json = false;
  std::string catalog_dir;
};
int cmd_matrix(const MatrixOptions& options, Context& ctx);

struct CacheOptions {
  std::string action;  ///< ls | du | prune
  int older_than_days = 30;
  bool all = false;
  bool json = false;
};
int cmd_cache(const CacheOptions& options, Context& ctx);
using app::cache_root;

struct SourcesOptions {
  std::string spec_path;        ///< optional: the spec's sources win over configuration
  std::string host_root = "/";  ///< where /etc/apt and /etc/pip.conf are read
  bool json = false;
};
int cmd_sources(const SourcesOptions& options, Context& ctx);
using app::env_or;

using app::gather_sources;
using app::user_config_path;

/// Prints what `gpuenv mark` (or `--mark`) did: text, or a gpuenv-mark-v1 document.
void print_mark_result(const app::MarkResult& result, bool json, std::ostream& out);
/// A mark record's predicate on one line ("PASSED standard on 8x NVIDIA H100 ..., until ..."), every field of the
/// record made safe to print (verify and inspect show records of keys that may not count).
std::string mark_predicate_line(const marks::MarkPredicate& p);

/// Prints an error (JSON when asked) and returns its exit code.
int report_error(const Error& error, bool json, Context& ctx);

using app::host_facts;

}  // namespace gpuenv::cli
