#include "images/disk/vm_root.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "base/archive/safe_extract.hpp"
#include "base/file_io.hpp"
#include "base/unique_fd.hpp"
#include "images/disk/vm_driver.hpp"

namespace gpuenv::images::disk {
namespace {

constexpr IoArea k_vm_root_io{"build.io", "check the work directory"};

namespace fs = std::filesystem;

Status write(const std::string& root, const std::string& rel, std::string_view text, unsigned mode = 0644) {
  return write_file_beneath(root, rel, text, mode, "the VM's files");
}

/// Enables UNIT for TARGET as `systemctl enable` would: a link in /etc/systemd/system/TARGET.wants.
Status enable(const std::string& root, const std::string& unit, const std::string& unit_path, const std::string& target) {
  return symlink_beneath(root, "etc/systemd/system/" + target + ".wants/" + unit, unit_path);
}

/// Enables a unit a package installed the way its postinst's `deb-systemd-helper enable` would: by the unit's own
/// [Install] section (WantedBy=, RequiredBy=, Alias=, Also=), read from /lib/systemd/system in the tree. Errors:
/// `vm.unit` (no such unit in the tree).
Status enable_packaged(const std::string& root, const std::string& unit, int depth = 0) {
  const std::string path = "lib/systemd/system/" + unit;
  auto text = read_file_beneath(root, path, 1u << 20);
  if (!text)
    return make_error(ErrorKind::spec, "vm.unit", "the image has no " + unit + " (/" + path + ")", "vm", "the package that ships it is missing from the lock");
  bool install = false;
  std::size_t start = 0;
  while (start < text->size()) {
    std::size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    std::string line = text->substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line[0] == '[') install = line == "[Install]";
    if (!install) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq);
    std::istringstream values(line.substr(eq + 1));
    for (std::string v; values >> v;) {
      if (key == "WantedBy") GPUENV_CHECK(symlink_beneath(root, "etc/systemd/system/" + v + ".wants/" + unit, "/" + path));
      else if (key == "RequiredBy") GPUENV_CHECK(symlink_beneath(root, "etc/systemd/system/" + v + ".requires/" + unit, "/" + path));
      else if (key == "Alias") GPUENV_CHECK(symlink_beneath(root, "etc/systemd/system/" + v, "/" + path));
      else if (key == "Also" && depth < 4) GPUENV_CHECK(enable_packaged(root, v, depth + 1));
    }
  }
  return ok_status();
}

/// What cloud-init's postinst enables (Debian 12's cloud-init 22.4: dh_systemd_enable for these units, each
/// WantedBy=cloud-init.target); its generator pulls cloud-init.target in at boot when a datasource is found.
const char* const k_cloud_init_units[] = {"cloud-init-local.service", "cloud-init.service", "cloud-config.service", "cloud-final.service",
                                          "cloud-init-hotplugd.socket"};

constexpr const char* k_network = R"(# gpuenv's VM network (docs/vm.md): DHCP on every Ethernet interface.
[Match]
Name=en* eth*

[Network]
DHCP=yes
)";

// The boot pre-flight also runs where the driver is missing (the recipe's unit is skipped then): in a VM image
// "no driver" is a verdict to record (could_not_run), not a reason to stay silent.
constexpr const char* k_preflight_dropin = R"(# gpuenv's VM image (docs/vm.md): run even without the NVIDIA driver, and record could_not_run.
[Unit]
ConditionPathExists=
)";

/// A system user as `adduser --system --no-create-home --home HOME --shell /usr/sbin/nologin NAME` makes it (a
/// postinst's): the lowest uid from 100 to 999 that /etc/passwd does not use, primary group nogroup (65534), and a
/// locked /etc/shadow entry where the image has a shadow file (its date from EPOCH). Nothing when NAME exists.
Status add_system_user(const std::string& root, const std::string& name, const std::string& home, std::int64_t epoch) {
  auto passwd = read_file_beneath(root, "etc/passwd", 1u << 20);
  if (!passwd) return make_error(ErrorKind::environment, "vm.users", "the image has no /etc/passwd", root, "base-passwd is missing from the lock");
  std::set<long> used;
  std::istringstream lines(*passwd);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + ":", 0) == 0) return ok_status();
    const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1), c = b == std::string::npos ? b : line.find(':', b + 1);
    if (c != std::string::npos) used.insert(std::strtol(line.c_str() + b + 1, nullptr, 10));
  }
  long uid = 100;
  while (used.count(uid) && uid < 999) ++uid;
  if (used.count(uid)) return make_error(ErrorKind::environment, "vm.users", "no free system uid (100-999) for " + name, root + "/etc/passwd", "");
  std::string text = *passwd;
  if (!text.empty() && text.back() != '\n') text += '\n';
  GPUENV_CHECK(write(root, "etc/passwd", text + name + ":x:" + std::to_string(uid) + ":65534::" + home + ":/usr/sbin/nologin\n"));
  if (auto shadow = read_file_beneath(root, "etc/shadow", 1u << 20)) {
    if (!shadow->empty() && shadow->back() != '\n') *shadow += '\n';
    GPUENV_CHECK(write(root, "etc/shadow", *shadow + name + ":*:" + std::to_string(epoch / 86400) + ":0:99999:7:::\n", 0640));
  }
  return ok_status();
}

/// SSH for cloud-init's keys (openssh-server, pinned with cloud-init): what its postinst does that the boot needs.
/// /etc/ssh/sshd_config from the package's template (ucf), the privilege separation user, and ssh.service enabled.
/// The host keys are cloud-init's (its ssh module makes them on the first boot, as Debian's cloud images do).
Status add_ssh_server(const std::string& root, std::int64_t epoch) {
  std::error_code ec;
  if (!fs::exists(fs::path(root) / "etc/ssh/sshd_config", ec)) {
    auto config = read_file_beneath(root, "usr/share/openssh/sshd_config", 1u << 20);
    if (!config)
      return make_error(ErrorKind::spec, "vm.unit", "the image has no /usr/share/openssh/sshd_config", "vm.cloud_init", "openssh-server is missing from the lock");
    GPUENV_CHECK(write(root, "etc/ssh/sshd_config", *config));
  }
  GPUENV_CHECK(add_system_user(root, "sshd", "/run/sshd", epoch));
  return enable_packaged(root, "ssh.service");
}

/// Whether BYTES (at least the ELF header of the program at PATH) are a program of PLATFORM's machine.
Status check_gpuenv_program(std::string_view bytes, const std::string& path, const resolver::Platform& platform) {
  const std::string want(platform.machine());
  const std::string hint = platform == resolver::native_platform()
                               ? "leave out --vm-gpuenv (the running gpuenv is a " + platform.str() + " program), or name a gpuenv built for " + platform.str()
                               : "build gpuenv for " + platform.str() + (platform.is_arm64() ? " (scripts/build_arm64.sh makes build-arm64/cli/gpuenv)" : "") +
                                     " and name it with --vm-gpuenv PATH";
  if (bytes.size() < 20 || bytes.substr(0, 4) != "\x7f" "ELF")
    return make_error(ErrorKind::usage, "vm.gpuenv_binary", path + " is not an ELF program; the disk's /usr/bin/gpuenv must be a " + want + " gpuenv", "--vm-gpuenv", hint);
  // e_machine at byte 18, in the file's byte order (EI_DATA, byte 5: 1 little-endian, 2 big-endian).
  const auto b18 = static_cast<unsigned char>(bytes[18]), b19 = static_cast<unsigned char>(bytes[19]);
  const unsigned machine = bytes[5] == 2 ? (b18 << 8 | b19) : (b19 << 8 | b18);
  if (machine == platform.facts().elf_machine) return ok_status();
  std::string found = "ELF machine " + std::to_string(machine);
  for (const auto& f : resolver::k_platform_facts)
    if (f.elf_machine == machine) found = "an " + std::string(f.machine) + " program";
  return make_error(ErrorKind::usage, "vm.gpuenv_binary", path + " is " + found + ", and this disk is " + platform.str() + ": its /usr/bin/gpuenv must be an " + want + " program",
                    "--vm-gpuenv", hint);
}

}  // namespace

Status symlink_beneath(const std::string& root, const std::string& rel, const std::string& target) {
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root_fd.get() < 0) return io_error(k_vm_root_io, "cannot open the image tree", root);
  const fs::path p(rel);
  GPUENV_TRY(dir, open_directory_beneath(root_fd.get(), p.parent_path().string(), "the VM's files"));
  const std::string name = p.filename().string();
  if (::unlinkat(dir.get(), name.c_str(), 0) != 0 && errno != ENOENT) return io_error(k_vm_root_io, "cannot replace", root + "/" + rel);
  if (::symlinkat(target.c_str(), dir.get(), name.c_str()) != 0) return io_error(k_vm_root_io, "cannot link", root + "/" + rel);
  return ok_status();
}

std::string console_unit() {
  return R"unit(# gpuenv's VM image (docs/vm.md): the boot pre-flight's verdict on the console, one line, for whoever watches
# the serial console (a cloud's console log, a boot test). With gpuenv.poweroff on the kernel command line the
# machine then powers off (boot tests, CI).
[Unit]
Description=gpuenv boot pre-flight verdict on the console
# After cloud-init's network stage too, where it runs: the line names the host the cloud's metadata named. (Not
# after cloud-final.service, which is ordered after multi-user.target: that cycle would drop this unit.)
After=gpuenv-preflight.service cloud-init.service

[Service]
Type=oneshot
StandardOutput=tty
StandardError=tty
TTYPath=/dev/console
ExecStart=/bin/sh -c 'echo "gpuenv-preflight ($$(cat /proc/sys/kernel/hostname)): $$(/usr/bin/gpuenv status --status-file /run/gpuenv/status.json 2>&1 | head -n 1)"'
ExecStartPost=/bin/sh -c 'if grep -qw gpuenv.poweroff /proc/cmdline; then systemctl --no-block start poweroff.target; fi'

[Install]
WantedBy=multi-user.target
)unit";
}

Status check_vm_gpuenv(const std::string& path, const resolver::Platform& platform) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return io_error(k_vm_root_io, "cannot open the gpuenv to put in the disk", path);
  char head[64] = {};
  const ssize_t n = ::pread(fd.get(), head, sizeof head, 0);
  if (n < 0) return io_error(k_vm_root_io, "cannot read the gpuenv to put in the disk", path);
  return check_gpuenv_program(std::string_view(head, static_cast<std::size_t>(n)), path, platform);
}

Status add_vm_files(const std::string& root, const VmRootInputs& in, CommandRunner& runner) {
  GPUENV_TRY(kernel, find_kernel(root));  // first: a tree that cannot boot gets nothing more
  GPUENV_CHECK(write(root, "etc/fstab", fstab(in.ids)));
  GPUENV_CHECK(write(root, "etc/hostname", in.hostname + "\n"));
  std::error_code ec;
  if (!fs::exists(fs::path(root) / "etc/hosts", ec))
    GPUENV_CHECK(write(root, "etc/hosts", "127.0.0.1\tlocalhost\n127.0.1.1\t" + in.hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"));
  GPUENV_CHECK(write(root, "etc/machine-id", "", 0444));  // empty: systemd's first boot (machine-id(5))
  fs::create_directories(fs::path(root) / "boot/efi", ec);

  GPUENV_CHECK(write(root, "etc/systemd/network/80-gpuenv-dhcp.network", k_network));
  GPUENV_CHECK(enable_packaged(root, "systemd-networkd.service"));  // Also= its socket
  if (in.cloud_init) {
    for (const char* unit : k_cloud_init_units) GPUENV_CHECK(enable_packaged(root, unit));
    GPUENV_CHECK(add_ssh_server(root, in.epoch));
  }

  auto binary = read_file_limited(in.gpuenv_binary, std::size_t{512} << 20);
  if (!binary) return binary.error();
  GPUENV_CHECK(check_gpuenv_program(*binary, in.gpuenv_binary, in.platform));
  GPUENV_CHECK(write(root, "usr/bin/gpuenv", *binary, 0755));
  GPUENV_CHECK(write(root, "etc/systemd/system/gpuenv-preflight.service", in.preflight_unit));
  GPUENV_CHECK(write(root, "etc/systemd/system/gpuenv-preflight.service.d/10-vm.conf", k_preflight_dropin));
  GPUENV_CHECK(enable(root, "gpuenv-preflight.service", "/etc/systemd/system/gpuenv-preflight.service", "multi-user.target"));
  GPUENV_CHECK(write(root, "etc/systemd/system/gpuenv-console.service", console_unit()));
  GPUENV_CHECK(enable(root, "gpuenv-console.service", "/etc/systemd/system/gpuenv-console.service", "multi-user.target"));
  if (!in.driver_module.empty()) {
    GPUENV_CHECK(write(root, "etc/systemd/system/gpuenv-driver.service", driver_info_unit(in.driver_module)));
    GPUENV_CHECK(enable(root, "gpuenv-driver.service", "/etc/systemd/system/gpuenv-driver.service", "multi-user.target"));
  }

  GPUENV_TRY(r, runner.run({"depmod", "-b", root, kernel.version}, {}, k_tool_timeout));
  if (r.exit_code != 0)
    return make_error(ErrorKind::environment, "vm.depmod", "depmod -b " + root + " " + kernel.version + " failed (exit " + std::to_string(r.exit_code) + "): " + r.err,
                      root, "kmod's depmod writes the module dependency files the kernel package's postinst would");
  return ok_status();
}

}  // namespace gpuenv::images::disk
