#include "base/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <optional>
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

/// flock(FD, HOW), retried when a signal interrupts it: 0, or the errno that stopped it (EWOULDBLOCK for a busy
/// lock when HOW has LOCK_NB).
int flock_retrying(int fd, int how) {
  while (::flock(fd, how) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

/// The most of /proc/locks read: every lock of the machine is a line of it (about 60 bytes), and a machine with
/// more than some 60000 locks held names the holders of one lock from the first megabyte's only.
constexpr std::size_t k_max_proc_locks = std::size_t{1} << 20;

/// One holder's line of /proc/locks.
struct FlockLine {
  long pid = 0;
  unsigned major = 0, minor = 0;
  unsigned long long inode = 0;
};


/// TEXT whole as a number in BASE, or nullopt.
template <class T>
std::optional<T> number_of(std::string_view text, int base) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

/// The holder of a flock that LINE of /proc/locks names ("1: FLOCK  ADVISORY  WRITE 7849 fe:00:10953026 0 EOF"),
/// or nullopt for a waiter ("1: -> FLOCK ..."), another kind of lock, or a line not of that form.
std::optional<FlockLine> parse_flock_line(std::string_view line) {
  const std::vector<std::string_view> f = text::split_blanks(line);
  if (f.size() < 6 || f[1] != "FLOCK") return std::nullopt;
  const auto pid = number_of<long>(f[4], 10);
  const std::string_view dev = f[5];
  const auto c1 = dev.find(':');
  const auto c2 = c1 == std::string_view::npos ? c1 : dev.find(':', c1 + 1);
  if (!pid || *pid <= 0 || c2 == std::string_view::npos) return std::nullopt;
  const auto maj = number_of<unsigned>(dev.substr(0, c1), 16);
  const auto min = number_of<unsigned>(dev.substr(c1 + 1, c2 - c1 - 1), 16);
  const auto ino = number_of<unsigned long long>(dev.substr(c2 + 1), 10);
  if (!maj || !min || !ino) return std::nullopt;
  return FlockLine{*pid, *maj, *min, *ino};
}

/// The command name of PID from /proc (already made safe to print), or "" when it is gone or hidden.
std::string command_of(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return safe_text(name, 64);
}

}  // namespace

std::vector<long> flock_holders_in(std::string_view proc_locks, unsigned major, unsigned minor, unsigned long long inode) {
  std::vector<long> exact, same_inode;
  // "1: FLOCK  ADVISORY  WRITE 7849 fe:00:10953026 0 EOF"; a waiter's line has "->" after the number.
  while (!proc_locks.empty()) {
    const auto eol = proc_locks.find('\n');
    const std::string_view line = proc_locks.substr(0, eol);
    proc_locks = eol == std::string_view::npos ? std::string_view() : proc_locks.substr(eol + 1);
    const std::optional<FlockLine> f = parse_flock_line(line);
    if (!f) continue;
    if (f->inode != inode) continue;
    (f->major == major && f->minor == minor ? exact : same_inode).push_back(f->pid);
  }
  std::vector<long>& out = exact.empty() ? same_inode : exact;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return std::move(out);
}

std::vector<long> flock_holders(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return {};
  std::ifstream in("/proc/locks", std::ios::binary);
  if (!in) return {};
  std::string text(k_max_proc_locks, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  // Cut short: the last line may be half of one, and is dropped.
  if (text.size() == k_max_proc_locks) text.resize(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  return flock_holders_in(text, major(st.st_dev), minor(st.st_dev), st.st_ino);
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
    if (const int err = flock_retrying(fd.get(), how); err != 0) return io_error(options.io, "cannot lock " + options.what, path, err);
    return FileLock(std::move(fd), path);
  }
  const auto until = std::chrono::steady_clock::now() + options.patience;
  for (;;) {
    const int err = flock_retrying(fd.get(), how | LOCK_NB);
    if (err == 0) return FileLock(std::move(fd), path);
    if (err != EWOULDBLOCK) return io_error(options.io, "cannot lock " + options.what, path, err);
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(k_poll_interval, until - std::chrono::steady_clock::now()));
  }
  const std::string waited = options.patience.count() == 0 ? "it was busy" : "gave up after " + patience_text(options.patience);
  const std::string holders = options.describe ? ", " + describe_holders(fd.get()) : std::string();
  return make_error(ErrorKind::environment, options.locked_id, options.what + " is locked" + holders + "; " + waited, path,
                    options.locked_hint.empty() ? "wait for the holder to finish" : options.locked_hint);
}

}  // namespace gpuenv
