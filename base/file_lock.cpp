#include "base/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/safe_text.hpp"
#include "base/text.hpp"

namespace gpuenv {
namespace {

/// How often a bounded wait tries again: short beside the waits it bounds (seconds), long beside a flock call.
constexpr auto k_poll_interval = std::chrono::milliseconds(25);

std::string patience_text(std::chrono::milliseconds patience) {
  if (patience.count() % 1000 == 0) return std::to_string(patience.count() / 1000) + " s";
  return std::to_string(patience.count()) + " ms";
}

/// flock with LOCK_NB, retried when a signal interrupts it: 0, or the errno that stopped it.
int try_flock(int fd, int how) {
  while (::flock(fd, how | LOCK_NB) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

/// flock that blocks until it holds the lock, retried when a signal interrupts it: 0, or the errno that stopped it.
int blocking_flock(int fd, int how) {
  while (::flock(fd, how) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

/// The command name of PID from /proc (already made safe to print), or "" when it is gone or hidden.
std::string command_of(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return safe_text(name, 64);
}

}  // namespace

std::vector<long> flock_holders(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return {};
  std::ostringstream id;
  id << std::hex;
  id.fill('0');
  id.width(2);
  id << major(st.st_dev) << ':';
  id.width(2);
  id << minor(st.st_dev) << ':' << std::dec << st.st_ino;
  const std::string wanted = id.str();
  // "1: FLOCK  ADVISORY  WRITE 7849 fe:00:10953026 0 EOF"; a waiter's line has "->" after the number.
  std::ifstream in("/proc/locks");
  std::vector<long> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string number, type, advisory, access, device;
    long pid = 0;
    if (!(fields >> number >> type) || type != "FLOCK") continue;
    if (!(fields >> advisory >> access >> pid >> device) || device != wanted || pid <= 0) continue;
    out.push_back(pid);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string describe_holders(int fd) {
  const std::vector<long> pids = flock_holders(fd);
  if (pids.empty()) {
    return "no holder is visible from here (one on another machine sharing the directory, or in another PID "
           "namespace, cannot be seen)";
  }
  std::vector<std::string> parts;
  for (const long pid : pids) {
    const std::string name = command_of(pid);
    parts.push_back("pid " + std::to_string(pid) + (name.empty() ? "" : " (" + name + ")"));
  }
  return "held by " + join(parts, ", ");
}

Result<FileLock> FileLock::acquire(const std::string& path, const LockOptions& options) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, options.create_mode));
  if (fd.get() < 0) return io_error(options.io, "cannot open the lock of " + options.what, path);
  return lock(std::move(fd), path, options);
}

Result<FileLock> FileLock::lock(UniqueFd fd, const std::string& path, const LockOptions& options) {
  const int how = options.mode == LockMode::shared ? LOCK_SH : LOCK_EX;
  if (options.patience == LockOptions::k_forever) {
    if (const int err = blocking_flock(fd.get(), how); err != 0) return io_error(options.io, "cannot lock " + options.what, path, err);
    return FileLock(std::move(fd), path);
  }
  const auto until = std::chrono::steady_clock::now() + options.patience;
  for (;;) {
    const int err = try_flock(fd.get(), how);
    if (err == 0) return FileLock(std::move(fd), path);
    if (err != EWOULDBLOCK) return io_error(options.io, "cannot lock " + options.what, path, err);
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(k_poll_interval, until - std::chrono::steady_clock::now()));
  }
  const std::string waited = options.patience.count() == 0 ? "it was busy" : "gave up after " + patience_text(options.patience);
  return make_error(ErrorKind::environment, options.locked_id, options.what + " is locked, " + describe_holders(fd.get()) + "; " + waited, path,
                    options.locked_hint.empty() ? "wait for the holder to finish" : options.locked_hint);
}

}  // namespace gpuenv
