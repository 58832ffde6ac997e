// gpuenv run IMAGE -- CMD...: unpack (cached) and run a command inside an image with bubblewrap (chroot when
// bubblewrap is missing), with the host's NVIDIA devices and driver libraries bound in when present. The same
// sandbox, with output captured and a timeout, runs the image checks of `gpuenv validate --image`.
#include <glob.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ostream>

#include "cli/commands.hpp"
#include "cli/render.hpp"
#include "images/assemble/image_build.hpp"
#include "base/process/command_runner.hpp"
#include "images/rootfs/ld_cache.hpp"
#include "images/run/unpack.hpp"

namespace gpuenv::cli {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> nvidia_devices() {
  std::vector<std::string> out;
  for (const char* pattern : {"/dev/nvidia*", "/dev/nvidia-caps/*"}) {
    glob_t g{};
    if (::glob(pattern, 0, nullptr, &g) == 0)
      for (std::size_t i = 0; i < g.gl_pathc; ++i)
        if (!fs::is_directory(g.gl_pathv[i])) out.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
  }
  return out;
}

/// The host's driver libraries (libcuda.so.1, libnvidia-ml.so.1, ...) as its dynamic linker cache names them.
std::vector<std::pair<std::string, std::string>> driver_libraries() {
  std::vector<std::pair<std::string, std::string>> out;
  auto cache = images::scan_ld_cache("/", images::LdCacheOptions{});
  if (!cache) return out;
  std::error_code ec;
  for (const auto& e : cache->entries) {
    if (e.flags != 0x0303 || !images::is_driver_library(e.key)) continue;
    const fs::path real = fs::canonical(e.path, ec);
    if (!ec) out.emplace_back(real.string(), e.key);
  }
  return out;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return k_exit_environment;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return k_exit_environment;
}

std::vector<char*> c_argv(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

bool have_bwrap() {
  for (const char* dir : {"/usr/bin", "/bin", "/usr/local/bin"})
    if (::access((std::string(dir) + "/bwrap").c_str(), X_OK) == 0) return true;
  return false;
}

/// The first of `paths` that is an executable file, or "".
std::string first_executable(std::initializer_list<const char*> paths) {
  for (const char* p : paths)
    if (::access(p, X_OK) == 0) return p;
  return {};
}

}  // namespace

Result<images::UnpackedImage> unpack_image_argument(const std::string& image, const Context& ctx) {
  std::string layout = image, ref;
  if (!fs::is_directory(layout)) {
    const auto colon = image.rfind(':');
    if (colon != std::string::npos && fs::is_directory(image.substr(0, colon))) {
      layout = image.substr(0, colon);
      ref = image.substr(colon + 1);
    } else {
      return make_error(ErrorKind::usage, "run.no_image", "no OCI layout directory at '" + image + "'", image,
                        "give the directory `gpuenv build` wrote (gpuenv-out/NAME), optionally as DIR:REF");
    }
  }
  return images::unpack_image(layout, ref, cache_root(ctx) + "/rootfs");
}

images::SandboxRequest image_sandbox(const images::UnpackedImage& image, std::vector<std::string> command, bool gpu) {
  images::SandboxRequest rq;
  rq.rootfs = image.rootfs;
  rq.command = command.empty() ? image.command : std::move(command);
  rq.env = image.env;
  rq.working_dir = image.working_dir;
  if (gpu) {
    rq.devices = nvidia_devices();
    rq.driver_libraries = driver_libraries();
  }
  return rq;
}

Result<validate::ImageRun> run_in_image_captured(const images::SandboxRequest& request, std::chrono::milliseconds timeout) {
  std::vector<std::string> argv;
  if (have_bwrap()) {
    argv = images::bwrap_arguments(request);
    argv.insert(argv.begin(), "bwrap");
  } else {
    // Without bubblewrap: the host's env and chroot run the command in the tree with exactly the image's
    // environment (root only; no private /dev or /proc, so no GPU binding).
    const std::string env = first_executable({"/usr/bin/env", "/bin/env"});
    const std::string chroot = first_executable({"/usr/sbin/chroot", "/usr/bin/chroot", "/sbin/chroot"});
    if (::geteuid() != 0 || env.empty() || chroot.empty()) {
      return make_error(ErrorKind::environment, "run.no_sandbox", "bubblewrap (bwrap) is missing and chroot needs root", "",
                        "install bubblewrap (Debian package bubblewrap)");
    }
    argv = {env, "-i"};
    argv.insert(argv.end(), request.env.begin(), request.env.end());
    argv.insert(argv.end(), {chroot, request.rootfs});
    argv.insert(argv.end(), request.command.begin(), request.command.end());
  }
  auto result = gpuenv::make_process_runner()->run(argv, {}, timeout);
  if (!result) {
    if (result.error().id == "process.timeout") {
      validate::ImageRun timed_out;
      timed_out.exit_code = 128 + SIGKILL;
      timed_out.timed_out = true;
      return timed_out;
    }
    return std::move(result).error();
  }
  validate::ImageRun run;
  run.exit_code = result->exit_code;
  run.out = std::move(result->out);
  run.err = std::move(result->err);
  return run;
}

int cmd_run(const RunOptions& o, Context& ctx) {
  auto image = unpack_image_argument(o.image, ctx);
  if (!image) return report_error(image.error(), false, ctx);
  images::SandboxRequest rq = image_sandbox(*image, o.command, !o.no_gpu);
  if (rq.command.empty()) {
    return report_error(make_error(ErrorKind::usage, "run.no_command", "no command given and the image has none", o.image, "add -- COMMAND ARGS..."), false, ctx);
  }
  for (const auto& b : o.binds) {
    auto bind = images::parse_bind(b);
    if (!bind) return report_error(bind.error(), false, ctx);
    // The image's tree is read-only and shared: a mount point must exist in it, or lie in the sandbox's own
    // writable tmpfs (/tmp, /var/tmp, /run), where bubblewrap makes the parents.
    const std::string& dest = bind->second;
    const bool in_tmpfs = dest.rfind("/tmp/", 0) == 0 || dest.rfind("/var/tmp/", 0) == 0 || dest.rfind("/run/", 0) == 0;
    struct stat st {};
    if (!in_tmpfs && ::lstat((rq.rootfs + dest).c_str(), &st) != 0) {
      return report_error(make_error(ErrorKind::usage, "run.bad_bind", "--bind " + b + ": " + dest + " does not exist in the image, whose tree is read-only", "",
                                     "bind to a path the image has, or under /tmp, /var/tmp or /run"),
                          false, ctx);
    }
    rq.binds.push_back(std::move(*bind));
  }
  ctx.out->flush();
  if (have_bwrap()) {
    std::vector<std::string> args = images::bwrap_arguments(rq);
    args.insert(args.begin(), "bwrap");
    const pid_t pid = ::fork();
    if (pid < 0) return report_error(make_error(ErrorKind::environment, "run.spawn", std::string("cannot fork: ") + std::strerror(errno), "", ""), false, ctx);
    if (pid == 0) {
      auto argv = c_argv(args);
      ::execvp("bwrap", argv.data());
      std::fprintf(stderr, "error: cannot run bwrap: %s\n", std::strerror(errno));
      ::_exit(127);
    }
    return wait_for(pid);
  }
  // Without bubblewrap: a plain chroot (root only; no private /dev or /proc, no GPU binding, no binds).
  if (!rq.binds.empty()) {
    return report_error(make_error(ErrorKind::environment, "run.no_sandbox", "--bind needs bubblewrap (bwrap), which is missing", "",
                                   "install bubblewrap (Debian package bubblewrap)"),
                        false, ctx);
  }
  if (::geteuid() != 0) {
    return report_error(make_error(ErrorKind::environment, "run.no_sandbox", "bubblewrap (bwrap) is missing and chroot needs root", "",
                                   "install bubblewrap (Debian package bubblewrap)"),
                        false, ctx);
  }
  std::vector<std::string> env = rq.env;
  std::vector<std::string> cmd = rq.command;
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chroot(rq.rootfs.c_str()) != 0 || ::chdir(rq.working_dir.c_str()) != 0) {
      std::fprintf(stderr, "error: cannot enter %s: %s\n", rq.rootfs.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    ::clearenv();
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    auto argv = c_argv(cmd);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "error: cannot run %s in the image: %s\n", cmd[0].c_str(), std::strerror(errno));
    ::_exit(127);
  }
  if (pid < 0) return report_error(make_error(ErrorKind::environment, "run.spawn", std::string("cannot fork: ") + std::strerror(errno), "", ""), false, ctx);
  return wait_for(pid);
}

}  // namespace gpuenv::cli
