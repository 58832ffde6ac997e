#pragma once
// Scratch directories for one command (a build's root filesystem and layers, gpgv's files) under the cache's tmp/
// directory. Each is locked while its command runs (flock on DIR/.lock, which the kernel releases when the process
// dies, however it dies), so a later command can tell an abandoned one (a build killed by SIGKILL or a power cut)
// from a live one, here or on another host sharing the cache, and remove it: nothing half-written stays behind.
#include <memory>
#include <string>

#include "base/error.hpp"
#include "base/file_lock.hpp"

namespace gpuenv {

/// The `cache.io` errors of the cache's directory store and work directories.
inline constexpr IoArea k_cache_io{"cache.io", "check free disk space and permissions of the cache directory (GPUENV_CACHE_DIR)"};

/// A locked scratch directory, removed with everything in it when destroyed.
class WorkDir {
 public:
  /// Creates ROOT/tmp/<pid>-<random>-work and takes its lock. The lock file is locked under a temporary name and
  /// renamed to .lock, so a sweeper never sees an unlocked .lock of a live directory. Fails with `cache.io`.
  static Result<std::unique_ptr<WorkDir>> create(const std::string& cache_root);
  ~WorkDir();
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  [[nodiscard]] const std::string& path() const { return m_path; }

 private:
  WorkDir(std::string path, FileLock lock) : m_path(std::move(path)), m_lock(std::move(lock)) {}
  std::string m_path;
  FileLock m_lock;  ///< declared after m_path: released after the destructor removed the directory
};

/// Removes the files under ROOT/tmp whose writer has exited: downloads (".part") and blobs being written, named
/// "PID-HOST-N-RANDOM" by BlobStore::temp_path (writer_gone: only this machine's and PID namespace's writers are
/// judged by PID), and any file nobody wrote to for a day (a writer on another machine sharing the cache). Returns
/// how many. Never fails: what cannot be removed stays.
std::size_t remove_dead_writers_files(const std::string& cache_root);

/// Removes the directories under ROOT/tmp that no process holds: those whose .lock can be locked (their command
/// died), and those without a .lock whose last change is more than a day old (left by gpuenv before work
/// directories were locked); and first, remove_dead_writers_files. Returns how many directories were removed. Never fails: what cannot be read or removed stays.
std::size_t sweep_abandoned_work_dirs(const std::string& cache_root);

}  // namespace gpuenv
