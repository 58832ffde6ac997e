#pragma once
// Running a command inside an unpacked image: with bubblewrap (a plain chroot as root when bubblewrap is
// missing), with the host's NVIDIA device nodes and driver libraries bound in when asked. Interactively for
// `gpuenv run`, with output captured and a timeout for the image checks of `gpuenv validate --image`.
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "base/process/command_runner.hpp"
#include "images/run/unpack.hpp"

namespace gpuenv::images {

/// The host's NVIDIA device nodes (/dev/nvidia*, /dev/nvidia-caps/*); empty without a driver.
std::vector<std::string> nvidia_devices();

/// The host's driver libraries (libcuda.so.1, libnvidia-ml.so.1, ...) as its dynamic linker cache names them:
/// real path -> name.
std::vector<std::pair<std::string, std::string>> driver_libraries();

/// Whether bubblewrap is installed (/usr/bin, /bin or /usr/local/bin).
bool have_bwrap();

/// An image argument of `gpuenv run` and `gpuenv validate --image` (a layout DIR, or DIR:REF) unpacked into
/// `cache_dir` (once per digest). Errors: `run.no_image` (no such directory), and those of unpack_image.
Result<UnpackedImage> unpack_layout_argument(const std::string& image, const std::string& cache_dir, const resolver::Platform& platform = resolver::native_platform());

/// The program COMMAND names, as a path in the unpacked tree ROOTFS: itself when it holds a '/', else the first
/// directory of the PATH in ENV (the image's) that holds it; std::nullopt when none does. An emulator does not
/// search PATH, so a program it starts is named by its path.
std::optional<std::string> program_in_image(const std::string& rootfs, const std::vector<std::string>& env, const std::string& command);

/// The static user-mode emulator for PLATFORM on this host: EXPLICIT when given (it must be an executable file),
/// else PLATFORM's qemu-user program (qemu-aarch64-static) on PATH_VARIABLE. Errors: `run.no_emulator` (none, with
/// what to install or name), `run.bad_emulator`.
Result<std::string> find_emulator(const resolver::Platform& platform, const std::string& explicit_path, const std::string& path_variable);

/// The sandbox that runs `command` (empty: the image's own) in `image` with the image's environment and working
/// directory, and, with `gpu`, the host's NVIDIA device nodes and driver libraries bound in.
SandboxRequest image_sandbox(const UnpackedImage& image, std::vector<std::string> command, bool gpu);

/// Parses a `--bind HOST:DEST` argument for the tree at `rootfs` (see parse_bind): the tree is read-only and
/// shared, so DEST must exist in it or lie under /tmp, /var/tmp or /run, where bubblewrap makes the parents.
/// Errors (ErrorKind::usage): `run.bad_bind`.
Result<std::pair<std::string, std::string>> parse_bind_into(const std::string& text, const std::string& rootfs);

/// What a command run in the sandbox with its output captured did.
struct SandboxRun {
  int exit_code = 0;  ///< 128 + signal number when killed by a signal
  std::string out, err;
  bool timed_out = false;  ///< killed at the timeout; out and err are then empty
};

/// Runs `request` through `runner` with bubblewrap (a plain chroot as root when bubblewrap is missing: no GPU
/// there), capturing stdout and stderr; past `timeout` the process group is killed and the result says
/// timed_out. Errors: `run.no_sandbox` (no bubblewrap and not root), `process.*` (the sandbox could not start).
Result<SandboxRun> run_sandbox_captured(const SandboxRequest& request, std::chrono::milliseconds timeout, CommandRunner& runner);

/// Runs `request` with the caller's terminal (stdin, stdout, stderr inherited) and waits for it: the command's
/// exit status (128 + signal when killed). Flush buffered output before calling. Errors: `run.no_sandbox`
/// (no bubblewrap and not root, or binds without bubblewrap), `run.spawn` (fork failed).
Result<int> run_sandbox_interactive(const SandboxRequest& request);

}  // namespace gpuenv::images
