// images/disk/vm_disk: the kernel checks on their own, and a whole disk booted under QEMU (q35, TCG, OVMF):
// Debian's cloud kernel from its .deb (scripts/test.sh downloads it into build-test-vm/), systemd-boot from
// the host's systemd-boot-efi, and a root whose init is a small static program that prints a line on the serial
// console and powers the machine off. The same inputs built twice, from other directories under another umask
// and time zone, must give the same bytes.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "base/digest.hpp"
#include "base/process/command_runner.hpp"
#include "fakes/shell.hpp"
#include "fakes/files.hpp"
#include "fakes/temp_dir.hpp"
#include "images/disk/disk_reader.hpp"
#include "images/disk/initramfs.hpp"
#include "images/disk/vm_disk.hpp"
#include "images/disk/vm_root.hpp"

namespace fs = std::filesystem;
using namespace gpuenv;
using namespace gpuenv::images::disk;
using gpuenv::testing::capture;
using gpuenv::testing::file_sha256;
using gpuenv::testing::sh_quote;
using gpuenv::testing::read_all;
using gpuenv::testing::write_tree_file;

namespace {

/// A module tree for kernel 6.1.0-1-test under usr/lib/modules (Debian 12 merges /lib into /usr/lib), with
/// depmod's index files as given: NVMe built in, virtio-blk, Xen and ext4 as modules, no virtio-scsi, AHCI or
/// Hyper-V; ext4 softly needs crc32c, which modules.alias resolves.
fs::path module_tree(const fs::path& root, const std::string& dep_extra = {}) {
  write_tree_file(root / "boot/vmlinuz-6.1.0-1-test", "kernel");
  const fs::path m = root / "usr/lib/modules/6.1.0-1-test";
  const std::string dep =
      "kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko\n"
      "kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko\n"
      "kernel/drivers/virtio/virtio.ko:\n"
      "kernel/drivers/virtio/virtio_ring.ko: kernel/drivers/virtio/virtio.ko\n"
      "kernel/drivers/virtio/virtio_pci_modern_dev.ko:\n"
      "kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/jbd2/jbd2.ko\n"
      "kernel/fs/jbd2/jbd2.ko:\n"
      "kernel/lib/crc16.ko:\n"
      "kernel/crypto/crc32c_generic.ko:\n"
      "kernel/drivers/block/xen-blkfront.ko:\n"
      "kernel/drivers/gpu/unrelated.ko:\n" + dep_extra;
  write_tree_file(m / "modules.dep", dep);
  write_tree_file(m / "modules.builtin", "kernel/drivers/nvme/host/nvme-core.ko\nkernel/drivers/nvme/host/nvme.ko\n");
  write_tree_file(m / "modules.softdep", "# Soft dependencies extracted from modules themselves.\nsoftdep ext4 pre: crypto-crc32c\nsoftdep jbd2 pre: crypto-crc32c\n");
  write_tree_file(m / "modules.alias", "alias crypto-crc32c crc32c_generic\nalias pci:v00001AF4d00001001sv*sd*bc*sc*i* virtio_blk\n");
  for (const char* ko : {"kernel/drivers/block/virtio_blk.ko", "kernel/drivers/virtio/virtio_pci.ko", "kernel/drivers/virtio/virtio.ko",
                         "kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/virtio/virtio_pci_modern_dev.ko", "kernel/fs/ext4/ext4.ko",
                         "kernel/fs/jbd2/jbd2.ko", "kernel/lib/crc16.ko", "kernel/crypto/crc32c_generic.ko", "kernel/drivers/block/xen-blkfront.ko"})
    write_tree_file(m / ko, std::string("module ") + ko);
  return root;
}

std::size_t position(const std::vector<std::string>& v, const std::string& x) {
  return static_cast<std::size_t>(std::find(v.begin(), v.end(), x) - v.begin());
}

}  // namespace

TEST(VmKernel, TheTreeHasOneKernel) {
  gpuenv::testing::TempDir dir("gpuenv-kernel");
  write_tree_file(dir.path() / "a/boot/vmlinuz-6.1.0-1-test", "kernel");
  auto ok = find_kernel((dir.path() / "a").string());
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->version, "6.1.0-1-test");
  EXPECT_EQ(find_kernel((dir.path() / "none").string()).error().id, "vm.kernel");
  write_tree_file(dir.path() / "two/boot/vmlinuz-6.1.0-1-test", "kernel");
  write_tree_file(dir.path() / "two/boot/vmlinuz-6.1.0-2-test", "another");
  EXPECT_EQ(find_kernel((dir.path() / "two").string()).error().id, "vm.kernel");
}

TEST(Initramfs, TakesTheControllersModulesTheKernelDidNotBuildInAfterWhatTheyNeed) {
  gpuenv::testing::TempDir dir("gpuenv-initramfs-plan");
  auto plan = plan_initramfs(module_tree(dir.path() / "a").string(), "6.1.0-1-test");
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->modules_dir, "usr/lib/modules/6.1.0-1-test");
  EXPECT_EQ(plan->ext4, Support::initramfs);
  std::map<std::string, Support> got;
  for (const auto& c : plan->controllers) got[c.name] = c.support;
  EXPECT_EQ(got, (std::map<std::string, Support>{{"nvme", Support::built_in}, {"virtio-blk", Support::initramfs}, {"virtio-scsi", Support::absent},
                                                  {"ahci", Support::absent}, {"hyperv", Support::absent}, {"xen-blkfront", Support::initramfs}}));
  EXPECT_EQ(plan->controllers[2].missing, (std::vector<std::string>{"virtio_scsi", "sd_mod"}));
  const auto& m = plan->modules;
  EXPECT_EQ(m.size(), 10u) << "each wanted module and what it needs, once, and nothing else";
  EXPECT_EQ(position(m, "kernel/drivers/gpu/unrelated.ko"), m.size());
  // Each after what it needs: modules.dep, and ext4's soft pre-dependency through modules.alias.
  for (const auto& [before, after] : std::vector<std::pair<std::string, std::string>>{
           {"kernel/crypto/crc32c_generic.ko", "kernel/fs/ext4/ext4.ko"},
           {"kernel/crypto/crc32c_generic.ko", "kernel/fs/jbd2/jbd2.ko"},
           {"kernel/fs/jbd2/jbd2.ko", "kernel/fs/ext4/ext4.ko"},
           {"kernel/lib/crc16.ko", "kernel/fs/ext4/ext4.ko"},
           {"kernel/drivers/virtio/virtio.ko", "kernel/drivers/virtio/virtio_ring.ko"},
           {"kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/block/virtio_blk.ko"},
           {"kernel/drivers/virtio/virtio_pci_modern_dev.ko", "kernel/drivers/virtio/virtio_pci.ko"}}) {
    ASSERT_LT(position(m, before), m.size()) << before;
    ASSERT_LT(position(m, after), m.size()) << after;
    EXPECT_LT(position(m, before), position(m, after)) << before << " loads after " << after;
  }

  // Refused: no module indexes, no ext4, no controller at all, a path out of the tree, a cycle.
  write_tree_file(dir.path() / "b/boot/vmlinuz-6.1.0-1-test", "kernel");
  fs::create_directories(dir.path() / "b/usr/lib/modules/6.1.0-1-test");
  auto no_dep = plan_initramfs((dir.path() / "b").string(), "6.1.0-1-test");
  ASSERT_FALSE(no_dep);
  EXPECT_EQ(no_dep.error().id, "vm.initramfs");
  EXPECT_NE(no_dep.error().message.find("modules.dep"), std::string::npos) << no_dep.error().message;
  EXPECT_EQ(plan_initramfs((dir.path() / "nothing").string(), "6.1.0-1-test").error().id, "vm.initramfs");
  module_tree(dir.path() / "c");
  write_tree_file(dir.path() / "c/usr/lib/modules/6.1.0-1-test/modules.dep", "kernel/drivers/block/virtio_blk.ko:\n");
  auto no_ext4 = plan_initramfs((dir.path() / "c").string(), "6.1.0-1-test");
  ASSERT_FALSE(no_ext4);
  EXPECT_NE(no_ext4.error().message.find("no ext4"), std::string::npos) << no_ext4.error().message;
  module_tree(dir.path() / "d");
  write_tree_file(dir.path() / "d/usr/lib/modules/6.1.0-1-test/modules.dep", "kernel/fs/ext4/ext4.ko:\n");
  write_tree_file(dir.path() / "d/usr/lib/modules/6.1.0-1-test/modules.builtin", "");
  auto no_disk = plan_initramfs((dir.path() / "d").string(), "6.1.0-1-test");
  ASSERT_FALSE(no_disk);
  EXPECT_NE(no_disk.error().message.find("none of the disk controllers"), std::string::npos) << no_disk.error().message;
  auto out = plan_initramfs(module_tree(dir.path() / "e", "kernel/x.ko: ../../../../etc/shadow\n").string(), "6.1.0-1-test");
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("outside the module tree"), std::string::npos) << out.error().message;
  auto escape = plan_initramfs(module_tree(dir.path() / "e2", "kernel/\x1b]0;x\x07.ko:\n").string(), "6.1.0-1-test");
  ASSERT_FALSE(escape);
  EXPECT_EQ(escape.error().message.find('\x1b'), std::string::npos) << "the index's text reached the message";
  module_tree(dir.path() / "f");
  write_tree_file(dir.path() / "f/usr/lib/modules/6.1.0-1-test/modules.dep",
                  "kernel/fs/ext4/ext4.ko: kernel/fs/jbd2/jbd2.ko\nkernel/fs/jbd2/jbd2.ko: kernel/fs/ext4/ext4.ko\nkernel/drivers/block/xen-blkfront.ko:\n");
  auto cycle = plan_initramfs((dir.path() / "f").string(), "6.1.0-1-test");
  ASSERT_FALSE(cycle);
  EXPECT_NE(cycle.error().message.find("cycle"), std::string::npos) << cycle.error().message;
  // A soft dependency leading back is left out, as modprobe does; '-' and '_' match in aliases, as kmod has it.
  module_tree(dir.path() / "g");
  write_tree_file(dir.path() / "g/usr/lib/modules/6.1.0-1-test/modules.softdep", "softdep ext4 pre: crypto_crc32c\nsoftdep crc32c_generic pre: ext4\n");
  auto soft = plan_initramfs((dir.path() / "g").string(), "6.1.0-1-test");
  ASSERT_TRUE(soft) << soft.error().message;
  EXPECT_LT(position(soft->modules, "kernel/crypto/crc32c_generic.ko"), position(soft->modules, "kernel/fs/ext4/ext4.ko"));
  // Compressed modules need a kernel that decompresses them.
  module_tree(dir.path() / "h", "kernel/drivers/block/virtio_blk.ko.xz:\n");
  write_tree_file(dir.path() / "h/usr/lib/modules/6.1.0-1-test/modules.dep",
                  "kernel/drivers/block/virtio_blk.ko.xz:\nkernel/fs/ext4/ext4.ko:\nkernel/drivers/virtio/virtio_pci.ko:\n");
  auto xz = plan_initramfs((dir.path() / "h").string(), "6.1.0-1-test");
  ASSERT_FALSE(xz);
  EXPECT_NE(xz.error().message.find("CONFIG_MODULE_DECOMPRESS"), std::string::npos) << xz.error().message;
  write_tree_file(dir.path() / "h/boot/config-6.1.0-1-test", "CONFIG_A=y\nCONFIG_MODULE_DECOMPRESS=y\n");
  EXPECT_TRUE(plan_initramfs((dir.path() / "h").string(), "6.1.0-1-test"));
  // A module tree that is a link out of the image's tree is not read.
  write_tree_file(dir.path() / "i/boot/vmlinuz-6.1.0-1-test", "kernel");
  fs::create_directories(dir.path() / "i/usr/lib");
  fs::create_symlink(dir.path() / "a/usr/lib/modules", dir.path() / "i/usr/lib/modules");
  EXPECT_EQ(plan_initramfs((dir.path() / "i").string(), "6.1.0-1-test").error().id, "vm.initramfs");
}

// The archive as GNU cpio reads it: newc, sorted with parents first, every member 0:0 at the epoch, /init the
// embedded static program, /dev/console a character device, the module list in load order; the same bytes twice.
TEST(Initramfs, IsASortedNewcCpioThatGnuCpioReadsAndTheSameBytesTwice) {
  ASSERT_EQ(capture("command -v cpio >/dev/null && echo yes"), "yes\n") << "GNU cpio is missing (scripts/deps.sh installs it)";
  gpuenv::testing::TempDir dir("gpuenv-initramfs");
  const fs::path root = module_tree(dir.path() / "root");
  auto plan = plan_initramfs(root.string(), "6.1.0-1-test");
  ASSERT_TRUE(plan) << plan.error().message;
  // The disk is an x86-64 one, whatever gpuenv was built for (an arm64 build embeds an x86-64 init too).
  const std::string init = std::string(initramfs_init_program_for("amd64"));
  if (init.empty()) GTEST_SKIP() << "this build has no x86-64 initramfs init (no x86-64 compiler when it was configured)";
  ASSERT_GT(init.size(), 4096u);
  EXPECT_EQ(init.substr(0, 4), "\x7f" "ELF");
  auto a = write_initramfs(*plan, root.string(), init, 1700000000, (dir.path() / "a.img").string());
  const mode_t old_umask = ::umask(077);
  auto b = write_initramfs(*plan, root.string(), init, 1700000000, (dir.path() / "b.img").string());
  ::umask(old_umask);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(*a, fs::file_size(dir.path() / "a.img"));
  EXPECT_EQ(file_sha256(dir.path() / "a.img"), file_sha256(dir.path() / "b.img"));
  int status = 0;
  const std::string list = capture("gzip -dc " + sh_quote(dir.path() / "a.img") + " | TZ=UTC cpio -itv --numeric-uid-gid --quiet 2>&1", &status);
  ASSERT_EQ(status, 0) << list;
  std::vector<std::string> names;
  std::istringstream lines(list);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_NE(line.find(" 0        0 "), std::string::npos) << "not owned by 0:0: " << line;
    EXPECT_NE(line.find("Nov 14  2023"), std::string::npos) << "not at the epoch: " << line;
    names.push_back(line.substr(line.rfind(' ') + 1));
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end())) << list;
  EXPECT_NE(list.find("crw-------   1 0        0          5,   1 Nov 14  2023 dev/console"), std::string::npos) << list;
  EXPECT_NE(list.find("-rwxr-xr-x   1 0        0   "), std::string::npos) << list;
  EXPECT_NE(list.find(" init\n"), std::string::npos) << list;
  EXPECT_NE(list.find(" lib/modules/6.1.0-1-test/kernel/fs/ext4/ext4.ko\n"), std::string::npos) << list;
  EXPECT_EQ(list.find("unrelated"), std::string::npos) << list;
  const std::string order = capture("gzip -dc " + sh_quote(dir.path() / "a.img") + " | cpio -i --to-stdout --quiet etc/gpuenv/initramfs-modules", &status);
  std::string expected;
  for (const auto& m : plan->modules) expected += "/lib/modules/6.1.0-1-test/" + m + "\n";
  EXPECT_EQ(order, expected);
  EXPECT_EQ(capture("gzip -dc " + sh_quote(dir.path() / "a.img") + " | cpio -i --to-stdout --quiet etc/gpuenv/initramfs-absent"), "virtio-scsi, ahci, hyperv");
  EXPECT_EQ(capture("gzip -dc " + sh_quote(dir.path() / "a.img") + " | cpio -i --to-stdout --quiet init | sha256sum"), sha256_hex(init) + "  -\n");

  // An init for another architecture than the disk's is refused.
  std::string arm = init;
  arm[18] = static_cast<char>(183);  // EM_AARCH64
  arm[19] = 0;
  EXPECT_EQ(write_initramfs(*plan, root.string(), arm, 0, (dir.path() / "arm.img").string()).error().id, "vm.initramfs");
  EXPECT_FALSE(fs::exists(dir.path() / "arm.img"));
  // A member the archive cannot hold is refused.
  EXPECT_EQ(newc_archive({{"/etc", 040755, {}, 0, 0}}, 0).error().id, "vm.initramfs");
  EXPECT_EQ(newc_archive({{"etc", 040755, {}, 0, 0}, {"etc", 040755, {}, 0, 0}}, 0).error().id, "vm.initramfs");
}

// An arm64 disk: the controllers of Arm machines (virtio over MMIO besides PCI), and an init that must be an
// aarch64 program: the x86-64 one is refused, naming what is missing.
TEST(Initramfs, AnArm64DiskLooksForArmsControllersAndTakesAnAarch64Init) {
  gpuenv::testing::TempDir dir("gpuenv-initramfs-arm64");
  const fs::path root = module_tree(dir.path() / "root", "kernel/drivers/virtio/virtio_mmio.ko: kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko\n");
  write_tree_file(root / "usr/lib/modules/6.1.0-1-test/kernel/drivers/virtio/virtio_mmio.ko", "module virtio_mmio");
  auto plan = plan_initramfs(root.string(), "6.1.0-1-test", gpuenv::resolver::Platform::arm64());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->platform, gpuenv::resolver::Platform::arm64());
  std::vector<std::pair<std::string, Support>> got;
  for (const auto& c : plan->controllers) got.emplace_back(c.name, c.support);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, Support>>{{"nvme", Support::built_in},
                                                               {"virtio-blk", Support::initramfs},
                                                               {"virtio-scsi", Support::absent},
                                                               {"virtio-blk-mmio", Support::initramfs},
                                                               {"virtio-scsi-mmio", Support::absent},
                                                               {"ahci", Support::absent},
                                                               {"hyperv", Support::absent},
                                                               {"xen-blkfront", Support::initramfs}}));
  EXPECT_LT(position(plan->modules, "kernel/drivers/virtio/virtio_mmio.ko"), plan->modules.size());
  // The amd64 plan of the same tree is what it was: no MMIO controllers, and virtio_mmio not taken.
  auto amd64 = plan_initramfs(root.string(), "6.1.0-1-test");
  ASSERT_TRUE(amd64) << amd64.error().message;
  EXPECT_EQ(amd64->controllers.size(), 6u);
  EXPECT_EQ(position(amd64->modules, "kernel/drivers/virtio/virtio_mmio.ko"), amd64->modules.size());

  const std::string x86 = std::string(initramfs_init_program_for("amd64"));
  ASSERT_GT(x86.size(), 20u);
  auto refused = write_initramfs(*plan, root.string(), x86, 0, (dir.path() / "x86.img").string());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().id, "vm.initramfs");
  EXPECT_NE(refused.error().message.find("not an aarch64 program, and this disk is a linux/arm64 one"), std::string::npos) << refused.error().message;
  EXPECT_FALSE(fs::exists(dir.path() / "x86.img"));
  auto none = write_initramfs(*plan, root.string(), {}, 0, (dir.path() / "none.img").string());
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("this gpuenv has no aarch64 initramfs init"), std::string::npos) << none.error().message;
  EXPECT_NE(none.error().hint.find("aarch64-linux-gnu-g++"), std::string::npos) << none.error().hint;
  std::string arm = x86;  // the header is all write_initramfs reads of it
  arm[18] = static_cast<char>(183);  // EM_AARCH64
  arm[19] = 0;
  auto taken = write_initramfs(*plan, root.string(), arm, 0, (dir.path() / "arm.img").string());
  ASSERT_TRUE(taken) << taken.error().message;
  EXPECT_EQ(capture("gzip -dc " + sh_quote(dir.path() / "arm.img") + " | cpio -i --to-stdout --quiet etc/gpuenv/initramfs-absent"),
            "virtio-scsi, virtio-scsi-mmio, ahci, hyperv");
}

// The gpuenv a disk gets must be a program of the disk's platform: another's is refused, saying how to name one.
TEST(VmRoot, TheGpuenvInsideIsAProgramOfTheDisksPlatform) {
  gpuenv::testing::TempDir dir("gpuenv-vm-gpuenv");
  const std::string x86 = std::string(initramfs_init_program_for("amd64"));  // a static x86-64 program at hand
  write_tree_file(dir.path() / "x86", x86);
  std::string arm = x86;
  arm[18] = static_cast<char>(183);
  arm[19] = 0;
  write_tree_file(dir.path() / "arm", arm);
  write_tree_file(dir.path() / "text", "#!/bin/sh\n");
  using gpuenv::resolver::Platform;
  EXPECT_TRUE(check_vm_gpuenv((dir.path() / "x86").string(), Platform::amd64()));
  EXPECT_TRUE(check_vm_gpuenv((dir.path() / "arm").string(), Platform::arm64()));
  auto wrong = check_vm_gpuenv((dir.path() / "x86").string(), Platform::arm64());
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().id, "vm.gpuenv_binary");
  EXPECT_EQ(wrong.error().kind, ErrorKind::usage);
  EXPECT_NE(wrong.error().message.find("is an x86_64 program, and this disk is linux/arm64"), std::string::npos) << wrong.error().message;
  EXPECT_NE(wrong.error().hint.find("--vm-gpuenv"), std::string::npos) << wrong.error().hint;
  EXPECT_NE(wrong.error().hint.find("scripts/build_arm64.sh"), std::string::npos) << wrong.error().hint;
  EXPECT_EQ(check_vm_gpuenv((dir.path() / "arm").string(), Platform::amd64()).error().id, "vm.gpuenv_binary");
  auto text = check_vm_gpuenv((dir.path() / "text").string(), Platform::amd64());
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().message.find("is not an ELF program"), std::string::npos) << text.error().message;
  EXPECT_EQ(check_vm_gpuenv((dir.path() / "missing").string(), Platform::amd64()).error().id, "build.io");
}

TEST(VmKernel, FstabNamesTheRootAndEspTheDiskWillHave) {
  const DiskIds a = disk_ids("seed-a"), b = disk_ids("seed-a"), c = disk_ids("seed-b");
  EXPECT_EQ(a.root_fs, b.root_fs);
  EXPECT_EQ(a.esp_volume_id, b.esp_volume_id);
  EXPECT_NE(a.root_fs, c.root_fs);
  EXPECT_NE(a.root_partition, a.root_fs);
  const std::string tab = fstab(a);
  EXPECT_NE(tab.find("UUID=" + a.root_fs.str() + " / ext4 "), std::string::npos) << tab;
  EXPECT_NE(tab.find(" /boot/efi vfat umask=0077,nofail "), std::string::npos) << tab;
}

// What a VM's root gets besides its packages, on a made-up tree: the files, and units enabled the way their packages'
// postinsts would (by each unit's [Install] section), cloud-init's only when asked; depmod is the host's.
TEST(VmRoot, AddsTheFilesAndEnablesUnitsAsTheirPackagesWould) {
  gpuenv::testing::TempDir dir("gpuenv-vmroot");
  const fs::path root = dir.path() / "root";
  write_tree_file(root / "boot/vmlinuz-6.1.0-1-test", "kernel");
  fs::create_directories(root / "lib/modules/6.1.0-1-test/kernel");
  write_tree_file(root / "lib/systemd/system/systemd-networkd.service",
                  "[Unit]\nDescription=n\n[Install]\nWantedBy=multi-user.target\nAlso=systemd-networkd.socket\nAlias=dbus-org.freedesktop.network1.service\n");
  write_tree_file(root / "lib/systemd/system/systemd-networkd.socket", "[Socket]\n[Install]\nWantedBy=sockets.target\n");
  auto runner = make_process_runner();
  VmRootInputs in{disk_ids("seed"), "gpu-node", "/bin/true", "[Unit]\nDescription=pre-flight\n", false};
  auto st = add_vm_files(root.string(), in, *runner);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(read_all(root / "etc/hostname"), "gpu-node\n");
  EXPECT_EQ(read_all(root / "etc/fstab"), fstab(in.ids));
  EXPECT_TRUE(fs::exists(root / "etc/machine-id") && fs::file_size(root / "etc/machine-id") == 0);
  EXPECT_EQ(read_all(root / "usr/bin/gpuenv"), read_all("/bin/true"));
  EXPECT_NE(read_all(root / "etc/systemd/system/gpuenv-preflight.service.d/10-vm.conf").find("ConditionPathExists=\n"), std::string::npos);
  EXPECT_NE(read_all(root / "etc/systemd/system/gpuenv-console.service").find("gpuenv.poweroff"), std::string::npos);
  EXPECT_TRUE(fs::exists(root / "lib/modules/6.1.0-1-test/modules.dep"));
  const std::pair<const char*, const char*> links[] = {
      {"etc/systemd/system/multi-user.target.wants/systemd-networkd.service", "/lib/systemd/system/systemd-networkd.service"},
      {"etc/systemd/system/sockets.target.wants/systemd-networkd.socket", "/lib/systemd/system/systemd-networkd.socket"},
      {"etc/systemd/system/dbus-org.freedesktop.network1.service", "/lib/systemd/system/systemd-networkd.service"},
      {"etc/systemd/system/multi-user.target.wants/gpuenv-preflight.service", "/etc/systemd/system/gpuenv-preflight.service"},
      {"etc/systemd/system/multi-user.target.wants/gpuenv-console.service", "/etc/systemd/system/gpuenv-console.service"}};
  for (const auto& [link, target] : links) {
    std::error_code ec;
    EXPECT_EQ(fs::read_symlink(root / link, ec).string(), target) << link;
  }
  EXPECT_FALSE(fs::exists(root / "etc/systemd/system/cloud-init.target.wants"));
  EXPECT_FALSE(fs::exists(root / "etc/systemd/system/gpuenv-driver.service"));  // no driver, no driver line
  // With a driver, its modinfo goes to the console too.
  in.driver_module = "nvidia-current";
  ASSERT_TRUE(add_vm_files(root.string(), in, *runner));
  EXPECT_NE(read_all(root / "etc/systemd/system/gpuenv-driver.service").find("modinfo -F version nvidia-current"), std::string::npos);
  {
    std::error_code ec;
    EXPECT_EQ(fs::read_symlink(root / "etc/systemd/system/multi-user.target.wants/gpuenv-driver.service", ec).string(),
              "/etc/systemd/system/gpuenv-driver.service");
  }
  in.driver_module.clear();
  // cloud-init asked for, but its units are not in the tree: the lock was not made for it.
  in.cloud_init = true;
  auto missing = add_vm_files(root.string(), in, *runner);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().id, "vm.unit");
  for (const char* unit : {"cloud-init-local.service", "cloud-init.service", "cloud-config.service", "cloud-final.service", "cloud-init-hotplugd.socket"})
    write_tree_file(root / "lib/systemd/system" / unit, "[Install]\nWantedBy=cloud-init.target\n");
  // ... and SSH for the keys it installs: openssh-server's template and unit, and a passwd to add its user to.
  auto no_ssh = add_vm_files(root.string(), in, *runner);
  ASSERT_FALSE(no_ssh);
  EXPECT_EQ(no_ssh.error().id, "vm.unit");
  write_tree_file(root / "usr/share/openssh/sshd_config", "Include /etc/ssh/sshd_config.d/*.conf\n");
  write_tree_file(root / "lib/systemd/system/ssh.service", "[Service]\nExecStart=/usr/sbin/sshd -D\n[Install]\nWantedBy=multi-user.target\nAlias=sshd.service\n");
  write_tree_file(root / "etc/passwd", "root:x:0:0:root:/root:/bin/bash\n_apt:x:100:65534::/nonexistent:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
  write_tree_file(root / "etc/shadow", "root:*:19000:0:99999:7:::\n");
  in.epoch = 1700000000;
  ASSERT_TRUE(add_vm_files(root.string(), in, *runner));
  std::error_code ec;
  EXPECT_EQ(fs::read_symlink(root / "etc/systemd/system/cloud-init.target.wants/cloud-final.service", ec).string(), "/lib/systemd/system/cloud-final.service");
  EXPECT_EQ(fs::read_symlink(root / "etc/systemd/system/multi-user.target.wants/ssh.service", ec).string(), "/lib/systemd/system/ssh.service");
  EXPECT_EQ(fs::read_symlink(root / "etc/systemd/system/sshd.service", ec).string(), "/lib/systemd/system/ssh.service");
  EXPECT_EQ(read_all(root / "etc/ssh/sshd_config"), "Include /etc/ssh/sshd_config.d/*.conf\n");
  // adduser --system: the lowest free uid from 100 (100 is _apt's), group nogroup; a locked shadow entry dated by the epoch.
  EXPECT_NE(read_all(root / "etc/passwd").find("\nsshd:x:101:65534::/run/sshd:/usr/sbin/nologin\n"), std::string::npos) << read_all(root / "etc/passwd");
  EXPECT_NE(read_all(root / "etc/shadow").find("\nsshd:*:19675:0:99999:7:::\n"), std::string::npos) << read_all(root / "etc/shadow");
  // Again (a rebuild of the same tree): the user is not added twice.
  ASSERT_TRUE(add_vm_files(root.string(), in, *runner));
  const std::string passwd = read_all(root / "etc/passwd");
  EXPECT_EQ(passwd.find("\nsshd:"), passwd.rfind("\nsshd:"));
  // The verdict waits for cloud-init's hostname, but not for cloud-final.service, which is ordered after
  // multi-user.target: that cycle made systemd drop the console unit.
  const std::string console = read_all(root / "etc/systemd/system/gpuenv-console.service");
  const auto after = console.find("\nAfter=");
  ASSERT_NE(after, std::string::npos);
  EXPECT_EQ(console.substr(after, console.find('\n', after + 1) - after), "\nAfter=gpuenv-preflight.service cloud-init.service");
  EXPECT_EQ(console.find("\nAfter=", after + 1), std::string::npos);
}

namespace {

/// The kernel .deb scripts/test.sh downloads: Debian's cloud kernel (FLAVOUR "cloud-amd64") or its generic one
/// ("amd64"); "" when it is not there.
std::string kernel_deb(const std::string& flavour) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(GPUENV_TEST_VM_DIR, ec)) {
    const std::string name = e.path().filename().string();
    const auto dash = name.find("-" + flavour + "_");
    if (name.rfind("linux-image-", 0) == 0 && dash != std::string::npos && e.path().extension() == ".deb" &&
        (flavour != "amd64" || name.find("-cloud-amd64_") == std::string::npos))
      return e.path().string();
  }
  return "";
}

/// A .deb scripts/test.sh downloads whose file name starts with PREFIX ("systemd-boot-efi_") and ends with SUFFIX
/// ("_arm64.deb"); "" when it is not there.
std::string test_deb(const std::string& prefix, const std::string& suffix) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(GPUENV_TEST_VM_DIR, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) return e.path().string();
  }
  return "";
}

/// What differs in a test root per architecture: the firmware the boot needs, where systemd-boot comes from, the
/// kernel's own crypto modules, the compiler of the static init and the console it writes to.
struct TestArch {
  const char* name;            ///< "amd64", "arm64"
  const char* boot_loader;     ///< systemd-boot<suffix>.efi
  const char* boot_loader_deb; ///< "": the host's (amd64); else systemd-boot-efi's .deb of that architecture
  const char* crypto;          ///< the kernel's architecture-specific crypto modules (crc32c)
  const char* cc;              ///< the static init's compiler
  const char* console;         ///< where the init writes: x86's first serial port; on arm64 /dev/console, the one
                               ///< the firmware's SPCR names (a PL011 on QEMU's virt machine)
  std::vector<const char*> firmware;
};
const TestArch k_amd64{"amd64", "systemd-bootx64.efi", "", "arch/x86/crypto", "cc", "/dev/ttyS0",
                       {"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"}};
const TestArch k_arm64{"arm64", "systemd-bootaa64.efi", "arm64", "arch/arm64/crypto", "aarch64-linux-gnu-gcc", "/dev/console",
                       {"/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/AAVMF/AAVMF_VARS.fd"}};

constexpr const char* k_init_c = R"(#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <unistd.h>
int main(void) {
  mount("devtmpfs", "/dev", "devtmpfs", 0, 0);
  mount("proc", "/proc", "proc", 0, 0);
  int out = open(CONSOLE, O_WRONLY | O_NOCTTY);
  char cmdline[1024] = {0};
  int in = open("/proc/cmdline", O_RDONLY);
  if (in >= 0) read(in, cmdline, sizeof cmdline - 1);
  const char* hello = "gpuenv-vm-test: init ran; cmdline: ";
  write(out, hello, strlen(hello));
  write(out, cmdline, strlen(cmdline));
  sync();
  reboot(RB_POWER_OFF);
  return 0;
}
)";

/// A root from a kernel .deb of ARCH: the kernel and its modules (depmod run, as the VM root's steps run it),
/// systemd-boot, and a static init that prints its command line on the serial console and powers off. Fails the
/// test (ADD_FAILURE) and returns "" when a step does not work.
std::string boot_root(const std::string& deb, const fs::path& dir, const TestArch& arch = k_amd64) {
  std::vector<std::string> need(arch.firmware.begin(), arch.firmware.end());
  const std::string host_loader = std::string("/usr/lib/systemd/boot/efi/") + arch.boot_loader;
  if (!*arch.boot_loader_deb) need.push_back(host_loader);
  for (const auto& n : need)
    if (!fs::exists(n)) {
      ADD_FAILURE() << n << " is missing: scripts/deps.sh installs " << (arch.name == std::string("arm64") ? "qemu-efi-aarch64" : "ovmf and systemd-boot-efi");
      return "";
    }
  const fs::path root = dir / "root";
  fs::create_directories(dir);
  int status = 0;
  // The kernel and the part of its module tree the disk controllers and ext4 draw on (the generic kernel's whole
  // tree is 400 MiB, which mkfs.ext4 would copy for nothing): the drivers, and what they need from lib/, crypto/,
  // block/ and fs/. The whole tree is booted by tests/online/vm_online.sh.
  fs::create_directories(root);
  const std::string x = capture("dpkg-deb --fsys-tarfile " + sh_quote(deb) + " | tar -x -C " + sh_quote(root) +
                                    " --wildcards './boot/*' './lib/modules/*/modules.*' './lib/modules/*/kernel/drivers/ata/*' './lib/modules/*/kernel/drivers/scsi/*'"
                                    " './lib/modules/*/kernel/drivers/block/*' './lib/modules/*/kernel/drivers/nvme/*' './lib/modules/*/kernel/drivers/virtio/*'"
                                    " './lib/modules/*/kernel/drivers/hv/*' './lib/modules/*/kernel/fs/*' './lib/modules/*/kernel/lib/*'"
                                    " './lib/modules/*/kernel/crypto/*'"
                                    " './lib/modules/*/kernel/block/*' './lib/modules/*/kernel/" + std::string(arch.crypto) + "/*' 2>&1",
                                &status);
  if (status != 0) {
    ADD_FAILURE() << "dpkg-deb --fsys-tarfile " << deb << " | tar -x: " << x;
    return "";
  }
  fs::create_directories(root / "usr/lib/systemd/boot/efi");
  if (*arch.boot_loader_deb) {
    const std::string loader_deb = test_deb("systemd-boot-efi_", std::string("_") + arch.boot_loader_deb + ".deb");
    const std::string y = capture("dpkg-deb --fsys-tarfile " + sh_quote(loader_deb) + " | tar -x -C " + sh_quote(root) + " ./usr/lib/systemd/boot/efi/" + arch.boot_loader + " 2>&1",
                                  &status);
    if (loader_deb.empty() || status != 0) {
      ADD_FAILURE() << "systemd-boot-efi's " << arch.name << " .deb (" << loader_deb << "): " << y;
      return "";
    }
  } else {
    fs::copy_file(host_loader, root / "usr/lib/systemd/boot/efi" / arch.boot_loader);
  }
  write_tree_file(dir / "init.c", k_init_c);
  for (const char* d : {"sbin", "dev", "proc"}) fs::create_directories(root / d);
  const std::string cc = capture(std::string(arch.cc) + " -static -O2 '-DCONSOLE=\"" + arch.console + "\"' -o " + sh_quote(root / "sbin/init") + " " +
                                     sh_quote(dir / "init.c") + " 2>&1",
                                 &status);
  if (status != 0) {
    ADD_FAILURE() << "a static init: " << cc;
    return "";
  }
  auto kernel = find_kernel(root.string());
  if (!kernel) {
    ADD_FAILURE() << kernel.error().message;
    return "";
  }
  const std::string dep = capture("depmod -b " + sh_quote(root) + " " + kernel->version + " 2>&1", &status);
  if (status != 0) {
    ADD_FAILURE() << "depmod: " << dep;
    return "";
  }
  return root.string();
}

/// Boots DISK under QEMU with tests/vm/qemu_boot.sh, the disk on CONTROLLER; the serial console's text. STATUS is
/// qemu_boot.sh's (0: powered off by itself), SECONDS the boot's.
std::string boot(const fs::path& disk, const std::string& controller, const fs::path& work, int& status, double& seconds, int timeout_s = 240,
                 const std::string& arch = "amd64") {
  const fs::path copy = work / ("boot-" + controller + ".raw");
  fs::remove(copy);
  capture("cp --sparse=always " + sh_quote(disk) + " " + sh_quote(copy));  // booting writes to the disk
  const fs::path console = work / ("console-" + controller + ".log");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string out = capture(sh_quote(fs::path(GPUENV_SOURCE_DIR) / "tests/vm/qemu_boot.sh") + " --disk " + sh_quote(copy) + " --console " + sh_quote(console) +
                                      " --arch " + arch + " --controller " + controller + " --memory 512 --timeout " + std::to_string(timeout_s) + " 2>&1",
                                  &status);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fs::remove(copy);
  const std::string log = read_all(console);
  return log + (status != 0 ? "\n[qemu_boot.sh: " + out + "]" : "");
}

std::string tail_of(const std::string& log) { return log.substr(log.size() > 3000 ? log.size() - 3000 : 0); }

}  // namespace

TEST(VmBoot, TheDiskBootsUnderOvmfAndIsTheSameBytesTwice) {
  const std::string deb = kernel_deb("cloud-amd64");
  if (deb.empty()) GTEST_SKIP() << "no Debian cloud kernel .deb in " << GPUENV_TEST_VM_DIR << " (scripts/test.sh downloads it with apt-get download)";
  gpuenv::testing::TempDir dir("gpuenv-vmboot");
  const fs::path root = boot_root(deb, dir.path());
  ASSERT_FALSE(root.empty());
  int status = 0;

  auto runner = make_process_runner();
  VmDiskRequest rq;
  rq.root = root.string();
  rq.seed = "0123456789abcdef";
  rq.epoch = 1700000000;
  rq.cmdline = "panic=-1 gpuenv.test=1";
  rq.work_dir = (dir.path() / "work1").string();
  rq.out = (dir.path() / "disk1.raw").string();
  const auto t0 = std::chrono::steady_clock::now();
  auto disk = build_vm_disk(rq, *runner);
  const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(disk) << disk.error().message;
  // Debian's cloud kernel: NVMe built in, the virtio, Hyper-V and Xen drivers as modules, no AHCI driver at all.
  std::map<std::string, Support> got;
  for (const auto& c : disk->initramfs.controllers) got[c.name] = c.support;
  EXPECT_EQ(got, (std::map<std::string, Support>{{"nvme", Support::built_in}, {"virtio-blk", Support::initramfs}, {"virtio-scsi", Support::initramfs},
                                                  {"ahci", Support::absent}, {"hyperv", Support::initramfs}, {"xen-blkfront", Support::initramfs}}));
  EXPECT_EQ(disk->initramfs.ext4, Support::built_in);
  EXPECT_LT(disk->raw_allocated, disk->raw_size / 2) << "the raw disk is not sparse";

  // Again from another work directory, under another umask and time zone: the same bytes.
  const mode_t old_umask = ::umask(077);
  const char* old_tz = std::getenv("TZ");
  const std::string saved_tz = old_tz ? old_tz : "";
  ::setenv("TZ", "Pacific/Auckland", 1);
  rq.work_dir = (dir.path() / "elsewhere/work2").string();
  rq.out = (dir.path() / "disk2.raw").string();
  auto again = build_vm_disk(rq, *runner);
  rq.format = DiskFormat::qcow2;
  rq.out = (dir.path() / "disk.qcow2").string();
  auto qcow = build_vm_disk(rq, *runner);
  ::umask(old_umask);
  if (old_tz) ::setenv("TZ", saved_tz.c_str(), 1);
  else ::unsetenv("TZ");
  ASSERT_TRUE(again) << again.error().message;
  ASSERT_TRUE(qcow) << qcow.error().message;
  EXPECT_EQ(file_sha256(dir.path() / "disk1.raw"), file_sha256(dir.path() / "disk2.raw")) << "two builds of the same inputs differ";
  // inspect's reader sees the same table in the raw disk and in the qcow2, and no lock (this root has none).
  for (const char* file : {"disk1.raw", "disk.qcow2"}) {
    fs::create_directories(dir.path() / "read");
    auto summary = read_disk((dir.path() / file).string(), (dir.path() / "read").string(), *runner);
    ASSERT_TRUE(summary) << file << ": " << summary.error().message;
    EXPECT_EQ(summary->format, std::string(file).find("qcow2") != std::string::npos ? "qcow2" : "raw");
    EXPECT_EQ(summary->disk_size, disk->raw_size);
    ASSERT_EQ(summary->layout.partitions.size(), 2u);
    EXPECT_EQ(summary->layout.partitions[1].unique, disk->ids.root_partition);
    EXPECT_FALSE(summary->lock);
    EXPECT_NE(summary->lock_problem.find("no /usr/share/gpuenv/gpuenv.lock"), std::string::npos) << summary->lock_problem;
    fs::remove_all(dir.path() / "read");
  }
  const std::string cmp = capture("qemu-img compare -f raw -F qcow2 " + sh_quote(dir.path() / "disk1.raw") + " " + sh_quote(dir.path() / "disk.qcow2") + " 2>&1", &status);
  EXPECT_EQ(status, 0) << cmp;

  // Boot it: UEFI firmware, systemd-boot from the removable-media path, the kernel, gpuenv's initramfs, our init.
  // Over virtio-blk (KubeVirt's default bus; a module of the cloud kernel, so the initramfs loads it) and NVMe
  // (built in). TCG: KVM hangs on these machines.
  const char* const controllers[] = {"virtio-blk", "nvme"};
  std::string logs[2];
  int statuses[2] = {0, 0};
  double seconds[2] = {0, 0};
  {
    std::vector<std::thread> both;  // two guests at a time: the test runs alone on two cores
    for (int i = 0; i < 2; ++i) both.emplace_back([&, i] { logs[i] = boot(dir.path() / "disk1.raw", controllers[i], dir.path(), statuses[i], seconds[i]); });
    for (auto& t : both) t.join();
  }
  for (int i = 0; i < 2; ++i) {
    const char* controller = controllers[i];
    const std::string& log = logs[i];
    const double boot_s = seconds[i];
    EXPECT_EQ(statuses[i], 0) << controller << ": qemu did not power off by itself (124: timed out)\n" << tail_of(log);
    EXPECT_NE(log.find("gpuenv-init: root PARTUUID=" + disk->ids.root_partition.str() + " is /dev/"), std::string::npos) << controller << "\n" << tail_of(log);
    EXPECT_NE(log.find("gpuenv-vm-test: init ran; cmdline: "), std::string::npos) << controller << "\n" << tail_of(log);
    EXPECT_NE(log.find("root=PARTUUID=" + disk->ids.root_partition.str() + " rootfstype=ext4 ro console=tty0 console=ttyS0,115200 panic=-1 gpuenv.test=1"),
              std::string::npos);
    EXPECT_NE(log.find("reboot: Power down"), std::string::npos);
    std::printf("vm disk (cloud kernel): build %.1f s, raw %llu MiB (%llu MiB allocated), qcow2 %llu MiB, initramfs %llu KiB, boot over %s to power-off under TCG %.1f s (two guests at a time)\n",
                build_s, static_cast<unsigned long long>(disk->raw_size >> 20), static_cast<unsigned long long>(disk->raw_allocated >> 20),
                static_cast<unsigned long long>(fs::file_size(dir.path() / "disk.qcow2") >> 20), static_cast<unsigned long long>(disk->initramfs_size >> 10), controller,
                boot_s);
  }
}

// The other controllers: virtio-scsi on the cloud kernel; AHCI, which only the generic kernel (linux-image-amd64)
// has, on that one, whose NVMe and ext4 are modules too. A controller the kernel has no driver for is said on the
// console by gpuenv's init, naming it, and the kernel panics (panic=-1: it reboots, and QEMU stops).
TEST(VmBoot, EveryControllerBootsAndOneTheKernelLacksIsNamedOnTheConsole) {
  const std::string cloud = kernel_deb("cloud-amd64"), generic = kernel_deb("amd64");
  if (cloud.empty() || generic.empty())
    GTEST_SKIP() << "no Debian cloud and generic kernel .debs in " << GPUENV_TEST_VM_DIR << " (scripts/test.sh downloads them with apt-get download)";
  auto runner = make_process_runner();
  gpuenv::testing::TempDir dir("gpuenv-vmboot-each");
  std::map<std::string, std::pair<std::string, VmDisk>> disks;  // one disk per kernel
  for (const char* kernel : {"cloud", "generic"}) {
    const fs::path d = dir.path() / kernel;
    const std::string root = boot_root(std::string(kernel) == "cloud" ? cloud : generic, d);
    ASSERT_FALSE(root.empty());
    VmDiskRequest rq;
    rq.root = root;
    rq.seed = std::string("seed-") + kernel;
    rq.epoch = 1700000000;
    rq.cmdline = "panic=-1 gpuenv.rootwait=5";
    rq.work_dir = (d / "work").string();
    rq.out = (d / "disk.raw").string();
    auto disk = build_vm_disk(rq, *runner);
    ASSERT_TRUE(disk) << disk.error().message;
    disks[kernel] = {rq.out, *disk};
  }
  struct Case {
    const char* kernel;
    const char* controller;
    bool boots;
    std::string log;
    int status = 0;
    double seconds = 0;
  };
  std::vector<Case> cases = {{"cloud", "virtio-scsi", true, {}}, {"generic", "ahci", true, {}}, {"cloud", "ahci", false, {}}, {"generic", "virtio-blk", true, {}}};
  // Two at a time: the test runs alone (RUN_SERIAL) on machines of two cores, and each TCG guest is one thread.
  for (std::size_t i = 0; i < cases.size(); i += 2) {
    std::vector<std::thread> pair;
    for (std::size_t j = i; j < std::min(i + 2, cases.size()); ++j)
      pair.emplace_back([&, j] {
        Case& c = cases[j];
        const fs::path work = dir.path() / (std::string(c.kernel) + "-" + c.controller);
        fs::create_directories(work);
        c.log = boot(disks[c.kernel].first, c.controller, work, c.status, c.seconds);
      });
    for (auto& t : pair) t.join();
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.kernel) + " kernel over " + c.controller);
    const VmDisk& disk = disks[c.kernel].second;
    const std::string& log = c.log;
    if (c.boots) {
      EXPECT_EQ(c.status, 0) << "qemu did not power off by itself (124: timed out)\n" << tail_of(log);
      EXPECT_NE(log.find("gpuenv-init: root PARTUUID=" + disk.ids.root_partition.str() + " is /dev/"), std::string::npos) << tail_of(log);
      EXPECT_NE(log.find("gpuenv-vm-test: init ran; cmdline: "), std::string::npos) << tail_of(log);
      EXPECT_NE(log.find("reboot: Power down"), std::string::npos) << tail_of(log);
    } else {
      EXPECT_NE(log.find("gpuenv-init: the root PARTUUID=" + disk.ids.root_partition.str() + " did not appear in 5 s; disks: none. This kernel has no driver for ahci"),
                std::string::npos)
          << tail_of(log);
      EXPECT_NE(log.find("Kernel panic - not syncing: Attempted to kill init!"), std::string::npos) << tail_of(log);
      EXPECT_EQ(log.find("gpuenv-vm-test: init ran"), std::string::npos);
    }
    std::printf("vm disk (%s kernel, initramfs %llu KiB, %zu modules): over %s %s under TCG in %.1f s (two guests at a time)\n", c.kernel,
                static_cast<unsigned long long>(disk.initramfs_size >> 10), disk.initramfs.modules.size(), c.controller, c.boots ? "boots to power-off" : "stops", c.seconds);
  }
}

// An arm64 disk (Debian's arm64 cloud kernel, systemd-boot-efi's arm64 .deb, an aarch64 static init from the cross
// compiler, gpuenv's aarch64 initramfs init) boots under qemu-system-aarch64's virt machine with AAVMF: BOOTAA64.EFI
// on the removable-media path, the ARM64 root partition type, the kernel's serial console from the firmware (no
// console= of gpuenv's). Over virtio-blk on PCI (a module: from the initramfs), virtio-blk over MMIO (the virt
// machine's own transport, also from the initramfs) and NVMe (built in).
TEST(VmBoot, AnArm64DiskBootsUnderAavmf) {
  const std::string deb = kernel_deb("cloud-arm64");
  if (deb.empty() || test_deb("systemd-boot-efi_", "_arm64.deb").empty())
    GTEST_SKIP() << "no Debian arm64 cloud kernel and systemd-boot-efi arm64 .debs in " << GPUENV_TEST_VM_DIR
                 << " (scripts/test.sh downloads them with apt-get download where arm64 is a dpkg architecture)";
  if (initramfs_init_program_for("arm64").empty())
    GTEST_SKIP() << "this gpuenv was built without an aarch64 initramfs init (no aarch64-linux-gnu-g++ that links static programs when it was configured)";
  ASSERT_EQ(capture("command -v qemu-system-aarch64 aarch64-linux-gnu-gcc >/dev/null && echo yes"), "yes\n")
      << "qemu-system-aarch64 or aarch64-linux-gnu-gcc is missing (scripts/deps.sh installs qemu-system-arm and gcc-aarch64-linux-gnu)";
  gpuenv::testing::TempDir dir("gpuenv-vmboot-arm64");
  const fs::path root = boot_root(deb, dir.path(), k_arm64);
  ASSERT_FALSE(root.empty());
  auto runner = make_process_runner();
  VmDiskRequest rq;
  rq.root = root.string();
  rq.seed = "arm64-seed";
  rq.epoch = 1700000000;
  rq.cmdline = "panic=-1 gpuenv.test=1";
  rq.work_dir = (dir.path() / "work").string();
  rq.out = (dir.path() / "disk.raw").string();
  rq.platform = gpuenv::resolver::Platform::arm64();
  const auto t0 = std::chrono::steady_clock::now();
  auto disk = build_vm_disk(rq, *runner);
  const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(disk) << disk.error().message;
  EXPECT_EQ(disk->platform, gpuenv::resolver::Platform::arm64());
  EXPECT_EQ(disk->cmdline, "root=PARTUUID=" + disk->ids.root_partition.str() + " rootfstype=ext4 ro panic=-1 gpuenv.test=1");
  std::map<std::string, Support> got;
  for (const auto& c : disk->initramfs.controllers) got[c.name] = c.support;
  // Debian's arm64 cloud kernel: NVMe and ext4 built in, virtio (PCI and MMIO), Hyper-V and Xen as modules, no AHCI.
  EXPECT_EQ(got, (std::map<std::string, Support>{{"nvme", Support::built_in},
                                                  {"virtio-blk", Support::initramfs},
                                                  {"virtio-scsi", Support::initramfs},
                                                  {"virtio-blk-mmio", Support::initramfs},
                                                  {"virtio-scsi-mmio", Support::initramfs},
                                                  {"ahci", Support::absent},
                                                  {"hyperv", Support::initramfs},
                                                  {"xen-blkfront", Support::initramfs}}));
  ASSERT_EQ(disk->layout.partitions.size(), 2u);
  EXPECT_EQ(disk->layout.partitions[1].type.str(), "b921b045-1df0-41c3-af44-4c6f280d3fae");
  // The ESP as mtools reads it: the arm64 loader on the removable-media path, and no x86 one.
  const std::string esp = sh_quote(dir.path() / "disk.raw") + "@@" + std::to_string(disk->layout.partitions[0].offset());
  int status = 0;
  const std::string listing = capture("MTOOLSRC=/dev/null mdir -/ -b -i " + esp + " ::/EFI 2>&1", &status);
  EXPECT_EQ(status, 0) << listing;
  EXPECT_NE(listing.find("::/EFI/BOOT/BOOTAA64.EFI"), std::string::npos) << listing;
  EXPECT_NE(listing.find("::/EFI/systemd/systemd-bootaa64.efi"), std::string::npos) << listing;
  EXPECT_EQ(listing.find("X64"), std::string::npos) << listing;
  // inspect's reader says which platform the disk is.
  fs::create_directories(dir.path() / "read");
  auto summary = read_disk(rq.out, (dir.path() / "read").string(), *runner);
  ASSERT_TRUE(summary) << summary.error().message;
  EXPECT_EQ(summary->platform, gpuenv::resolver::Platform::arm64());
  EXPECT_EQ(partition_type_name(summary->layout.partitions[1].type), "Linux root (ARM64)");

  const char* const controllers[] = {"virtio-blk", "virtio-blk-mmio", "nvme"};
  std::string logs[3];
  int statuses[3] = {0, 0, 0};
  double seconds[3] = {0, 0, 0};
  for (int i = 0; i < 3; i += 2) {  // two guests at a time on the two cores
    std::vector<std::thread> pair;
    for (int j = i; j < std::min(i + 2, 3); ++j)
      pair.emplace_back([&, j] {
        const fs::path work = dir.path() / controllers[j];
        fs::create_directories(work);
        logs[j] = boot(rq.out, controllers[j], work, statuses[j], seconds[j], 400, "arm64");
      });
    for (auto& t : pair) t.join();
  }
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(controllers[i]);
    const std::string& log = logs[i];
    EXPECT_EQ(statuses[i], 0) << "qemu did not power off by itself (124: timed out)\n" << tail_of(log);
    EXPECT_NE(log.find("gpuenv-init: root PARTUUID=" + disk->ids.root_partition.str() + " is /dev/"), std::string::npos) << tail_of(log);
    // systemd-boot's initrd= comes first, then the entry's options: no console= of gpuenv's.
    const auto ran = log.find("gpuenv-vm-test: init ran; cmdline: initrd=");
    ASSERT_NE(ran, std::string::npos) << tail_of(log);
    const std::string cmdline = log.substr(ran, log.find_first_of("\r\n", ran) - ran);
    EXPECT_NE(cmdline.find(" root=PARTUUID=" + disk->ids.root_partition.str() + " rootfstype=ext4 ro panic=-1 gpuenv.test=1"), std::string::npos) << cmdline;
    EXPECT_EQ(cmdline.find("console="), std::string::npos) << cmdline;
    EXPECT_NE(log.find("printk: console [ttyAMA0] enabled"), std::string::npos) << "the serial console is not the firmware's PL011\n" << tail_of(log);
    EXPECT_NE(log.find("reboot: Power down"), std::string::npos) << tail_of(log);
    std::printf("arm64 vm disk (cloud kernel): build %.1f s, initramfs %llu KiB (%zu modules), boot over %s to power-off under TCG (virt, cortex-a57) %.1f s\n", build_s,
                static_cast<unsigned long long>(disk->initramfs_size >> 10), disk->initramfs.modules.size(), controllers[i], seconds[i]);
  }
}
