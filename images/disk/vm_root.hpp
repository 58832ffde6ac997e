#pragma once
// What a VM disk's root holds beyond its packages (docs/vm.md), written into the tree before the build's checks
// (so gpuenv's own binary is held to the DT_NEEDED check like everything else), without running a maintainer
// script on the host:
// - /etc/fstab (the root by the file system UUID the disk will have, the ESP at /boot/efi), /etc/hostname,
//   /etc/hosts when no package wrote one, an empty /etc/machine-id (systemd's first boot makes one per machine);
// - networking: systemd-networkd with DHCP on every Ethernet interface, enabled;
// - cloud-init's units, when asked, enabled as its postinst would (each unit's [Install] section), and SSH for the
//   keys it installs: openssh-server's sshd_config from its template, the `sshd` privilege separation user and
//   ssh.service enabled, as that postinst would (the host keys are cloud-init's, made on the first boot);
// - gpuenv itself (/usr/bin/gpuenv) and its boot pre-flight unit (recipes/systemd/gpuenv-preflight.service),
//   enabled, with a drop-in that lets it run without an NVIDIA driver (it then records could_not_run);
// - gpuenv-console.service: the verdict on the console, one line `gpuenv-preflight (<hostname>): <state>: <reason>`; with
//   `gpuenv.poweroff` on the kernel command line it then powers the machine off (boot tests, CI);
// - with a driver (vm_driver.hpp), gpuenv-driver.service: the module's modinfo on the console before the verdict;
// - the kernel's module dependency files (depmod -b ROOT VERSION: what the kernel package's postinst would run).
#include <string>

#include "base/error.hpp"
#include "base/process/command_runner.hpp"
#include "images/disk/vm_disk.hpp"
#include "resolver/platform.hpp"

namespace gpuenv::images::disk {

struct VmRootInputs {
  DiskIds ids;
  std::string hostname;        ///< the image's name
  std::string gpuenv_binary;   ///< copied to /usr/bin/gpuenv
  std::string preflight_unit;  ///< the unit's text
  bool cloud_init = false;     ///< enable cloud-init's units and SSH (the lock pinned cloud-init and openssh-server)
  std::string driver_module;   ///< the image's NVIDIA module ("nvidia-current"): its modinfo goes to the console; "" for none
  std::int64_t epoch = 0;      ///< SOURCE_DATE_EPOCH: the date of a system user's shadow entry
  resolver::Platform platform; ///< the disk's: gpuenv_binary must be a program of its architecture
};

/// Whether the program at PATH can be the gpuenv of a PLATFORM disk: an ELF file of PLATFORM's machine. Errors:
/// `vm.gpuenv_binary` (usage: not ELF, or another architecture's, with the way to name the right one), `build.io`
/// (it cannot be read).
Status check_vm_gpuenv(const std::string& path, const resolver::Platform& platform);

/// The symlink REL -> TARGET beneath ROOT (its directory made under write_file_beneath's rule), replacing what is
/// there. Errors: `build.io`, `archive.unsafe` (a directory on the way leads out of ROOT).
Status symlink_beneath(const std::string& root, const std::string& rel, const std::string& target);

/// The unit that puts the verdict on the console.
std::string console_unit();

/// Errors: `build.io` (a file cannot be written, with errno's text), `vm.gpuenv_binary` (check_vm_gpuenv's),
/// `vm.kernel` (find_kernel's), `vm.depmod`,
/// `vm.unit` (cloud-init or openssh-server asked for but not in the tree), `vm.users` (no /etc/passwd).
Status add_vm_files(const std::string& root, const VmRootInputs& inputs, CommandRunner& runner);

}  // namespace gpuenv::images::disk
