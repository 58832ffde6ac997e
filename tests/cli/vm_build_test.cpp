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

}  // namespace
