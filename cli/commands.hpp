#pragma once
// The commands of gpuenv: each turns its options into one library call and renders the result.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "cli/context.hpp"
#include "images/registry/registry_client.hpp"
#include "images/run/unpack.hpp"
#include "packages/sources.hpp"
#include "resolver/catalog.hpp"
#include "resolver/lockfile.hpp"
#include "resolver/solver.hpp"
#include "resolver/spec.hpp"
#include "validate/check.hpp"

namespace gpuenv::cli {

/// The catalog in use and the digest that locks record.
struct LoadedCatalog {
  resolver::Catalog catalog;
  std::string sha256;
  std::string origin;  ///< "embedded" or the directory
};

/// Loads the embedded catalog, or every *.yaml of `dir` when it is not empty.
Result<LoadedCatalog> load_catalog_from(const std::string& dir);

struct ResolveOptions {
  std::string spec_path;
  std::optional<std::string> driver;
  std::vector<std::string> gpus;
  std::optional<std::string> lock_path;
  bool json = false;
  std::string catalog_dir;
  bool offline = false;  ///< a base image comes from the cache only
};
int cmd_resolve(const ResolveOptions& options, Context& ctx);

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
  bool json = false;
};
int cmd_validate(const ValidateOptions& options, Context& ctx);

struct PreflightOptions {
  std::string status_file = "/run/gpuenv/status.json";
  std::string backend;
  std::string lock;
  bool json = false;
};
int cmd_preflight(const PreflightOptions& options, Context& ctx);

struct ChecksOptions {
  bool json = false;
};
int cmd_checks(const ChecksOptions& options, Context& ctx);

/// A base image, in a local layout and unpacked, with what resolving and pinning read from it.
struct BaseImage {
  std::string pinned;           ///< "docker://host/repo:tag@sha256:..." or "oci:/abs/path[:ref]@sha256:..."
  std::string layout_dir;       ///< the OCI layout holding it (the cache's copy of a registry image)
  std::string manifest_digest;  ///< "sha256:..."
  std::string rootfs;           ///< unpacked, read-only
  std::string distro, release;  ///< ID and VERSION_ID of its /etc/os-release ("debian", "12")
  std::string dpkg_status;      ///< its /var/lib/dpkg/status; "" when it has none
};
/// Gets `reference` (docker://REF, pulled into the cache unless a pinned digest is cached already; or
/// oci:PATH[:REF][@sha256:...]) and reads it. Errors: `base.*`, `registry.*`, `run.*`.
Result<BaseImage> prepare_base_image(const std::string& reference, bool offline, Context& ctx);
/// Registry options for `registry` (host[:port]): plain HTTP with `plain_http` or when GPUENV_INSECURE_REGISTRIES
/// lists it; credentials from GPUENV_REGISTRY_USER/PASSWORD or the Docker config.json (a bad one in *problem).
images::RegistryOptions registry_options(const Context& ctx, const std::string& registry, bool plain_http, Status* problem);

/// A spec read, checked and resolved (the first half of resolve and lock).
struct PreparedResolution {
  LoadedCatalog catalog;
  std::string spec_text;
  resolver::Spec spec;
  resolver::Resolution resolution;
  std::optional<BaseImage> base;  ///< when the spec names a base image
  resolver::ResolveRequest request;  ///< what was resolved (request.spec points at spec)
};
/// Loads the catalog, reads and parses the spec, gathers GPUs and driver (flags, spec, host) and resolves.
/// Returns 0, or the exit code of an error it has already reported. An unsatisfiable answer returns 0 with
/// resolution.ok == false.
int prepare_resolution(const ResolveOptions& options, Context& ctx, PreparedResolution& out);

struct LockOptions {
  ResolveOptions resolve;        ///< spec, --driver, --gpu, --json, catalog
  std::string output = "gpuenv.lock";
  std::string host_root = "/";
  bool offline = false;  ///< use only the cache
};
int cmd_lock(const LockOptions& options, Context& ctx);

/// A lock made in process (resolve, then pin every package).
struct MadeLock {
  PreparedResolution prepared;
  std::string text;
  std::vector<resolver::LockedPackage> packages;
  std::vector<std::string> wheel_requirements;
  std::uint64_t debs = 0, wheels = 0, bytes = 0;
};
/// The body of `gpuenv lock` without writing: returns 0, or the exit code of an error it has reported.
int make_lock(const LockOptions& options, Context& ctx, MadeLock& out);

struct BuildOptions {
  LockOptions lock;           ///< lock.resolve.spec_path is the SPEC or LOCK argument; --host-root, --offline, --json
  std::string output;         ///< layout directory; default ./gpuenv-out/NAME
  std::string format = "oci-dir";
  std::string compression = "gzip";  ///< layer compression: gzip or zstd
  std::string tag;
  std::vector<std::string> allow_missing;
  unsigned threads = 0;
  std::string push;         ///< registry reference to push to; "" for none
  bool plain_http = false;  ///< talk to the registry over http:// (a loopback test registry)
  std::string ca_bundle;    ///< extra CA for the registry's TLS
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
  std::string image;                 ///< an OCI layout directory, or DIR:REF
  std::vector<std::string> command;  ///< after "--"; empty: the image's own command
  bool no_gpu = false;
  std::vector<std::string> binds;    ///< HOST:DEST, bound read-only
};
/// Returns the command's exit status (128 + signal when killed), or a gpuenv exit code when it cannot start.
int cmd_run(const RunOptions& options, Context& ctx);

/// An image argument of `gpuenv run` and `gpuenv validate --image` (a layout DIR, or DIR:REF) unpacked into the
/// cache (once per digest). Errors: `run.no_image` (no such directory), and those of images::unpack_image.
Result<images::UnpackedImage> unpack_image_argument(const std::string& image, const Context& ctx);
/// The sandbox that runs `command` in `image` with the image's environment and working directory, and, with
/// `gpu`, the host's NVIDIA device nodes and driver libraries bound in.
images::SandboxRequest image_sandbox(const images::UnpackedImage& image, std::vector<std::string> command, bool gpu);
/// Runs `request` with bubblewrap (a plain chroot as root when bubblewrap is missing: no GPU there), capturing
/// stdout and stderr through pipes; past `timeout` the process group is killed and the result says timed_out.
/// Errors: `run.no_sandbox` (no bubblewrap and not root), `process.*` (the sandbox could not be started).
Result<validate::ImageRun> run_in_image_captured(const images::SandboxRequest& request, std::chrono::milliseconds timeout);

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

/// The sources a command uses: the spec's (may be null), the user configuration, the host under `host_root`;
/// `runner` asks the local pip for its default index (may be null).
Result<packages::SourceSet> gather_sources(const Context& ctx, const resolver::SourcesRequest* spec_sources, const std::string& spec_path,
                                         const std::string& host_root, gpuenv::CommandRunner* runner);

/// $GPUENV_CONFIG, else $XDG_CONFIG_HOME/gpuenv/config.yaml, else ~/.config/gpuenv/config.yaml.
std::string user_config_path(const Context& ctx);
/// The user configuration's sources, or nothing when the file does not exist.
Result<std::optional<resolver::SourcesRequest>> load_user_config_for(const Context& ctx);

/// Prints an error (JSON when asked) and returns its exit code.
int report_error(const Error& error, bool json, Context& ctx);

/// Host facts with the GPUENV_DRIVER / GPUENV_GPUS overrides of ctx.env applied.
Result<resolver::HostFacts> host_facts(Context& ctx, const resolver::Catalog& catalog);

}  // namespace gpuenv::cli
