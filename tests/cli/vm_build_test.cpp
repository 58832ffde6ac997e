// `gpuenv build` of VM disks through the whole command, offline: the formats must match the lock (a container's
// lock makes no disk, a VM's lock no OCI image), and a VM lock whose packages hold no
// kernel is refused, naming why, with nothing left at the output. (A disk that boots: tests/images/vm_disk_test.cpp
// and the online test tests/online/vm_online.sh.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/context.hpp"
#include "base/net/fetcher.hpp"
#include "base/process/command_runner.hpp"
#include "fakes/temp_dir.hpp"
#include "resolver/platform.hpp"

namespace {

namespace fs = std::filesystem;

struct CmdResult {
  int code = 0;
  std::string out, err;
};

CmdResult gpuenv(const std::vector<std::string>& args, const fs::path& cache) {
  std::ostringstream out, err;
  gpuenv::cli::Context ctx;
  ctx.out = &out;
  ctx.err = &err;
  ctx.env = {{"GPUENV_CACHE_DIR", cache.string()}, {"HOME", cache.string()}, {"SOURCE_DATE_EPOCH", "1700000000"}};
  ctx.make_runner = [] { return gpuenv::make_process_runner(); };
  ctx.make_fetcher = [](const gpuenv::NetLimits&) { return gpuenv::make_offline_fetcher(); };  // nothing to fetch: no packages
  ctx.make_probes = [] { return std::vector<std::unique_ptr<gpuenv::validate::HostProbe>>{}; };
  const int code = gpuenv::cli::run(args, ctx);
  return {code, out.str(), err.str()};
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {(std::istreambuf_iterator<char>(in)), {}};
}

class VmBuild : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string lock = read(std::string(GPUENV_SOURCE_DIR) + "/tests/data/locks/empty.lock");
    container = (dir.path() / "empty.lock").string();
    std::ofstream(container) << lock;
    std::string vm_text = lock;
    vm_text.replace(vm_text.find("packages: []"), 12, "vm:\n  kernel: \"linux-image-cloud-amd64\"\n  disk_size: 0\n  cloud_init: false\n  cmdline: \"\"\npackages: []");
    vm = (dir.path() / "vm.lock").string();
    std::ofstream(vm) << vm_text;
  }
  gpuenv::testing::TempDir dir{"gpuenv-vmbuild"};
  std::string container, vm;
};

TEST_F(VmBuild, TheFormatMustMatchTheLock) {
  for (const char* format : {"raw", "qcow2"}) {
    const CmdResult r = gpuenv({"build", container, "--format", format, "-o", (dir.path() / "x.raw").string(), "--json"}, dir.path() / "cache");
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.out.find("\"id\": \"build.not_vm\""), std::string::npos) << r.out;
  }
  const CmdResult r = gpuenv({"build", vm, "--format", "oci-dir", "-o", (dir.path() / "layout").string(), "--json"}, dir.path() / "cache");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.out.find("\"id\": \"build.not_vm\""), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir.path() / "layout"));
}

TEST_F(VmBuild, ALockWithoutAKernelIsRefusedAndLeavesNothing) {
  const fs::path out = dir.path() / "out/disk.raw";
  const CmdResult r = gpuenv({"build", vm, "-o", out.string(), "--json"}, dir.path() / "cache");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.out.find("\"id\": \"vm.kernel\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no kernel"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(!fs::exists(out.parent_path()) || fs::is_empty(out.parent_path()));  // no temporary file either
  // A directory where the disk should go is refused before anything is built.
  fs::create_directories(dir.path() / "adir");
  const CmdResult d = gpuenv({"build", vm, "-o", (dir.path() / "adir").string(), "--json"}, dir.path() / "cache");
  EXPECT_EQ(d.code, 2);
  EXPECT_NE(d.out.find("\"id\": \"cli.output\""), std::string::npos) << d.out;
}

// A linux/arm64 disk built on this (amd64) machine needs an arm64 gpuenv inside: refused before anything is unpacked
// without --vm-gpuenv and with an x86-64 one, each naming how to make and name one; an aarch64 one is taken (this lock
// then fails for its missing kernel, as any). vm.driver is refused: its compiler, an arm64 program, cannot run here.
TEST_F(VmBuild, AnArm64DiskNeedsAnArm64GpuenvAndNoDriverBuiltHere) {
  if (gpuenv::resolver::native_platform() != gpuenv::resolver::Platform::amd64()) GTEST_SKIP() << "the refusals are an amd64 machine's";
  std::string text = read(vm);
  text.replace(text.find("base: \"debian:12\"\n"), 18, "base: \"debian:12\"\nplatforms: [\"linux/arm64\"]\n");
  text.replace(text.find("linux-image-cloud-amd64"), 23, "linux-image-cloud-arm64");
  const fs::path arm_lock = dir.path() / "arm.lock";
  std::ofstream(arm_lock) << text;
  const fs::path out = dir.path() / "out/disk.raw";
  const CmdResult none = gpuenv({"build", arm_lock.string(), "-o", out.string(), "--json"}, dir.path() / "cache");
  EXPECT_EQ(none.code, 2) << none.err;
  EXPECT_NE(none.out.find("\"id\": \"vm.gpuenv_binary\""), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("this disk is linux/arm64, and this gpuenv is a linux/amd64 program"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("--vm-gpuenv"), std::string::npos) << none.out;
  const CmdResult x86 = gpuenv({"build", arm_lock.string(), "-o", out.string(), "--vm-gpuenv", "/bin/true", "--json"}, dir.path() / "cache");
  EXPECT_EQ(x86.code, 2) << x86.err;
  EXPECT_NE(x86.out.find("/bin/true is an x86_64 program, and this disk is linux/arm64"), std::string::npos) << x86.out;
  EXPECT_FALSE(fs::exists(out));
  // An ELF header of machine 183 (AArch64) is all the check reads.
  std::string header(64, '\0');
  header.replace(0, 6, "\x7f" "ELF\x02\x01");
  header[18] = static_cast<char>(183);
  const fs::path arm = dir.path() / "gpuenv-arm64";
  std::ofstream(arm, std::ios::binary) << header;
  const CmdResult taken = gpuenv({"build", arm_lock.string(), "-o", out.string(), "--vm-gpuenv", arm.string(), "--json"}, dir.path() / "cache");
  EXPECT_EQ(taken.code, 2) << taken.err;
  EXPECT_NE(taken.out.find("\"id\": \"vm.kernel\""), std::string::npos) << taken.out;
  std::string with_driver = text;
  with_driver.replace(with_driver.find("  cmdline: \"\"\n"), 14,
                      "  cmdline: \"\"\n  driver:\n    request: \"distro\"\n    module: \"nvidia-kernel-dkms\"\n    packages: []\n    version: \"535.1\"\n");
  const fs::path driver_lock = dir.path() / "arm-driver.lock";
  std::ofstream(driver_lock) << with_driver;
  const CmdResult driver = gpuenv({"build", driver_lock.string(), "-o", out.string(), "--vm-gpuenv", arm.string(), "--json"}, dir.path() / "cache");
  EXPECT_EQ(driver.code, 4) << driver.err << driver.out;
  EXPECT_NE(driver.out.find("\"id\": \"vm.driver_build\""), std::string::npos) << driver.out;
  EXPECT_NE(driver.out.find("cannot run on this linux/amd64 machine"), std::string::npos) << driver.out;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
