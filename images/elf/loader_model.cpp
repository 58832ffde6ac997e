#include "images/elf/loader_model.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>

namespace gpuenv::images {
namespace {

namespace fs = std::filesystem;

std::string loader_dirname(const std::string& abs) {
  const auto slash = abs.rfind('/');
  return slash == 0 || slash == std::string::npos ? std::string("/") : abs.substr(0, slash);
}

std::string basename_of(const std::string& abs) { return abs.substr(abs.rfind('/') + 1); }

bool is_linker_name(const std::string& name) { return name.rfind("ld-linux", 0) == 0 || name.rfind("ld64.so", 0) == 0; }

}  // namespace

LoaderModel::LoaderModel(std::string root, std::vector<std::pair<std::string, std::string>> cache, std::vector<std::string> default_dirs)
    : m_root(std::move(root)), m_default(std::move(default_dirs)) {
  while (m_root.size() > 1 && m_root.back() == '/') m_root.pop_back();
  for (auto& [key, path] : cache) m_cache.emplace(std::move(key), std::move(path));  // first entry wins, as in ld.so
}

std::optional<std::string> LoaderModel::resolve_inside(const std::string& abs) {
  auto it = m_resolved.find(abs);
  if (it == m_resolved.end()) it = m_resolved.emplace(abs, resolve_uncached(abs)).first;
  return it->second;
}

std::optional<std::string> LoaderModel::resolve_uncached(const std::string& abs) const {
  // Links are followed inside the image: an absolute target is read relative to the image root.
  fs::path p = fs::path(abs).lexically_normal();
  for (int hops = 0; hops < 40; ++hops) {
    // Resolve the parent directories first, component by component, so a linked directory stays inside.
    fs::path done = "/";
    bool relinked = false;
    for (auto it = p.begin(); it != p.end(); ++it) {
      if (*it == "/") continue;
      const fs::path next = (done / *it).lexically_normal();
      struct stat st {};
      const std::string host = m_root + next.string();
      if (::lstat(host.c_str(), &st) != 0) return std::nullopt;
      if (S_ISLNK(st.st_mode)) {
        std::error_code ec;
        const fs::path target = fs::read_symlink(host, ec);
        if (ec) return std::nullopt;
        fs::path rest;
        for (auto r = std::next(it); r != p.end(); ++r) rest /= *r;
        fs::path joined = target.is_absolute() ? target : done / target;
        if (!rest.empty()) joined /= rest;
        p = ("/" / joined.relative_path()).lexically_normal();
        if (p.string().rfind("/..", 0) == 0) p = "/";  // ".." above the root stays at the root, as in a chroot
        relinked = true;
        break;
      }
      done = next;
    }
    if (!relinked) {
      struct stat st {};
      if (::stat((m_root + p.string()).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
      return p.string();
    }
  }
  return std::nullopt;
}

const ElfInfo* LoaderModel::info(const std::string& abs) {
  const auto real = resolve_inside(abs);
  if (!real) return nullptr;
  auto it = m_info.find(*real);
  if (it != m_info.end()) return it->second.get();
  std::unique_ptr<ElfInfo> out;
  const std::string host = m_root + *real;
  const int fd = ::open(host.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    char magic[4];
    if (::pread(fd, magic, 4, 0) == 4 && is_elf_magic(std::string_view(magic, 4))) {
      auto elf = parse_elf_fd(fd, *real);
      if (elf) out = std::make_unique<ElfInfo>(std::move(*elf));
    }
    ::close(fd);
  }
  return m_info.emplace(*real, std::move(out)).first->second.get();
}

bool LoaderModel::compatible(const std::string& abs, const ElfInfo& root) {
  const ElfInfo* e = info(abs);
  return e && e->bits == root.bits && e->machine == root.machine && e->little_endian == root.little_endian;
}

std::vector<std::string> LoaderModel::expand(const std::string& list, const std::string& origin) const {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const auto colon = list.find(':', pos);
    std::string dir = list.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    pos = colon == std::string::npos ? list.size() + 1 : colon + 1;
    for (const char* token : {"${ORIGIN}", "$ORIGIN"})
      for (auto at = dir.find(token); at != std::string::npos; at = dir.find(token, at + origin.size())) dir.replace(at, std::strlen(token), origin);
    // ld.so drops trailing slashes ("$ORIGIN/" is the directory itself); a relative directory is relative to
    // the working directory, the root under `gpuenv run`.
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (!dir.empty() && dir.find('$') == std::string::npos) out.push_back(dir[0] == '/' ? dir : "/" + dir);
  }
  return out;
}

std::optional<std::string> LoaderModel::search(const std::string& name, const Object& needer, const ElfInfo& root) {
  if (name.find('/') != std::string::npos) {
    const std::string p = name[0] == '/' ? name : "/" + name;
    return resolve_inside(p) && compatible(p, root) ? std::optional<std::string>(p) : std::nullopt;
  }
  std::vector<std::string> dirs;
  if (needer.elf->runpath.empty()) {
    for (const Object* l = &needer; l; l = l->loader)
      if (l->elf->runpath.empty() && !l->elf->rpath.empty())
        for (auto& d : expand(l->elf->rpath, loader_dirname(l->path))) dirs.push_back(std::move(d));
  } else {
    dirs = expand(needer.elf->runpath, loader_dirname(needer.path));
  }
  std::string key = name;
  for (const auto& d : dirs) key += '\n' + d;
  if (auto it = m_searched.find(key); it != m_searched.end()) return it->second;
  std::optional<std::string> found;
  auto try_path = [&](const std::string& p) {
    if (!found && resolve_inside(p) && compatible(p, root)) found = p;
  };
  for (const auto& d : dirs) try_path((d == "/" ? std::string() : d) + "/" + name);
  if (!found)
    if (auto it = m_cache.find(name); it != m_cache.end()) try_path(it->second);
  for (const auto& d : m_default) try_path(d + "/" + name);
  m_searched.emplace(std::move(key), found);
  return found;
}

std::vector<LoadedLibrary> LoaderModel::list(const std::string& abs) {
  std::vector<LoadedLibrary> out;
  const ElfInfo* root_elf = info(abs);
  if (!root_elf || !root_elf->has_dynamic) return out;
  const auto root_identity = resolve_inside(abs);
  std::deque<Object> objects;  // stable addresses: loader pointers
  std::set<std::string> names, identities;
  objects.push_back(Object{abs, root_elf, nullptr});
  identities.insert(*root_identity);
  if (!root_elf->soname.empty()) names.insert(root_elf->soname);
  for (std::size_t i = 0; i < objects.size(); ++i) {
    const Object& obj = objects[i];
    for (const auto& needed : obj.elf->needed) {
      if (is_linker_name(needed) || names.count(needed)) continue;  // the linker is loaded already; so is a name it knows
      names.insert(needed);  // found or not ("not found" is listed once, as ld.so's trace mode fakes an entry)
      const auto found = search(needed, obj, *root_elf);
      if (!found) {
        out.push_back(LoadedLibrary{needed, "", obj.path});
        continue;
      }
      const std::string identity = *resolve_inside(*found);
      if (!identities.insert(identity).second) continue;  // the same file under another name: loaded once
      const ElfInfo* e = info(*found);
      if (!e->soname.empty()) names.insert(e->soname);
      out.push_back(LoadedLibrary{needed, *found, obj.path});
      if (e->has_dynamic) objects.push_back(Object{*found, e, &obj});
    }
  }
  return out;
}

Unresolved LoaderModel::unresolved(const std::vector<std::string>& objects, const std::function<bool(const std::string&)>& accept) {
  std::set<std::string> needed_names;
  for (const auto& o : objects)
    if (const ElfInfo* e = info(o); e && e->has_dynamic) needed_names.insert(e->needed.begin(), e->needed.end());
  std::map<std::string, std::set<std::string>> missing, optional;
  for (const auto& o : objects) {
    const ElfInfo* e = info(o);
    if (!e || !e->has_dynamic) continue;
    const bool program = !e->interpreter.empty();
    if (program && !resolve_inside(e->interpreter)) missing[e->interpreter].insert(o);
    const bool needed = needed_names.count(basename_of(o)) || (!e->soname.empty() && needed_names.count(e->soname));
    if (needed && !program) continue;  // judged in the trees of the objects that need it
    const std::string base = basename_of(o);
    const bool module = base.find(".cpython-") != std::string::npos || base.find(".abi3.so") != std::string::npos ||
                        base.find(".pypy") != std::string::npos;
    auto& into = program || module ? missing : optional;
    for (const auto& dep : list(o))
      if (dep.path.empty() && !accept(dep.name)) into[dep.name].insert(fs::path(dep.needed_by).lexically_normal().string());
  }
  Unresolved out;
  for (auto& [name, users] : missing) out.required[name].assign(users.begin(), users.end());
  for (auto& [name, users] : optional)
    if (!out.required.count(name)) out.optional[name].assign(users.begin(), users.end());
  return out;
}

}  // namespace gpuenv::images
