#pragma once
// Unpacking an image from an OCI layout into a root filesystem directory (cached by manifest digest), for
// `gpuenv run` and validation inside the image.
#include <string>
#include <vector>

#include "base/archive/safe_extract.hpp"
#include "base/error.hpp"
#include "images/oci/layout_image.hpp"  // LayoutImage, read_layout_image

namespace gpuenv::images {

struct UnpackedImage {
  std::string rootfs;                 ///< the unpacked tree (treat as read-only: it is shared by later runs)
  std::string manifest_digest;
  std::vector<std::string> env;       ///< the config's Env ("KEY=VALUE")
  std::vector<std::string> command;   ///< the config's Entrypoint followed by Cmd
  std::string working_dir = "/";
  bool reused = false;                ///< it was already unpacked
  resolver::Platform platform;        ///< what its config says it is (os, architecture, variant)
};

/// Extracts the layers of `image` (blobs of `layout_dir`), in order, into the existing directory `root`, with
/// whiteouts applied. Errors: `run.bad_image` (a layer media type other than tar, tar+gzip), extraction's.
/// With `entries`, every extracted entry (path, mode, owner) is appended in order, whiteout markers excepted.
Status extract_image_layers(const std::string& layout_dir, const LayoutImage& image, const std::string& root,
                            std::vector<ExtractedEntry>* entries = nullptr);

/// The manifest of `layout_dir` named `ref` (org.opencontainers.image.ref.name), or its only manifest when
/// `ref` is empty, unpacked layer by layer (safe extraction: nothing lands outside the tree; `.wh.NAME`
/// whiteouts remove NAME) into `cache_dir`/<digest>. A tree is only renamed into place when complete, so an
/// interrupted unpack is redone. Errors: `run.no_image` (no such ref, or several manifests and no ref),
/// `run.bad_image` (unreadable manifest or config, a layer media type other than tar/tar+gzip), and those of
/// extraction.
/// From an index of platforms, PLATFORM's image is taken (images::platform_entry); an image whose config names a
/// platform gpuenv does not build is `run.bad_image`.
Result<UnpackedImage> unpack_image(const std::string& layout_dir, const std::string& ref, const std::string& cache_dir,
                                   const resolver::Platform& platform = resolver::native_platform());

struct SandboxRequest {
  std::string rootfs;
  std::vector<std::string> command;
  std::vector<std::string> env;                 ///< the process environment, exactly
  std::string working_dir = "/";
  std::vector<std::string> devices;             ///< host device nodes to bind (/dev/nvidia0, /dev/nvidiactl, ...)
  std::vector<std::pair<std::string, std::string>> driver_libraries;  ///< host path -> name under /run/gpuenv/driver
  std::vector<std::pair<std::string, std::string>> binds;  ///< host path -> absolute path inside, read-only (`run --bind`)
  /// A static user-mode emulator on the host (qemu-aarch64-static) for an image of another architecture: bound
  /// read-only at k_emulator_path and run with the command (whose program must then be a path in the image).
  std::string emulator;
};

/// Where the sandbox finds SandboxRequest::emulator.
inline constexpr const char* k_emulator_path = "/run/gpuenv/emulator";

/// Parses a `--bind HOST:DEST` argument: HOST must exist (made absolute), DEST must be an absolute path
/// inside the image without `..`, not `/` and not under /proc, /dev or /run/gpuenv. Errors (ErrorKind::usage):
/// `run.bad_bind`.
Result<std::pair<std::string, std::string>> parse_bind(const std::string& text);

/// bubblewrap's argument vector (without the program name) for running `command` inside the image: the tree
/// bound read-only as /, fresh /dev, /proc and tmpfs /tmp, /run and /var/tmp, PID and IPC namespaces, the
/// environment replaced, the host's NVIDIA device nodes and driver libraries bound in as the NVIDIA container
/// toolkit does (libraries under /run/gpuenv/driver, added to LD_LIBRARY_PATH).
std::vector<std::string> bwrap_arguments(const SandboxRequest& request);

}  // namespace gpuenv::images
