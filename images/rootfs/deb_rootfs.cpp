#include "images/rootfs/deb_rootfs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <regex>

#include "base/archive/safe_extract.hpp"
#include "base/file_io.hpp"
#include "base/unique_fd.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <openssl/evp.h>

#include "packages/apt/deb822.hpp"
#include "base/digest.hpp"

namespace gpuenv::images {
namespace {

namespace fs = std::filesystem;

/// The `rootfs.io` error of opening the image tree (no hint: the path says it all).
constexpr IoArea k_tree_open_io{"rootfs.io", ""};

/// NAME in the directory DIR_FD (WHERE names it in errors), written whole or not at all.
Status write_in(int dir_fd, const std::string& where, const std::string& name, const std::string& text) {
  auto fail = [&](const Error& e) {
    return make_error(ErrorKind::environment, "rootfs.io", "cannot write " + where + "/" + name + ": " + e.message, where, "check free disk space");
  };
  auto file = AtomicFile::create_in(dir_fd, name, 0644, Durability::scratch);
  if (!file) return fail(file.error());
  if (auto st = file->write(text); !st) return fail(st.error());
  if (auto st = file->commit(); !st) return fail(st.error());
  return ok_status();
}

/// The bytes of a regular file opened as FD (at most 64 MiB: dpkg's files are far smaller); std::nullopt when FD
/// is invalid, not a regular file or unreadable.
std::optional<std::string> read_fd(UniqueFd fd) { return read_regular_fd(fd.get(), std::size_t{64} << 20); }

std::string md5_hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_md5(), nullptr);  // dpkg's own conffile digest; not for integrity
  return to_hex(md, n);
}

}  // namespace

bool keep_in_minimal_image(std::string_view p) {
  auto under = [&](std::string_view dir) { return p.size() > dir.size() && p.substr(0, dir.size()) == dir && p[dir.size()] == '/'; };
  if (under("usr/share/doc")) {
    const auto slash = p.rfind('/');
    return p.substr(slash + 1) == "copyright";
  }
  return !(under("usr/share/man") || under("usr/share/info") || under("usr/share/locale") || under("usr/share/lintian") ||
           under("usr/share/linda"));
}

Result<InstalledDeb> install_deb(std::string_view bytes, const std::string& origin, const std::string& root, const ExtractOptions& options) {
  auto contents = extract_deb(bytes, origin, root, options);
  if (!contents) return std::move(contents).error();
  return read_deb_control(std::move(*contents), origin);
}

Result<InstalledDeb> read_deb_control(DebContents contents, const std::string& origin) {
  auto stanzas = packages::parse_deb822(contents.control, origin + " (control)");
  if (!stanzas) return std::move(stanzas).error();
  if (stanzas->size() != 1 || (*stanzas)[0].get("Package").empty() || (*stanzas)[0].get("Version").empty()) {
    return make_error(ErrorKind::environment, "rootfs.bad_control", "the control file needs exactly one stanza with Package and Version", origin,
                      "the package is damaged");
  }
  const packages::Stanza& s = (*stanzas)[0];
  InstalledDeb d;
  d.name = std::string(s.get("Package"));
  d.version = std::string(s.get("Version"));
  d.architecture = std::string(s.get("Architecture"));
  // The name and architecture name the package's files under var/lib/dpkg/info: Debian policy's grammar only.
  static const std::regex name_re("^[a-z0-9][a-z0-9+.-]+$"), arch_re("^[a-z0-9][a-z0-9-]*$");
  if (!std::regex_match(d.name, name_re) || (!d.architecture.empty() && !std::regex_match(d.architecture, arch_re))) {
    return make_error(ErrorKind::environment, "rootfs.bad_control",
                      "the control file names package '" + d.name + "' for architecture '" + d.architecture + "', which Debian policy does not allow",
                      origin, "the package is damaged or hostile; do not install it");
  }
  d.multi_arch = std::string(s.get("Multi-Arch"));
  d.control = std::move(contents.control);
  d.md5sums = std::move(contents.md5sums);
  for (std::size_t pos = 0; pos < contents.conffiles.size();) {
    auto nl = contents.conffiles.find('\n', pos);
    if (nl == std::string::npos) nl = contents.conffiles.size();
    std::string line = contents.conffiles.substr(pos, nl - pos);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    // "remove-on-upgrade /etc/x" flags (dpkg >= 1.20) precede the path
    if (const auto sp = line.rfind(' '); sp != std::string::npos) line = line.substr(sp + 1);
    if (!line.empty() && line[0] == '/') {
      // A conffile is a file of the package inside the image: no "..", no empty or "." components.
      auto normal = normalize_member_path(std::string_view(line).substr(1));
      if (!normal || !*normal || "/" + **normal != line) {
        return make_error(ErrorKind::environment, "rootfs.bad_control", "the conffiles list names '" + line + "', which is not a plain path in the image",
                          origin, "the package is damaged or hostile; do not install it");
      }
      d.conffiles.push_back(line);
    }
    pos = nl + 1;
  }
  d.entries = std::move(contents.entries);
  return d;
}

Status write_dpkg_database(const std::string& root, const std::vector<InstalledDeb>& packages) {
  // Every file is written and read beneath the root: a package (or base image) that makes var/lib/dpkg or its
  // info directory a symlink out of the tree gets an error, never writes on the host.
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root_fd.get() < 0) return io_error(k_tree_open_io, "cannot open the image tree", root);
  GPUENV_TRY(dpkg_dir, open_directory_beneath(root_fd.get(), "var/lib/dpkg", root));
  GPUENV_TRY(info_dir, open_directory_beneath(root_fd.get(), "var/lib/dpkg/info", root));
  const std::string info = root + "/var/lib/dpkg/info";
  std::vector<const InstalledDeb*> sorted;
  for (const auto& p : packages) sorted.push_back(&p);
  std::sort(sorted.begin(), sorted.end(), [](const InstalledDeb* a, const InstalledDeb* b) {
    return std::tie(a->name, a->architecture) < std::tie(b->name, b->architecture);
  });
  std::string status;
  for (const InstalledDeb* p : sorted) {
    // dpkg's order: Package, then Status, then the rest of the control fields as shipped.
    std::string control = p->control;
    while (!control.empty() && (control.back() == '\n' || control.back() == '\r')) control.pop_back();
    const auto first_nl = control.find('\n');
    const std::string first = control.substr(0, first_nl);
    const std::string rest = first_nl == std::string::npos ? std::string() : control.substr(first_nl + 1);
    std::string conffiles;
    for (const auto& c : p->conffiles) {
      const auto body = read_fd(open_file_beneath(root_fd.get(), c.substr(1)));
      conffiles += " " + c + " " + (body ? md5_hex(*body) : std::string("newconffile")) + "\n";
    }
    if (!conffiles.empty()) conffiles = "Conffiles:\n" + conffiles;
    if (first.rfind("Package:", 0) == 0) status += first + "\nStatus: install ok installed\n" + rest + "\n" + conffiles + "\n";
    else status += "Package: " + p->name + "\nStatus: install ok installed\n" + control + "\n" + conffiles + "\n";
    std::vector<std::string> paths = {"/."};
    for (const auto& e : p->entries) paths.push_back("/" + e.path);
    std::sort(paths.begin() + 1, paths.end());
    paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
    std::string list;
    for (const auto& x : paths) list += x + "\n";
    const std::string stem = p->multi_arch == "same" ? p->name + ":" + p->architecture : p->name;
    if (auto st = write_in(info_dir.get(), info, stem + ".list", list); !st) return st;
    if (!p->md5sums.empty())
      if (auto st = write_in(info_dir.get(), info, stem + ".md5sums", p->md5sums); !st) return st;
    if (!p->conffiles.empty()) {
      std::string text;
      for (const auto& c : p->conffiles) text += c + "\n";
      if (auto st = write_in(info_dir.get(), info, stem + ".conffiles", text); !st) return st;
    }
  }
  // Layout version 1: Multi-Arch: same packages have "name:arch" info files.
  if (auto st = write_in(info_dir.get(), info, "format", "1\n"); !st) return st;
  const std::string dpkg = root + "/var/lib/dpkg";
  for (const char* f : {"available", "diversions", "statoverride"}) {
    if (::faccessat(dpkg_dir.get(), f, F_OK, AT_SYMLINK_NOFOLLOW) != 0)
      if (auto st = write_in(dpkg_dir.get(), dpkg, f, ""); !st) return st;
  }
  // A base image's status: its stanzas stay, except those of packages installed now, and all stay sorted.
  if (const auto old_status = read_fd(UniqueFd(::openat(dpkg_dir.get(), "status", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)))) {
    const std::string& old = *old_status;
    std::map<std::string, std::string> stanzas;  // "name:arch" -> stanza text with its blank line
    auto key_of = [](std::string_view stanza) {
      std::string name, arch;
      std::size_t pos = 0;
      while (pos < stanza.size()) {
        std::size_t eol = stanza.find('\n', pos);
        if (eol == std::string_view::npos) eol = stanza.size();
        const std::string_view line = stanza.substr(pos, eol - pos);
        auto value = [&](std::size_t n) {
          std::string_view v = line.substr(n);
          while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
          while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.remove_suffix(1);
          return std::string(v);
        };
        if (line.rfind("Package:", 0) == 0) name = value(8);
        else if (line.rfind("Architecture:", 0) == 0) arch = value(13);
        pos = eol + 1;
      }
      return name + ":" + arch;
    };
    std::size_t pos = 0;
    while (pos < old.size()) {
      std::size_t end = old.find("\n\n", pos);
      if (end == std::string::npos) end = old.size();
      std::string stanza = old.substr(pos, end - pos);
      pos = end + 2;
      while (!stanza.empty() && stanza.front() == '\n') stanza.erase(0, 1);
      if (stanza.empty()) continue;
      stanzas[key_of(stanza)] = stanza + "\n\n";
    }
    for (const InstalledDeb* p : sorted) {
      // A package installed now replaces the base's stanza of any architecture of that name (all <-> amd64).
      for (auto it = stanzas.begin(); it != stanzas.end();) {
        if (it->first.substr(0, it->first.find(':')) == p->name) it = stanzas.erase(it);
        else ++it;
      }
    }
    std::size_t start = 0;
    while (start < status.size()) {
      std::size_t end = status.find("\n\n", start);
      if (end == std::string::npos) end = status.size();
      const std::string stanza = status.substr(start, end - start);
      start = end + 2;
      if (!stanza.empty()) stanzas[key_of(stanza)] = stanza + "\n\n";
    }
    status.clear();
    for (const auto& [key, text] : stanzas) status += text;
  }
  return write_in(dpkg_dir.get(), dpkg, "status", status);
}

Status apply_base_passwd(const std::string& root) {
  const fs::path r(root);
  for (const auto& [master, target] : {std::pair{"usr/share/base-passwd/passwd.master", "etc/passwd"},
                                       std::pair{"usr/share/base-passwd/group.master", "etc/group"}}) {
    struct stat st {};
    if (::lstat((r / target).c_str(), &st) == 0) continue;  // already there (as anything): left as it is
    // Read and written beneath the root: a master that is a link to a host file (/etc/shadow) is not copied
    // into the image, and an etc/ that links out of the tree gets nothing written into it.
    const auto text = read_file_beneath(root, master, std::size_t{1} << 20);
    if (!text) continue;
    if (auto w = write_file_beneath(root, target, *text, 0644, "the image tree " + root); !w) return w;
  }
  return ok_status();
}

}  // namespace gpuenv::images
