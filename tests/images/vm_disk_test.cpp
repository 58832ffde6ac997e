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

#include "base/digest.hpp"
#include "base/process/command_runner.hpp"
#include "fakes/shell.hpp"
#include "fakes/files.hpp"
#include "fakes/temp_dir.hpp"
#include "images/disk/disk_reader.hpp"
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

/// A /boot with one kernel whose config says CONFIG.
fs::path boot_with(const fs::path& root, const std::string& config, bool initrd = false) {
  write_tree_file(root / "boot/vmlinuz-6.1.0-1-test", "kernel");
  write_tree_file(root / "boot/config-6.1.0-1-test", config);
  if (initrd) write_tree_file(root / "boot/initrd.img-6.1.0-1-test", "initrd");
  return root;
}

}  // namespace

TEST(VmKernel, AKernelWithoutInitramfsNeedsExt4AndADiskControllerBuiltIn) {
  gpuenv::testing::TempDir dir("gpuenv-kernel");
  auto ok = find_kernel(boot_with(dir.path() / "a", "CONFIG_EXT4_FS=y\nCONFIG_BLK_DEV_NVME=y\nCONFIG_VIRTIO_BLK=m\nCONFIG_VIRTIO_PCI=m\n").string());
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->version, "6.1.0-1-test");
  EXPECT_EQ(ok->built_in_disks, std::vector<std::string>{"nvme"});
  EXPECT_TRUE(ok->initrd.empty());

  auto no_ext4 = find_kernel(boot_with(dir.path() / "b", "CONFIG_EXT4_FS=m\nCONFIG_BLK_DEV_NVME=y\n").string());
  ASSERT_FALSE(no_ext4);
  EXPECT_EQ(no_ext4.error().id, "vm.kernel_needs_initramfs");
  EXPECT_NE(no_ext4.error().message.find("ext4 as a module"), std::string::npos);
  // virtio-blk built in is no use while virtio-pci is a module.
  auto no_disk = find_kernel(boot_with(dir.path() / "c", "CONFIG_EXT4_FS=y\nCONFIG_VIRTIO_BLK=y\nCONFIG_VIRTIO_PCI=m\n").string());
  ASSERT_FALSE(no_disk);
  EXPECT_EQ(no_disk.error().id, "vm.kernel_needs_initramfs");
  // With an initramfs, modules are fine.
  auto with_initrd = find_kernel(boot_with(dir.path() / "d", "CONFIG_EXT4_FS=m\n", true).string());
  ASSERT_TRUE(with_initrd) << with_initrd.error().message;
  EXPECT_FALSE(with_initrd->initrd.empty());

  EXPECT_EQ(find_kernel((dir.path() / "none").string()).error().id, "vm.kernel");
  boot_with(dir.path() / "two", "CONFIG_EXT4_FS=y\nCONFIG_BLK_DEV_NVME=y\n");
  write_tree_file(dir.path() / "two/boot/vmlinuz-6.1.0-2-test", "another");
  EXPECT_EQ(find_kernel((dir.path() / "two").string()).error().id, "vm.kernel");
  write_tree_file(dir.path() / "noconfig/boot/vmlinuz-6.1.0-1-test", "kernel");
  EXPECT_EQ(find_kernel((dir.path() / "noconfig").string()).error().id, "vm.kernel");
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
  const fs::path root = boot_with(dir.path() / "root", "CONFIG_EXT4_FS=y\nCONFIG_BLK_DEV_NVME=y\n");
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

/// The cloud kernel .deb scripts/test.sh downloads, or "".
std::string kernel_deb() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(GPUENV_TEST_VM_DIR, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("linux-image-", 0) == 0 && name.find("-cloud-amd64_") != std::string::npos && e.path().extension() == ".deb") return e.path().string();
  }
  return "";
}

constexpr const char* k_init_c = R"(#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <unistd.h>
int main(void) {
  mount("devtmpfs", "/dev", "devtmpfs", 0, 0);
  mount("proc", "/proc", "proc", 0, 0);
  int out = open("/dev/ttyS0", O_WRONLY | O_NOCTTY);
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

}  // namespace

TEST(VmBoot, TheDiskBootsUnderOvmfAndIsTheSameBytesTwice) {
  const std::string deb = kernel_deb();
  if (deb.empty()) GTEST_SKIP() << "no Debian cloud kernel .deb in " << GPUENV_TEST_VM_DIR << " (scripts/test.sh downloads it with apt-get download)";
  for (const char* need : {"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd", "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"})
    ASSERT_TRUE(fs::exists(need)) << need << " is missing: scripts/deps.sh installs ovmf and systemd-boot-efi";
  gpuenv::testing::TempDir dir("gpuenv-vmboot");
  const fs::path root = dir.path() / "root";
  int status = 0;
  capture("dpkg-deb -x " + sh_quote(deb) + " " + sh_quote(root) + " 2>&1", &status);
  ASSERT_EQ(status, 0) << "dpkg-deb -x " << deb;
  fs::create_directories(root / "usr/lib/systemd/boot/efi");
  fs::copy_file("/usr/lib/systemd/boot/efi/systemd-bootx64.efi", root / "usr/lib/systemd/boot/efi/systemd-bootx64.efi");
  write_tree_file(dir.path() / "init.c", k_init_c);
  fs::create_directories(root / "sbin");
  fs::create_directories(root / "dev");
  fs::create_directories(root / "proc");
  const std::string cc = capture("cc -static -O2 -o " + sh_quote(root / "sbin/init") + " " + sh_quote(dir.path() / "init.c") + " 2>&1", &status);
  ASSERT_EQ(status, 0) << "a static init: " << cc;

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
  EXPECT_EQ(disk->kernel.built_in_disks.front(), "nvme");
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

  // Boot it: UEFI firmware, systemd-boot from the removable-media path, the kernel, our init. NVMe, which the
  // cloud kernel has built in. TCG: KVM hangs on these machines.
  fs::copy_file("/usr/share/OVMF/OVMF_VARS_4M.fd", dir.path() / "vars.fd");
  const fs::path console = dir.path() / "console.log";
  const std::string qemu = "timeout 300 qemu-system-x86_64 -machine q35,accel=tcg -m 512 -nographic -no-reboot -monitor none -display none"
                           " -drive if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd -drive if=pflash,format=raw,file=" +
                           sh_quote(dir.path() / "vars.fd") + " -drive if=none,id=d0,format=raw,file=" + sh_quote(dir.path() / "disk1.raw") +
                           " -device nvme,drive=d0,serial=gpuenv0 -serial file:" + sh_quote(console) + " 2>&1";
  const auto b0 = std::chrono::steady_clock::now();
  const std::string qemu_out = capture(qemu, &status);
  const double boot_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
  const std::string log = read_all(console);
  EXPECT_EQ(status, 0) << "qemu did not power off by itself (124: timed out): " << qemu_out << "\n" << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
  EXPECT_NE(log.find("gpuenv-vm-test: init ran; cmdline: "), std::string::npos) << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
  EXPECT_NE(log.find("root=PARTUUID=" + disk->ids.root_partition.str() + " rootfstype=ext4 ro console=tty0 console=ttyS0,115200 panic=-1 gpuenv.test=1"),
            std::string::npos);
  EXPECT_NE(log.find("reboot: Power down"), std::string::npos);
  std::printf("vm disk: build %.1f s, raw %llu MiB (%llu MiB allocated), qcow2 %llu MiB, boot to power-off under TCG %.1f s\n", build_s,
              static_cast<unsigned long long>(disk->raw_size >> 20), static_cast<unsigned long long>(disk->raw_allocated >> 20),
              static_cast<unsigned long long>(fs::file_size(dir.path() / "disk.qcow2") >> 20), boot_s);
}
