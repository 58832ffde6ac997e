#include "base/cache/work_dir.hpp"

#include "base/file_io.hpp"
#include "base/file_lock.hpp"
#include "base/unique_fd.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>

namespace gpuenv {
namespace {

namespace fs = std::filesystem;

constexpr const char* k_lock_name = ".lock";

/// The lock of a work directory: exclusive, tried once (nobody else holds a lock file that was just created, and
/// a sweeper passes by a directory whose lock is held).
LockOptions work_dir_lock() {
  LockOptions o;
  o.what = "the work directory";
  o.io = k_cache_io;
  o.locked_id = "cache.locked";
  return o;
}

/// The sweep's: tried once per work directory, and a held lock's error is discarded, so nobody's /proc is read.
LockOptions sweep_lock() {
  LockOptions o = work_dir_lock();
  o.describe = false;
  return o;
}

}  // namespace

Result<std::unique_ptr<WorkDir>> WorkDir::create(const std::string& cache_root) {
  const fs::path tmp = fs::path(cache_root) / "tmp";
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) return io_error(k_cache_io, "cannot create the cache's tmp directory", tmp.string(), ec.value());
  std::random_device rd;
  std::string path;
  for (int attempt = 0;; ++attempt) {
    path = (tmp / (std::to_string(::getpid()) + "-" + std::to_string(rd()) + "-work")).string();
    if (::mkdir(path.c_str(), 0700) == 0) break;
    if (errno != EEXIST || attempt > 16) return io_error(k_cache_io, "cannot create a work directory", path, errno);
  }
  const std::string pending = path + "/.lock-pending";
  UniqueFd fd(::open(pending.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    const int error = errno;
    fs::remove_all(path, ec);
    return io_error(k_cache_io, "cannot create the work directory's lock", pending, error);
  }
  auto lock = FileLock::lock(std::move(fd), pending, work_dir_lock());
  if (!lock) {
    fs::remove_all(path, ec);
    return std::move(lock).error();
  }
  if (::rename(pending.c_str(), (path + "/" + k_lock_name).c_str()) != 0) {
    const int error = errno;
    fs::remove_all(path, ec);
    return io_error(k_cache_io, "cannot lock the work directory", path, error);
  }
  return std::unique_ptr<WorkDir>(new WorkDir(path, std::move(*lock)));
}

WorkDir::~WorkDir() {
  std::error_code ec;
  fs::remove_all(m_path, ec);  // while still locked (m_lock is released after this body): no sweeper takes it half-removed
}

std::size_t remove_dead_writers_files(const std::string& cache_root) {
  std::size_t removed = 0;
  std::error_code ec;
  const std::string tmp = (fs::path(cache_root) / "tmp").string();
  const UniqueFd dir(::open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return 0;
  for (fs::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e;
    const std::string name = it->path().filename().string();
    if (it->is_regular_file(e) && !e && (writer_gone(name, '-') || untouched_for_a_day(dir.get(), name.c_str())) && fs::remove(it->path(), e) && !e)
      ++removed;
  }
  return removed;
}

std::size_t sweep_abandoned_work_dirs(const std::string& cache_root) {
  remove_dead_writers_files(cache_root);  // a killed download's .part too
  std::size_t removed = 0;
  std::error_code ec;
  const auto day_ago = fs::file_time_type::clock::now() - std::chrono::hours(24);
  for (fs::directory_iterator it(fs::path(cache_root) / "tmp", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e;
    if (!it->is_directory(e) || e) continue;
    const fs::path dir = it->path();
    const fs::path lock = dir / k_lock_name;
    UniqueFd fd(::open(lock.c_str(), O_RDWR | O_CLOEXEC));
    if (fd.get() < 0) {
      // No lock: a directory being created right now (young), or one from before work directories were locked.
      if (errno == ENOENT && fs::last_write_time(dir, e) < day_ago && !e) {
        fs::remove_all(dir, e);
        if (!e) ++removed;
      }
      continue;
    }
    // Tried once: a held lock is a live command's, and any other failure leaves the directory alone too.
    if (auto held = FileLock::lock(std::move(fd), lock.string(), sweep_lock())) {
      // Nobody held it: its command is gone. Removed while we hold the lock.
      fs::remove_all(dir, e);
      if (!e) ++removed;
    }
  }
  return removed;
}

}  // namespace gpuenv
