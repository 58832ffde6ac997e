#include "base/file_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <random>

namespace gpuenv {
namespace {

constexpr IoArea k_file_io{"io.error", "check the path, its permissions and free disk space"};

/// ".NAME.tmp.PID.HOST.N.RANDOM" (HOST: writer_host()): unique among this process's writers (N) and other
/// processes (PID, HOST, RANDOM).
std::string temp_name(const std::string& name) {
  static std::atomic<unsigned long> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, "%08llx", static_cast<unsigned long long>(rng() & 0xffffffffULL));
  return "." + name + ".tmp." + writer_stamp('.') + "." + std::to_string(counter++) + "." + suffix;
}

/// Whether ENTRY is a temporary file of NAME (".NAME.tmp.REST") and what follows the prefix.
std::optional<std::string_view> temp_rest(std::string_view entry, const std::string& name) {
  const std::string prefix = "." + name + ".tmp.";
  if (entry.size() <= prefix.size() || entry.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  return entry.substr(prefix.size());
}

/// The first 12 hex digits of the kernel's boot id and the inode of this process's PID namespace, or "" when
/// either cannot be read.
std::string read_writer_host() {
  std::string boot;
  if (const int fd = ::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC); fd >= 0) {
    char buf[64] = {};
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    for (ssize_t i = 0; i < n && boot.size() < 12; ++i)
      if (std::isxdigit(static_cast<unsigned char>(buf[i]))) boot += static_cast<char>(std::tolower(static_cast<unsigned char>(buf[i])));
  }
  struct stat ns {};
  if (boot.size() != 12 || ::stat("/proc/self/ns/pid", &ns) != 0) return "";
  return boot + "n" + std::to_string(static_cast<unsigned long long>(ns.st_ino));
}

}  // namespace

const std::string& writer_host() {
  static const std::string host = read_writer_host();
  return host;
}

std::string writer_stamp(char separator) {
  return std::to_string(::getpid()) + separator + (writer_host().empty() ? std::string("unknown") : writer_host());
}

bool writer_gone(std::string_view text, char separator) {
  const long pid = leading_pid(text, separator);
  if (pid <= 0 || writer_host().empty()) return false;
  const std::string_view rest = text.substr(text.find(separator) + 1);
  const std::string& host = writer_host();
  // Another machine's or PID namespace's writer (a shared cache, a container) has PIDs of its own: never judged here.
  if (rest.size() <= host.size() || rest.compare(0, host.size(), host) != 0 || rest[host.size()] != separator) return false;
  return process_gone(pid);
}

bool untouched_for_a_day(int dir_fd, const char* name) {
  struct stat st {};
  if (::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return false;
  return st.st_mtime < ::time(nullptr) - 24 * 3600;
}

long leading_pid(std::string_view text, char separator) {
  long pid = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (ec != std::errc() || p == text.data() || p == text.data() + text.size() || *p != separator || pid <= 0) return 0;
  return pid;
}

bool process_gone(long pid) {
  if (pid <= 0 || pid == static_cast<long>(::getpid())) return false;
  errno = 0;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;  // EPERM: alive, another user's
}

std::size_t remove_dead_temporaries(int dir_fd, const std::string& name) {
  const int listing = ::dup(dir_fd);
  if (listing < 0) return 0;
  DIR* d = ::fdopendir(listing);
  if (!d) {
    ::close(listing);
    return 0;
  }
  std::vector<std::string> dead;
  while (const dirent* e = ::readdir(d))
    if (const auto rest = temp_rest(e->d_name, name); rest && (writer_gone(*rest, '.') || untouched_for_a_day(dir_fd, e->d_name)))
      dead.emplace_back(e->d_name);
  ::closedir(d);
  std::size_t removed = 0;
  for (const auto& entry : dead) removed += ::unlinkat(dir_fd, entry.c_str(), 0) == 0 ? 1 : 0;
  return removed;
}

std::string temporary_beside(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    remove_dead_temporaries(dfd, name);
    ::close(dfd);
  }
  return (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + temp_name(name);
}

std::optional<std::string> read_regular_fd(int fd, std::size_t max_bytes) {
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) > max_bytes) return std::nullopt;
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_bytes) return std::nullopt;  // it grew while being read
  }
}

Result<std::string> read_file_limited(const std::string& path, std::size_t max_bytes, const TooLarge& limit) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return make_error(ErrorKind::usage, "io.not_found", "no such file", path, "check the path (relative paths start in the current directory)");
    }
    return io_error(k_file_io, "cannot open", path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return io_error(k_file_io, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) return make_error(ErrorKind::usage, "io.not_a_file", "not a regular file", path, "give the path of a YAML file");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return make_error(limit.kind, limit.id, "file is " + std::to_string(st.st_size) + " bytes; the limit is " + std::to_string(max_bytes), path, limit.hint);
  }
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t got = ::read(fd.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return io_error(k_file_io, "cannot read", path);
    if (got == 0) break;
    text.append(buf, static_cast<std::size_t>(got));
    if (text.size() > max_bytes) {  // the file grew while being read
      return make_error(limit.kind, limit.id, "file is larger than " + std::to_string(max_bytes) + " bytes", path, "");
    }
  }
  return text;
}

AtomicFile::AtomicFile(UniqueFd fd, int dir_fd, bool own_dir, std::string temp, std::string target, mode_t mode)
    : m_fd(std::move(fd)), m_dir_fd(dir_fd), m_own_dir(own_dir), m_temp(std::move(temp)), m_target(target), m_where(std::move(target)), m_mode(mode) {}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : m_fd(std::move(o.m_fd)), m_dir_fd(std::exchange(o.m_dir_fd, -1)), m_own_dir(std::exchange(o.m_own_dir, false)),
      m_temp(std::move(o.m_temp)), m_target(std::move(o.m_target)), m_where(std::move(o.m_where)), m_mode(o.m_mode), m_durability(o.m_durability), m_done(std::exchange(o.m_done, true)) {}

AtomicFile::~AtomicFile() {
  if (!m_done && m_dir_fd >= 0) ::unlinkat(m_dir_fd, m_temp.c_str(), 0);
  if (m_own_dir && m_dir_fd >= 0) ::close(m_dir_fd);
}

Result<AtomicFile> AtomicFile::create_in(int dir_fd, const std::string& name, mode_t mode, Durability durability) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return make_error(ErrorKind::internal, "io.bad_name", "not a single path component: '" + name + "'", name, "");
  }
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string temp = temp_name(name);
    UniqueFd fd(::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.get() >= 0) {
      AtomicFile file(std::move(fd), dir_fd, false, std::move(temp), name, mode);
      file.m_durability = durability;
      return file;
    }
    if (errno != EEXIST) return io_error(k_file_io, "cannot create a temporary file", name);
  }
  return io_error(k_file_io, "cannot create a temporary file", name, EEXIST);
}

Result<AtomicFile> AtomicFile::create(const std::string& path, mode_t mode, Durability durability) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return io_error(k_file_io, "cannot open the directory " + dir, path);
  // What a killed writer of the same file left (a 300 MB archive, a 600 MB sparse disk) goes before this one
  // starts: the next run of the same command cleans up after the last.
  remove_dead_temporaries(dfd, name);
  auto file = create_in(dfd, name, mode, durability);
  if (!file) {
    ::close(dfd);
    Error e = std::move(file).error();
    e.where = path;
    e.message += " (in " + dir + ")";
    return e;
  }
  file->m_own_dir = true;
  file->m_where = path;
  return file;
}

Status AtomicFile::write(std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(m_fd.get(), bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return io_error(k_file_io, "cannot write", m_where);
    done += static_cast<std::size_t>(w);
  }
  return ok_status();
}

Status AtomicFile::commit() {
  if (m_done) return make_error(ErrorKind::internal, "io.committed", "already committed", m_target, "");
  const bool sync = m_durability == Durability::synced;
  if (::fchmod(m_fd.get(), m_mode) != 0 || (sync && ::fsync(m_fd.get()) != 0)) return io_error(k_file_io, "cannot flush", m_where);
  if (::close(m_fd.release()) != 0) return io_error(k_file_io, "cannot flush", m_where);
  if (::renameat(m_dir_fd, m_temp.c_str(), m_dir_fd, m_target.c_str()) != 0) return io_error(k_file_io, "cannot rename the temporary file into place", m_where);
  m_done = true;
  if (sync) ::fsync(m_dir_fd);
  return ok_status();
}

Result<std::vector<std::string>> sorted_directory_names(int dir_fd, const std::string& where) {
  const int dup_fd = ::dup(dir_fd);
  DIR* d = dup_fd >= 0 ? ::fdopendir(dup_fd) : nullptr;
  if (d == nullptr) {
    const int err = errno;
    if (dup_fd >= 0) ::close(dup_fd);
    return io_error(k_file_io, "cannot list", where, err);
  }
  ::rewinddir(d);  // the duplicate shares the original's position
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool remove_tree_renamed(const std::string& dir) {
  const std::filesystem::path p(dir);
  const std::filesystem::path gone = p.parent_path() / (".removing-" + p.filename().string() + "-" + std::to_string(::getpid()));
  std::error_code ec;
  std::filesystem::rename(p, gone, ec);
  if (ec) return false;
  std::filesystem::remove_all(gone, ec);
  return true;
}

StagedDirectory::~StagedDirectory() {
  std::error_code ec;
  std::filesystem::remove_all(m_path, ec);  // best effort: a leftover is a temporary the next writer of the same tree replaces
}

Result<DirCommit> commit_directory(const std::string& staged, const std::string& target, Durability durability, const IoArea& area,
                                   const std::string& what) {
  const StagedDirectory gone_at_return(staged);  // whatever happens: once renamed, nothing is left to remove
  if (durability == Durability::synced) {
    const UniqueFd fd(::open(staged.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0 || ::syncfs(fd.get()) != 0) return io_error(area, "cannot sync", staged);
  }
  if (::rename(staged.c_str(), target.c_str()) != 0) {
    const int err = errno;
    if (err == EEXIST || err == ENOTEMPTY) return DirCommit::already_there;
    return io_error(area, what, target, err);
  }
  if (durability == Durability::synced) {
    const std::filesystem::path parent = std::filesystem::path(target).has_parent_path() ? std::filesystem::path(target).parent_path() : ".";
    const UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() >= 0) (void)::fsync(dir.get());
  }
  return DirCommit::placed;
}

Status write_file_atomic(const std::string& path, std::string_view bytes, mode_t mode, Durability durability) {
  GPUENV_TRY(file, AtomicFile::create(path, mode, durability));
  GPUENV_CHECK(file.write(bytes));
  return file.commit();
}

}  // namespace gpuenv
