// The real DataFiles adapter (validate/data_files.hpp): POSIX calls on this machine's file systems.
//
// O_DIRECT: Linux refuses it with EINVAL either at open (file systems without direct I/O, such as tmpfs) or at the
// first read or write (alignment the device does not take). Both fall back to buffered I/O, and a buffered reader
// first drops the file's own pages from the page cache (posix_fadvise POSIX_FADV_DONTNEED), so a second run does not
// measure memory; the host's other caches are never touched (no /proc/sys/vm/drop_caches).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>
#include <vector>

#include "base/unique_fd.hpp"
#include "validate/data_files.hpp"

namespace gpuenv::validate {
namespace posix_data_detail {

// The error of a failed call, its id chosen by errno so the check can tell "missing" from "no space".
Error data_error(const std::string& what, const std::string& path, int err) {
  const char* id = k_data_io;
  switch (err) {
    case ENOENT:
    case ENOTDIR: id = k_data_missing; break;
    case EACCES:
    case EPERM: id = k_data_denied; break;
    case EROFS: id = k_data_read_only; break;
    case ENOSPC:
    case EDQUOT: id = k_data_no_space; break;
    default: break;
  }
  return make_error(ErrorKind::environment, id, what + ": " + std::strerror(err), path, "");
}

// Clears O_DIRECT on an open descriptor; false when the file system refuses.
bool drop_direct(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) == 0;
}

class PosixReadFile final : public DataReadFile {
 public:
  PosixReadFile(UniqueFd fd, bool direct, std::string path) : m_fd(std::move(fd)), m_direct(direct), m_path(std::move(path)) {}
  [[nodiscard]] bool direct() const override { return m_direct; }
  Result<std::size_t> read(std::byte* buffer, std::size_t size) override {
    for (;;) {
      const ssize_t n = ::read(m_fd.get(), buffer, size);
      if (n >= 0) return static_cast<std::size_t>(n);
      if (errno == EINTR) continue;
      if (errno == EINVAL && m_direct && drop_direct(m_fd.get())) {
        // The device took the open but not this read: buffered from here on, the file's cached pages dropped.
        m_direct = false;
        (void)::posix_fadvise(m_fd.get(), 0, 0, POSIX_FADV_DONTNEED);
        continue;
      }
      return data_error("reading", m_path, errno);
    }
  }

 private:
  UniqueFd m_fd;
  bool m_direct;
  std::string m_path;
};

class PosixWriteFile final : public DataWriteFile {
 public:
  PosixWriteFile(UniqueFd fd, bool direct, std::string path) : m_fd(std::move(fd)), m_direct(direct), m_path(std::move(path)) {}
  [[nodiscard]] bool direct() const override { return m_direct; }
  Status write(const std::byte* buffer, std::size_t size) override {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(m_fd.get(), buffer + done, size - done);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EINVAL && m_direct && drop_direct(m_fd.get())) {
        m_direct = false;
        continue;
      }
      return data_error("writing", m_path, n == 0 ? EIO : errno);
    }
    return ok_status();
  }
  Status finish() override {
    if (::fdatasync(m_fd.get()) != 0) return data_error("syncing", m_path, errno);
    // Written pages are clean once synced, so this drops them all: the read that follows comes from the device.
    (void)::posix_fadvise(m_fd.get(), 0, 0, POSIX_FADV_DONTNEED);
    const int fd = m_fd.release();
    if (::close(fd) != 0) return data_error("closing", m_path, errno);
    return ok_status();
  }

 private:
  UniqueFd m_fd;
  bool m_direct;
  std::string m_path;
};

// DIR split at its last '/' into the directory holding it and its name ("." for a name alone).
std::pair<std::string, std::string> split_dir(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const auto slash = dir.rfind('/');
  if (slash == std::string::npos) return {".", dir};
  return {slash == 0 ? "/" : dir.substr(0, slash), dir.substr(slash + 1)};
}

// Opens the directory DIR (the --data path, or one gpuenv made in it) for *at calls. The --data path itself is
// followed when it is a link: the user named it, and every other call here follows it too.
UniqueFd open_dir(const std::string& dir) { return UniqueFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); }

// How long ago ST changed, by the wall clock; 0 when its mtime is ahead of this clock.
std::chrono::seconds age_of(const struct stat& st) {
  timespec now {};
  if (::clock_gettime(CLOCK_REALTIME, &now) != 0 || now.tv_sec <= st.st_mtim.tv_sec) return std::chrono::seconds(0);
  return std::chrono::seconds(now.tv_sec - st.st_mtim.tv_sec);
}

std::string read_line_of(const char* path) {
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return {};
  char buf[128];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return {};
  std::string s(buf, static_cast<std::size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class PosixDataFiles final : public DataFiles {
 public:
  Result<DataPathInfo> inspect(const std::string& path) override {
    DataPathInfo info;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return info;
      return data_error("looking at the data path", path, errno);
    }
    info.kind = S_ISDIR(st.st_mode) ? DataPathKind::directory : S_ISREG(st.st_mode) ? DataPathKind::regular_file : DataPathKind::other;
    info.size = static_cast<std::uint64_t>(st.st_size);
    struct statvfs vfs {};
    if (::statvfs(path.c_str(), &vfs) == 0) {
      info.free_bytes = static_cast<std::uint64_t>(vfs.f_bavail) * static_cast<std::uint64_t>(vfs.f_frsize);
      info.read_only = (vfs.f_flag & ST_RDONLY) != 0;
    }
    return info;
  }

  Result<std::unique_ptr<DataReadFile>> open_read(const std::string& path) override {
    bool direct = true;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT));
    if (fd.get() < 0 && errno == EINVAL) {
      direct = false;
      fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    }
    if (fd.get() < 0) return data_error("opening for reading", path, errno);
    if (!direct) (void)::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
    (void)::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    return std::unique_ptr<DataReadFile>(std::make_unique<PosixReadFile>(std::move(fd), direct, path));
  }

  Result<std::string> make_directory(const std::string& parent, const std::string& prefix) override {
    std::string templ = parent + "/" + prefix + "XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) return data_error("making a directory", parent, errno);
    return std::string(buf.data());
  }

  Result<std::unique_ptr<DataWriteFile>> create(const std::string& path) override {
    constexpr int k_flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
    bool direct = true;
    UniqueFd fd(::open(path.c_str(), k_flags | O_DIRECT, 0600));
    if (fd.get() < 0 && errno == EINVAL) {
      direct = false;
      fd = UniqueFd(::open(path.c_str(), k_flags, 0600));
    }
    if (fd.get() < 0) return data_error("creating", path, errno);
    return std::unique_ptr<DataWriteFile>(std::make_unique<PosixWriteFile>(std::move(fd), direct, path));
  }

  Status write_small(const std::string& path, const std::string& text) override {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.get() < 0) return data_error("creating", path, errno);
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
      return data_error("writing", path, errno == 0 ? EIO : errno);
    if (::fdatasync(fd.get()) != 0) return data_error("syncing", path, errno);
    // The file's name is an entry of its directory: synced too, or a crash could keep the directory without it.
    const UniqueFd dir(open_dir(split_dir(path).first));
    if (dir.get() < 0) return data_error("opening the directory of", path, errno);
    if (::fsync(dir.get()) != 0) return data_error("syncing the directory of", path, errno);
    return ok_status();
  }

  Status rename_directory(const std::string& parent, const std::string& from, const std::string& to) override {
    const UniqueFd dir(open_dir(parent));
    if (dir.get() < 0) return data_error("opening", parent, errno);
    int done = ::renameat2(dir.get(), from.c_str(), dir.get(), to.c_str(), RENAME_NOREPLACE);
    if (done != 0 && (errno == EINVAL || errno == ENOSYS)) {
      // No RENAME_NOREPLACE on this file system: refuse a TO that exists; rename itself fails on a TO that holds
      // anything (ENOTEMPTY), so at worst an empty directory made in between is replaced.
      struct stat st {};
      if (::fstatat(dir.get(), to.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return data_error("renaming " + from + " to " + to, parent, EEXIST);
      done = ::renameat(dir.get(), from.c_str(), dir.get(), to.c_str());
    }
    if (done != 0) return data_error("renaming " + from + " to " + to, parent, errno);
    if (::fsync(dir.get()) != 0) return data_error("syncing", parent, errno);
    return ok_status();
  }

  Result<std::string> read_small(const std::string& path, std::size_t limit) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (fd.get() < 0) return data_error("opening", path, errno);
    std::string out(limit, '\0');
    std::size_t got = 0;
    while (got < limit) {
      const ssize_t n = ::read(fd.get(), out.data() + got, limit - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return data_error("reading", path, errno);
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    out.resize(got);
    return out;
  }

  Result<std::vector<DataEntry>> list(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return data_error("listing", dir, errno);
    std::vector<DataEntry> out;
    const uid_t me = ::geteuid();
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st {};
      if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      out.push_back(DataEntry{name, S_ISDIR(st.st_mode), st.st_uid == me, age_of(st)});
    }
    ::closedir(d);
    return out;
  }

  Status remove_directory(const std::string& dir) override {
    const auto [parent_path, leaf] = split_dir(dir);
    const UniqueFd parent(open_dir(parent_path));
    if (parent.get() < 0) return data_error("opening", parent_path, errno);
    UniqueFd fd(::openat(parent.get(), leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) return data_error("opening", dir, errno);
    const int listed = ::dup(fd.get());
    DIR* d = listed < 0 ? nullptr : ::fdopendir(listed);
    if (d == nullptr) {
      const int err = errno;
      if (listed >= 0) ::close(listed);
      return data_error("listing", dir, err);
    }
    std::vector<std::string> names;
    bool has_directory = false;
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st {};
      if (::fstatat(fd.get(), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) has_directory = true;
      names.push_back(name);
    }
    ::closedir(d);
    if (has_directory) return data_error("removing (it holds a directory gpuenv did not make)", dir, ENOTEMPTY);
    for (const auto& name : names)
      if (::unlinkat(fd.get(), name.c_str(), 0) != 0 && errno != ENOENT) return data_error("removing " + name, dir, errno);
    // The name must still be the directory just emptied (not one swapped in since) before it is removed.
    struct stat emptied {}, named {};
    if (::fstat(fd.get(), &emptied) != 0 || ::fstatat(parent.get(), leaf.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
        emptied.st_dev != named.st_dev || emptied.st_ino != named.st_ino)
      return data_error("removing (its name now names something else)", dir, ESTALE);
    if (::unlinkat(parent.get(), leaf.c_str(), AT_REMOVEDIR) != 0) return data_error("removing", dir, errno);
    return ok_status();
  }

  DataOwner self() override {
    DataOwner o;
    char host[HOST_NAME_MAX + 1] = {};
    if (::gethostname(host, sizeof host - 1) == 0) o.host = host;
    o.boot_id = read_line_of("/proc/sys/kernel/random/boot_id");
    char ns[64] = {};
    const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    if (n > 0) o.pid_namespace.assign(ns, static_cast<std::size_t>(n));
    o.pid = static_cast<long>(::getpid());
    return o;
  }

  bool alive(long pid) override {
    if (pid <= 0 || pid > INT_MAX) return false;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
  }

  std::chrono::steady_clock::time_point now() override { return std::chrono::steady_clock::now(); }
};

}  // namespace posix_data_detail

std::shared_ptr<DataFiles> make_posix_data_files() { return std::make_shared<posix_data_detail::PosixDataFiles>(); }

}  // namespace gpuenv::validate
