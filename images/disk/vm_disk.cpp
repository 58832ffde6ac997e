#include "images/disk/vm_disk.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>

#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "images/disk/disk_image.hpp"

namespace gpuenv::images::disk {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t k_mib = 1u << 20;

/// systemd-boot for PLATFORM in the tree (systemd-boot-efi of that architecture): systemd-boot<suffix>.efi.
std::string boot_loader_of(const resolver::Platform& platform) {
  return "usr/lib/systemd/boot/efi/systemd-boot" + std::string(platform.facts().efi_suffix) + ".efi";
}

/// The removable-media path UEFI firmware boots without a boot entry (UEFI 2.10 section 3.5.1.1): BOOTX64.EFI,
/// BOOTAA64.EFI.
std::string removable_media_path(const resolver::Platform& platform) {
  std::string suffix(platform.facts().efi_suffix);
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return "EFI/BOOT/BOOT" + suffix + ".EFI";
}

/// The consoles gpuenv names on the command line. x86-64: the screen and the first serial port, the last named
/// being /dev/console (where systemd and the verdict line write). Arm64: none; the kernel takes the serial console
/// the firmware describes (ACPI's SPCR table, else the device tree's stdout-path): ttyAMA0 (a PL011) on QEMU's virt
/// machine and Azure, ttyS0 (a 16550) on Graviton. Naming one there would make it /dev/console where it exists
/// and, where it does not, leave /dev/console on the screen (the first console to register).
std::string consoles_of(const resolver::Platform& platform) { return platform.is_amd64() ? " console=tty0 console=ttyS0,115200" : ""; }

Error kernel_error(const std::string& id, const std::string& what, const std::string& where, const std::string& hint) {
  return make_error(ErrorKind::spec, id, what, where, hint);
}

/// Bytes the tree needs on ext4: each file in whole 4 KiB blocks, an inode each, a quarter more, and 256 MiB.
std::uint64_t root_size_for(const std::string& root) {
  std::uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    bytes += (static_cast<std::uint64_t>(st.st_size) + 4095) / 4096 * 4096 + 256;
  }
  const std::uint64_t want = bytes + bytes / 4 + (256u << 20);
  return (want + k_mib - 1) / k_mib * k_mib;
}

}  // namespace

DiskIds disk_ids(const std::string& seed) {
  DiskIds ids;
  ids.disk = guid_from_seed(seed + "/disk");
  ids.esp_partition = guid_from_seed(seed + "/esp-partition");
  ids.root_partition = guid_from_seed(seed + "/root-partition");
  ids.root_fs = guid_from_seed(seed + "/root-fs");
  const Guid v = guid_from_seed(seed + "/esp-fs");
  ids.esp_volume_id = (std::uint32_t{v.bytes[0]} << 24) | (std::uint32_t{v.bytes[1]} << 16) | (std::uint32_t{v.bytes[2]} << 8) | v.bytes[3];
  return ids;
}

std::string fstab(const DiskIds& ids) {
  char volume[10];
  std::snprintf(volume, sizeof volume, "%04X-%04X", ids.esp_volume_id >> 16, ids.esp_volume_id & 0xffff);
  return "# /etc/fstab, written by gpuenv for its VM disk layout (docs/vm.md)\n"
         "UUID=" + ids.root_fs.str() + " / ext4 errors=remount-ro 0 1\n"
         "UUID=" + std::string(volume) + " /boot/efi vfat umask=0077,nofail 0 1\n";
}

Result<KernelFacts> find_kernel(const std::string& root) {
  const fs::path boot = fs::path(root) / "boot";
  std::vector<std::string> versions;
  std::error_code ec;
  for (auto it = fs::directory_iterator(boot, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("vmlinuz-", 0) == 0 && it->is_regular_file()) versions.push_back(name.substr(8));
  }
  std::sort(versions.begin(), versions.end());
  if (versions.empty())
    return kernel_error("vm.kernel", "the image has no kernel (/boot/vmlinuz-*)", "vm.kernel", "name a kernel package under vm.kernel, e.g. linux-image-cloud-amd64");
  if (versions.size() > 1) {
    std::string list;
    for (const auto& v : versions) list += (list.empty() ? "" : ", ") + v;
    return kernel_error("vm.kernel", "the image has several kernels (" + list + "); a VM image boots one", "vm.kernel", "keep one kernel package in the spec");
  }
  KernelFacts k;
  k.version = versions.front();
  k.image = (boot / ("vmlinuz-" + k.version)).string();
  return k;
}

Result<VmDisk> build_vm_disk(const VmDiskRequest& rq, CommandRunner& runner) {
  VmDisk out;
  out.platform = rq.platform;
  GPUENV_TRY(kernel, find_kernel(rq.root));
  out.kernel = kernel;
  GPUENV_TRY(plan, plan_initramfs(rq.root, kernel.version, rq.platform));
  const std::string loader_path = boot_loader_of(rq.platform);
  const fs::path loader = fs::path(rq.root) / loader_path;
  std::error_code ec;
  if (!fs::is_regular_file(loader, ec))
    return make_error(ErrorKind::spec, "vm.boot_loader", "the image has no systemd-boot for " + rq.platform.str() + " (/" + loader_path + ")", "vm",
                      "the VM plan adds systemd-boot-efi of the lock's architecture; a lock without it was not made for a VM image");
  if (rq.cmdline.find_first_of("\n\r") != std::string::npos)
    return make_error(ErrorKind::spec, "vm.cmdline", "the kernel command line holds a line break", "vm.cmdline", "write it on one line");
  out.ids = disk_ids(rq.seed);
  // PARTUUID: the partition's GUID, which gpuenv's init (always there: the initramfs is always written) finds in the
  // GPT of each disk, whichever controller it is on.
  out.cmdline = "root=PARTUUID=" + out.ids.root_partition.str() + " rootfstype=ext4 ro" + consoles_of(rq.platform);
  if (!rq.cmdline.empty()) out.cmdline += " " + rq.cmdline;

  // The ESP's files: written into the work directory first, then copied in by mcopy.
  const fs::path esp_dir = fs::path(rq.work_dir) / "esp";
  fs::create_directories(esp_dir, ec);
  if (ec) return make_error(ErrorKind::environment, "disk.io", "cannot make " + esp_dir.string() + ": " + ec.message(), rq.work_dir, "check the work directory");
  const std::string initrd = (esp_dir / "initrd.img").string();
  GPUENV_TRY(initrd_size, write_initramfs(plan, rq.root, initramfs_init_program_for(rq.platform.debian_arch()), rq.epoch, initrd));
  out.initramfs = std::move(plan);
  out.initramfs_size = initrd_size;
  const std::string entry = "title gpuenv\nversion " + kernel.version + "\nlinux /gpuenv/vmlinuz-" + kernel.version + "\ninitrd /gpuenv/initrd.img-" +
                            kernel.version + "\noptions " + out.cmdline + "\n";
  GPUENV_CHECK(write_file_atomic((esp_dir / "gpuenv.conf").string(), entry, 0644, Durability::scratch));
  // No menu, no waiting, and no editing of the command line at the console (init=/bin/sh would be root).
  GPUENV_CHECK(write_file_atomic((esp_dir / "loader.conf").string(), "default gpuenv.conf\ntimeout 0\neditor no\n", 0644, Durability::scratch));
  FatRequest fat{(fs::path(rq.work_dir) / "esp.img").string(), rq.esp_size, out.ids.esp_volume_id, "ESP", rq.epoch,
                 {{removable_media_path(rq.platform), loader.string()},
                  {"EFI/systemd/" + loader.filename().string(), loader.string()},
                  {"loader/loader.conf", (esp_dir / "loader.conf").string()},
                  {"loader/entries/gpuenv.conf", (esp_dir / "gpuenv.conf").string()},
                  {"gpuenv/vmlinuz-" + kernel.version, kernel.image},
                  {"gpuenv/initrd.img-" + kernel.version, initrd}}};
  GPUENV_CHECK(make_fat(fat, runner));

  Ext4Request ext4{(fs::path(rq.work_dir) / "root.img").string(), rq.root, rq.root_size ? rq.root_size : root_size_for(rq.root), out.ids.root_fs, "root", rq.epoch,
                   rq.owners};
  GPUENV_CHECK(make_ext4(ext4, runner));

  const std::string raw = rq.format == DiskFormat::raw ? rq.out : (fs::path(rq.work_dir) / "disk.raw").string();
  GPUENV_TRY(layout, write_raw_disk(raw, out.ids.disk,
                                    {{{*Guid::parse(k_type_esp), out.ids.esp_partition, "esp", rq.esp_size}, fat.out},
                                     {{root_partition_type(rq.platform), out.ids.root_partition, "root", ext4.size}, ext4.out}}));
  out.layout = layout;
  out.raw_size = layout.size();
  struct stat st {};
  if (::stat(raw.c_str(), &st) == 0) out.raw_allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
  fs::remove(fat.out, ec);
  fs::remove(ext4.out, ec);
  if (rq.format == DiskFormat::qcow2) {
    GPUENV_CHECK(convert_to_qcow2(raw, rq.out, runner));
    fs::remove(raw, ec);
  }
  return out;
}

}  // namespace gpuenv::images::disk
