#pragma once
// What the libFuzzer targets share: splitting one input into parts, and a scratch directory that a target may
// write beneath (and only there), emptied after every input.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace gpuenv::fuzzing {

/// The bytes of one input as text.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) { return {reinterpret_cast<const char*>(data), size}; }

/// TEXT cut at every SEPARATOR, at most MAX_PARTS parts (the last one keeps the rest, separators included).
inline std::vector<std::string_view> split(std::string_view text, char separator, std::size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const auto at = text.find(separator);
    if (at == std::string_view::npos) break;
    parts.push_back(text.substr(0, at));
    text.remove_prefix(at + 1);
  }
  parts.push_back(text);
  return parts;
}

/// A directory made by mkdtemp under $TMPDIR (or /tmp) for the life of the process; `reset()` empties it (making
/// every directory beneath it writable first, as an extracted archive may have left some read-only) and the
/// destructor removes it. `inside(path)` says whether PATH is beneath it, for targets that check where a library
/// writes.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/gpuenv-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    m_path = pattern;
  }
  ~ScratchDir() {
    reset();
    ::rmdir(m_path.c_str());
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  [[nodiscard]] const std::string& path() const { return m_path; }
  [[nodiscard]] bool inside(std::string_view p) const {
    return p.size() > m_path.size() && p.substr(0, m_path.size()) == m_path && p[m_path.size()] == '/' &&
           p.find("/../") == std::string_view::npos && p.substr(p.size() - 3) != "/..";
  }
  /// A new empty directory NAME beneath the scratch directory.
  std::string make_dir(const std::string& name) const {
    const std::string dir = m_path + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0) {
      std::perror(dir.c_str());
      std::abort();
    }
    return dir;
  }
  void reset() const {
    const int fd = ::open(m_path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) std::abort();
    empty(fd);
    ::close(fd);
  }

 private:
  /// Removes everything in the directory FD (closed by the caller), never following a symlink.
  static void empty(int fd) {
    const int dup = ::dup(fd);
    DIR* dir = ::fdopendir(dup);
    if (dir == nullptr) std::abort();
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(dir);
    for (const auto& name : names) {
      struct stat st {};
      if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        ::fchmodat(fd, name.c_str(), 0700, 0);
        const int sub = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) std::abort();
        empty(sub);
        ::close(sub);
        if (::unlinkat(fd, name.c_str(), AT_REMOVEDIR) != 0) std::abort();
      } else if (::unlinkat(fd, name.c_str(), 0) != 0) {
        std::abort();
      }
    }
  }

  std::string m_path;
};

}  // namespace gpuenv::fuzzing
