#include "resolver/lockfile.hpp"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fakes/catalog_fixture.hpp"

namespace {

using namespace gpuenv::resolver;

std::string render_for(const std::string& yaml, const std::string& driver) {
  const Spec spec = gpuenv::testing::spec_of(yaml);
  ResolveRequest req;
  req.spec = &spec;
  req.gpus = *gpu_targets(gpuenv::testing::mini_catalog(), spec.gpu.models, spec.gpu.archs, "t");
  req.driver = *Constraint::parse(driver);
  auto r = resolve(gpuenv::testing::mini_catalog(), req);
  EXPECT_TRUE(r.ok() && r->ok) << (r.ok() ? gpuenv::testing::conflicts_text(*r) : r.error().to_string());
  return render_lock(lock_of(spec, *r, LockInputs{"spec-digest", "catalog-digest", "gpuenv test"}));
}

// Compares with a checked-in golden file; GPUENV_UPDATE_GOLDEN=1 rewrites it (a deliberate act, reviewed in the diff).
void expect_golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(GPUENV_SOURCE_DIR) + "/tests/data/golden/" + name;
  if (std::getenv("GPUENV_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << actual;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "missing golden file " << path << " (run with GPUENV_UPDATE_GOLDEN=1 to create it)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(actual, want.str()) << "golden " << name << " differs";
}

const char* k_spec = "name: golden\nframeworks: {torch: '2.5.1'}\ngpu: {models: [H100, A100]}\n";

TEST(Lockfile, MatchesGoldenFile) { expect_golden("torch-h100.lock", render_for(k_spec, "535.104.05")); }

TEST(Lockfile, ForwardCompatLockSaysSo) {
  expect_golden("torch-compat.lock", render_for("name: compat\ncuda: '12.4'\nframeworks: {torch: '2.5.1'}\ngpu: {models: [A100]}\n", "470.199.02"));
}

TEST(Lockfile, SameInputSameBytes) {
  EXPECT_EQ(render_for(k_spec, "535.104.05"), render_for(k_spec, "535.104.05"));
}

TEST(Lockfile, IsValidYamlWithTheSchema) {
  const YAML::Node n = YAML::Load(render_for(k_spec, "535.104.05"));
  EXPECT_EQ(n["schema"].as<std::string>(), "gpuenv-lock-v1");
  EXPECT_EQ(n["frameworks"]["torch"]["variant"].as<std::string>(), "cu121");
  EXPECT_EQ(n["driver"]["forward_compat"].as<bool>(), false);
}

// lock_of gives the value that the rendered text reads back as, so that `gpuenv build SPEC` need not parse the
// lock it has just made: checked on locks with and without packages, a base image, frameworks and forward compat.
struct Made {
  Spec spec;
  Resolution resolution;
};

Made resolved(const std::string& yaml, const std::string& driver) {
  Made m{gpuenv::testing::spec_of(yaml), {}};
  ResolveRequest req;
  req.spec = &m.spec;
  req.gpus = *gpu_targets(gpuenv::testing::mini_catalog(), m.spec.gpu.models, m.spec.gpu.archs, "t");
  req.driver = *Constraint::parse(driver);
  auto r = resolve(gpuenv::testing::mini_catalog(), req);
  EXPECT_TRUE(r.ok() && r->ok);
  m.resolution = *r;
  return m;
}

TEST(Lockfile, TheLockValueIsWhatItsTextReadsBackAs) {
  const std::vector<LockedPackage> packages = {
      {"base-files", "12.4+deb12u5", PackageKind::deb, "amd64", "http://deb.example/pool/b.deb", *gpuenv::Digest::from_hex(std::string(64, 'a')), "debian", 1234},
      {"torch", "2.5.1+cu121", PackageKind::wheel, "x86_64", "http://wheels.example/torch.whl", *gpuenv::Digest::from_hex(std::string(64, 'b')), "pytorch", 99}};
  struct Case {
    const char* yaml;
    const char* driver;
    bool with_packages;
    const char* base_image;
  };
  const Case cases[] = {
      {k_spec, "535.104.05", false, ""},
      {k_spec, "535.104.05", true, ""},
      {"name: compat\ncuda: '12.4'\nframeworks: {torch: '2.5.1'}\ngpu: {models: [A100]}\n", "470.199.02", true, ""},
      {"name: pkgs\ncuda: '12.4'\ngpu: {models: [H100], confidential: allowed}\npackages: {apt: [curl], pip: ['numpy<2']}\n", "550.54.15", true,
       "docker://registry.example/base:12@sha256:0123456789012345678901234567890123456789012345678901234567890123"},
      {"name: slim\nbase: {distro: debian:12, variant: slim}\npython: '3.11'\n", "535.104.05", true, ""},
      {"name: vm\nimage: {format: qcow2}\nvm: {disk_size: 8G, cloud_init: true, cmdline: 'quiet splash'}\n", "535.104.05", true, ""},
      {"name: vm-default\nimage: {format: raw}\n", "535.104.05", false, ""},
  };
  for (const Case& c : cases) {
    const Made m = resolved(c.yaml, c.driver);
    const LockInputs in{"spec-digest", "catalog-digest", "gpuenv test", c.base_image};
    const std::vector<LockedPackage> pk = c.with_packages ? packages : std::vector<LockedPackage>{};
    auto read = parse_lock(render_lock(lock_of(m.spec, m.resolution, in, pk)), "t.lock");
    ASSERT_TRUE(read.ok()) << read.error().to_string();
    EXPECT_TRUE(*read == lock_of(m.spec, m.resolution, in, pk)) << c.yaml;
  }
}

// Issue 33 review: the writer refuses what the reader refuses. Names, versions and URLs come from apt and wheel
// indexes; one a lock cannot hold is lock.unwritable (exit 4) before anything is written, not a lock no later
// command reads.
TEST(Lockfile, WhatTheReaderWouldRefuseIsNeverWritten) {
  const Made m = resolved(k_spec, "535.104.05");
  const LockInputs in{"spec-digest", "catalog-digest", "gpuenv test", ""};
  const LockedPackage good{"curl", "7.88.1-10+deb12u8", PackageKind::deb, "amd64", "http://deb.example/pool/c.deb", *gpuenv::Digest::from_hex(std::string(64, 'a')), "debian", 1};
  auto fine = render_checked_lock(lock_of(m.spec, m.resolution, in, {good}));
  ASSERT_TRUE(fine.ok()) << fine.error().to_string();
  EXPECT_EQ(*fine, render_lock(lock_of(m.spec, m.resolution, in, {good})));
  for (const auto& [name, version] : std::vector<std::pair<std::string, std::string>>{
           {"curl\x1b[2J", "1.0"}, {"Curl", "1.0"}, {"curl", "1.0\x1b]8;;x\x07"}, {"curl", "1.0 evil"}, {"", "1.0"}}) {
    LockedPackage bad = good;
    bad.name = name;
    bad.version = version;
    auto r = render_checked_lock(lock_of(m.spec, m.resolution, in, {bad}));
    ASSERT_FALSE(r.ok()) << name << " " << version;
    EXPECT_EQ(r.error().id, "lock.unwritable");
    EXPECT_EQ(r.error().kind, gpuenv::ErrorKind::environment);
  }
}

// Issue 32: a spec without framework, cuda or cudnn locks no CUDA, written as null like an absent cuDNN, and no
// floor when no GPU needs one; both read back as absent.
TEST(Lockfile, ALockWithoutCudaSaysNullAndReadsBackAsNone) {
  const std::string text = render_for("name: cpu\npackages: {apt: [curl]}\n", "535.104.05");
  EXPECT_NE(text.find("\ncuda: null\ncudnn: null\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  min: null\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  floor:\n    []\n"), std::string::npos) << text;
  auto lock = parse_lock(text, "cpu.lock");
  ASSERT_TRUE(lock.ok()) << lock.error().to_string();
  EXPECT_EQ(lock->cuda, "");
  EXPECT_EQ(lock->driver_min, "");
  const std::string h100 = render_for("name: cpu\ngpu: {models: [H100]}\n", "535.104.05");
  EXPECT_NE(h100.find("\n  min: \"525.60.13\"\n"), std::string::npos) << h100;
  EXPECT_NE(h100.find("\ncuda: null\n"), std::string::npos) << h100;
}

TEST(Lockfile, ASlimBaseIsWrittenAndTheRequiredSetIsNot) {
  const Made slim = resolved("name: slim\nbase: {distro: debian:12, variant: slim}\n", "535.104.05");
  const LockInputs in{"spec-digest", "catalog-digest", "gpuenv test", ""};
  const std::string text = render_lock(lock_of(slim.spec, slim.resolution, in));
  EXPECT_NE(text.find("base: \"debian:12\"\nbase_variant: \"slim\"\n"), std::string::npos) << text;
  EXPECT_EQ(parse_lock(text, "t.lock")->base_variant, "slim");
  EXPECT_EQ(render_for(k_spec, "535.104.05").find("base_variant"), std::string::npos);  // old locks keep their bytes
}

TEST(Lockfile, AVmLockSaysSoAndAContainerLockDoesNot) {
  const Made vm = resolved("name: vm\nvm: {kernel: linux-image-amd64, disk_size: 512M}\n", "535.104.05");
  const std::string text = render_lock(lock_of(vm.spec, vm.resolution, LockInputs{"spec-digest", "catalog-digest", "gpuenv test", ""}));
  EXPECT_NE(text.find("vm:\n  kernel: \"linux-image-amd64\"\n  disk_size: 536870912\n  cloud_init: false\n  cmdline: \"\"\n"), std::string::npos) << text;
  auto read = parse_lock(text, "t.lock");
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  ASSERT_TRUE(read->vm);
  EXPECT_EQ(read->vm->disk_size, 512u << 20);
  EXPECT_EQ(render_for(k_spec, "535.104.05").find("\nvm:"), std::string::npos);  // container locks keep their bytes
  for (const char* bad : {"vm: []\n", "vm: {kernel: x, disk_size: lots, cloud_init: false, cmdline: ''}\n",
                          "vm: {kernel: x, disk_size: 0, cloud_init: maybe, cmdline: ''}\n", "vm: {disk_size: 0, cloud_init: false, cmdline: ''}\n"}) {
    std::string damaged = text.substr(0, text.find("vm:\n")) + bad + text.substr(text.find("packages:"));
    auto r = parse_lock(damaged, "t.lock");
    EXPECT_FALSE(r.ok()) << bad;
  }
}

// A VM lock with a driver records vm.driver (with the version the lock found) and build_packages, reads both back,
// and refuses build_packages without a driver.
TEST(Lockfile, AVmDriverAndItsBuildPackagesAreRecorded) {
  Made vm = resolved("name: vm\nvm: {driver: distro}\n", "535.309.01");
  vm.spec.vm->driver->version = "535.309.01";
  const std::vector<LockedPackage> image = {
      {"libnvidia-ml1", "535.309.01-0+deb12u1", PackageKind::deb, "amd64", "http://deb.example/pool/n.deb", *gpuenv::Digest::from_hex(std::string(64, 'c')), "debian", 7}};
  const std::vector<LockedPackage> build = {
      {"nvidia-kernel-dkms", "535.309.01-0+deb12u1", PackageKind::deb, "amd64", "http://deb.example/pool/d.deb", *gpuenv::Digest::from_hex(std::string(64, 'd')), "debian", 9}};
  const LockInputs in{"spec-digest", "catalog-digest", "gpuenv test", ""};
  const std::string text = render_lock(lock_of(vm.spec, vm.resolution, in, image, build));
  EXPECT_NE(text.find("  driver:\n    request: \"distro\"\n    module: \"nvidia-kernel-dkms\"\n    packages: [\"firmware-nvidia-gsp\""), std::string::npos) << text;
  EXPECT_NE(text.find("    version: \"535.309.01\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nbuild_packages:\n  - {name: \"nvidia-kernel-dkms\""), std::string::npos) << text;
  auto read = parse_lock(text, "t.lock");
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_TRUE(*read == lock_of(vm.spec, vm.resolution, in, image, build));
  EXPECT_EQ(read->build_packages.size(), 1u);
  EXPECT_EQ(read->vm->driver->version, "535.309.01");
  // No build_packages line without a driver: other locks keep their bytes.
  EXPECT_EQ(render_for(k_spec, "535.104.05").find("build_packages"), std::string::npos);
  // Damage: a driver without its version, an unknown request, build packages for no driver.
  auto damaged = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return parse_lock(t, "t.lock");
  };
  EXPECT_FALSE(damaged("    version: \"535.309.01\"\n", "").ok());
  EXPECT_FALSE(damaged("request: \"distro\"", "request: \"latest\"").ok());
  const auto stray = damaged("  driver:\n", "  old_driver:\n");
  EXPECT_FALSE(stray.ok());
  const std::string no_driver = text.substr(0, text.find("  driver:\n")) + text.substr(text.find("packages:\n  - {name: \"libnvidia"));
  auto orphan = parse_lock(no_driver, "t.lock");
  ASSERT_FALSE(orphan.ok());
  EXPECT_NE(orphan.error().message.find("build_packages without vm.driver"), std::string::npos) << orphan.error().message;
}

TEST(Lockfile, LockTextIsToldFromASpec) {
  EXPECT_TRUE(is_lock_text(render_for(k_spec, "535.104.05")));
  EXPECT_FALSE(is_lock_text(k_spec));
  EXPECT_FALSE(is_lock_text("name: x\n# schema: gpuenv-lock-v1 in a comment is not a lock\n"));
  EXPECT_FALSE(is_lock_text("name: x\ndescription: 'schema: gpuenv-lock-v1'\n"));
  // A damaged lock is still a lock, so that parse_lock can say where it is damaged.
  EXPECT_TRUE(is_lock_text("schema: \"gpuenv-lock-v1\"\nspec: {name: [\n"));
  EXPECT_FALSE(is_lock_text(std::string("\0\1", 2)));
  // A lock of another version is a lock, refused by its schema, not a spec with unknown keys.
  const std::string v2 = "schema: gpuenv-lock-v2\ngenerator: \"gpuenv 9\"\n";
  EXPECT_TRUE(is_lock_text(v2));
  auto refused = parse_lock(v2, "new.lock");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().id, "lock.schema");
  EXPECT_NE(refused.error().message.find("gpuenv-lock-v2"), std::string::npos) << refused.error().to_string();
}

TEST(Lockfile, DamagedLocksSayWhatAndWhereWithTheLockIds) {
  std::ifstream in(std::string(GPUENV_SOURCE_DIR) + "/tests/data/golden/torch-h100.lock");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string golden = text.str();
  ASSERT_TRUE(parse_lock(golden, "l.lock").ok());
  auto damaged = [&](const std::string& from, const std::string& to) {
    std::string t = golden;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) t.replace(at, from.size(), to);
    return parse_lock(t, "l.lock");
  };
  struct Case {
    std::string from, to, id, where;
  };
  for (const Case& c : std::vector<Case>{
           {"  sha256: \"spec-digest\"\n", "", "lock.missing", "l.lock:5:3"},  // at the mapping that lacks it
           {"name: \"golden\"", "name: [\"golden\"]", "lock.bad_value", "l.lock:5:9"},
           {"generator: \"gpuenv test\"", "generator: ~", "lock.bad_value", "l.lock:3:12"},
           {"archs: [\"sm_80\", \"sm_90\"]", "archs: {a: 1}", "lock.bad_value", "l.lock:22:10"},
           {"archs: [\"sm_80\", \"sm_90\"]", "archs: [\"sm_80\", [1]]", "lock.bad_value", "l.lock:22:20"},
           // The spec's name names build's output directory: a lock edited into a path is refused.
           {"name: \"golden\"", "name: \"../../x\"", "lock.bad_value", "l.lock:5:9"},
           {"name: \"golden\"", "name: \"a/b\"", "lock.bad_value", "l.lock:5:9"},
       }) {
    auto r = damaged(c.from, c.to);
    ASSERT_FALSE(r.ok()) << c.to;
    EXPECT_EQ(r.error().id, c.id) << c.to;
    EXPECT_EQ(r.error().where, c.where) << c.to;
    EXPECT_EQ(r.error().kind, gpuenv::ErrorKind::spec) << c.to;
    EXPECT_NE(r.error().hint.find("gpuenv lock SPEC -o FILE"), std::string::npos) << c.to;
  }
  // Issue 33, case 7: a package name with terminal escapes, in a lock inside a disk, reached the terminal through
  // inspect. Names, versions and architectures are now what Debian and Python allow, and no field holds a control.
  const std::string pkg = "packages:\n  - {name: \"curl\", version: \"7.88.1-10+deb12u8\", kind: \"deb\", architecture: \"amd64\", url: \"http://m/c.deb\", "
                          "sha256: \"" + std::string(64, 'a') + "\", source: \"debian\", size: \"10\"}\n";
  auto good = damaged("packages: []\n", pkg);
  ASSERT_TRUE(good.ok()) << good.error().to_string();
  struct Bad {
    std::string from, to, id;
  };
  for (const Bad& b : std::vector<Bad>{{"\"curl\"", "\"curl\\e]0;pwned\\a\\e[2J\"", "lock.unsafe_text"},
                                       {"\"curl\"", "\"cu\\u202erl\"", "lock.unsafe_text"},
                                       {"\"curl\"", "\"Curl Tools\"", "lock.bad_value"},
                                       {"\"curl\"", "\"../../etc\"", "lock.bad_value"},
                                       {"\"7.88.1-10+deb12u8\"", "\"7.88 1\"", "lock.bad_value"},
                                       {"\"amd64\"", "\"amd64/../x\"", "lock.bad_value"}}) {
    std::string t = pkg;
    t.replace(t.find(b.from), b.from.size(), b.to);
    auto r = damaged("packages: []\n", t);
    ASSERT_FALSE(r.ok()) << b.to;
    EXPECT_EQ(r.error().id, b.id) << b.to << ": " << r.error().to_string();
  }
  std::string wheel = pkg;
  wheel.replace(wheel.find("\"deb\""), 5, "\"wheel\"");
  wheel.replace(wheel.find("\"curl\""), 6, "\"Torch_Audio.x\"");
  wheel.replace(wheel.find("\"amd64\""), 7, "\"manylinux_2_17_x86_64.manylinux2014_x86_64\"");
  EXPECT_TRUE(damaged("packages: []\n", wheel).ok()) << "a wheel's name and platform tag";
  auto variant = damaged("base: \"debian:12\"\n", "base: \"debian:12\"\nbase_variant: \"skinny\"\n");
  ASSERT_FALSE(variant.ok());
  EXPECT_EQ(variant.error().id, "lock.bad_value");
  EXPECT_NE(variant.error().message.find("required, slim"), std::string::npos) << variant.error().to_string();
  auto nullable = damaged("cudnn: \"8.9.2\"\npython", "cudnn: null\npython");
  ASSERT_TRUE(nullable.ok()) << nullable.error().to_string();
  EXPECT_EQ(nullable->cudnn, "");
}

}  // namespace
