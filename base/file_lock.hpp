#pragma once
// The one file lock: flock(2) on a lock file, shared or exclusive, held by an open descriptor and released when it
// is closed (by FileLock's destructor, or by the kernel when the process dies, however it dies).
//
// flock has no timed wait, so a bounded wait polls (a try every 25 ms) until its patience runs out; an unbounded
// one blocks in the kernel. Both retry a call a signal interrupted. When the patience runs out the error names the
// holders the kernel reports in /proc/locks for the lock file's device and inode, with their command names: those
// are the processes of this machine visible in this PID namespace. /proc/locks names the superblock's device, which
// is not fstat's st_dev on a btrfs subvolume or overlayfs, so when no holder matches both the inode alone is
// matched. A holder on another machine sharing the directory (NFS) or in another PID namespace cannot be seen, and
// the error says so instead of guessing.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv {

/// Whether other holders may hold the lock at the same time (shared) or none may (exclusive).
enum class LockMode { shared, exclusive };

/// How long, and under which error ids, to wait for a lock.
struct LockOptions {
  /// Waiting forever: flock blocks until the holders release the lock.
  static constexpr std::chrono::milliseconds k_forever = std::chrono::milliseconds::max();

  LockMode mode = LockMode::exclusive;
  std::chrono::milliseconds patience{0};  ///< how long to wait for the holders; zero: try once; k_forever: block
  std::string what = "the lock file";     ///< what the lock guards, for messages ("the cache", "this image's marks")
  IoArea io{"io.error", "check the path, its permissions and free disk space"};  ///< the errors of open or flock failing
  std::string locked_id = "io.locked";    ///< the error id when the patience ran out
  std::string locked_hint;                ///< its hint; empty: "wait for the holder to finish"
  mode_t create_mode = 0644;              ///< the lock file's mode when acquire creates it
  bool describe = true;                   ///< name the holders in the LOCKED_ID error (reads /proc); false where the
                                          ///< caller discards that error (a sweep trying each lock once)
};

/// A held flock; released when destroyed.
class FileLock {
 public:
  /// Opens PATH (created with CREATE_MODE when absent; its directory must exist) and locks it. Errors: io_error(IO)
  /// when it cannot be opened or locked; LOCKED_ID (environment) when the patience ran out, naming WHAT, the
  /// patience and the holders (describe_holders).
  static Result<FileLock> acquire(const std::string& path, const LockOptions& options);
  /// Locks the open file FD (a lock file the caller opened under its own rule, e.g. O_EXCL); PATH names it in
  /// messages. The same errors as acquire; FD is closed on failure.
  static Result<FileLock> lock(UniqueFd fd, const std::string& path, const LockOptions& options);

  FileLock(FileLock&&) noexcept = default;
  FileLock& operator=(FileLock&&) noexcept = default;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() = default;  ///< closing the descriptor releases the lock

  /// The locked file's descriptor (to write into it, or to tell it apart).
  [[nodiscard]] int fd() const { return m_fd.get(); }
  /// The lock file's path as the caller named it.
  [[nodiscard]] const std::string& path() const { return m_path; }

 private:
  FileLock(UniqueFd fd, std::string path) : m_fd(std::move(fd)), m_path(std::move(path)) {}
  UniqueFd m_fd;
  std::string m_path;
};

/// The PIDs that /proc/locks lists as holding a flock on the file open as FD (waiters left out), sorted; empty
/// when there are none that this PID namespace can see, or /proc/locks cannot be read.
std::vector<long> flock_holders(int fd);

/// The PIDs that PROC_LOCKS (the text of /proc/locks) lists as holding a flock on inode INODE of the device
/// MAJOR:MINOR (waiters left out), sorted and unique. When none matches the device and inode, those matching the
/// inode alone (the device /proc/locks names is the superblock's, not st_dev on btrfs subvolumes or overlayfs).
/// Malformed lines are skipped.
std::vector<long> flock_holders_in(std::string_view proc_locks, unsigned major, unsigned minor, unsigned long long inode);

/// "pid 4242 (gpuenv)" for each holder of the file open as FD, joined with ", "; or a sentence saying that no
/// holder is visible from here and why that can be (another machine sharing the directory, another PID namespace).
std::string describe_holders(int fd);

}  // namespace gpuenv
