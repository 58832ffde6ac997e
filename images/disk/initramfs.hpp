#pragma once
// The initramfs of a VM disk (docs/vm.md, "The initramfs"). Debian's kernels build most disk controllers as
// modules (the cloud kernel: virtio-blk, virtio-scsi, Hyper-V storage and Xen's block front end; the generic one
// also NVMe, AHCI and ext4), so without an initramfs a kernel can mount its root only over what it has built in.
// gpuenv writes one itself, the same bytes for the same tree and epoch:
//   - a newc cpio (the kernel's initramfs format), entries sorted by path with every parent first, owned by
//     root, every time the epoch, inode numbers in that order; gzip'd by gpuenv's deterministic gzip;
//   - /init, gpuenv's static init program (images/disk/init/gpuenv_init.cpp, compiled with gpuenv and embedded);
//   - the modules of the disk controllers and of ext4 that the kernel has not built in, with every module they
//     need (modules.dep) and their `pre:` soft dependencies (modules.softdep, through modules.alias: ext4's
//     crc32c), under lib/modules/<version>/, and /etc/gpuenv/initramfs-modules, their load order;
//   - /etc/gpuenv/initramfs-absent: the controllers this kernel has no driver for, which the init names when no
//     root appears;
//   - /dev/console, which the kernel opens for the init before any file system is mounted.
// The init loads the modules, waits for the root by its PARTUUID, mounts it and executes /sbin/init.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "resolver/platform.hpp"

namespace gpuenv::images::disk {

/// How a kernel drives one disk controller (or ext4).
enum class Support { built_in, initramfs, absent };
std::string_view to_string(Support s);

struct ControllerSupport {
  /// "nvme", "virtio-blk", "virtio-scsi", "ahci", "hyperv", "xen-blkfront"; for linux/arm64 also "virtio-blk-mmio" and
  /// "virtio-scsi-mmio" (virtio over MMIO, which Arm machines without PCI use)
  std::string name;
  Support support = Support::absent;
  std::vector<std::string> missing;  ///< the modules this kernel has neither built in nor as a file (absent only)
};

struct InitramfsPlan {
  resolver::Platform platform;                   ///< the disk's: its init must be a program of that architecture
  std::string kernel_version;
  std::string modules_dir;                       ///< lib/modules/<version> in the tree, as read (usr/ merged or not)
  std::vector<std::string> modules;              ///< paths under modules_dir, in load order
  std::vector<ControllerSupport> controllers;    ///< every controller gpuenv looks for, in a fixed order
  Support ext4 = Support::absent;
};

/// What the initramfs for KERNEL_VERSION in ROOT, a tree of PLATFORM, must hold, from the tree's modules.dep,
/// modules.builtin, modules.softdep and modules.alias (depmod has run); the controllers looked for are PLATFORM's.
/// Errors, all `vm.initramfs`: no modules.dep or modules.builtin, a module path leaving the module tree, a dependency
/// cycle, ext4 neither built in nor a module, or no disk controller at all.
Result<InitramfsPlan> plan_initramfs(const std::string& root, const std::string& kernel_version,
                                     const resolver::Platform& platform = resolver::Platform::amd64());

/// One cpio member.
struct CpioEntry {
  std::string path;          ///< relative, no leading slash
  std::uint32_t mode = 0;    ///< type and permission bits (S_IFDIR | 0755, S_IFREG | 0644, S_IFCHR | 0600, ...)
  std::string data;          ///< a file's bytes
  std::uint32_t rdev_major = 0, rdev_minor = 0;
};

/// A newc cpio of ENTRIES (sorted here, parents must be among them), every member owned by 0:0 with mtime EPOCH,
/// and the trailer. Errors: `vm.initramfs` for an absolute, empty or doubled path.
Result<std::string> newc_archive(std::vector<CpioEntry> entries, std::int64_t epoch);

/// Writes the gzip'd initramfs of PLAN (modules read from ROOT, INIT_PROGRAM as /init) to OUT, replaced whole.
/// Returns its size. Errors: `vm.initramfs` (INIT_PROGRAM is not an ELF program of PLAN's platform, or a module
/// cannot be read), `disk.io` (OUT cannot be written).
Result<std::uint64_t> write_initramfs(const InitramfsPlan& plan, const std::string& root, std::string_view init_program, std::int64_t epoch,
                                      const std::string& out);

/// gpuenv's init program for the Debian architecture DEBIAN_ARCH ("amd64", "arm64"): a static executable, or ""
/// when this build has none for it (no cross compiler for that architecture when it was configured) or the name is
/// not one of those.
std::string_view initramfs_init_program_for(std::string_view debian_arch);

/// gpuenv's init program for the architecture gpuenv was built for ("" on one other than amd64 and arm64).
std::string_view initramfs_init_program();

}  // namespace gpuenv::images::disk
