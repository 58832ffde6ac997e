// gpuenv run IMAGE -- CMD...: unpack (cached) and run a command inside an image with bubblewrap (chroot when
// bubblewrap is missing), with the host's NVIDIA devices and driver libraries bound in when present.
#include <glob.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ostream>

#include "cli/commands.hpp"
#include "cli/render.hpp"
#include "images/build/image_build.hpp"
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

}  // namespace

int cmd_run(const RunOptions& o, Context& ctx) {
  std::string layout = o.image, ref;
  if (!fs::is_directory(layout)) {
    const auto colon = o.image.rfind(':');
    if (colon != std::string::npos && fs::is_directory(o.image.substr(0, colon))) {
      layout = o.image.substr(0, colon);
      ref = o.image.substr(colon + 1);
    } else {
      return report_error(make_error(ErrorKind::usage, "run.no_image", "no OCI layout directory at '" + o.image + "'", o.image,
                                     "give the directory `gpuenv build` wrote (gpuenv-out/NAME), optionally as DIR:REF"),
                          false, ctx);
    }
  }
  auto image = images::unpack_image(layout, ref, cache_root(ctx) + "/rootfs");
  if (!image) return report_error(image.error(), false, ctx);
  images::SandboxRequest rq;
  rq.rootfs = image->rootfs;
  rq.command = o.command.empty() ? image->command : o.command;
  rq.env = image->env;
  rq.working_dir = image->working_dir;
  if (rq.command.empty()) {
    return report_error(make_error(ErrorKind::usage, "run.no_command", "no command given and the image has none", o.image, "add -- COMMAND ARGS..."), false, ctx);
  }
  if (!o.no_gpu) {
    rq.devices = nvidia_devices();
    rq.driver_libraries = driver_libraries();
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
  // Without bubblewrap: a plain chroot (root only; no private /dev or /proc, no GPU binding).
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
