#include "images/disk/vm_driver.hpp"
#include "images/disk/vm_root.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>
#include <map>
#include <regex>
#include <optional>

#include "base/archive/safe_extract.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/text.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv::images::disk {
namespace {

constexpr IoArea k_driver_io{"build.io", "check the work directory"};

namespace fs = std::filesystem;

/// One value of a dkms.conf line: quotes removed, $PACKAGE_NAME / ${PACKAGE_VERSION} substituted.
std::string dkms_value(std::string v, const std::map<std::string, std::string>& vars) {
  v = std::string(text::trim(v));
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
  for (const auto& [name, value] : vars) {
    for (const std::string& pattern : {"${" + name + "}", "$" + name}) {
      for (std::size_t p = v.find(pattern); p != std::string::npos; p = v.find(pattern, p + value.size())) v.replace(p, pattern.size(), value);
    }
  }
  return v;
}

/// A module name: what becomes a file name.
bool plain_name(const std::string& s) {
  static const std::regex re(R"(^[A-Za-z0-9_][A-Za-z0-9_.+-]*$)");
  return s.size() < 128 && std::regex_match(s, re);
}

/// A location: relative components of plain names (a leading '/' allowed and dropped), no "..".
std::optional<std::string> plain_location(std::string s) {
  while (!s.empty() && s.front() == '/') s.erase(0, 1);
  while (!s.empty() && s.back() == '/') s.pop_back();
  if (s.empty()) return std::string();
  std::size_t start = 0;
  while (start <= s.size()) {
    const auto slash = s.find('/', start);
    const std::string part = s.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part == "." || part == ".." || !plain_name(part)) return std::nullopt;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return s;
}

/// The one DKMS tree of the build root (/usr/src/<dir>/dkms.conf).
Result<std::string> find_dkms_tree(const std::string& build_root) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(build_root) / "usr/src", ec))
    if (e.is_directory(ec) && !e.is_symlink(ec) && fs::is_regular_file(e.path() / "dkms.conf", ec)) found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  if (found.size() != 1)
    return make_error(ErrorKind::spec, "vm.driver_source",
                      found.empty() ? "the driver build's packages hold no DKMS source tree (/usr/src/*/dkms.conf)"
                                    : "the driver build's packages hold several DKMS source trees: " + join(found, ", "),
                      "vm.driver.module", "name the kernel module's DKMS source package (e.g. nvidia-kernel-dkms) in vm.driver.module");
  return "usr/src/" + found.front();
}

/// The end of a long output, for an error message.
std::string tail_lines(const std::string& text, std::size_t lines) {
  std::size_t p = text.size();
  for (std::size_t n = 0; p > 0 && n <= lines; --p)
    if (text[p - 1] == '\n') ++n;
  return text.substr(p);
}

/// bwrap around ARGV: the build root read-only as /, the source at /build, nothing shared with the host.
std::vector<std::string> sandboxed(const DriverBuildRequest& rq, const std::string& source, const std::vector<std::string>& argv) {
  const std::string epoch = std::to_string(rq.epoch);
  std::vector<std::string> out = {"bwrap", "--ro-bind", rq.build_root, "/", "--bind", source, "/build", "--dev", "/dev", "--proc", "/proc",
                                  "--tmpfs", "/tmp", "--unshare-all", "--hostname", "gpuenv", "--die-with-parent", "--clearenv",
                                  "--setenv", "PATH", "/usr/sbin:/usr/bin:/sbin:/bin", "--setenv", "HOME", "/tmp", "--setenv", "LC_ALL", "C",
                                  "--setenv", "TZ", "UTC", "--setenv", "SOURCE_DATE_EPOCH", epoch, "--setenv", "KBUILD_BUILD_TIMESTAMP", "@" + epoch,
                                  "--setenv", "KBUILD_BUILD_USER", "gpuenv", "--setenv", "KBUILD_BUILD_HOST", "gpuenv", "--chdir", "/build"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

Status run_step(CommandRunner& runner, const std::vector<std::string>& argv, const DriverBuildRequest& rq, const std::string& what) {
  GPUENV_TRY(r, runner.run(argv, {}, rq.timeout));
  if (r.exit_code == 0) return ok_status();
  return make_error(ErrorKind::environment, "vm.driver_build",
                    what + " failed (exit " + std::to_string(r.exit_code) + "); the end of its output:\n" + tail_lines(r.out + r.err, 30), rq.kernel_abi,
                    "the module source may not support this kernel: pin another vm.kernel or vm.driver.module version");
}

}  // namespace

Result<DkmsConf> parse_dkms_conf(std::string_view text, const std::string& where) {
  // Logical lines: a trailing backslash continues a line (MAKE[0] spans several).
  std::vector<std::string> lines;
  std::string current;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    start = end + 1;
    if (!line.empty() && line.back() == '\\') {
      current += line.substr(0, line.size() - 1);
      continue;
    }
    lines.push_back(current + line);
    current.clear();
  }
  if (!current.empty()) lines.push_back(current);
  static const std::regex assign(R"(^\s*([A-Z_]+)(\[([0-9]{1,3})\])?=(.*)$)");
  std::map<std::string, std::string> vars;
  std::map<int, std::map<std::string, std::string>> indexed;
  for (const auto& line : lines) {
    std::smatch m;
    if (line.empty() || line.find_first_not_of(" \t") == std::string::npos || text::trim(line)[0] == '#' || !std::regex_match(line, m, assign)) continue;
    const std::string key = m[1];
    if (m[2].matched) indexed[std::stoi(m[3])][key] = dkms_value(m[4], vars);
    else if (key == "PACKAGE_NAME" || key == "PACKAGE_VERSION") vars[key] = dkms_value(m[4], vars);
  }
  DkmsConf out;
  out.package_name = vars["PACKAGE_NAME"];
  out.package_version = vars["PACKAGE_VERSION"];
  auto bad = [&](const std::string& what) {
    return make_error(ErrorKind::spec, "vm.dkms_conf", what, where, "vm.driver.module must be a DKMS source package of a kernel module");
  };
  for (auto& [i, keys] : indexed) {
    if (!keys.count("BUILT_MODULE_NAME")) continue;
    DkmsModule mod;
    mod.built_name = keys["BUILT_MODULE_NAME"];
    mod.dest_name = keys.count("DEST_MODULE_NAME") ? keys["DEST_MODULE_NAME"] : mod.built_name;
    auto built_at = plain_location(keys["BUILT_MODULE_LOCATION"]);
    auto dest_at = plain_location(keys["DEST_MODULE_LOCATION"]);
    if (!plain_name(mod.built_name) || !plain_name(mod.dest_name) || !built_at || !dest_at || dest_at->empty())
      return bad("module " + std::to_string(i) + " of dkms.conf has a name or location that is not a plain relative path ('" + mod.built_name + "' -> '" +
                 keys["DEST_MODULE_LOCATION"] + "/" + mod.dest_name + "')");
    mod.built_location = *built_at;
    mod.dest_location = *dest_at;
    out.modules.push_back(std::move(mod));
  }
  if (out.modules.empty()) return bad("dkms.conf names no module (BUILT_MODULE_NAME[i])");
  return out;
}

Result<BuiltDriver> build_driver_modules(const DriverBuildRequest& rq, CommandRunner& runner) {
  BuiltDriver out;
  GPUENV_TRY(tree, find_dkms_tree(rq.build_root));
  out.source = "/" + tree;
  const auto conf_text = read_file_beneath(rq.build_root, tree + "/dkms.conf", 1u << 20);
  if (!conf_text) return io_error(k_driver_io, "cannot read", out.source + "/dkms.conf");
  GPUENV_TRY(conf, parse_dkms_conf(*conf_text, out.source + "/dkms.conf"));
  out.conf = std::move(conf);
  std::error_code ec;
  // The headers package links /lib/modules/<abi>/build to its /usr/src tree (an absolute link: looked at, not followed).
  if (!fs::exists(fs::symlink_status(fs::path(rq.build_root) / "lib/modules" / rq.kernel_abi / "build", ec)) ||
      !fs::is_directory(fs::path(rq.build_root) / "usr/src" / ("linux-headers-" + rq.kernel_abi), ec))
    return make_error(ErrorKind::spec, "vm.driver_source", "the driver build has no headers for the kernel " + rq.kernel_abi + " (/lib/modules/" + rq.kernel_abi + "/build)",
                      "build_packages", "lock the spec again: the lock's build_packages pin linux-headers-" + rq.kernel_abi);
  // Mount points for bwrap in the (read-only) build root; the tree is the build's own copy of directories.
  for (const char* d : {"build", "tmp", "dev", "proc"}) fs::create_directories(fs::path(rq.build_root) / d, ec);
  // awk is an alternative (mawk's postinst runs update-alternatives), which Kbuild's scripts call by that name.
  if (!fs::exists(fs::symlink_status(fs::path(rq.build_root) / "usr/bin/awk", ec)) && fs::is_regular_file(fs::path(rq.build_root) / "usr/bin/mawk", ec))
    fs::create_symlink("mawk", fs::path(rq.build_root) / "usr/bin/awk", ec);
  const std::string source = rq.work_dir + "/driver-source";
  fs::remove_all(source, ec);
  fs::copy(fs::path(rq.build_root) / tree, source, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
  if (ec) return make_error(ErrorKind::environment, "build.io", "cannot copy the module source: " + ec.message(), out.source, "check the work directory");
  const unsigned jobs = std::max(1u, rq.jobs);
  GPUENV_CHECK(run_step(runner, sandboxed(rq, source, {"make", "-j" + std::to_string(jobs), "modules", "KERNEL_UNAME=" + rq.kernel_abi}), rq,
                        "make modules for " + rq.kernel_abi));
  std::vector<std::string> strip = {"strip", "--strip-debug"};
  for (const auto& m : out.conf.modules) {
    const std::string rel = (m.built_location.empty() ? "" : m.built_location + "/") + m.built_name + ".ko";
    if (!fs::is_regular_file(fs::path(source) / rel, ec))
      return make_error(ErrorKind::environment, "vm.driver_build", "the build made no " + rel + ", which dkms.conf names", out.source,
                        "the module source may not support this kernel");
    strip.push_back(rel);
    out.modules.push_back({source + "/" + rel, "lib/modules/" + rq.kernel_abi + "/" + m.dest_location + "/" + m.dest_name + ".ko"});
  }
  GPUENV_CHECK(run_step(runner, sandboxed(rq, source, strip), rq, "strip --strip-debug of the modules"));
  return out;
}

std::string driver_key(const std::vector<std::string>& build_inputs) {
  std::string text = "gpuenv-driver-modules-v1\n";
  for (const auto& line : build_inputs) text += line + "\n";
  return sha256_hex(text);
}

namespace {

constexpr std::string_view k_manifest_head = "gpuenv-driver-modules-v1\n";

/// One manifest line: built name, built location ("-" for the top), destination name and location, install path.
std::string manifest_line(const DkmsModule& m, const std::string& install) {
  return m.built_name + " " + (m.built_location.empty() ? "-" : m.built_location) + " " + m.dest_name + " " + m.dest_location + " " + install + "\n";
}

bool safe_install_path(const std::string& p) {
  return p.rfind("lib/modules/", 0) == 0 && p.find("..") == std::string::npos && p.find("//") == std::string::npos && p.size() > 3 &&
         p.substr(p.size() - 3) == ".ko";
}

}  // namespace

Status keep_driver(const BuiltDriver& driver, const std::string& drivers_dir, const std::string& key) {
  const fs::path final_dir = fs::path(drivers_dir) / key;
  const fs::path staging = fs::path(drivers_dir) / (".staging-" + key + "-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(staging, ec);
  const StagedDirectory staged(staging.string());  // gone whatever happens below
  fs::create_directories(staging, ec);
  if (ec) return make_error(ErrorKind::environment, "build.io", "cannot create " + staging.string() + ": " + ec.message(), drivers_dir, "check the cache directory");
  std::string manifest(k_manifest_head);
  manifest += driver.conf.package_name + " " + driver.conf.package_version + " " + driver.source + "\n";
  for (std::size_t i = 0; i < driver.modules.size() && i < driver.conf.modules.size(); ++i) {
    GPUENV_TRY(bytes, read_file_limited(driver.modules[i].file, std::size_t{1} << 30));
    GPUENV_CHECK(write_file_atomic((staging / (std::to_string(i) + ".ko")).string(), bytes));
    manifest += manifest_line(driver.conf.modules[i], driver.modules[i].install);
  }
  GPUENV_CHECK(write_file_atomic((staging / "manifest").string(), manifest));
  // Synced: later builds take a kept driver by its name, so its modules reach the disk before it is named. Another
  // build that kept the same modules first keeps its own.
  GPUENV_CHECK(commit_directory(staging.string(), final_dir.string(), Durability::synced, k_driver_io, "cannot keep the built driver modules"));
  return ok_status();
}

std::optional<BuiltDriver> kept_driver(const std::string& drivers_dir, const std::string& key) {
  const fs::path dir = fs::path(drivers_dir) / key;
  auto text = read_file_limited((dir / "manifest").string(), 1u << 20);
  if (!text || text->rfind(k_manifest_head, 0) != 0) return std::nullopt;
  std::istringstream in(text->substr(k_manifest_head.size()));
  BuiltDriver out;
  if (!(in >> out.conf.package_name >> out.conf.package_version >> out.source)) return std::nullopt;
  DkmsModule m;
  std::string install;
  while (in >> m.built_name >> m.built_location >> m.dest_name >> m.dest_location >> install) {
    if (m.built_location == "-") m.built_location.clear();
    const fs::path file = dir / (std::to_string(out.modules.size()) + ".ko");
    std::error_code ec;
    if (!safe_install_path(install) || !fs::is_regular_file(file, ec)) return std::nullopt;
    out.conf.modules.push_back(m);
    out.modules.push_back({file.string(), install});
  }
  if (out.modules.empty()) return std::nullopt;
  std::error_code ec;
  fs::last_write_time(dir / "manifest", fs::file_time_type::clock::now(), ec);  // used: prune keeps it
  return out;
}

namespace {

DriverCacheUse walk_drivers(const std::string& drivers_dir, const std::function<bool(const fs::path&)>& remove) {
  DriverCacheUse out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(drivers_dir, ec)) {
    const fs::path manifest = e.path() / "manifest";
    if (e.path().filename().string().front() == '.') {
      // Left by a killed build or prune (.staging-..., .removing-...): removed by a prune that reaches its age.
      if (remove && remove(e.path())) fs::remove_all(e.path(), ec);
      continue;
    }
    if (!fs::is_regular_file(manifest, ec)) continue;
    std::uint64_t bytes = 0;
    for (const auto& f : fs::directory_iterator(e.path(), ec))
      if (f.is_regular_file(ec)) bytes += f.file_size(ec);
    if (remove && (!remove(manifest) || !remove_tree_renamed(e.path().string()))) continue;
    ++out.drivers;
    out.bytes += bytes;
  }
  return out;
}

}  // namespace

DriverCacheUse driver_cache_use(const std::string& drivers_dir) { return walk_drivers(drivers_dir, nullptr); }

DriverCacheUse prune_driver_cache(const std::string& drivers_dir, std::chrono::system_clock::time_point cutoff) {
  return walk_drivers(drivers_dir, [&](const fs::path& manifest) {
    if (cutoff == std::chrono::system_clock::time_point::max()) return true;
    std::error_code ec;
    const auto when = fs::last_write_time(manifest, ec);
    if (ec) return true;
    return std::chrono::file_clock::to_sys(when) < cutoff;
  });
}

Status install_driver_modules(const BuiltDriver& driver, const std::string& root) {
  for (const auto& m : driver.modules) {
    GPUENV_TRY(bytes, read_file_limited(m.file, std::size_t{1} << 30));
    GPUENV_CHECK(write_file_beneath(root, m.install, bytes, 0644, "the driver's modules"));
  }
  return ok_status();
}

namespace {

/// What nvidia-alternative's postinst links (update-alternatives --slave), by link and target. A link in the
/// multiarch library directory is written without it (`in_lib_dir`): /usr/lib/<triplet>/ is the platform's.
struct AlternativeLink {
  bool in_lib_dir;
  const char* link;
  const char* target;
};
constexpr AlternativeLink k_driver_links[] = {
    {true, "libcuda.so.1", "nvidia/current/libcuda.so.1"},
    {true, "libcuda.so", "nvidia/current/libcuda.so"},
    {true, "libcudadebugger.so.1", "nvidia/current/libcudadebugger.so.1"},
    {true, "libnvidia-ml.so.1", "nvidia/current/libnvidia-ml.so.1"},
    {true, "libnvidia-ptxjitcompiler.so.1", "nvidia/current/libnvidia-ptxjitcompiler.so.1"},
    {true, "libnvidia-nvvm.so.4", "nvidia/current/libnvidia-nvvm.so.4"},
    {true, "libnvidia-allocator.so.1", "nvidia/current/libnvidia-allocator.so.1"},
    {true, "libnvidia-api.so.1", "nvidia/current/libnvidia-api.so.1"},
    {true, "libnvidia-encode.so.1", "nvidia/current/libnvidia-encode.so.1"},
    {true, "libnvidia-opticalflow.so.1", "nvidia/current/libnvidia-opticalflow.so.1"},
    {true, "libnvcuvid.so.1", "nvidia/current/libnvcuvid.so.1"},
    {false, "usr/bin/nvidia-smi", "/usr/lib/nvidia/current/nvidia-smi"},
    {false, "usr/bin/nvidia-debugdump", "/usr/lib/nvidia/current/nvidia-debugdump"},
    // The module's configuration: glx-alternative-nvidia links /etc/modprobe.d to /etc/nvidia, which
    // nvidia-alternative links to the driver's own /etc/nvidia/current (nvidia-kernel-support).
    {false, "etc/modprobe.d/nvidia.conf", "/etc/nvidia/current/nvidia-modprobe.conf"},
    {false, "etc/modprobe.d/nvidia-blacklists-nouveau.conf", "/etc/nvidia/current/nvidia-blacklists-nouveau.conf"},
    {false, "etc/modprobe.d/nvidia-options.conf", "/etc/nvidia/current/nvidia-options.conf"},
};

}  // namespace

Result<std::vector<std::string>> link_driver_alternatives(const std::string& root, const resolver::Platform& platform) {
  std::vector<std::string> made;
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root_fd.get() < 0) return io_error(k_driver_io, "cannot open the image tree", root);
  const std::string lib_dir = "usr/lib/" + std::string(platform.triplet()) + "/";
  for (const auto& l : k_driver_links) {
    const std::string link_path = l.in_lib_dir ? lib_dir + l.link : std::string(l.link);
    const fs::path link(link_path);
    const std::string target = l.target[0] == '/' ? std::string(l.target + 1) : (link.parent_path() / l.target).string();
    // The target must be a file of the tree, read beneath the root (a link in it cannot lead outside).
    if (open_file_beneath(root_fd.get(), target).get() < 0) continue;
    GPUENV_CHECK(symlink_beneath(root, link_path, l.target));
    made.push_back("/" + link_path + " -> " + l.target);
  }
  return made;
}

std::string driver_info_unit(const std::string& module) {
  return R"unit(# gpuenv's VM image (docs/vm.md): the NVIDIA kernel module built into the image, on the console, one line: what a
# cloud's console log shows of the driver before the pre-flight's verdict.
[Unit]
Description=gpuenv: the image's NVIDIA kernel module on the console
Before=gpuenv-console.service

[Service]
Type=oneshot
StandardOutput=tty
StandardError=tty
TTYPath=/dev/console
ExecStart=/bin/sh -c 'echo "gpuenv-driver ($$(cat /proc/sys/kernel/hostname)): )unit" +
         module + R"unit( version $$(/sbin/modinfo -F version )unit" + module + R"unit( 2>&1) vermagic $$(/sbin/modinfo -F vermagic )unit" + module +
         R"unit( 2>&1) file $$(/sbin/modinfo -n )unit" + module + R"unit( 2>&1)"'

[Install]
WantedBy=multi-user.target
)unit";
}

}  // namespace gpuenv::images::disk
