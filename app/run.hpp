#pragma once
// `gpuenv run IMAGE -- CMD...`: unpack (cached) and run a command inside an image, with the host's GPUs.
#include <optional>
#include <string>
#include <vector>

#include "app/services.hpp"
#include "base/error.hpp"
#include "images/run/sandbox.hpp"
#include "images/run/unpack.hpp"

namespace gpuenv::app {

struct RunRequest {
  std::string image;                 ///< an OCI layout directory (DIR, DIR:REF, oci:DIR[:REF]) or docker://REF
  std::vector<std::string> command;  ///< empty: the image's own command
  bool gpu = true;                   ///< bind the host's NVIDIA device nodes and driver libraries
  std::vector<std::string> binds;    ///< HOST:DEST, bound read-only
  bool plain_http = false;           ///< pull a registry image over plain HTTP (also: GPUENV_INSECURE_REGISTRIES)
  /// The image's platform to run (from an index of platforms); unset: this machine's. Another architecture's runs
  /// through a static user-mode emulator (images::find_emulator), said in a step line.
  std::optional<resolver::Platform> platform;
  std::string emulator;              ///< the emulator to use (`--emulator`); "": found on PATH
};

/// An image argument of `gpuenv run` and `gpuenv validate --image` unpacked into the cache (once per digest): a
/// layout (DIR, DIR:REF, oci:DIR[:REF]), or a registry image (docker://REF, or REF with a registry host where no
/// such directory exists), pulled into the cache first with every digest checked (fetch_registry_image; a pinned
/// digest already cached needs no network). Errors: `run.no_image` (no such directory), `registry.*`,
/// `run.digest_mismatch`, and those of images::unpack_image.
Result<images::UnpackedImage> unpack_image_argument(const std::string& image, Services& services, bool plain_http = false,
                                                    const resolver::Platform& platform = resolver::native_platform());

/// What `run` starts: the sandbox, and what the user must be told first (that the image is emulated).
struct RunPlan {
  images::SandboxRequest sandbox;
  std::vector<std::string> notes;
};

/// The image unpacked and the sandbox planned, nothing started. Errors: those of run but `run.spawn`.
Result<RunPlan> plan_run(const RunRequest& request, Services& services);

/// Runs the command in the image with the terminal and returns its exit status (128 + signal when killed).
/// Flush buffered output first. Errors: unpacking's, `run.no_command` (none given and the image has none),
/// `run.bad_bind`, `run.no_sandbox`, `run.spawn`, `run.no_emulator`, `run.bad_emulator`, `run.no_program` (an
/// emulated command whose program is not in the image).
Result<int> run(const RunRequest& request, Services& services);

}  // namespace gpuenv::app
