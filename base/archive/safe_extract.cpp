#include "base/archive/safe_extract.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include "base/file_io.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv {
namespace {

using ArchivePtr = std::unique_ptr<archive, decltype(&archive_read_free)>;

Error unsafe(const std::string& origin, const std::string& path, const std::string& why) {
  return make_error(ErrorKind::environment, "archive.unsafe", "refused entry '" + path + "': " + why, origin,
                    "the archive tries to write outside its root or contains what a package must not; do not use it");
}
Error limit(const std::string& origin, const std::string& why) {
  return make_error(ErrorKind::environment, "archive.limit", why, origin, "the archive is larger than gpuenv allows (a decompression bomb?)");
}
constexpr IoArea k_extract_io{"archive.io", "check free disk space and permissions of the target directory"};
constexpr IoArea k_write_beneath_io{"archive.io", "check free disk space and permissions"};

/// The message of a failed call on PATH: "WHAT 'PATH'" (io_error adds ": strerror").
std::string on_path(const std::string& what, const std::string& path) { return what + " '" + path + "'"; }

using Fd = UniqueFd;

/// Opens (and creates) the directory `rel` beneath `root_fd`. Symlinks on the way are followed only while
/// they stay beneath the root (openat2 RESOLVE_BENEATH); anything else is refused.
Result<Fd> open_dir_beneath(int root_fd, const std::string& rel, const std::string& origin, const std::string& entry) {
  if (rel.empty()) return Fd(::dup(root_fd));
  std::size_t pos = 0;
  std::string prefix;
  while (pos <= rel.size()) {
    const auto slash = rel.find('/', pos);
    prefix = rel.substr(0, slash);
    open_how how{};
    how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, root_fd, prefix.c_str(), &how, sizeof how);
    if (fd < 0 && errno == ENOENT) {
      // Create the missing component inside its (already safe) parent.
      const auto parent_end = prefix.rfind('/');
      auto parent = open_dir_beneath(root_fd, parent_end == std::string::npos ? std::string() : prefix.substr(0, parent_end), origin, entry);
      if (!parent) return std::move(parent).error();
      const std::string name = parent_end == std::string::npos ? prefix : prefix.substr(parent_end + 1);
      if (::mkdirat(parent->get(), name.c_str(), 0755) != 0 && errno != EEXIST) return io_error(k_extract_io, on_path("cannot create directory", prefix), origin);
      fd = syscall(SYS_openat2, root_fd, prefix.c_str(), &how, sizeof how);
    }
    if (fd < 0) {
      if (errno == EXDEV || errno == ELOOP) return unsafe(origin, entry, "'" + prefix + "' is a symlink leading outside the root");
      if (errno == ENOTDIR) return unsafe(origin, entry, "'" + prefix + "' is not a directory");
      if (errno == ENOSYS) return make_error(ErrorKind::environment, "archive.kernel", "the kernel lacks openat2 (Linux >= 5.6 needed)", origin, "");
      return io_error(k_extract_io, on_path("cannot open directory", prefix), origin);
    }
    if (slash == std::string::npos) return Fd(static_cast<int>(fd));
    ::close(static_cast<int>(fd));
    pos = slash + 1;
  }
  return Fd(::dup(root_fd));
}

std::pair<std::string, std::string> split_parent(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

// Removes a non-directory entry so it can be replaced (later packages and layers overwrite earlier files).
bool remove_existing(int dir_fd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
  if (S_ISDIR(st.st_mode)) return false;
  return ::unlinkat(dir_fd, name.c_str(), 0) == 0;
}

struct Reader {
  std::string_view bytes;
  std::string origin;
  std::string root;
  const ExtractOptions& o;
  std::uint64_t total = 0;
  std::vector<ExtractedEntry> entries;
};

/// libarchive's message for the last error; it has none for some failures (a damaged compressed stream can end the
/// reader with ARCHIVE_FATAL and a null message), and a null char* must never reach a std::string.
std::string error_text(archive* a) {
  const char* e = archive_error_string(a);
  return e ? e : "unknown error";
}

Status write_entry(Reader& r, archive* a, archive_entry* e, int root_fd) {
  const char* raw = archive_entry_pathname(e);
  auto norm = normalize_member_path(raw ? raw : "");
  if (!norm) {
    Error err = std::move(norm).error();
    err.where = r.origin;
    return err;
  }
  if (!*norm) return ok_status();  // "./" itself
  const std::string path = **norm;
  if (r.o.keep && !r.o.keep(path)) return ok_status();
  if (r.entries.size() >= r.o.max_entries) return limit(r.origin, "more than " + std::to_string(r.o.max_entries) + " entries");
  ExtractedEntry out;
  out.path = path;
  out.mode = archive_entry_perm(e);
  out.uid = static_cast<std::uint32_t>(archive_entry_uid(e));
  out.gid = static_cast<std::uint32_t>(archive_entry_gid(e));
  const auto [parent_rel, name] = split_parent(path);
  auto parent = open_dir_beneath(root_fd, parent_rel, r.origin, path);
  if (!parent) return std::move(parent).error();
  const int pfd = parent->get();

  if (const char* hard = archive_entry_hardlink(e)) {
    auto target = normalize_member_path(hard);
    if (!target || !*target) return unsafe(r.origin, path, "hard link to '" + std::string(hard) + "', outside the archive's tree");
    const auto [tparent_rel, tname] = split_parent(**target);
    auto tparent = open_dir_beneath(root_fd, tparent_rel, r.origin, path);
    if (!tparent) return std::move(tparent).error();
    struct stat st {};
    if (::fstatat(tparent->get(), tname.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      return unsafe(r.origin, path, "hard link to '" + **target + "', which is not a file extracted earlier");
    if (!remove_existing(pfd, name) || ::linkat(tparent->get(), tname.c_str(), pfd, name.c_str(), 0) != 0)
      return io_error(k_extract_io, on_path("cannot create hard link", path), r.origin);
    out.type = ExtractedEntry::Type::hardlink;
    out.link_target = **target;
    r.entries.push_back(std::move(out));
    return ok_status();
  }

  switch (archive_entry_filetype(e)) {
    case AE_IFDIR: {
      if (::mkdirat(pfd, name.c_str(), 0755) != 0 && errno != EEXIST) return io_error(k_extract_io, on_path("cannot create directory", path), r.origin);
      auto dir = open_dir_beneath(root_fd, path, r.origin, path);  // refuses a symlink standing where a directory goes out
      if (!dir) return std::move(dir).error();
      ::fchmod(dir->get(), out.mode);
      out.type = ExtractedEntry::Type::directory;
      break;
    }
    case AE_IFLNK: {
      const char* target = archive_entry_symlink(e);
      if (!target || !*target) return unsafe(r.origin, path, "symlink without a target");
      if (!remove_existing(pfd, name)) return unsafe(r.origin, path, "a directory stands where the symlink goes");
      if (::symlinkat(target, pfd, name.c_str()) != 0) return io_error(k_extract_io, on_path("cannot create symlink", path), r.origin);
      out.type = ExtractedEntry::Type::symlink;
      out.link_target = target;
      break;
    }
    case AE_IFREG: {
      const la_int64_t declared = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
      if (declared < 0 || static_cast<std::uint64_t>(declared) > r.o.max_entry_bytes)
        return limit(r.origin, "entry '" + path + "' is " + std::to_string(declared) + " bytes");
      if (!remove_existing(pfd, name)) return unsafe(r.origin, path, "a directory stands where the file goes");
      Fd fd(::openat(pfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (fd.get() < 0) return io_error(k_extract_io, on_path("cannot create file", path), r.origin);
      char buf[1 << 16];
      std::uint64_t size = 0;
      while (true) {
        const la_ssize_t n = archive_read_data(a, buf, sizeof buf);
        if (n < 0) {
          return make_error(ErrorKind::environment, "archive.corrupt", "cannot read '" + path + "': " + error_text(a), r.origin,
                            "the archive is damaged or truncated; download it again");
        }
        if (n == 0) break;
        size += static_cast<std::uint64_t>(n);
        r.total += static_cast<std::uint64_t>(n);
        if (size > r.o.max_entry_bytes) return limit(r.origin, "entry '" + path + "' unpacks past " + std::to_string(r.o.max_entry_bytes) + " bytes");
        if (r.total > r.o.max_total_bytes) return limit(r.origin, "unpacks past " + std::to_string(r.o.max_total_bytes) + " bytes");
        if (r.total > (64u << 20) && static_cast<double>(r.total) > r.o.max_ratio * static_cast<double>(r.bytes.size()))
          return limit(r.origin, "compression ratio above " + std::to_string(static_cast<int>(r.o.max_ratio)) + ":1");
        std::size_t done = 0;
        while (done < static_cast<std::size_t>(n)) {
          const ssize_t w = ::write(fd.get(), buf + done, static_cast<std::size_t>(n) - done);
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) return io_error(k_extract_io, on_path("cannot write", path), r.origin);
          done += static_cast<std::size_t>(w);
        }
      }
      ::fchmod(fd.get(), out.mode);
      out.type = ExtractedEntry::Type::file;
      out.size = size;
      break;
    }
    case AE_IFCHR:
    case AE_IFBLK:
    case AE_IFIFO: {
      if (!r.o.allow_devices) return unsafe(r.origin, path, "device node or FIFO");
      const mode_t kind = archive_entry_filetype(e) == AE_IFCHR ? S_IFCHR : archive_entry_filetype(e) == AE_IFBLK ? S_IFBLK : S_IFIFO;
      if (!remove_existing(pfd, name) || ::mknodat(pfd, name.c_str(), kind | out.mode, archive_entry_rdev(e)) != 0)
        return io_error(k_extract_io, on_path("cannot create device node", path), r.origin);
      out.type = kind == S_IFIFO ? ExtractedEntry::Type::fifo : ExtractedEntry::Type::device;
      break;
    }
    default:
      return unsafe(r.origin, path, "unsupported entry type (socket?)");
  }
  r.entries.push_back(std::move(out));
  return ok_status();
}

ArchivePtr open_memory(std::string_view bytes) {
  ArchivePtr a(archive_read_new(), &archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  archive_read_support_format_zip(a.get());
  archive_read_open_memory(a.get(), bytes.data(), bytes.size());
  return a;
}

}  // namespace

Result<UniqueFd> open_directory_beneath(int root_fd, const std::string& rel, const std::string& origin) {
  return open_dir_beneath(root_fd, rel, origin, rel);
}

UniqueFd open_file_beneath(int root_fd, const std::string& rel) {
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  UniqueFd fd(static_cast<int>(syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how)));
  struct stat st {};
  if (fd.get() >= 0 && (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))) {
    errno = EINVAL;
    return UniqueFd(-1);
  }
  return fd;
}

Status write_file_beneath(const std::string& root, const std::string& rel, std::string_view bytes, unsigned mode, const std::string& origin) {
  const std::string what = "cannot write " + rel + " in " + root;
  auto io = [&](const std::string& why) {
    return make_error(ErrorKind::environment, k_write_beneath_io.id, what + ": " + why, origin, k_write_beneath_io.hint);
  };
  GPUENV_TRY(path, normalize_member_path(rel));
  if (!path) return unsafe(origin, rel, "not a file path");
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root_fd.get() < 0) return io_error(k_write_beneath_io, what, origin);
  const auto slash = path->rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : path->substr(0, slash);
  const std::string name = slash == std::string::npos ? *path : path->substr(slash + 1);
  UniqueFd dir_fd;
  if (dir.empty()) {
    dir_fd = UniqueFd(::dup(root_fd.get()));
  } else {
    GPUENV_TRY(opened, open_directory_beneath(root_fd.get(), dir, origin));
    dir_fd = std::move(opened);
  }
  auto file = AtomicFile::create_in(dir_fd.get(), name, static_cast<mode_t>(mode), Durability::scratch);
  if (!file) return io(file.error().message);
  if (auto st = file->write(bytes); !st) return io(st.error().message);
  if (auto st = file->commit(); !st) return io(st.error().message);
  return ok_status();
}

std::optional<std::string> read_file_beneath(const std::string& root, const std::string& rel, std::size_t max_bytes) {
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root_fd.get() < 0) return std::nullopt;
  return read_regular_fd(open_file_beneath(root_fd.get(), rel).get(), max_bytes);
}

Result<std::optional<std::string>> normalize_member_path(std::string_view p) {
  if (p.find('\0') != std::string_view::npos) return unsafe("", std::string(p.substr(0, p.find('\0'))), "NUL in the path");
  if (!p.empty() && p.front() == '/') return unsafe("", std::string(p), "absolute path");
  std::string out;
  std::size_t pos = 0;
  while (pos <= p.size()) {
    const auto slash = p.find('/', pos);
    const std::string_view comp = p.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos);
    if (comp == "..") return unsafe("", std::string(p), "'..' in the path");
    if (!comp.empty() && comp != ".") {
      if (!out.empty()) out += '/';
      out += comp;
    }
    if (slash == std::string_view::npos) break;
    pos = slash + 1;
  }
  if (out.empty()) return std::optional<std::string>{};
  return std::optional<std::string>(std::move(out));
}

Result<std::vector<ExtractedEntry>> extract_archive(std::string_view bytes, const std::string& origin, const std::string& root,
                                                    const ExtractOptions& options) {
  Fd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root_fd.get() < 0) return io_error(k_extract_io, on_path("cannot open the target directory", root), origin);
  ArchivePtr a = open_memory(bytes);
  Reader r{bytes, origin, root, options, 0, {}};
  while (true) {
    archive_entry* e = nullptr;
    const int rc = archive_read_next_header(a.get(), &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) {
      return make_error(ErrorKind::environment, "archive.corrupt", "cannot read the archive: " + error_text(a.get()),
                        origin, "the file is damaged, truncated or not an archive; download it again");
    }
    if (auto st = write_entry(r, a.get(), e, root_fd.get()); !st) return std::move(st).error();
  }
  return std::move(r.entries);
}

Result<std::vector<ArMember>> parse_ar(std::string_view bytes, const std::string& origin) {
  static constexpr std::string_view k_magic = "!<arch>\n";
  if (bytes.substr(0, k_magic.size()) != k_magic) {
    return make_error(ErrorKind::environment, "archive.not_deb", "not an ar archive (no '!<arch>' header)", origin,
                      "the file is not a .deb; the download may be an HTML error page");
  }
  std::vector<ArMember> out;
  std::size_t pos = k_magic.size();
  while (pos < bytes.size()) {
    if (bytes.size() - pos < 60 || bytes.substr(pos + 58, 2) != "`\n") {
      return make_error(ErrorKind::environment, "archive.corrupt", "bad ar member header at offset " + std::to_string(pos), origin,
                        "the .deb is truncated or damaged; download it again");
    }
    std::string name(bytes.substr(pos, 16));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!name.empty() && name.back() == '/') name.pop_back();  // GNU ar terminator
    std::uint64_t size = 0;
    for (char c : bytes.substr(pos + 48, 10)) {
      if (c == ' ') break;
      if (c < '0' || c > '9') return make_error(ErrorKind::environment, "archive.corrupt", "bad ar member size at offset " + std::to_string(pos), origin, "");
      size = size * 10 + static_cast<std::uint64_t>(c - '0');
    }
    pos += 60;
    if (size > bytes.size() - pos) {
      return make_error(ErrorKind::environment, "archive.corrupt", "ar member '" + name + "' runs past the end of the file", origin,
                        "the .deb is truncated; download it again");
    }
    out.push_back({name, bytes.substr(pos, size)});
    pos += size + (size & 1);  // members are 2-byte aligned
  }
  return out;
}

Result<DebContents> extract_deb(std::string_view bytes, const std::string& origin, const std::string& root, const ExtractOptions& options) {
  auto members = parse_ar(bytes, origin);
  if (!members) return std::move(members).error();
  const ArMember* data = nullptr;
  const ArMember* control = nullptr;
  for (const auto& m : *members) {
    if (m.name.rfind("data.tar", 0) == 0) data = &m;
    else if (m.name.rfind("control.tar", 0) == 0) control = &m;
  }
  if (members->empty() || (*members)[0].name != "debian-binary" || !data || !control) {
    return make_error(ErrorKind::environment, "archive.not_deb", "missing debian-binary, control.tar.* or data.tar.*", origin,
                      "the file is not a Debian binary package");
  }
  DebContents out;
  {
    ArchivePtr a = open_memory(control->data);
    archive_entry* e = nullptr;
    while (archive_read_next_header(a.get(), &e) == ARCHIVE_OK) {
      auto p = normalize_member_path(archive_entry_pathname(e) ? archive_entry_pathname(e) : "");
      if (!p || !*p) continue;
      std::string* sink = **p == "control" ? &out.control : **p == "md5sums" ? &out.md5sums : **p == "conffiles" ? &out.conffiles : nullptr;
      if (!sink) continue;
      char buf[1 << 14];
      la_ssize_t n;
      while ((n = archive_read_data(a.get(), buf, sizeof buf)) > 0) {
        sink->append(buf, static_cast<std::size_t>(n));
        if (sink->size() > (16u << 20)) return limit(origin, "control member " + **p + " larger than 16 MiB");
      }
    }
    if (out.control.empty()) {
      return make_error(ErrorKind::environment, "archive.not_deb", "control.tar has no control file", origin, "the package is damaged");
    }
  }
  auto entries = extract_archive(data->data, origin + " (" + data->name + ")", root, options);
  if (!entries) return std::move(entries).error();
  out.entries = std::move(*entries);
  return out;
}

}  // namespace gpuenv
