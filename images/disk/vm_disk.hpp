#pragma once
// A bootable UEFI disk from a finished root tree (docs/vm.md): the kernel the tree's packages installed
// (/boot/vmlinuz-<version>), gpuenv's own initramfs for it (images/disk/initramfs.hpp: the disk controllers' and
// ext4's modules the kernel has not built in, and an init that mounts the root by its PARTUUID) and systemd-boot
// (/usr/lib/systemd/boot/efi/systemd-boot<x64|aa64>.efi, from systemd-boot-efi) go to a FAT32 EFI system partition
// with a Boot Loader Specification entry; the tree becomes the ext4 root. The layout, for linux/amd64 (linux/arm64:
// BOOTAA64.EFI, systemd-bootaa64.efi and the ARM64 root type):
//
//   GPT  1: "esp"  EFI system partition   EFI/BOOT/BOOTX64.EFI (the removable-media path: no NVRAM entry
//                                         needed, which is what an imported cloud image has),
//                                         EFI/systemd/systemd-bootx64.efi, loader/loader.conf,
//                                         loader/entries/gpuenv.conf, gpuenv/vmlinuz-<v>, gpuenv/initrd.img-<v>
//        2: "root" Linux root (x86-64)    ext4, the tree
//
// Every GUID, the file system UUID and the FAT volume id derive from the seed (the lock's sha256), so the same
// lock gives the same disk. A kernel that drives no disk controller, or has no ext4, is refused before the disk is
// written (plan_initramfs).
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/process/command_runner.hpp"
#include "images/disk/filesystems.hpp"
#include "images/disk/gpt.hpp"
#include "images/disk/initramfs.hpp"
#include "resolver/platform.hpp"

namespace gpuenv::images::disk {

enum class DiskFormat { raw, qcow2 };

/// The identities of a disk made from SEED; the root's /etc/fstab names them, so they are known first.
struct DiskIds {
  Guid disk, esp_partition, root_partition, root_fs;
  std::uint32_t esp_volume_id = 0;
};
DiskIds disk_ids(const std::string& seed);

/// /etc/fstab for DISK_IDS: the root by UUID, the ESP at /boot/efi by its volume id (umask=0077, nofail).
std::string fstab(const DiskIds& ids);

struct KernelFacts {
  std::string version;  ///< "6.1.0-57-cloud-amd64"
  std::string image;    ///< path of vmlinuz-<version> in the tree
};

/// The tree's one kernel. Errors: `vm.kernel` (no kernel, several).
Result<KernelFacts> find_kernel(const std::string& root);

struct VmDiskRequest {
  std::string root;                 ///< the finished root tree
  std::vector<InodeOwner> owners;   ///< the tree's owners and modes (make_ext4)
  std::string work_dir;             ///< scratch: the file system images
  std::string out;                  ///< the disk image (replaced)
  DiskFormat format = DiskFormat::raw;
  std::uint64_t root_size = 0;      ///< bytes; 0: what the tree needs and a quarter more, and 256 MiB
  std::uint64_t esp_size = 256u << 20;
  std::string seed;                 ///< the lock's sha256
  std::int64_t epoch = 0;           ///< SOURCE_DATE_EPOCH
  std::string cmdline;              ///< appended to the kernel command line
  resolver::Platform platform;      ///< the tree's: its boot loader, root partition type, initramfs init, consoles
};

struct VmDisk {
  resolver::Platform platform;
  GptLayout layout;
  DiskIds ids;
  KernelFacts kernel;
  InitramfsPlan initramfs;          ///< what the initramfs holds, and how the kernel drives each disk controller
  std::uint64_t initramfs_size = 0; ///< its bytes, gzip'd
  std::string cmdline;              ///< the whole kernel command line
  std::uint64_t raw_size = 0;       ///< the raw disk's size
  std::uint64_t raw_allocated = 0;  ///< the bytes the sparse raw file occupies
};

/// Errors: those of find_kernel, plan_initramfs and write_initramfs (`vm.initramfs`: no init of the platform in this
/// gpuenv), `vm.boot_loader` (no systemd-boot of the platform in the tree), `vm.cmdline` (a command line with a
/// newline), and make_fat's, make_ext4's and write_raw_disk's.
Result<VmDisk> build_vm_disk(const VmDiskRequest& request, CommandRunner& runner);

}  // namespace gpuenv::images::disk
