#include "images/run/sandbox.hpp"

#include <glob.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "images/plan/gpu_rules.hpp"
#include "images/rootfs/ld_cache.hpp"

namespace gpuenv::images {
namespace {

namespace fs = std::filesystem;

Error no_sandbox(const std::string& what) {
  return make_error(ErrorKind::environment, "run.no_sandbox", what, "", "install bubblewrap (Debian package bubblewrap)");
}

constexpr IoArea k_spawn_io{"run.spawn", ""};

Error spawn_failed() { return io_error(k_spawn_io, "cannot fork", ""); }

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

/// The first of `paths` that is an executable file, or "".
std::string first_executable(std::initializer_list<const char*> paths) {
  for (const char* p : paths)
    if (::access(p, X_OK) == 0) return p;
  return {};
}

/// bwrap with its arguments for `request`.
std::vector<std::string> bwrap_command(const SandboxRequest& request) {
  std::vector<std::string> argv = bwrap_arguments(request);
  argv.insert(argv.begin(), "bwrap");
  return argv;
}

/// Without bubblewrap: the host's env and chroot run the command in the tree with exactly the image's
/// environment (root only; no private /dev or /proc, so no GPU binding).
Result<std::vector<std::string>> chroot_command(const SandboxRequest& request) {
  const std::string env = first_executable({"/usr/bin/env", "/bin/env"});
  const std::string chroot = first_executable({"/usr/sbin/chroot", "/usr/bin/chroot", "/sbin/chroot"});
  if (::geteuid() != 0 || env.empty() || chroot.empty()) return no_sandbox("bubblewrap (bwrap) is missing and chroot needs root");
  std::vector<std::string> argv = {env, "-i"};
  argv.insert(argv.end(), request.env.begin(), request.env.end());
  argv.insert(argv.end(), {chroot, request.rootfs});
  argv.insert(argv.end(), request.command.begin(), request.command.end());
  return argv;
}

/// Forks and execs bubblewrap with the terminal; its exit status.
Result<int> spawn_bwrap(const SandboxRequest& request) {
  std::vector<std::string> args = bwrap_command(request);
  const pid_t pid = ::fork();
  if (pid < 0) return spawn_failed();
  if (pid == 0) {
    auto argv = c_argv(args);
    ::execvp("bwrap", argv.data());
    std::fprintf(stderr, "error: cannot run bwrap: %s\n", std::strerror(errno));
    ::_exit(127);
  }
  return wait_for(pid);
}

/// Forks, enters the tree with chroot(2) and execs the command with exactly the image's environment.
Result<int> spawn_chroot(const SandboxRequest& request) {
  std::vector<std::string> env = request.env;
  std::vector<std::string> cmd = request.command;
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chroot(request.rootfs.c_str()) != 0 || ::chdir(request.working_dir.c_str()) != 0) {
      std::fprintf(stderr, "error: cannot enter %s: %s\n", request.rootfs.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    ::clearenv();
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    auto argv = c_argv(cmd);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "error: cannot run %s in the image: %s\n", cmd[0].c_str(), std::strerror(errno));
    ::_exit(127);
  }
  if (pid < 0) return spawn_failed();
  return wait_for(pid);
}

}  // namespace

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

std::vector<std::pair<std::string, std::string>> driver_libraries() {
  std::vector<std::pair<std::string, std::string>> out;
  auto cache = scan_ld_cache("/", LdCacheOptions{});
  if (!cache) return out;
  std::error_code ec;
  for (const auto& e : cache->entries) {
    if (e.flags != 0x0303 || !is_driver_library(e.key)) continue;
    const fs::path real = fs::canonical(e.path, ec);
    if (!ec) out.emplace_back(real.string(), e.key);
  }
  return out;
}

bool have_bwrap() {
  for (const char* dir : {"/usr/bin", "/bin", "/usr/local/bin"})
    if (::access((std::string(dir) + "/bwrap").c_str(), X_OK) == 0) return true;
  return false;
}

Result<UnpackedImage> unpack_layout_argument(const std::string& image, const std::string& cache_dir, const resolver::Platform& platform) {
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
  return unpack_image(layout, ref, cache_dir, platform);
}

std::optional<std::string> program_in_image(const std::string& rootfs, const std::vector<std::string>& env, const std::string& command) {
  if (command.find('/') != std::string::npos) return command;
  std::string path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (const auto& e : env)
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  std::size_t at = 0;
  while (at <= path.size()) {
    const std::size_t colon = std::min(path.find(':', at), path.size());
    const std::string dir = path.substr(at, colon - at);
    at = colon + 1;
    if (dir.empty() || dir.front() != '/' || dir.find("..") != std::string::npos) continue;
    struct stat st {};
    // lstat of the last component only: a link there is the image's own, resolved inside the sandbox.
    if (::lstat((rootfs + dir + "/" + command).c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) return dir + "/" + command;
  }
  return std::nullopt;
}

Result<std::string> find_emulator(const resolver::Platform& platform, const std::string& explicit_path, const std::string& path_variable) {
  const std::string name(platform.facts().qemu_user);
  auto usable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (!explicit_path.empty()) {
    if (!usable(explicit_path))
      return make_error(ErrorKind::usage, "run.bad_emulator", "the emulator " + explicit_path + " is not an executable file", "--emulator",
                        "name a static user-mode emulator for " + platform.str() + ", e.g. /usr/bin/" + name);
    return fs::absolute(explicit_path).string();
  }
  std::size_t at = 0;
  while (at <= path_variable.size()) {
    const std::size_t colon = std::min(path_variable.find(':', at), path_variable.size());
    const std::string dir = path_variable.substr(at, colon - at);
    at = colon + 1;
    if (!dir.empty() && usable(dir + "/" + name)) return fs::absolute(dir + "/" + name).string();
  }
  return make_error(ErrorKind::environment, "run.no_emulator", "the image is for " + platform.str() + " and this host is " + resolver::native_platform().str() +
                    ", and no " + name + " is on PATH", "--platform",
                    "install qemu-user-static (Debian: apt-get install qemu-user-static) or name the emulator with --emulator PATH");
}

SandboxRequest image_sandbox(const UnpackedImage& image, std::vector<std::string> command, bool gpu) {
  SandboxRequest rq;
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

Result<std::pair<std::string, std::string>> parse_bind_into(const std::string& text, const std::string& rootfs) {
  GPUENV_TRY(bind, parse_bind(text));
  const std::string& dest = bind.second;
  const bool in_tmpfs = dest.rfind("/tmp/", 0) == 0 || dest.rfind("/var/tmp/", 0) == 0 || dest.rfind("/run/", 0) == 0;
  struct stat st {};
  if (!in_tmpfs && ::lstat((rootfs + dest).c_str(), &st) != 0) {
    return make_error(ErrorKind::usage, "run.bad_bind", "--bind " + text + ": " + dest + " does not exist in the image, whose tree is read-only", "",
                      "bind to a path the image has, or under /tmp, /var/tmp or /run");
  }
  return bind;
}

Result<SandboxRun> run_sandbox_captured(const SandboxRequest& request, std::chrono::milliseconds timeout, CommandRunner& runner) {
  std::vector<std::string> argv;
  if (have_bwrap()) {
    argv = bwrap_command(request);
  } else {
    GPUENV_TRY(chrooted, chroot_command(request));
    argv = std::move(chrooted);
  }
  auto result = runner.run(argv, {}, timeout);
  if (!result) {
    if (result.error().id == "process.timeout") {
      SandboxRun timed_out;
      timed_out.exit_code = 128 + SIGKILL;
      timed_out.timed_out = true;
      return timed_out;
    }
    return std::move(result).error();
  }
  SandboxRun run;
  run.exit_code = result->exit_code;
  run.out = std::move(result->out);
  run.err = std::move(result->err);
  return run;
}

Result<int> run_sandbox_interactive(const SandboxRequest& request) {
  if (have_bwrap()) return spawn_bwrap(request);
  // Without bubblewrap: a plain chroot (root only; no private /dev or /proc, no GPU binding, no binds).
  if (!request.binds.empty()) return no_sandbox("--bind needs bubblewrap (bwrap), which is missing");
  if (::geteuid() != 0) return no_sandbox("bubblewrap (bwrap) is missing and chroot needs root");
  return spawn_chroot(request);
}

}  // namespace gpuenv::images
