#pragma once
// `gpuenv run IMAGE -- CMD...`: unpack (cached) and run a command inside an image, with the host's GPUs.
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
};

/// An image argument of `gpuenv run` and `gpuenv validate --image` unpacked into the cache (once per digest): a
/// layout (DIR, DIR:REF, oci:DIR[:REF]), or a registry image (docker://REF, or REF with a registry host where no
/// such directory exists), pulled into the cache first with every digest checked (fetch_registry_image; a pinned
/// digest already cached needs no network). Errors: `run.no_image` (no such directory), `registry.*`,
/// `run.digest_mismatch`, and those of images::unpack_image.
Result<images::UnpackedImage> unpack_image_argument(const std::string& image, Services& services, bool plain_http = false);

/// Runs the command in the image with the terminal and returns its exit status (128 + signal when killed).
/// Flush buffered output first. Errors: unpacking's, `run.no_command` (none given and the image has none),
/// `run.bad_bind`, `run.no_sandbox`, `run.spawn`.
Result<int> run(const RunRequest& request, Services& services);

}  // namespace gpuenv::app
