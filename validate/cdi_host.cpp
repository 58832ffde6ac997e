#include "validate/cdi_host.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "base/file_io.hpp"

namespace gpuenv::validate {
namespace cdi_host_detail {

// A directory with more entries than this is not read further (spec directories hold a handful of files).
constexpr std::size_t k_max_directory_entries = 100000;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string errno_text(int err) { return std::strerror(err); }

std::string file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace cdi_host_detail

void read_cdi_spec_file(CdiSpecFile& f, std::size_t max_bytes) {
  using cdi_host_detail::errno_text;
  using cdi_host_detail::file_type_name;
  struct stat st {};
  if (::stat(f.path.c_str(), &st) != 0) {
    const int err = errno;
    f.permission_denied = err == EACCES;
    f.problem = err == ENOENT && f.symlink ? "a dangling symlink" : "cannot be read: " + errno_text(err);
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    f.problem = file_type_name(st.st_mode) + (f.symlink ? " behind a symlink" : "") + ", not a regular file";
    return;
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    f.problem = std::to_string(st.st_size) + " bytes, larger than the " + std::to_string(max_bytes >> 20) + " MiB gpuenv reads";
    return;
  }
  UniqueFd fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) {
    const int err = errno;
    f.permission_denied = err == EACCES;
    f.problem = "cannot be opened: " + errno_text(err);
    return;
  }
  f.text = read_regular_fd(fd.get(), max_bytes);
  if (!f.text) f.problem = "changed while it was read, or could not be read";
}

namespace cdi_host_detail {

/// The *.json and *.yaml entries of one directory, sorted by name; directories among them go to SKIPPED.
void list_directory(const std::string& dir, CdiDirectoryScan& scan, std::vector<CdiSpecFile>& found) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    scan.unlisted.push_back(dir + " (" + errno_text(errno) + ")");
    return;
  }
  std::vector<std::string> names;
  std::size_t seen = 0;
  while (const dirent* e = ::readdir(d)) {
    if (++seen > k_max_directory_entries) {
      scan.unlisted.push_back(dir + " (more than " + std::to_string(k_max_directory_entries) + " entries: read no further)");
      break;
    }
    const std::string name = e->d_name;
    if (ends_with(name, ".json") || ends_with(name, ".yaml")) names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  const std::string prefix = dir.size() > 1 && dir.back() == '/' ? dir : dir + "/";
  for (const auto& name : names) {
    CdiSpecFile f;
    f.path = prefix + name;
    f.format = ends_with(name, ".json") ? CdiFormat::json : CdiFormat::yaml;
    struct stat lst {};
    if (::lstat(f.path.c_str(), &lst) == 0) {
      if (S_ISDIR(lst.st_mode)) {
        scan.skipped.push_back(f.path);
        continue;
      }
      f.symlink = S_ISLNK(lst.st_mode);
    }
    found.push_back(std::move(f));
  }
}

}  // namespace cdi_host_detail

CdiDirectoryScan scan_cdi_directories(const std::vector<std::string>& dirs, std::size_t max_files) {
  CdiDirectoryScan scan;
  std::set<std::pair<dev_t, ino_t>> listed;
  for (const auto& dir : dirs) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) {
        scan.absent.push_back(dir);
      } else {
        scan.unlisted.push_back(dir + " (" + cdi_host_detail::errno_text(errno) + ")");
      }
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      scan.unlisted.push_back(dir + " (" + cdi_host_detail::file_type_name(st.st_mode) + ", not a directory)");
      continue;
    }
    if (!listed.insert({st.st_dev, st.st_ino}).second) continue;  // /var/run/cdi is /run/cdi: once
    scan.searched.push_back(dir);
    std::vector<CdiSpecFile> found;
    cdi_host_detail::list_directory(dir, scan, found);
    for (auto& f : found) {
      if (scan.files.size() >= max_files) {
        ++scan.left_out;
        continue;
      }
      scan.files.push_back(std::move(f));
    }
  }
  return scan;
}

Result<HostRoot> HostRoot::open(const std::string& root) {
  UniqueFd fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    return make_error(ErrorKind::usage, "cdi.root", "cannot open the host root: " + cdi_host_detail::errno_text(errno), root,
                      "give the directory a host's file system is mounted at (default /)");
  }
  return HostRoot(std::move(fd), root);
}

HostPathState HostRoot::probe(const std::string& absolute_path, std::string& why) const {
  const std::string rel = absolute_path.substr(absolute_path.find_first_not_of('/') == std::string::npos ? absolute_path.size()
                                                                                                          : absolute_path.find_first_not_of('/'));
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const long fd = ::syscall(SYS_openat2, m_fd.get(), rel.empty() ? "." : rel.c_str(), &how, sizeof how);
  if (fd >= 0) {
    ::close(static_cast<int>(fd));
    return HostPathState::present;
  }
  int err = errno;
  if (err == ENOSYS && m_root == "/") {
    // Kernels before 5.6 (RHEL 8's 4.18): on the host itself there is no tree to stay inside, so stat answers.
    struct stat st {};
    if (::stat(absolute_path.c_str(), &st) == 0) return HostPathState::present;
    err = errno;
  }
  if (err == ENOENT || err == ENOTDIR || err == ELOOP) return HostPathState::missing;
  if (err == ENOSYS) {
    why = "the kernel lacks openat2 (Linux 5.6 or later is needed)";
  } else {
    why = cdi_host_detail::errno_text(err);
  }
  return HostPathState::not_checked;
}

}  // namespace gpuenv::validate
