#include "images/assemble/root_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "base/file_io.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv::images::assembly {
namespace {

namespace fs = std::filesystem;

/// The names in a directory, sorted ("." and ".." left out).
Result<std::vector<std::string>> sorted_names(int dir_fd, const std::string& prefix) {
  auto names = sorted_directory_names(dir_fd, prefix.empty() ? "/" : prefix);
  if (!names) {
    Error e = std::move(names).error();  // "cannot list: <reason>" at the directory
    e.id = "build.io";
    e.hint = "check free disk space and permissions";
    return e;
  }
  return names;
}

Node node_of(const std::string& path, const struct stat& st) {
  Node node;
  node.path = path;
  node.st_mode = st.st_mode;
  node.dev = st.st_dev;
  node.ino = st.st_ino;
  node.nlink = st.st_nlink;
  node.ctime_ns = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return node;
}

Status walk(int dir_fd, const std::string& prefix, std::vector<Node>& out, bool skip_special) {
  auto names = sorted_names(dir_fd, prefix);
  if (!names) return std::move(names).error();
  for (const auto& n : *names) {
    struct stat st {};
    if (::fstatat(dir_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return io_error(k_build_io, "cannot stat", prefix + n);
    Node node = node_of(prefix + n, st);
    if (S_ISDIR(st.st_mode)) {
      node.type = TarEntry::Type::directory;
      out.push_back(node);
      UniqueFd sub(::openat(dir_fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.get() < 0) return io_error(k_build_io, "cannot open", node.path);
      if (auto s = walk(sub.get(), node.path + "/", out, skip_special); !s) return s;
    } else if (S_ISLNK(st.st_mode)) {
      node.type = TarEntry::Type::symlink;
      std::string target(static_cast<std::size_t>(st.st_size) + 1, '\0');
      const ssize_t r = ::readlinkat(dir_fd, n.c_str(), target.data(), target.size());
      if (r < 0) return io_error(k_build_io, "cannot read link", node.path);
      target.resize(static_cast<std::size_t>(r));
      node.link = target;
      out.push_back(node);
    } else if (S_ISREG(st.st_mode)) {
      node.type = TarEntry::Type::file;
      node.size = static_cast<std::uint64_t>(st.st_size);
      out.push_back(node);
    } else if (!skip_special) {
      return build_error("build.special_file", "the image tree holds a device, FIFO or socket, which gpuenv does not put into layers", node.path,
                         "report the package that installed it");
    }
  }
  return ok_status();
}

RootEntry::Kind kind_of(TarEntry::Type type) {
  switch (type) {
    case TarEntry::Type::directory: return RootEntry::Kind::directory;
    case TarEntry::Type::symlink: return RootEntry::Kind::symlink;
    default: return RootEntry::Kind::file;
  }
}

}  // namespace

Error build_error(const std::string& id, const std::string& what, const std::string& where, const std::string& hint) {
  return make_error(ErrorKind::environment, id, what, where, hint);
}

Result<std::vector<Node>> walk_tree(const std::string& root, bool skip_special) {
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root_fd.get() < 0) return io_error(k_build_io, "cannot open", root);
  std::vector<Node> nodes;
  if (auto st = walk(root_fd.get(), "", nodes, skip_special); !st) return std::move(st).error();
  return nodes;
}

std::vector<RootEntry> root_entries(const std::vector<Node>& nodes, const Owners& owners) {
  std::vector<RootEntry> out;
  out.reserve(nodes.size());
  for (const auto& n : nodes) {
    auto it = owners.find(n.path);
    out.push_back({n.path, kind_of(n.type), n.type == TarEntry::Type::file ? n.size : 0, it == owners.end() ? k_no_package : it->second.package});
  }
  return out;
}

Result<Mapped> Mapped::open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) return io_error(k_build_io, "cannot open", path);
  Mapped m;
  m.m_size = static_cast<std::size_t>(st.st_size);
  if (m.m_size == 0) return m;
  void* p = ::mmap(nullptr, m.m_size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) return io_error(k_build_io, "cannot map", path);
  m.m_data = static_cast<const char*>(p);
  return m;
}

Mapped::Mapped(Mapped&& o) noexcept : m_data(std::exchange(o.m_data, nullptr)), m_size(std::exchange(o.m_size, 0)) {}

Mapped::~Mapped() {
  if (m_data) ::munmap(const_cast<char*>(m_data), m_size);
}

Status write_file(const std::string& path, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (auto st = write_file_atomic(path, bytes, 0644); !st) {
    Error e = st.error();
    e.id = "build.io";
    e.hint = "check free disk space and permissions";
    return e;
  }
  return ok_status();
}

}  // namespace gpuenv::images::assembly
