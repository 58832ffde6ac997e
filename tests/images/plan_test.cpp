// The image plan (images/plan): layer assignment, GPU rules, loader configuration, config and reuse key, from
// plain values only (no files, no gpg, no dpkg).
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "images/plan/gpu_rules.hpp"
#include "images/plan/image_config.hpp"
#include "images/plan/layer_plan.hpp"
#include "base/time.hpp"

namespace {

using namespace gpuenv;
using namespace gpuenv::images;
using Kind = RootEntry::Kind;

resolver::LockedPackage deb(const std::string& name, const std::string& version = "1.0") { return {name, version, resolver::PackageKind::deb, "amd64", "", {}, "", 0}; }
resolver::LockedPackage wheel(const std::string& name, const std::string& version = "1.0") { return {name, version, resolver::PackageKind::wheel, "", "", {}, "", 0}; }

resolver::Lock lock_of(std::vector<resolver::LockedPackage> packages) {
  resolver::Lock lock;
  lock.spec_name = "demo";
  lock.base = "debian:12";
  lock.packages = std::move(packages);
  return lock;
}

/// The names of the planned layers, bottom to top.
std::vector<std::string> names(const std::vector<LayerPlan>& layers) {
  std::vector<std::string> out;
  for (const auto& l : layers) out.push_back(l.name);
  return out;
}

/// The paths a planned layer holds, in order.
std::vector<std::string> paths(const LayerPlan& layer, const std::vector<RootEntry>& root) {
  std::vector<std::string> out;
  for (std::size_t i : layer.entries) out.push_back(root[i].path);
  return out;
}

const LayerPlan& layer_named(const std::vector<LayerPlan>& layers, const std::string& name) {
  for (const auto& l : layers)
    if (l.name == name) return l;
  throw std::runtime_error("no layer " + name);
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// ---- layer_of ----

TEST(PlanLayerOf, SortsDebsIntoCudaCudnnUserAndBase) {
  resolver::Lock lock = lock_of({});
  lock.requested_apt = {"curl=7.88.1-10", "git"};
  EXPECT_EQ(layer_of(deb("cuda-cudart-12-4"), lock), "cuda");
  EXPECT_EQ(layer_of(deb("libcublas-12-4"), lock), "cuda");
  EXPECT_EQ(layer_of(deb("libnccl2"), lock), "cuda");
  EXPECT_EQ(layer_of(deb("libnvjitlink-12-4"), lock), "cuda");
  EXPECT_EQ(layer_of(deb("libcudnn9-cuda-12"), lock), "cudnn");
  EXPECT_EQ(layer_of(deb("cudnn9-cuda-12"), lock), "cudnn");
  EXPECT_EQ(layer_of(deb("curl"), lock), "user");
  EXPECT_EQ(layer_of(deb("git"), lock), "user");
  EXPECT_EQ(layer_of(deb("libc6"), lock), "base");
  EXPECT_EQ(layer_of(deb("libcurl4"), lock), "base");  // "curl" names curl, not every package starting so
}

TEST(PlanLayerOf, SortsWheelsIntoCudaCudnnUserAndFramework) {
  resolver::Lock lock = lock_of({});
  lock.requested_pip = {"numpy<2.2", "Foo.Bar[extra]>=1", "requests ; python_version > '3'"};
  EXPECT_EQ(layer_of(wheel("nvidia-cublas-cu12"), lock), "cuda");
  EXPECT_EQ(layer_of(wheel("nvidia_cuda_runtime_cu12"), lock), "cuda");  // compared canonicalized
  EXPECT_EQ(layer_of(wheel("cuda-toolkit"), lock), "cuda");
  EXPECT_EQ(layer_of(wheel("nvidia-cudnn-cu12"), lock), "cudnn");
  EXPECT_EQ(layer_of(wheel("numpy"), lock), "user");
  EXPECT_EQ(layer_of(wheel("foo_bar"), lock), "user");
  EXPECT_EQ(layer_of(wheel("requests"), lock), "user");
  EXPECT_EQ(layer_of(wheel("torch"), lock), "framework");
  EXPECT_EQ(layer_of(wheel("filelock"), lock), "framework");
}

// ---- plan_layers ----

TEST(PlanLayers, PutsEachPathIntoItsPackagesLayerWithItsParents) {
  resolver::Lock lock = lock_of({deb("libc6", "2.36"), deb("cuda-cudart-12-4", "12.4.127"), wheel("torch", "2.5.1")});
  const std::vector<RootEntry> root = {
      {"usr", Kind::directory, 0, 0},
      {"usr/lib", Kind::directory, 0, 0},
      {"usr/lib/libc.so.6", Kind::file, 100, 0},
      {"usr/local", Kind::directory, 0, k_no_package},
      {"usr/local/cuda", Kind::directory, 0, 1},
      {"usr/local/cuda/libcudart.so.12", Kind::file, 40, 1},
      {"usr/local/cuda/libcudart.so", Kind::symlink, 0, 1},
      {"usr/local/lib/torch/libtorch.so", Kind::file, 7, 2},
      {"usr/share/gpuenv", Kind::directory, 0, k_no_package},
      {"usr/share/gpuenv/gpuenv.lock", Kind::file, 3, k_no_package},
      {"var/empty", Kind::directory, 0, k_no_package},
  };
  const auto layers = plan_layers(root, lock);
  EXPECT_EQ(names(layers), (std::vector<std::string>{"base", "cuda", "framework", "metadata"}));
  EXPECT_EQ(paths(layer_named(layers, "base"), root), (std::vector<std::string>{"usr", "usr/lib", "usr/lib/libc.so.6"}));
  // "usr" belongs to libc6 but is repeated as a parent; "usr/local" belongs to nobody and comes only as one.
  EXPECT_EQ(paths(layer_named(layers, "cuda"), root),
            (std::vector<std::string>{"usr", "usr/local", "usr/local/cuda", "usr/local/cuda/libcudart.so.12", "usr/local/cuda/libcudart.so"}));
  EXPECT_EQ(paths(layer_named(layers, "framework"), root), (std::vector<std::string>{"usr", "usr/local", "usr/local/lib/torch/libtorch.so"}));
  // A directory nobody installed and nothing lies beneath (var/empty) goes nowhere.
  EXPECT_EQ(paths(layer_named(layers, "metadata"), root), (std::vector<std::string>{"usr", "usr/share/gpuenv", "usr/share/gpuenv/gpuenv.lock"}));
}

TEST(PlanLayers, CountsPackagesAndTheirBytesPerLayer) {
  resolver::Lock lock = lock_of({deb("zlib1g", "1:1.2.13"), deb("libc6", "2.36"), deb("libcublas-12-4", "12.4.5")});
  const std::vector<RootEntry> root = {
      {"lib", Kind::directory, 0, 1},
      {"lib/libc.so.6", Kind::file, 100, 1},
      {"lib/libm.so.6", Kind::file, 20, 1},
      {"lib/libz.so.1", Kind::file, 9, 0},
      {"opt", Kind::directory, 0, 2},
  };
  const auto layers = plan_layers(root, lock);
  ASSERT_EQ(names(layers), (std::vector<std::string>{"base", "cuda"}));
  const auto& base = layers[0];
  EXPECT_EQ(base.packages, (std::vector<std::string>{"libc6 2.36", "zlib1g 1:1.2.13"}));
  ASSERT_EQ(base.package_bytes.size(), 2u);
  EXPECT_EQ(base.package_bytes[0].package, 0u);
  EXPECT_EQ(base.package_bytes[0].bytes, 9u);
  EXPECT_EQ(base.package_bytes[1].package, 1u);
  EXPECT_EQ(base.package_bytes[1].bytes, 120u);
  // A package that brings only a directory is still listed, with 0 bytes.
  ASSERT_EQ(layers[1].package_bytes.size(), 1u);
  EXPECT_EQ(layers[1].package_bytes[0].bytes, 0u);
  EXPECT_EQ(layers[1].packages, (std::vector<std::string>{"libcublas-12-4 12.4.5"}));
}

TEST(PlanLayers, AnEmptyTreePlansNoLayer) { EXPECT_TRUE(plan_layers({}, lock_of({deb("libc6")})).empty()); }

// ---- GPU rules ----

TEST(PlanGpuRules, RefusesCudaFromDebsAndWheelsAtOnce) {
  auto st = check_one_cuda_source(lock_of({deb("libc6"), deb("libcublas-12-4"), wheel("torch"), wheel("nvidia-cudnn-cu12")}));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().id, "build.cuda_twice");
  EXPECT_NE(st.error().message.find("libcublas-12-4"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("nvidia-cudnn-cu12"), std::string::npos) << st.error().message;
}

TEST(PlanGpuRules, AcceptsOneSourceOfCuda) {
  EXPECT_TRUE(check_one_cuda_source(lock_of({deb("libcublas-12-4"), deb("libcudnn9-cuda-12"), wheel("numpy")})));
  EXPECT_TRUE(check_one_cuda_source(lock_of({deb("libc6"), wheel("torch"), wheel("nvidia-cublas-cu12")})));
  EXPECT_TRUE(check_one_cuda_source(lock_of({})));
}

TEST(PlanGpuRules, KnowsTheDriversLibraries) {
  for (const char* so : {"libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1", "libnvcuvid.so.1", "libOpenCL.so.1"})
    EXPECT_TRUE(is_driver_library(so)) << so;
  for (const char* so : {"libcudart.so.12", "libcublas.so.12", "libnvrtc.so.12", "libnvjitlink.so.12", "libc.so.6"}) EXPECT_FALSE(is_driver_library(so)) << so;
}

TEST(PlanGpuRules, RefusesADriverLibraryInTheTreeNamingItsPackage) {
  const auto lock = lock_of({deb("libc6"), deb("libnvidia-compute-550")});
  const std::vector<RootEntry> root = {{"usr/lib/x86_64-linux-gnu/libc.so.6", Kind::file, 1, 0},
                                       {"usr/lib/x86_64-linux-gnu/libcuda.so.550.54", Kind::file, 1, 1}};
  auto st = check_no_driver_library(root, lock);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().id, "build.driver_in_image");
  EXPECT_NE(st.error().message.find("/usr/lib/x86_64-linux-gnu/libcuda.so.550.54"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().hint.find("libnvidia-compute-550"), std::string::npos) << st.error().hint;
}

TEST(PlanGpuRules, AcceptsStubsAndLinksNamedLikeDriverLibraries) {
  const auto lock = lock_of({deb("cuda-cudart-dev-12-4")});
  const std::vector<RootEntry> root = {{"usr/local/cuda/lib64/stubs/libcuda.so", Kind::file, 1, 0},
                                       {"usr/lib/libcuda.so.1", Kind::symlink, 0, k_no_package},
                                       {"usr/lib/libnvidia-ml.so.1", Kind::directory, 0, k_no_package}};
  EXPECT_TRUE(check_no_driver_library(root, lock));
}

TEST(PlanGpuRules, ADriverLibraryNoPackageInstalledNamesAnUnknownOwner) {
  auto st = check_no_driver_library({{"opt/libnvidia-ml.so.1", Kind::file, 1, k_no_package}}, lock_of({}));
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().hint.find("(unknown)"), std::string::npos) << st.error().hint;
}

// ---- ld.so.conf.d ----

TEST(PlanLoaderConfig, ListsTheLibraryDirectoriesOfNvidiasWheelsOnce) {
  const std::string site = "usr/local/lib/python3.11/dist-packages";
  const auto dirs = wheel_cuda_library_dirs({site + "/nvidia/cublas/lib/libcublas.so.12", site + "/nvidia/cublas/lib/libcublasLt.so.12",
                                             site + "/nvidia/cudnn/lib/libcudnn.so.9", site + "/nvidia/cublas/include/cublas.h",
                                             site + "/nvidia/cublas/lib/__init__.py", site + "/torch/lib/libtorch.so", "usr/local/bin/nvidia/lib/x.so"},
                                            site);
  EXPECT_EQ(dirs, (std::vector<std::string>{"/" + site + "/nvidia/cublas/lib", "/" + site + "/nvidia/cudnn/lib"}));
  const auto conf = wheel_cuda_loader_config(dirs);
  ASSERT_TRUE(conf);
  EXPECT_EQ(conf->path, "etc/ld.so.conf.d/000-gpuenv-cuda-wheels.conf");
  EXPECT_EQ(conf->text, "# Written by gpuenv: the CUDA libraries of NVIDIA's wheels.\n/" + site + "/nvidia/cublas/lib\n/" + site + "/nvidia/cudnn/lib\n");
}

TEST(PlanLoaderConfig, WritesNothingWithoutWheelLibraries) {
  EXPECT_TRUE(wheel_cuda_library_dirs({"usr/local/lib/python3.11/dist-packages/numpy/core/_multiarray.so"}, "usr/local/lib/python3.11/dist-packages").empty());
  EXPECT_FALSE(wheel_cuda_loader_config({}));
}

// ---- image config ----

TEST(PlanImageConfig, SetsTheNvidiaVariablesAndLabelsFromTheLock) {
  resolver::Lock lock = lock_of({});
  lock.cuda = "12.4.1";
  lock.cudnn = "9.1.0";
  lock.python = "3.11";
  lock.driver_min = "550.54";
  lock.archs = {"sm_80", "sm_90"};
  lock.frameworks = {{"torch", "2.5.1", "cu124", "", ""}, {"jax", "0.4.30", "", "", ""}};
  const auto plan = plan_image_config(lock, "abc123", 1700000000);
  EXPECT_EQ(plan.env, (std::vector<std::string>{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
                                                "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
                                                "NVIDIA_REQUIRE_CUDA=cuda>=12.4"}));
  const std::map<std::string, std::string> want = {{"org.opencontainers.image.title", "demo"},
                                                   {"org.opencontainers.image.created", "2023-11-14T22:13:20Z"},
                                                   {"dev.gpuenv.lock.sha256", "abc123"},
                                                   {"dev.gpuenv.driver.min", "550.54"},
                                                   {"dev.gpuenv.cuda.archs", "sm_80,sm_90"},
                                                   {"dev.gpuenv.cuda.version", "12.4.1"},
                                                   {"dev.gpuenv.cudnn.version", "9.1.0"},
                                                   {"dev.gpuenv.python.version", "3.11"},
                                                   {"dev.gpuenv.framework.torch", "2.5.1+cu124"},
                                                   {"dev.gpuenv.framework.jax", "0.4.30"}};
  EXPECT_EQ(plan.labels, want);
  EXPECT_EQ(plan.cmd, (std::vector<std::string>{"/usr/bin/python3.11"}));
}

TEST(PlanImageConfig, WithoutCudaOrPythonRequiresNoCudaAndRunsAShell) {
  const auto plan = plan_image_config(lock_of({}), "abc", 0);
  EXPECT_FALSE(std::any_of(plan.env.begin(), plan.env.end(), [](const std::string& e) { return e.rfind("NVIDIA_REQUIRE_CUDA=", 0) == 0; }));
  EXPECT_TRUE(has(plan.env, "NVIDIA_VISIBLE_DEVICES=all"));
  EXPECT_EQ(plan.labels.count("dev.gpuenv.cuda.version"), 0u);
  EXPECT_EQ(plan.labels.count("dev.gpuenv.cuda.archs"), 0u);
  EXPECT_EQ(plan.labels.count("dev.gpuenv.driver.min"), 0u);  // no floor: no label, not an empty one
  EXPECT_EQ(plan.cmd, (std::vector<std::string>{"/bin/sh"}));
  resolver::Lock targets = lock_of({});
  targets.archs = {"sm_90"};  // GPUs named, but no CUDA in the image: no CUDA label says otherwise
  targets.driver_min = "525.60.13";
  const auto with_gpus = plan_image_config(targets, "abc", 0);
  EXPECT_EQ(with_gpus.labels.count("dev.gpuenv.cuda.archs"), 0u);
  EXPECT_EQ(with_gpus.labels.at("dev.gpuenv.driver.min"), "525.60.13");
  resolver::Lock slim = lock_of({});
  slim.base_variant = "slim";  // no shell in it: no command
  EXPECT_TRUE(plan_image_config(slim, "abc", 0).cmd.empty());
}

TEST(PlanImageConfig, KeepsTheBaseImagesVariablesAndLabelsUnlessGpuenvSetsThem) {
  resolver::Lock lock = lock_of({});
  lock.base_image = "docker://example.org/base:1@sha256:aa";
  BaseImageConfig base;
  base.env = {"PATH=/opt/bin", "HOME=/root", "NVIDIA_VISIBLE_DEVICES=none"};
  base.labels = {{"maintainer", "someone"}, {"org.opencontainers.image.title", "base"}};
  base.manifest_digest = "sha256:bb";
  const auto plan = plan_image_config(lock, "abc", 0, &base);
  ASSERT_GE(plan.env.size(), 2u);
  EXPECT_EQ(plan.env.front(), "HOME=/root");  // the base's first, less what gpuenv sets
  EXPECT_EQ(plan.env[1], "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  EXPECT_FALSE(has(plan.env, "PATH=/opt/bin"));
  EXPECT_FALSE(has(plan.env, "NVIDIA_VISIBLE_DEVICES=none"));
  EXPECT_EQ(plan.labels.at("maintainer"), "someone");
  EXPECT_EQ(plan.labels.at("org.opencontainers.image.title"), "demo");
  EXPECT_EQ(plan.labels.at("org.opencontainers.image.base.digest"), "sha256:bb");
  EXPECT_EQ(plan.labels.at("dev.gpuenv.base.image"), "docker://example.org/base:1@sha256:aa");
}

// ---- reuse key and small facts ----

TEST(PlanReuseKey, ChangesWithWhatTheBytesDependOnOnly) {
  ImageParameters p;
  p.generator = "gpuenv 0.1.0";
  p.architecture = "amd64";
  const std::string key = reuse_key("lock", p);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(reuse_key("lock", p), key);
  EXPECT_NE(reuse_key("lock2", p), key);
  auto changed = [&](auto edit) {
    ImageParameters q = p;
    edit(q);
    return reuse_key("lock", q) != key;
  };
  EXPECT_TRUE(changed([](ImageParameters& q) { q.source_date_epoch = 1; }));
  EXPECT_TRUE(changed([](ImageParameters& q) { q.gzip_level = 9; }));
  EXPECT_TRUE(changed([](ImageParameters& q) { q.compression = Compression::zstd; }));
  EXPECT_TRUE(changed([](ImageParameters& q) { q.architecture = "arm64"; }));
  EXPECT_TRUE(changed([](ImageParameters& q) { q.allow_missing = {"libfoo.so.1"}; }));
  EXPECT_FALSE(changed([](ImageParameters& q) { q.zstd_level = 19; }));  // gzip layers do not depend on it
}

TEST(PlanFacts, SpellsTimesAndArchitectures) {
  EXPECT_EQ(format_rfc3339_utc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(format_rfc3339_utc(1700000000), "2023-11-14T22:13:20Z");
}

}  // namespace
