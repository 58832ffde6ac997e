// images/disk/vm_driver: a VM image's NVIDIA module, step by step. dkms.conf as Debian's driver packages write it;
// the build's orchestration through a double of the process port that plays make and strip inside the bound
// source directory (the sandbox's arguments are checked: read-only build root, nothing shared, a cleared
// environment with the fixed times); its refusals; the installation and the alternatives' links on a made-up tree.
// The real build, in bubblewrap against Debian's headers, is the online test tests/online/vm_online.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "base/process/command_runner.hpp"
#include "fakes/files.hpp"
#include "fakes/temp_dir.hpp"
#include "images/disk/vm_driver.hpp"
#include "images/disk/vm_root.hpp"

namespace fs = std::filesystem;
using namespace gpuenv;
using namespace gpuenv::images::disk;
using gpuenv::testing::read_all;
using gpuenv::testing::write_tree_file;

namespace {

// The shape of Debian's nvidia-kernel-dkms dkms.conf: a MAKE spread over lines, names built from PACKAGE_NAME.
constexpr const char* k_conf = R"(# DKMS configuration
PACKAGE_NAME="nvidia-current"
PACKAGE_VERSION="535.1"
MAKE[0]="env NV_VERBOSE=1 \
    make ${parallel_jobs+-j$parallel_jobs} modules KERNEL_UNAME=${kernelver}"
CLEAN="true"

BUILT_MODULE_NAME[0]="nvidia"
DEST_MODULE_NAME[0]="$PACKAGE_NAME"
DEST_MODULE_LOCATION[0]="/updates/dkms"

BUILT_MODULE_NAME[1]="nvidia-uvm"
BUILT_MODULE_LOCATION[1]=uvm/
DEST_MODULE_NAME[1]="${PACKAGE_NAME}-uvm"
DEST_MODULE_LOCATION[1]='/updates/dkms'
)";

/// Plays `make` and `strip` as the sandbox would run them: make writes each module where dkms.conf says it is
/// built, in the directory bound at /build. Records every command.
class ScriptedBuild final : public CommandRunner {
 public:
  std::vector<std::vector<std::string>> commands;
  int make_exit = 0;
  std::vector<std::string> made = {"nvidia.ko", "uvm/nvidia-uvm.ko"};

  Result<CommandResult> run(const std::vector<std::string>& argv, std::string_view, std::chrono::milliseconds) override {
    commands.push_back(argv);
    const auto bind = std::find(argv.begin(), argv.end(), "--bind");
    const std::string source = bind != argv.end() ? *(bind + 1) : "";
    const bool make = std::find(argv.begin(), argv.end(), "make") != argv.end();
    if (make && make_exit != 0) return CommandResult{make_exit, std::string(200, 'x') + "\nconftest.h:1: error: no such header\n", ""};
    if (make)
      for (const auto& f : made) write_tree_file(fs::path(source) / f, "module " + f);
    return CommandResult{0, "", ""};
  }
};

struct BuildRoot {
  gpuenv::testing::TempDir dir{"gpuenv-vmdriver"};
  fs::path root = dir.path() / "build-root";
  BuildRoot() {
    write_tree_file(root / "usr/src/nvidia-current-535.1/dkms.conf", k_conf);
    write_tree_file(root / "usr/src/nvidia-current-535.1/Makefile", "modules:\n");
    write_tree_file(root / "usr/src/linux-headers-6.1.0-1-test/Makefile", "include x\n");
    write_tree_file(root / "usr/bin/mawk", "awk");
    fs::create_directories(root / "lib/modules/6.1.0-1-test");
    fs::create_symlink("/usr/src/linux-headers-6.1.0-1-test", root / "lib/modules/6.1.0-1-test/build");
  }
  DriverBuildRequest request() const {
    DriverBuildRequest rq;
    rq.build_root = root.string();
    rq.work_dir = (dir.path() / "work").string();
    fs::create_directories(rq.work_dir);
    rq.kernel_abi = "6.1.0-1-test";
    rq.epoch = 1700000000;
    rq.jobs = 3;
    return rq;
  }
};

bool has_pair(const std::vector<std::string>& argv, const std::string& a, const std::string& b) {
  for (std::size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == a && argv[i + 1] == b) return true;
  return false;
}

}  // namespace

TEST(DkmsConf, ReadsTheModulesAsDkmsWould) {
  auto conf = parse_dkms_conf(k_conf, "dkms.conf");
  ASSERT_TRUE(conf) << conf.error().message;
  EXPECT_EQ(conf->package_name, "nvidia-current");
  EXPECT_EQ(conf->package_version, "535.1");
  ASSERT_EQ(conf->modules.size(), 2u);
  EXPECT_EQ(conf->modules[0], (DkmsModule{"nvidia", "", "nvidia-current", "updates/dkms"}));
  EXPECT_EQ(conf->modules[1], (DkmsModule{"nvidia-uvm", "uvm", "nvidia-current-uvm", "updates/dkms"}));
  // No destination name: the built one.
  auto plain = parse_dkms_conf("BUILT_MODULE_NAME[0]=foo\nDEST_MODULE_LOCATION[0]=/extra\n", "x");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->modules[0].dest_name, "foo");
}

TEST(DkmsConf, RefusesWhatWouldLeaveTheModuleTree) {
  for (const char* text : {"BUILT_MODULE_NAME[0]=a\nDEST_MODULE_LOCATION[0]=/../../etc\n", "BUILT_MODULE_NAME[0]=a/b\nDEST_MODULE_LOCATION[0]=/extra\n",
                           "BUILT_MODULE_NAME[0]=a\nDEST_MODULE_NAME[0]=../x\nDEST_MODULE_LOCATION[0]=/extra\n",
                           "BUILT_MODULE_NAME[0]=a\n",  // no destination at all
                           "PACKAGE_NAME=x\nMAKE[0]=make\n", ""}) {
    auto r = parse_dkms_conf(text, "dkms.conf");
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().id, "vm.dkms_conf") << text;
    EXPECT_EQ(r.error().where, "dkms.conf");
  }
}

TEST(DriverBuild, BuildsInTheSandboxAndStripsEachModule) {
  BuildRoot b;
  ScriptedBuild runner;
  auto built = build_driver_modules(b.request(), runner);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ(built->source, "/usr/src/nvidia-current-535.1");
  ASSERT_EQ(built->modules.size(), 2u);
  EXPECT_EQ(built->modules[0].install, "lib/modules/6.1.0-1-test/updates/dkms/nvidia-current.ko");
  EXPECT_EQ(built->modules[1].install, "lib/modules/6.1.0-1-test/updates/dkms/nvidia-current-uvm.ko");
  ASSERT_EQ(runner.commands.size(), 2u);
  const auto& make = runner.commands[0];
  EXPECT_EQ(make[0], "bwrap");
  EXPECT_TRUE(has_pair(make, "--ro-bind", b.root.string())) << "the build root is read-only";
  EXPECT_TRUE(has_pair(make, "--hostname", "gpuenv"));
  for (const char* flag : {"--unshare-all", "--clearenv", "--die-with-parent"}) EXPECT_NE(std::find(make.begin(), make.end(), flag), make.end()) << flag;
  EXPECT_TRUE(has_pair(make, "SOURCE_DATE_EPOCH", "1700000000"));
  EXPECT_TRUE(has_pair(make, "KBUILD_BUILD_TIMESTAMP", "@1700000000"));
  const std::vector<std::string> tail(make.end() - 4, make.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"make", "-j3", "modules", "KERNEL_UNAME=6.1.0-1-test"}));
  const auto& strip = runner.commands[1];
  const std::vector<std::string> stripped(strip.end() - 4, strip.end());
  EXPECT_EQ(stripped, (std::vector<std::string>{"strip", "--strip-debug", "nvidia.ko", "uvm/nvidia-uvm.ko"}));
  // The source was copied out: the build root's own tree is untouched (its files are the package store's).
  EXPECT_FALSE(fs::exists(b.root / "usr/src/nvidia-current-535.1/nvidia.ko"));
  std::error_code ec;
  EXPECT_EQ(fs::read_symlink(b.root / "usr/bin/awk", ec), "mawk");  // mawk's alternative, which Kbuild calls awk

  // Installed into an image tree, each under its DKMS name.
  const fs::path image = b.dir.path() / "image";
  fs::create_directories(image);
  ASSERT_TRUE(install_driver_modules(*built, image.string()));
  EXPECT_EQ(read_all(image / "lib/modules/6.1.0-1-test/updates/dkms/nvidia-current-uvm.ko"), "module uvm/nvidia-uvm.ko");
}

TEST(DriverBuild, ItsFailuresSayWhatAndWhere) {
  {
    BuildRoot b;
    ScriptedBuild runner;
    runner.make_exit = 2;
    auto r = build_driver_modules(b.request(), runner);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().id, "vm.driver_build");
    EXPECT_NE(r.error().message.find("no such header"), std::string::npos) << r.error().message;  // the end of make's output
    EXPECT_LT(r.error().message.size(), 4000u);
  }
  {
    BuildRoot b;
    ScriptedBuild runner;
    runner.made = {"nvidia.ko"};  // dkms.conf names nvidia-uvm too
    auto r = build_driver_modules(b.request(), runner);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().id, "vm.driver_build");
    EXPECT_NE(r.error().message.find("uvm/nvidia-uvm.ko"), std::string::npos);
  }
  {
    BuildRoot b;
    write_tree_file(b.root / "usr/src/other-1.0/dkms.conf", "BUILT_MODULE_NAME[0]=o\nDEST_MODULE_LOCATION[0]=/extra\n");
    ScriptedBuild runner;
    auto r = build_driver_modules(b.request(), runner);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().id, "vm.driver_source");
    EXPECT_NE(r.error().message.find("several"), std::string::npos);
    EXPECT_TRUE(runner.commands.empty());
  }
  {
    BuildRoot b;
    fs::remove_all(b.root / "usr/src/linux-headers-6.1.0-1-test");
    ScriptedBuild runner;
    auto r = build_driver_modules(b.request(), runner);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().id, "vm.driver_source");
    EXPECT_NE(r.error().message.find("no headers for the kernel 6.1.0-1-test"), std::string::npos);
  }
  {
    BuildRoot b;
    fs::remove_all(b.root / "usr/src/nvidia-current-535.1");
    ScriptedBuild runner;
    auto r = build_driver_modules(b.request(), runner);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().id, "vm.driver_source");
  }
}

TEST(DriverAlternatives, LinksWhatTheTreeHoldsAndNothingElse) {
  gpuenv::testing::TempDir dir("gpuenv-vmdriver-alt");
  const fs::path root = dir.path() / "root";
  write_tree_file(root / "usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.535.1", "nvml");
  fs::create_symlink("libnvidia-ml.so.535.1", root / "usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.1");
  write_tree_file(root / "usr/lib/nvidia/current/nvidia-smi", "smi");
  write_tree_file(root / "etc/nvidia/current/nvidia-modprobe.conf", "install nvidia modprobe -i nvidia-current\n");
  // libcuda.so.1 leads out of the tree: no link to it.
  fs::create_symlink("/etc/passwd", root / "usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1");
  auto made = link_driver_alternatives(root.string());
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_EQ(made->size(), 3u);
  std::error_code ec;
  EXPECT_EQ(fs::read_symlink(root / "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", ec), "nvidia/current/libnvidia-ml.so.1");
  EXPECT_EQ(read_all(root / "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"), "nvml");
  EXPECT_EQ(fs::read_symlink(root / "usr/bin/nvidia-smi", ec), "/usr/lib/nvidia/current/nvidia-smi");
  EXPECT_EQ(fs::read_symlink(root / "etc/modprobe.d/nvidia.conf", ec), "/etc/nvidia/current/nvidia-modprobe.conf");
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / "usr/lib/x86_64-linux-gnu/libcuda.so.1")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / "etc/modprobe.d/nvidia-options.conf")));
}

// An arm64 disk's libraries are under /usr/lib/aarch64-linux-gnu: the links go there, not to the x86-64 directory.
TEST(DriverAlternatives, LinksInThePlatformsLibraryDirectory) {
  gpuenv::testing::TempDir dir("gpuenv-vmdriver-alt-arm64");
  const fs::path root = dir.path() / "root";
  write_tree_file(root / "usr/lib/aarch64-linux-gnu/nvidia/current/libnvidia-ml.so.1", "nvml");
  write_tree_file(root / "usr/lib/aarch64-linux-gnu/nvidia/current/libcuda.so.1", "cuda");
  auto made = link_driver_alternatives(root.string(), gpuenv::resolver::Platform::arm64());
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_EQ(*made, (std::vector<std::string>{"/usr/lib/aarch64-linux-gnu/libcuda.so.1 -> nvidia/current/libcuda.so.1",
                                             "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1 -> nvidia/current/libnvidia-ml.so.1"}));
  EXPECT_EQ(read_all(root / "usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1"), "nvml");
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / "usr/lib/x86_64-linux-gnu")));
}

TEST(DriverInfo, TheUnitPrintsTheModulesModinfoBeforeTheVerdict) {
  const std::string unit = driver_info_unit("nvidia-current");
  EXPECT_NE(unit.find("Before=gpuenv-console.service"), std::string::npos);
  for (const char* field : {"modinfo -F version nvidia-current", "modinfo -F vermagic nvidia-current", "modinfo -n nvidia-current"})
    EXPECT_NE(unit.find(field), std::string::npos) << field;
  EXPECT_NE(unit.find("WantedBy=multi-user.target"), std::string::npos);
}

// Built modules are kept under their build key and taken back whole; a damaged entry is built again, and prune
// removes what was not used since the cutoff.
TEST(DriverCache, KeepsBuiltModulesAndTakesThemBack) {
  BuildRoot b;
  ScriptedBuild runner;
  auto built = build_driver_modules(b.request(), runner);
  ASSERT_TRUE(built) << built.error().message;
  const std::string drivers = (b.dir.path() / "cache/drivers").string();
  const std::string key = driver_key({"gpuenv test", "6.1.0-1-test", "1700000000", "linux-headers-6.1.0-1-test 6.1.1-1 aaaa"});
  EXPECT_NE(key, driver_key({"gpuenv test", "6.1.0-2-test", "1700000000", "linux-headers-6.1.0-1-test 6.1.1-1 aaaa"}));
  EXPECT_FALSE(kept_driver(drivers, key));
  ASSERT_TRUE(keep_driver(*built, drivers, key));
  auto kept = kept_driver(drivers, key);
  ASSERT_TRUE(kept);
  ASSERT_EQ(kept->modules.size(), 2u);
  EXPECT_EQ(kept->conf.modules, built->conf.modules);
  EXPECT_EQ(kept->modules[1].install, "lib/modules/6.1.0-1-test/updates/dkms/nvidia-current-uvm.ko");
  EXPECT_EQ(read_all(kept->modules[1].file), "module uvm/nvidia-uvm.ko");
  // Installed from the cache, the image gets the same files.
  const fs::path image = b.dir.path() / "image";
  fs::create_directories(image);
  ASSERT_TRUE(install_driver_modules(*kept, image.string()));
  EXPECT_EQ(read_all(image / "lib/modules/6.1.0-1-test/updates/dkms/nvidia-current.ko"), "module nvidia.ko");
  // Keeping again (another build got there first) leaves one entry.
  ASSERT_TRUE(keep_driver(*built, drivers, key));
  EXPECT_EQ(driver_cache_use(drivers).drivers, 1u);
  EXPECT_GT(driver_cache_use(drivers).bytes, 0u);
  // A manifest whose install path leaves /lib/modules is not taken.
  const fs::path manifest = fs::path(drivers) / key / "manifest";
  std::string text = read_all(manifest);
  const std::string good = "lib/modules/6.1.0-1-test/updates/dkms/nvidia-current.ko";
  write_tree_file(manifest, text.replace(text.find(good), good.size(), "lib/modules/../../etc/passwd.ko"));
  EXPECT_FALSE(kept_driver(drivers, key));
  // Prune: recently used stays, everything goes with --all, a killed build's staging directory too.
  write_tree_file(fs::path(drivers) / (".staging-" + key + "-1/0.ko"), "half");
  EXPECT_EQ(prune_driver_cache(drivers, std::chrono::system_clock::now() - std::chrono::hours(1)).drivers, 0u);
  EXPECT_TRUE(fs::exists(fs::path(drivers) / (".staging-" + key + "-1")));
  EXPECT_EQ(prune_driver_cache(drivers, std::chrono::system_clock::time_point::max()).drivers, 1u);
  EXPECT_EQ(driver_cache_use(drivers).drivers, 0u);
  EXPECT_FALSE(fs::exists(fs::path(drivers) / key));
  EXPECT_TRUE(fs::is_empty(drivers));
}
