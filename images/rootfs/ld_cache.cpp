#include "images/rootfs/ld_cache.hpp"

#include "base/file_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "images/elf/elf.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv::images {
namespace {

constexpr IoArea k_conf_open_io{"ldcache.conf", "check the image's /etc/ld.so.conf and the files it includes"};
constexpr IoArea k_conf_read_io{"ldcache.conf", ""};
constexpr IoArea k_root_io{"ldcache.io", ""};
constexpr IoArea k_cache_write_io{"ldcache.io", "check free disk space and that the image's /etc is a directory inside it"};
constexpr int k_max_include_depth = 16;
constexpr std::size_t k_max_conf_bytes = 1u << 20;
constexpr std::uint16_t k_et_dyn = 3;

/// Opens `path` (absolute or relative, inside the image) as if `root_fd` were "/".
int open_in_root(int root_fd, const std::string& path, int flags) {
  std::string rel = path;
  while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
  if (rel.empty()) rel = ".";
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how));
}

/// "/a//b/" -> "/a/b"; relative paths become absolute.
std::string normalize(const std::string& path) {
  std::string out = "/";
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '/' && out.back() == '/') continue;
    out += path[i];
  }
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string dirname_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

bool has_wildcard(std::string_view s) { return s.find_first_of("*?[") != std::string_view::npos; }

std::vector<std::string> list_dir(int root_fd, const std::string& dir) {
  const UniqueFd fd(open_in_root(root_fd, dir, O_RDONLY | O_DIRECTORY));
  if (fd.get() < 0) return {};
  auto names = sorted_directory_names(fd.get(), dir);
  return names ? std::move(*names) : std::vector<std::string>{};  // an unreadable directory holds nothing for ld.so
}

bool exists_in_root(int root_fd, const std::string& path) {
  const int fd = open_in_root(root_fd, path, O_PATH);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

/// glob(3) inside the image: the existing paths matching `pattern` (absolute), in byte order per component.
std::vector<std::string> glob_in_root(int root_fd, const std::string& pattern) {
  std::vector<std::string> parts;
  for (std::size_t pos = 1; pos <= pattern.size();) {
    const auto slash = pattern.find('/', pos);
    const std::string part = pattern.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  std::vector<std::string> current = {""};
  for (const auto& part : parts) {
    std::vector<std::string> next;
    for (const auto& base : current) {
      if (!has_wildcard(part)) {
        next.push_back(base + "/" + part);
        continue;
      }
      for (const auto& name : list_dir(root_fd, base.empty() ? "/" : base))
        if (::fnmatch(part.c_str(), name.c_str(), FNM_PERIOD) == 0) next.push_back(base + "/" + name);
    }
    current = std::move(next);
  }
  std::vector<std::string> out;
  for (auto& p : current)
    if (!p.empty() && exists_in_root(root_fd, p)) out.push_back(std::move(p));
  return out;
}

Result<std::string> read_in_root(int root_fd, const std::string& path) {
  UniqueFd fd(open_in_root(root_fd, path, O_RDONLY));
  if (fd.get() < 0) {
    return io_error(k_conf_open_io, "cannot read", path);
  }
  std::string text;
  char buf[8192];
  while (true) {
    const ssize_t r = ::read(fd.get(), buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error(k_conf_read_io, "cannot read", path);
    if (r == 0) break;
    text.append(buf, static_cast<std::size_t>(r));
    if (text.size() > k_max_conf_bytes) return make_error(ErrorKind::environment, "ldcache.conf", "configuration file larger than 1 MiB", path, "");
  }
  return text;
}

class Scanner {
 public:
  Scanner(int root_fd, const resolver::Platform& platform, LdCache& out) : m_root_fd(root_fd), m_platform(platform), m_out(out) {}

  Status parse_conf(const std::string& path, int depth) {
    if (depth > k_max_include_depth) {
      return make_error(ErrorKind::environment, "ldcache.conf", "includes nested more than " + std::to_string(k_max_include_depth) + " deep",
                        path, "look for a file that includes itself");
    }
    auto text = read_in_root(m_root_fd, path);
    if (!text) return std::move(text).error();
    std::size_t pos = 0;
    while (pos < text->size()) {
      auto end = text->find('\n', pos);
      if (end == std::string::npos) end = text->size();
      std::string line = text->substr(pos, end - pos);
      pos = end + 1;
      if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
      const auto first = line.find_first_not_of(" \t\r");
      if (first == std::string::npos) continue;
      line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
      if (line.rfind("include", 0) == 0 && line.size() > 7 && (line[7] == ' ' || line[7] == '\t')) {
        std::size_t p = 7;
        while (p < line.size()) {
          const auto s = line.find_first_not_of(" \t", p);
          if (s == std::string::npos) break;
          const auto e = line.find_first_of(" \t", s);
          std::string pattern = line.substr(s, e == std::string::npos ? std::string::npos : e - s);
          p = e == std::string::npos ? line.size() : e;
          if (pattern.front() != '/') pattern = dirname_of(path) + "/" + pattern;
          for (const auto& file : glob_in_root(m_root_fd, pattern))
            if (auto st = parse_conf(file, depth + 1); !st) return st;
        }
        continue;
      }
      if (line.rfind("hwcap", 0) == 0 && line.size() > 5 && (line[5] == ' ' || line[5] == '\t')) continue;
      if (const auto eq = line.find('='); eq != std::string::npos) line.erase(eq);  // libc5's "DIR=TYPE"
      add_dir(line);
    }
    return ok_status();
  }

  void add_dir(const std::string& dir) {
    const std::string path = normalize(dir);
    UniqueFd fd(open_in_root(m_root_fd, path, O_RDONLY | O_DIRECTORY));
    struct stat st {};
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) return;  // ldconfig skips a missing directory
    if (!m_seen.insert({st.st_dev, st.st_ino}).second) return;
    m_dirs.push_back(path);
  }

  void scan_all() {
    m_out.directories = m_dirs;
    for (const auto& dir : m_dirs) scan(dir);
    std::stable_sort(m_out.entries.begin(), m_out.entries.end(), [](const LdCacheEntry& a, const LdCacheEntry& b) {
      const int c = ld_cache_compare(a.key, b.key);
      if (c != 0) return c > 0;
      return a.flags > b.flags;
    });
  }

 private:
  struct Found {
    std::string name;
    bool is_link;
    std::uint32_t flags;
  };

  void scan(const std::string& dir) {
    UniqueFd dir_fd(open_in_root(m_root_fd, dir, O_RDONLY | O_DIRECTORY));
    if (dir_fd.get() < 0) return;
    std::map<std::string, Found> by_key;
    for (const auto& name : list_dir(m_root_fd, dir)) {
      if ((name.rfind("lib", 0) != 0 && name.rfind("ld-", 0) != 0) || name.find(".so") == std::string::npos) continue;
      struct stat lst {};
      if (::fstatat(dir_fd.get(), name.c_str(), &lst, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!S_ISREG(lst.st_mode) && !S_ISLNK(lst.st_mode)) continue;
      bool is_link = S_ISLNK(lst.st_mode);
      const std::string shown = (dir == "/" ? "" : dir) + "/" + name;
      UniqueFd fd(open_in_root(m_root_fd, shown, O_RDONLY));
      struct stat st {};
      if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // dangling, or a directory
      auto elf = parse_elf_fd(fd.get(), shown);
      if (!elf) {
        if (elf.error().id != "elf.not_elf") m_out.notes.push_back(shown + ": skipped: " + elf.error().message);
        continue;
      }
      if (elf->type != k_et_dyn) continue;
      const std::uint32_t flags = ld_cache_flags(*elf);
      if (flags == 0) {
        m_out.notes.push_back(shown + ": skipped: ELF machine " + std::to_string(elf->machine) + " has no ld.so.cache type");
        continue;
      }
      constexpr std::uint16_t k_em_386 = 3;
      if (elf->machine != m_platform.facts().elf_machine && !(m_platform.is_amd64() && elf->machine == k_em_386)) {
        m_out.notes.push_back(shown + ": skipped: ELF machine " + std::to_string(elf->machine) + " is not " + m_platform.str() + "'s");
        continue;
      }
      std::string key = elf->soname.empty() ? name : elf->soname;
      if (is_link && name != key) {
        // A development link ("libz.so" -> the library whose SONAME is "libz.so.1") keeps its name.
        const bool dev_link = name.size() >= 3 && name.compare(name.size() - 3, 3, ".so") == 0 && key.compare(0, name.size(), name) == 0;
        if (!dev_link) is_link = false;
      }
      if (is_link) key = name;
      auto [it, inserted] = by_key.try_emplace(key, Found{name, is_link, flags});
      if (!inserted) {
        Found& old = it->second;
        if ((!is_link && old.is_link) || (is_link == old.is_link && ld_cache_compare(old.name, name) < 0)) old = Found{name, is_link, flags};
      }
    }
    for (const auto& [key, found] : by_key) m_out.entries.push_back({key, (dir == "/" ? "" : dir) + "/" + key, found.flags});
  }

  int m_root_fd;
  resolver::Platform m_platform;
  LdCache& m_out;
  std::vector<std::string> m_dirs;
  std::set<std::pair<dev_t, ino_t>> m_seen;
};

void put32(std::string& out, std::uint32_t v, bool little) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * (little ? i : 3 - i))) & 0xff);
}
void put64(std::string& out, std::uint64_t v, bool little) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * (little ? i : 7 - i))) & 0xff);
}

Result<UniqueFd> open_root(const std::string& root) {
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return io_error(k_root_io, "cannot open the image root", root);
  return fd;
}

}  // namespace

int ld_cache_compare(std::string_view a, std::string_view b) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0, j = 0;
  while (i < a.size()) {
    if (digit(a[i])) {
      if (j >= b.size() || !digit(b[j])) return 1;
      // Numbers compare by value (as glibc's int arithmetic would for sane lengths).
      std::uint64_t va = 0, vb = 0;
      while (i < a.size() && digit(a[i])) va = va * 10 + static_cast<std::uint64_t>(a[i++] - '0');
      while (j < b.size() && digit(b[j])) vb = vb * 10 + static_cast<std::uint64_t>(b[j++] - '0');
      if (va != vb) return va < vb ? -1 : 1;
    } else if (j < b.size() && digit(b[j])) {
      return -1;
    } else if (j >= b.size() || a[i] != b[j]) {
      return j >= b.size() ? 1 : static_cast<unsigned char>(a[i]) - static_cast<unsigned char>(b[j]);
    } else {
      ++i;
      ++j;
    }
  }
  return j < b.size() ? -1 : 0;
}

Result<LdCache> scan_ld_cache(const std::string& root, const LdCacheOptions& options) {
  auto root_fd = open_root(root);
  if (!root_fd) return std::move(root_fd).error();
  LdCache out;
  Scanner scanner(root_fd->get(), options.platform, out);
  if (exists_in_root(root_fd->get(), "/etc/ld.so.conf"))
    if (auto st = scanner.parse_conf("/etc/ld.so.conf", 0); !st) return std::move(st).error();
  const std::string triplet(options.platform.triplet());
  for (const std::string& dir : {"/lib/" + triplet, "/usr/lib/" + triplet, std::string("/lib"), std::string("/usr/lib")})
    scanner.add_dir(dir);
  scanner.scan_all();
  return out;
}

std::string render_ld_cache(const LdCache& cache, const LdCacheOptions& options) {
  const bool le = options.little_endian;
  constexpr std::size_t header_size = 48, entry_size = 24;
  const std::size_t strings_at = header_size + entry_size * cache.entries.size();
  std::string strings;
  std::map<std::string, std::size_t> placed;  // path -> offset in the file
  std::string table;
  for (const auto& e : cache.entries) {
    auto [it, inserted] = placed.try_emplace(e.path, strings_at + strings.size());
    if (inserted) {
      strings += e.path;
      strings += '\0';
    }
    const std::size_t value = it->second;
    const std::size_t key = value + e.path.size() - e.key.size();  // the key is the path's last component
    put32(table, e.flags, le);
    put32(table, static_cast<std::uint32_t>(key), le);
    put32(table, static_cast<std::uint32_t>(value), le);
    put32(table, 0, le);  // osversion
    put64(table, 0, le);  // hwcap
  }
  std::size_t extension_at = strings_at + strings.size();
  extension_at = (extension_at + 7) & ~std::size_t{7};
  std::string out = "glibc-ld.so.cache1.1";
  put32(out, static_cast<std::uint32_t>(cache.entries.size()), le);
  put32(out, static_cast<std::uint32_t>(strings.size()), le);
  out += static_cast<char>(le ? 2 : 3);  // cache_file_new_flags_endian_little / _big
  out.append(3, '\0');
  put32(out, static_cast<std::uint32_t>(extension_at), le);
  out.append(12, '\0');
  out += table;
  out += strings;
  out.resize(extension_at, '\0');
  // One extension section: the generator (tag 0), as ldconfig writes its own name there.
  put32(out, 0xeaa42174u, le);
  put32(out, 1, le);
  put32(out, 0, le);  // tag: generator
  put32(out, 0, le);  // flags
  put32(out, static_cast<std::uint32_t>(extension_at + 8 + 16), le);
  put32(out, static_cast<std::uint32_t>(options.generator.size()), le);
  out += options.generator;
  return out;
}

Result<LdCache> write_ld_cache(const std::string& root, const LdCacheOptions& options) {
  auto cache = scan_ld_cache(root, options);
  if (!cache) return cache;
  const std::string bytes = render_ld_cache(*cache, options);
  auto root_fd = open_root(root);
  if (!root_fd) return std::move(root_fd).error();
  const std::string where = root + "/etc/ld.so.cache";
  UniqueFd etc(open_in_root(root_fd->get(), "/etc", O_RDONLY | O_DIRECTORY));
  if (etc.get() < 0) {
    if (errno != ENOENT || ::mkdirat(root_fd->get(), "etc", 0755) != 0) return io_error(k_cache_write_io, "cannot open etc/", where);
    etc = UniqueFd(open_in_root(root_fd->get(), "/etc", O_RDONLY | O_DIRECTORY));
    if (etc.get() < 0) return io_error(k_cache_write_io, "cannot open etc/", where);
  }
  auto out = AtomicFile::create_in(etc.get(), "ld.so.cache", 0644);
  if (!out) return io_error(k_cache_write_io, "cannot create", where);
  if (!out->write(bytes)) return io_error(k_cache_write_io, "cannot write", where);
  if (!out->commit()) return io_error(k_cache_write_io, "cannot store", where);
  return cache;
}

}  // namespace gpuenv::images
