#include "images/disk/initramfs.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "base/file_io.hpp"
#include "base/text.hpp"
#include "images/oci/parallel_gzip.hpp"

// The embedded inits (images/CMakeLists.txt), one per architecture; size 0 where this build has none.
extern const unsigned char gpuenv_initramfs_init_amd64[];
extern const std::size_t gpuenv_initramfs_init_amd64_size;
extern const unsigned char gpuenv_initramfs_init_arm64[];
extern const std::size_t gpuenv_initramfs_init_arm64_size;

namespace gpuenv::images::disk {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t k_index_limit = 64u << 20;   // modules.dep and modules.alias of a distribution kernel: ~1 MiB
constexpr std::size_t k_module_limit = 256u << 20;  // one module

/// A controller gpuenv looks for and the modules it takes, each built in or loaded from the initramfs.
struct Controller {
  const char* name;
  std::vector<const char*> modules;
};
/// The controllers of PLATFORM's machines, in the order gpuenv reports them.
const std::vector<Controller>& controllers(const resolver::Platform& platform) {
  // virtio over PCI (q35, KubeVirt, Google Cloud's virtio-scsi); SCSI and SATA disks need sd_mod; Hyper-V's storvsc
  // (Azure) needs its bus.
  static const std::vector<Controller> amd64 = {{"nvme", {"nvme"}},
                                                {"virtio-blk", {"virtio_pci", "virtio_blk"}},
                                                {"virtio-scsi", {"virtio_pci", "virtio_scsi", "sd_mod"}},
                                                {"ahci", {"ahci", "sd_mod"}},
                                                {"hyperv", {"hv_vmbus", "hv_storvsc", "sd_mod"}},
                                                {"xen-blkfront", {"xen_blkfront"}}};
  // Arm's: the same over PCI (QEMU's and KubeVirt's virt machine, Graviton's NVMe, Azure's Hyper-V), and virtio over
  // MMIO, the transport of Arm machines that describe their devices without PCI (QEMU's virtio-*-device).
  static const std::vector<Controller> arm64 = {{"nvme", {"nvme"}},
                                                {"virtio-blk", {"virtio_pci", "virtio_blk"}},
                                                {"virtio-scsi", {"virtio_pci", "virtio_scsi", "sd_mod"}},
                                                {"virtio-blk-mmio", {"virtio_mmio", "virtio_blk"}},
                                                {"virtio-scsi-mmio", {"virtio_mmio", "virtio_scsi", "sd_mod"}},
                                                {"ahci", {"ahci", "sd_mod"}},
                                                {"hyperv", {"hv_vmbus", "hv_storvsc", "sd_mod"}},
                                                {"xen-blkfront", {"xen_blkfront"}}};
  return platform.is_arm64() ? arm64 : amd64;
}

Error plan_error(const std::string& what, const std::string& where, const std::string& hint) {
  return make_error(ErrorKind::spec, "vm.initramfs", what, where, hint);
}

/// "use a Debian kernel package (linux-image-cloud-amd64 or linux-image-amd64)", for PLATFORM's architecture.
std::string debian_kernels_hint(const resolver::Platform& platform) {
  const std::string arch(platform.debian_arch());
  return "use a Debian kernel package (linux-image-cloud-" + arch + " or linux-image-" + arch + ")";
}

/// A module's name as the kernel knows it: the file name without .ko[.xz|.zst|.gz], '-' as '_'.
std::string module_name(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  std::string name(slash == std::string_view::npos ? path : path.substr(slash + 1));
  const std::size_t ko = name.find(".ko");
  if (ko != std::string::npos) name.resize(ko);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text::is_space(text[i])) ++i;
    std::size_t j = i;
    while (j < text.size() && !text::is_space(text[j])) ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

/// An alias or soft dependency as kmod compares them: '-' and '_' the same, outside a [...] pattern.
std::string alias_key(std::string_view a) {
  std::string out(a);
  bool in_class = false;
  for (auto& c : out) {
    if (c == '[') in_class = true;
    else if (c == ']') in_class = false;
    else if (c == '-' && !in_class) c = '_';
  }
  return out;
}

/// PATH with every link resolved, when that stays inside the tree whose resolved path is TREE.
std::optional<fs::path> resolved_inside(const fs::path& tree, const fs::path& path) {
  std::error_code ec;
  fs::path real = fs::weakly_canonical(path, ec);
  if (ec) return std::nullopt;
  auto t = tree.begin(), r = real.begin();
  for (; t != tree.end() && !t->empty(); ++t, ++r)
    if (r == real.end() || *t != *r) return std::nullopt;
  return real;
}

/// A module path from an index: relative, inside the module tree, no "." or "..", no control character (it may
/// reach a message).
bool safe_module_path(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  for (const char c : p)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  for (const auto& part : fs::path(p))
    if (part == ".." || part == ".") return false;
  return true;
}

/// What a kernel's module indexes say (depmod's files): each module's path and dependencies, the built-in ones,
/// the aliases and the pre: soft dependencies.
struct ModuleIndex {
  std::map<std::string, std::string> path_of;                  // name -> path
  std::map<std::string, std::vector<std::string>> deps_of;     // name -> names, as modules.dep lists them
  std::set<std::string> built_in;
  std::map<std::string, std::vector<std::string>> aliases;     // alias -> module names
  std::map<std::string, std::vector<std::string>> soft_pre;    // module -> names or aliases
};

/// Reads the indexes of the module tree MODULES_DIR. Error `vm.initramfs` for a modules.dep entry outside the tree.
Result<ModuleIndex> read_module_index(const std::string& modules_dir, const std::string& dep_text, const std::string& builtin_text,
                                      const std::string& alias_text, const std::string& softdep_text) {
  ModuleIndex index;
  auto& path_of = index.path_of;
  auto& deps_of = index.deps_of;
  // A bad entry is named by its line, not echoed: the index is the package's text, not gpuenv's.
  std::size_t line_number = 0;
  auto bad_entry = [&] {
    return plan_error("line " + std::to_string(line_number) + " of modules.dep names a module outside the module tree, or with a control character",
                      "/" + modules_dir + "/modules.dep", "rebuild the tree");
  };
  for (const auto& line : lines_of(dep_text)) {
    ++line_number;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string path = line.substr(0, colon);
    if (!safe_module_path(path)) return bad_entry();
    const std::string name = module_name(path);
    path_of[name] = path;
    for (const auto& d : words_of(line.substr(colon + 1))) {
      if (!safe_module_path(d)) return bad_entry();
      deps_of[name].push_back(module_name(d));
      path_of.emplace(module_name(d), d);
    }
  }
  for (const auto& line : lines_of(builtin_text))
    if (!line.empty()) index.built_in.insert(module_name(line));
  for (const auto& line : lines_of(alias_text)) {
    const auto w = words_of(line);
    if (w.size() == 3 && w[0] == "alias") index.aliases[alias_key(w[1])].push_back(module_name(w[2]));
  }
  for (const auto& line : lines_of(softdep_text)) {
    const auto w = words_of(line);
    if (w.size() < 3 || w[0] != "softdep") continue;
    bool pre = false;
    for (std::size_t i = 2; i < w.size(); ++i) {
      if (w[i] == "pre:") pre = true;
      else if (w[i] == "post:") pre = false;
      else if (pre) index.soft_pre[module_name(w[1])].push_back(w[i]);
    }
  }
  return index;
}

}  // namespace

std::string_view to_string(Support s) {
  switch (s) {
    case Support::built_in: return "built in";
    case Support::initramfs: return "initramfs";
    case Support::absent: return "absent";
  }
  return "absent";
}

Result<InitramfsPlan> plan_initramfs(const std::string& root, const std::string& version, const resolver::Platform& platform) {
  InitramfsPlan plan;
  plan.platform = platform;
  plan.kernel_version = version;
  // Debian 12 merges /lib into /usr/lib: the tree holds usr/lib/modules and a lib -> usr/lib link. Whichever is
  // taken must stay inside the tree with its links resolved.
  std::error_code ec;
  const fs::path tree = fs::weakly_canonical(root, ec);
  for (const char* dir : {"usr/lib/modules/", "lib/modules/"}) {
    const fs::path p = fs::path(root) / (dir + version);
    if (fs::is_directory(p, ec) && resolved_inside(tree, p)) {
      plan.modules_dir = dir + version;
      break;
    }
  }
  if (plan.modules_dir.empty())
    return plan_error("kernel " + version + " has no module tree (/lib/modules/" + version + ")", "vm.kernel", "use a Debian kernel package (linux-image-*)");
  const std::string dir = (fs::path(root) / plan.modules_dir).string();
  auto read_index = [&](const char* name, bool required) -> Result<std::string> {
    auto text = read_file_limited(dir + "/" + name, k_index_limit);
    if (!text && required)
      return plan_error("kernel " + version + " has no " + name + " (" + text.error().message + ")", "/" + plan.modules_dir,
                        "depmod writes it; this is a bug in the VM root's steps");
    return text ? std::move(*text) : std::string();
  };
  GPUENV_TRY(dep_text, read_index("modules.dep", true));
  GPUENV_TRY(builtin_text, read_index("modules.builtin", true));
  GPUENV_TRY(softdep_text, read_index("modules.softdep", false));
  GPUENV_TRY(alias_text, read_index("modules.alias", false));

  GPUENV_TRY(index, read_module_index(plan.modules_dir, dep_text, builtin_text, alias_text, softdep_text));
  const auto& path_of = index.path_of;
  const auto& deps_of = index.deps_of;
  const auto& built_in = index.built_in;
  const auto& aliases = index.aliases;
  auto& soft_pre = index.soft_pre;

  auto support_of = [&](const std::string& name) {
    if (built_in.count(name)) return Support::built_in;
    return path_of.count(name) ? Support::initramfs : Support::absent;
  };
  std::vector<std::string> wanted;
  plan.ext4 = support_of("ext4");
  if (plan.ext4 == Support::absent)
    return plan_error("kernel " + version + " has no ext4, built in or as a module: it cannot mount the root", "vm.kernel", debian_kernels_hint(platform));
  if (plan.ext4 == Support::initramfs) wanted.push_back("ext4");
  for (const auto& c : controllers(platform)) {
    ControllerSupport s{c.name, Support::built_in, {}};
    for (const char* m : c.modules) {
      const Support one = support_of(m);
      if (one == Support::absent) s.missing.push_back(m);
      else if (one == Support::initramfs && s.support == Support::built_in) s.support = Support::initramfs;
    }
    if (!s.missing.empty()) s.support = Support::absent;
    else
      for (const char* m : c.modules)
        if (support_of(m) == Support::initramfs) wanted.push_back(m);
    plan.controllers.push_back(std::move(s));
  }
  if (std::none_of(plan.controllers.begin(), plan.controllers.end(), [](const ControllerSupport& s) { return s.support != Support::absent; }))
    return plan_error("kernel " + version + " drives none of the disk controllers gpuenv knows (NVMe, virtio-blk, virtio-scsi, AHCI, Hyper-V, Xen): it cannot find its root",
                      "vm.kernel", debian_kernels_hint(platform));

  // Load order: each module after what it needs (modules.dep) and its pre: soft dependencies (when they resolve to
  // a module file; one built in or absent needs nothing), each once.
  std::set<std::string> done, visiting;
  std::function<Status(const std::string&)> visit = [&](const std::string& name) -> Status {
    if (done.count(name) || built_in.count(name) || !path_of.count(name)) return ok_status();
    if (!visiting.insert(name).second)
      return plan_error("modules.dep of kernel " + version + " has a dependency cycle through " + name, "/" + plan.modules_dir + "/modules.dep", "rebuild the tree");
    // Soft dependencies as modprobe takes them: one that leads back to a module being loaded is left out, not an error.
    auto soft_visit = [&](const std::string& m) { return visiting.count(m) ? ok_status() : visit(m); };
    for (const auto& soft : soft_pre[name]) {
      const std::string n = module_name(soft);
      if (path_of.count(n)) GPUENV_CHECK(soft_visit(n));
      else if (const auto a = aliases.find(alias_key(soft)); a != aliases.end())
        for (const auto& m : a->second) GPUENV_CHECK(soft_visit(m));
    }
    const auto deps = deps_of.find(name);
    if (deps != deps_of.end())
      for (auto it = deps->second.rbegin(); it != deps->second.rend(); ++it) GPUENV_CHECK(visit(*it));
    visiting.erase(name);
    done.insert(name);
    plan.modules.push_back(path_of.at(name));
    return ok_status();
  };
  for (const auto& w : wanted) GPUENV_CHECK(visit(w));
  // A compressed module (.ko.xz, .ko.zst, .ko.gz) is given to the kernel to decompress, which it can only with
  // CONFIG_MODULE_DECOMPRESS (Debian 12's modules are not compressed).
  if (std::any_of(plan.modules.begin(), plan.modules.end(), [](const std::string& m) { return m.find(".ko.") != std::string::npos; })) {
    auto config = read_file_limited((fs::path(root) / ("boot/config-" + version)).string(), 4u << 20);
    if (!config || config->find("\nCONFIG_MODULE_DECOMPRESS=y\n") == std::string::npos)
      return plan_error("kernel " + version + " has compressed modules but no CONFIG_MODULE_DECOMPRESS=y in /boot/config-" + version +
                            ": it cannot load them from the initramfs",
                        "vm.kernel", "use a kernel that decompresses its modules, or uncompressed modules (Debian 12's)");
  }
  return plan;
}

Result<std::string> newc_archive(std::vector<CpioEntry> entries, std::int64_t epoch) {
  std::sort(entries.begin(), entries.end(), [](const CpioEntry& a, const CpioEntry& b) { return a.path < b.path; });
  std::string out;
  auto member = [&](std::uint32_t ino, const std::string& name, std::uint32_t mode, std::uint32_t nlink, const std::string& data, std::uint32_t major,
                    std::uint32_t minor) {
    char header[111];
    std::snprintf(header, sizeof header, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino, mode, 0u, 0u, nlink,
                  static_cast<std::uint32_t>(epoch), static_cast<std::uint32_t>(data.size()), 0u, 0u, major, minor, static_cast<std::uint32_t>(name.size() + 1), 0u);
    out.append(header, 110);
    out += name;
    out.push_back('\0');
    out.append((4 - out.size() % 4) % 4, '\0');
    out += data;
    out.append((4 - out.size() % 4) % 4, '\0');
  };
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (e.path.empty() || e.path.front() == '/' || e.path.back() == '/' || (i > 0 && entries[i - 1].path == e.path))
      return make_error(ErrorKind::internal, "vm.initramfs", "the initramfs member '" + e.path + "' is empty, absolute or doubled", e.path, "this is a bug in the initramfs plan");
    member(static_cast<std::uint32_t>(i + 1), e.path, e.mode, S_ISDIR(e.mode) ? 2 : 1, e.data, e.rdev_major, e.rdev_minor);
  }
  member(0, "TRAILER!!!", 0, 1, {}, 0, 0);  // all zero but nlink and the name, as GNU cpio writes it
  return out;
}

Result<std::uint64_t> write_initramfs(const InitramfsPlan& plan, const std::string& root, std::string_view init_program, std::int64_t epoch, const std::string& out) {
  // The disk is one of PLAN's platform (its boot loader, its root partition type, its kernel): so must its init be.
  // e_machine is little-endian in the ELF files of both architectures.
  const std::uint16_t want = plan.platform.facts().elf_machine;
  if (init_program.size() < 20 || init_program.substr(0, 4) != "\x7f" "ELF" ||
      (static_cast<unsigned char>(init_program[18]) | static_cast<unsigned>(static_cast<unsigned char>(init_program[19])) << 8) != want)
    return make_error(ErrorKind::environment, "vm.initramfs",
                      init_program.empty() ? "this gpuenv has no " + std::string(plan.platform.machine()) + " initramfs init, and this disk is a " + plan.platform.str() + " one"
                                           : "gpuenv's initramfs init is not an " + std::string(plan.platform.machine()) + " program, and this disk is a " + plan.platform.str() + " one",
                      "gpuenv", "use a gpuenv built with the " + std::string(plan.platform.triplet()) + "-g++ cross compiler installed (scripts/deps.sh), which embeds that init");
  std::error_code tree_ec;
  const fs::path tree = fs::weakly_canonical(root, tree_ec);
  std::vector<CpioEntry> entries;
  std::set<std::string> dirs = {"dev", "etc", "etc/gpuenv", "proc", "root", "sys"};
  const std::string mod_root = "lib/modules/" + plan.kernel_version;
  std::string list;
  for (const auto& m : plan.modules) {
    const std::string src = (fs::path(root) / plan.modules_dir / m).string();
    // The module is read from the tree, never through a link that leaves it.
    const auto real = resolved_inside(tree, src);
    if (!real) return plan_error("the module " + m + " leads out of the image's tree", "/" + plan.modules_dir + "/" + m, "rebuild the tree");
    auto bytes = read_file_limited(real->string(), k_module_limit);
    if (!bytes) return plan_error("cannot read the module " + m + ": " + bytes.error().message, "/" + plan.modules_dir + "/" + m, "check the build directory");
    const std::string dest = mod_root + "/" + m;
    for (fs::path p = fs::path(dest).parent_path(); !p.empty(); p = p.parent_path()) dirs.insert(p.string());
    entries.push_back({dest, S_IFREG | 0644, std::move(*bytes), 0, 0});
    list += "/" + dest + "\n";
  }
  for (const auto& d : dirs) entries.push_back({d, S_IFDIR | (d == "root" ? 0700u : 0755u), {}, 0, 0});
  entries.push_back({"dev/console", S_IFCHR | 0600, {}, 5, 1});
  entries.push_back({"init", S_IFREG | 0755, std::string(init_program), 0, 0});
  entries.push_back({"etc/gpuenv/initramfs-modules", S_IFREG | 0644, list, 0, 0});
  std::string absent;  // for the init's message when no root appears
  for (const auto& c : plan.controllers)
    if (c.support == Support::absent) absent += (absent.empty() ? "" : ", ") + c.name;
  entries.push_back({"etc/gpuenv/initramfs-absent", S_IFREG | 0644, absent, 0, 0});
  GPUENV_TRY(cpio, newc_archive(std::move(entries), epoch));
  GzipOptions options;
  options.level = 9;
  GPUENV_TRY(gz, gzip_compress(cpio, options));
  if (auto st = write_file_atomic(out, gz, 0644, Durability::scratch); !st)
    return make_error(ErrorKind::environment, "disk.io", "cannot write the initramfs " + out + ": " + st.error().message, out, "check the work directory");
  return static_cast<std::uint64_t>(gz.size());
}

std::string_view initramfs_init_program_for(std::string_view debian_arch) {
  if (debian_arch == "amd64") return {reinterpret_cast<const char*>(gpuenv_initramfs_init_amd64), gpuenv_initramfs_init_amd64_size};
  if (debian_arch == "arm64") return {reinterpret_cast<const char*>(gpuenv_initramfs_init_arm64), gpuenv_initramfs_init_arm64_size};
  return {};
}

std::string_view initramfs_init_program() {
#if defined(__x86_64__)
  return initramfs_init_program_for("amd64");
#elif defined(__aarch64__)
  return initramfs_init_program_for("arm64");
#else
  return {};
#endif
}

}  // namespace gpuenv::images::disk
