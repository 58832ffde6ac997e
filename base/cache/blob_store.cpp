#include "base/cache/blob_store.hpp"

#include "base/cache/work_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "base/digest.hpp"
#include "base/file_lock.hpp"
#include "base/file_io.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv {
namespace {

namespace fs = std::filesystem;

/// The cache's lock, ROOT/lock: writers hold it shared between writing a blob and renaming it into place, prune
/// exclusive while it deletes. Both wait for it as long as it takes (the holders' critical sections are short).
Result<FileLock> lock_cache(const std::string& root, LockMode mode) {
  LockOptions o;
  o.mode = mode;
  o.patience = LockOptions::k_forever;
  o.what = "the cache";
  o.io = k_cache_io;
  o.locked_id = "cache.locked";
  return FileLock::acquire(root + "/lock", o);
}

class DirBlobStore final : public BlobStore {
 public:
  explicit DirBlobStore(std::string root) : m_root(std::move(root)) {}

  Result<std::optional<std::string>> find(const Digest& sha) override {
    if (sha.empty()) return no_digest();
    const std::string p = blob_path(sha);
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return std::optional<std::string>{};
      return io_error(k_cache_io, "cannot stat", p);
    }
    ::utimensat(AT_FDCWD, p.c_str(), nullptr, 0);  // last used = now (best effort)
    return std::optional<std::string>(p);
  }

  Result<std::string> temp_path() override {
    if (auto st = ensure_dirs(); !st) return std::move(st).error();
    std::call_once(m_swept, [this] { remove_dead_writers_files(m_root); });  // the next command cleans up after a killed one
    static std::atomic<unsigned> counter{0};
    std::random_device rd;
    return m_root + "/tmp/" + writer_stamp('-') + "-" + std::to_string(counter++) + "-" + std::to_string(rd());
  }

  Result<std::string> adopt(const std::string& file, const Digest& sha, bool already_verified) override {
    if (sha.empty()) return no_digest();
    if (already_verified) return install(file, sha);
    auto actual = sha256_of_file(file);
    if (!actual) return std::move(actual).error();
    if (*actual != sha) {
      ::unlink(file.c_str());
      return make_error(ErrorKind::environment, "cache.hash_mismatch",
                        "file has sha256 " + actual->hex() + ", expected " + sha.hex(), file,
                        "the download was corrupted or the index is wrong; it was not cached");
    }
    return install(file, sha);
  }

  Result<Digest> put(std::string_view bytes) override {
    auto tmp = temp_path();
    if (!tmp) return std::move(tmp).error();
    const int fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return io_error(k_cache_io, "cannot create", *tmp);
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        Error e = io_error(k_cache_io, "cannot write", *tmp);
        ::close(fd);
        ::unlink(tmp->c_str());
        return e;
      }
      done += static_cast<std::size_t>(w);
    }
    const int synced = ::fsync(fd) == 0 ? 0 : errno;
    const int closed = ::close(fd) == 0 ? 0 : errno;  // closed whether or not fsync failed
    if (synced != 0 || closed != 0) {
      ::unlink(tmp->c_str());
      return io_error(k_cache_io, "cannot flush", *tmp, synced != 0 ? synced : closed);
    }
    auto sha = sha256_of_file(*tmp);
    if (!sha) {
      ::unlink(tmp->c_str());
      return std::move(sha).error();
    }
    auto placed = install(*tmp, *sha);
    if (!placed) return std::move(placed).error();
    return *sha;
  }

  Result<std::vector<BlobInfo>> list() override {
    std::vector<BlobInfo> out;
    std::error_code ec;
    const fs::path dir = fs::path(m_root) / "blobs" / "sha256";
    if (!fs::exists(dir, ec)) return out;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      struct stat st {};
      if (::stat(it->path().c_str(), &st) != 0) continue;
      auto digest = Digest::from_hex(it->path().filename().string());
      if (!digest) continue;  // not a blob (a stray file); prune leaves it alone
      BlobInfo b;
      b.sha256 = std::move(*digest);
      b.bytes = static_cast<std::uint64_t>(st.st_size);
      b.last_used = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec));
      out.push_back(std::move(b));
    }
    if (ec) return make_error(ErrorKind::environment, "cache.io", "cannot list the cache: " + ec.message(), dir.string(), "");
    std::sort(out.begin(), out.end(), [](const BlobInfo& a, const BlobInfo& b) { return a.sha256 < b.sha256; });
    return out;
  }

  Result<std::uint64_t> prune(std::chrono::system_clock::time_point cutoff) override {
    if (auto st = ensure_dirs(); !st) return std::move(st).error();
    GPUENV_TRY(lock, lock_cache(m_root, LockMode::exclusive));  // no writer is between write and rename while we delete
    auto blobs = list();
    if (!blobs) return std::move(blobs).error();
    std::uint64_t freed = 0;
    for (const auto& b : *blobs) {
      if (b.last_used >= cutoff && cutoff != std::chrono::system_clock::time_point::max()) continue;
      if (::unlink(blob_path(b.sha256).c_str()) == 0) freed += b.bytes;
    }
    // Temporary files of dead writers (live writers do not hold the lock while downloading).
    remove_dead_writers_files(m_root);
    return freed;
  }

 private:
  Error no_digest() const {
    return make_error(ErrorKind::internal, "cache.bad_digest", "a blob was asked for without a sha256", m_root, "");
  }

  [[nodiscard]] std::string blob_path(const Digest& sha) const {
    return m_root + "/blobs/sha256/" + sha.hex().substr(0, 2) + "/" + sha.hex();
  }

  Status ensure_dirs() const {
    std::error_code ec;
    fs::create_directories(fs::path(m_root) / "tmp", ec);
    if (!ec) fs::create_directories(fs::path(m_root) / "blobs" / "sha256", ec);
    // The cache holds unpacked images (their setuid files) and registry answers: private to its owner, and
    // tightened when an older gpuenv made it 0755. Best effort: a cache another user owns stays usable (the
    // unpacked roots' own directory is made private strictly, by unpack).
    if (!ec) (void)::chmod(m_root.c_str(), 0700);
    if (ec) {
      return make_error(ErrorKind::environment, "cache.io", "cannot create the cache directory: " + ec.message(), m_root,
                        "set GPUENV_CACHE_DIR to a writable directory");
    }
    return ok_status();
  }

  /// Moves FILE (a temporary of this store's) into the cache as SHA; FILE is gone afterwards, placed or not.
  Result<std::string> install(const std::string& file, const Digest& sha) {
    auto placed = place(file, sha);
    if (!placed) ::unlink(file.c_str());
    return placed;
  }

  Result<std::string> place(const std::string& file, const Digest& sha) {
    if (auto st = ensure_dirs(); !st) return std::move(st).error();
    GPUENV_TRY(lock, lock_cache(m_root, LockMode::shared));
    const std::string dest = blob_path(sha);
    std::error_code ec;
    fs::create_directories(fs::path(dest).parent_path(), ec);
    if (ec) return make_error(ErrorKind::environment, "cache.io", "cannot create " + fs::path(dest).parent_path().string() + ": " + ec.message(), dest, "");
    if (const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
    ::chmod(file.c_str(), 0644);
    if (::rename(file.c_str(), dest.c_str()) != 0) return io_error(k_cache_io, "cannot move into the cache", dest);  // same content either way if another process won
    return dest;
  }

  std::string m_root;
  std::once_flag m_swept;
};

}  // namespace

std::unique_ptr<BlobStore> make_dir_blob_store(std::string root) { return std::make_unique<DirBlobStore>(std::move(root)); }

std::string default_cache_root(const std::string& gpuenv_cache_dir, const std::string& xdg_cache_home, const std::string& home) {
  if (!gpuenv_cache_dir.empty()) return gpuenv_cache_dir;
  if (!xdg_cache_home.empty()) return xdg_cache_home + "/gpuenv";
  return (home.empty() ? std::string("/tmp") : home) + "/.cache/gpuenv";
}

Result<Digest> sha256_of_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return io_error(k_cache_io, "cannot open", path);
  Sha256 hash;
  std::vector<char> buf(1 << 16);
  while (true) {
    const ssize_t r = ::read(fd.get(), buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error(k_cache_io, "cannot read", path);
    if (r == 0) break;
    hash.update(buf.data(), static_cast<std::size_t>(r));
  }
  return hash.finish_digest();
}

}  // namespace gpuenv
