// Answers that must rest on recorded facts (issue 12): a cuDNN release the catalog lacks is judged only on
// what its recorded neighbours agree on; a patch release the catalog lacks gets its minor series' facts;
// the driver's way of running CUDA (natively or through minor-version compatibility) is said as it is.
#include <gtest/gtest.h>

#include "fakes/catalog_fixture.hpp"
#include "resolver/solver.hpp"

namespace {

using namespace gpuenv::resolver;
using gpuenv::testing::resolve_yaml;

CudnnRelease release(const char* v, std::vector<CudnnBuild> builds) {
  CudnnRelease r;
  r.version = *Version::parse(v);
  r.builds = std::move(builds);
  return r;
}

CudnnBuild build(int major, const char* lo, const char* hi, const char* driver, std::vector<int> sm) {
  return CudnnBuild{major, *Version::parse(lo), *Version::parse(hi), *Version::parse(driver), std::move(sm)};
}

std::string notes_of(const Resolution& r) {
  std::string out;
  for (const auto& n : r.notes) out += n + "\n";
  return out;
}

TEST(CudnnFacts, RecordedReleaseGivesItsOwnFacts) {
  Catalog c;
  c.cudnn = {release("9.5.1", {build(12, "12.0", "12.6", "525.60.13", {50, 90})})};
  const auto f = c.cudnn_facts(*Version::parse("9.5.1"), 12);
  EXPECT_TRUE(f.recorded);
  ASSERT_TRUE(f.has_build && f.sm && f.driver_min);
  EXPECT_TRUE(*f.has_build);
  EXPECT_EQ(f.sm->back(), 90);
  EXPECT_FALSE(*c.cudnn_facts(*Version::parse("9.5.1"), 11).has_build);
}

TEST(CudnnFacts, OnlyWhatBothNeighboursAgreeOnIsInferred) {
  Catalog c;
  c.cudnn = {release("9.5.1", {build(12, "12.0", "12.6", "525.60.13", {50, 60, 90})}),
             release("9.10.2", {build(12, "12.0", "12.9", "525.60.13", {50, 60, 90, 100, 120})})};
  const auto f = c.cudnn_facts(*Version::parse("9.7.1"), 12);
  EXPECT_FALSE(f.recorded);
  ASSERT_TRUE(f.below && f.above);
  EXPECT_EQ(f.below->str(), "9.5.1");
  EXPECT_EQ(f.above->str(), "9.10.2");
  ASSERT_TRUE(f.has_build && f.cuda_min && f.driver_min);
  EXPECT_EQ(f.cuda_min->str(), "12.0");
  EXPECT_EQ(f.driver_min->str(), "525.60.13");
  EXPECT_FALSE(f.cuda_max.has_value());  // 12.6 and 12.9 disagree
  EXPECT_FALSE(f.sm.has_value());        // Blackwell appears between them: not known for 9.7.1
  EXPECT_NE(std::find(f.unknown.begin(), f.unknown.end(), "architectures"), f.unknown.end());
}

TEST(CudnnFacts, NothingIsTakenFromOneSideAlone) {
  Catalog c;
  c.cudnn = {release("9.17.0", {build(13, "13.0", "13.1", "580.65.06", {75, 120})})};
  const auto newer = c.cudnn_facts(*Version::parse("9.26.0"), 13);
  EXPECT_FALSE(newer.has_build || newer.driver_min || newer.sm);
  EXPECT_FALSE(newer.unknown.empty());
  const auto older = c.cudnn_facts(*Version::parse("9.1.0"), 13);
  EXPECT_FALSE(older.has_build.has_value());  // a build for CUDA 13 is not refused on 9.17.0's word
}

TEST(CudnnFacts, NeighboursThatDisagreeOnABuildLeaveItUnknown) {
  Catalog c;
  c.cudnn = {release("9.10.2", {build(11, "11.8", "11.8", "450.80.02", {50}), build(12, "12.0", "12.9", "525.60.13", {50})}),
             release("9.17.0", {build(12, "12.0", "12.9", "525.60.13", {75})})};
  EXPECT_FALSE(c.cudnn_facts(*Version::parse("9.12.0"), 11).has_build.has_value());
}

// Case 2 of issue 12: torch 2.7 bundles cuDNN 9.7.1, whose support matrix the catalog lacks; torch 2.7+cu128
// is built for Blackwell. The answer must not be a refusal taken from an older cuDNN record.
TEST(RecordedFacts, Torch27RunsOnBlackwell) {
  for (const char* gpu : {"RTX 5090", "B200"}) {
    const auto r = resolve_yaml(std::string("frameworks: {torch: '2.7'}\ngpu: {models: ['") + gpu + "'], driver: '575.51.03'}\n");
    ASSERT_TRUE(r.ok) << gpu << "\n" << gpuenv::testing::conflicts_text(r);
    ASSERT_FALSE(r.frameworks.empty());
    EXPECT_EQ(r.frameworks[0].variant, "cu128") << gpu;
    const std::string notes = notes_of(r);
    if (r.cudnn && !gpuenv::testing::catalog().cudnn_release(*r.cudnn))
      EXPECT_NE(notes.find("has no support matrix in the catalog"), std::string::npos) << notes;
  }
}

// Case 3: a published patch release the catalog does not list resolves with its minor series' facts.
TEST(RecordedFacts, UnlistedPatchReleaseGetsItsSeriesFacts) {
  const auto r = resolve_yaml("base: ubuntu:22.04\nframeworks: {tensorflow: '2.16.2'}\ngpu: {models: [A100], driver: '550.54.15'}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  ASSERT_FALSE(r.frameworks.empty());
  EXPECT_EQ(r.frameworks[0].version.str(), "2.16.2");
  EXPECT_NE(notes_of(r).find("tensorflow 2.16.2 is not in the catalog; the facts recorded for tensorflow 2.16.1"), std::string::npos)
      << notes_of(r);
  // A release of a series the catalog does not know stays unknown.
  const auto none = resolve_yaml("base: ubuntu:22.04\nframeworks: {tensorflow: '2.99.1'}\ngpu: {models: [A100]}\n");
  EXPECT_FALSE(none.ok);
}

// Item 5: 550.54.15 is CUDA 12.4's own driver; CUDA 12.6 runs on it only through minor-version compatibility.
TEST(RecordedFacts, DriverModeSaysNativeOrMinorVersionCompatibility) {
  const auto native = resolve_yaml("cuda: '12.4'\ngpu: {models: [L4], driver: '550.54.15'}\n");
  ASSERT_TRUE(native.ok) << gpuenv::testing::conflicts_text(native);
  EXPECT_EQ(native.driver_mode, "native") << native.cuda->str();
  const auto minor = resolve_yaml("cuda: '12.6'\ngpu: {models: [L4], driver: '550.54.15'}\n");
  ASSERT_TRUE(minor.ok) << gpuenv::testing::conflicts_text(minor);
  EXPECT_EQ(minor.driver_mode, "minor_version_compat");
  EXPECT_GT(minor.cuda_native_driver, *Version::parse("550.54.15"));
  const auto none = resolve_yaml("cuda: '12.6'\ngpu: {models: [L4]}\n");
  EXPECT_EQ(none.driver_mode, "");
}

}  // namespace

namespace {

// Without a variant index, only torch's default variants (what the Python package index serves) are chosen.
TEST(RecordedFacts, DefaultVariantsOnlyWhenNoVariantIndexIsConfigured) {
  const std::string yaml = "frameworks: {torch: latest}\ngpu: {models: [H100], driver: '550.54.15'}\n";
  const auto spec = gpuenv::testing::spec_of(yaml);
  gpuenv::resolver::ResolveRequest req;
  req.spec = &spec;
  req.gpus = *gpuenv::resolver::gpu_targets(gpuenv::testing::catalog(), spec.gpu.models, spec.gpu.archs, "t");
  req.driver = spec.gpu.driver;
  const auto any = gpuenv::resolver::resolve(gpuenv::testing::catalog(), req);
  ASSERT_TRUE(any.ok() && any->ok);
  ASSERT_FALSE(any->frameworks.empty());
  EXPECT_FALSE(any->frameworks[0].is_default) << any->frameworks[0].version.str() << "+" << any->frameworks[0].variant;  // a cu12x build of the newest torch
  req.default_variants_only = true;
  const auto plain = gpuenv::resolver::resolve(gpuenv::testing::catalog(), req);
  ASSERT_TRUE(plain.ok() && plain->ok);
  EXPECT_TRUE(plain->frameworks[0].is_default) << plain->frameworks[0].version.str() << "+" << plain->frameworks[0].variant;
  EXPECT_LT(plain->frameworks[0].version, any->frameworks[0].version);
}

}  // namespace

namespace {

using gpuenv::resolver::Platform;

/// Resolves YAML on the real catalog as `gpuenv lock` does without a variant index, on a linux/amd64 machine.
gpuenv::resolver::Resolution resolve_index_only(const std::string& yaml) {
  const auto spec = gpuenv::testing::spec_of(yaml);
  gpuenv::resolver::ResolveRequest req;
  req.spec = &spec;
  req.gpus = *gpuenv::resolver::gpu_targets(gpuenv::testing::catalog(), spec.gpu.models, spec.gpu.archs, "t");
  req.driver = spec.gpu.driver;
  req.default_variants_only = true;
  req.host_platform = Platform::amd64();
  auto r = gpuenv::resolver::resolve(gpuenv::testing::catalog(), req);
  EXPECT_TRUE(r.ok());
  return r.ok() ? std::move(*r) : gpuenv::resolver::Resolution{};
}

// Every framework release records what the Python package index serves for Linux aarch64 (docs/catalog.md).
TEST(RecordedFacts, EveryFrameworkReleaseRecordsItsAarch64Wheels) {
  for (const auto& [name, releases] : gpuenv::testing::catalog().frameworks)
    for (const auto& r : releases) EXPECT_TRUE(r.aarch64_cuda.has_value()) << name << " " << r.version.str();
  for (const char* grace : {"GH200", "GB200", "GB300", "GB10"}) {
    const auto* g = gpuenv::testing::catalog().gpu(grace);
    ASSERT_NE(g, nullptr) << grace;
    EXPECT_EQ(g->host_arch, "arm64") << grace;
  }
  EXPECT_EQ(gpuenv::testing::catalog().gpu("GB10")->sm, 121);
  EXPECT_EQ(gpuenv::testing::catalog().gpu("H100")->host_arch, "");
}

// torch's aarch64 wheels on the Python package index are CPU-only up to 2.10 and CUDA builds from 2.11.
TEST(RecordedFacts, GraceGpusGetATorchWhoseAarch64WheelsCarryCuda) {
  const auto refused = resolve_index_only("frameworks: {torch: '2.10'}\ngpu: {models: [GH200]}\n");
  ASSERT_FALSE(refused.ok);
  ASSERT_FALSE(refused.conflicts.empty());
  EXPECT_EQ(refused.conflicts.front().rule, gpuenv::resolver::Rule::platform_framework);
  EXPECT_EQ(refused.conflicts.front().message,
            "torch 2.10.0's Linux aarch64 wheels on the Python package index are CPU-only, so the linux/arm64 image would have no CUDA; "
            "the first later torch release with CUDA on aarch64 there is 2.11.0");
  for (const char* grace : {"GH200", "GB200", "GB300", "GB10"}) {
    const auto any = resolve_index_only(std::string("frameworks: {torch: '2.*'}\ngpu: {models: [") + grace + "]}\n");
    ASSERT_TRUE(any.ok) << grace << "\n" << gpuenv::testing::conflicts_text(any);
    EXPECT_EQ(any.platforms, std::vector<Platform>{Platform::arm64()}) << grace;
    EXPECT_GE(any.frameworks.at(0).version, *gpuenv::resolver::Version::parse("2.11")) << grace;
    EXPECT_TRUE(any.frameworks.at(0).is_default) << grace;
  }
  const auto hopper = resolve_index_only("frameworks: {torch: '2.10'}\ngpu: {models: [H100]}\n");
  ASSERT_TRUE(hopper.ok) << gpuenv::testing::conflicts_text(hopper);
  EXPECT_EQ(hopper.frameworks.at(0).version.str(), "2.10.0");
}

// TensorFlow's aarch64 wheels on the index are CPU-only builds in every recorded release; JAX's CUDA plugins have
// aarch64 wheels except in 0.4.22, 0.4.26 and 0.4.38.
TEST(RecordedFacts, TensorflowAndJaxOnAGraceGpu) {
  const auto tf = resolve_index_only("frameworks: {tensorflow: latest}\ngpu: {models: [GH200]}\n");
  ASSERT_FALSE(tf.ok);
  EXPECT_NE(gpuenv::testing::conflicts_text(tf).find("no later tensorflow release in the catalog has CUDA on aarch64 there"), std::string::npos)
      << gpuenv::testing::conflicts_text(tf);
  const auto old_jax = resolve_index_only("frameworks: {jax: '==0.4.38'}\ngpu: {models: [GH200]}\n");
  ASSERT_FALSE(old_jax.ok);
  EXPECT_NE(gpuenv::testing::conflicts_text(old_jax).find("jax 0.4.38's Linux aarch64 wheels on the Python package index are CPU-only, so the "
                                                          "linux/arm64 image would have no CUDA; the first later jax release with CUDA on "
                                                          "aarch64 there is 0.5.0"),
            std::string::npos)
      << gpuenv::testing::conflicts_text(old_jax);
  const auto jax = resolve_index_only("frameworks: {jax: latest}\ngpu: {models: [GB10]}\n");
  ASSERT_TRUE(jax.ok) << gpuenv::testing::conflicts_text(jax);
}

// vLLM and SGLang pin their torch (recorded from their wheels on the index, 2026-12-06): the resolution carries that
// torch, a GPU must be covered by the framework's kernels and its torch's, and vllm 0.34.0 (flashinfer-python==0.7.3)
// and sglang 0.5.20 to 0.5.22 (cuda-tile==1.6.0rc5, a source distribution only) cannot be installed with wheels.
TEST(RecordedFacts, ServingFrameworksBringTheTorchTheyPin) {
  const auto vllm = resolve_index_only("frameworks: {vllm: latest}\ngpu: {models: [H100], driver: '580.95.05'}\n");
  ASSERT_TRUE(vllm.ok) << gpuenv::testing::conflicts_text(vllm);
  ASSERT_EQ(vllm.frameworks.size(), 2u);
  EXPECT_EQ(vllm.frameworks[0].name + " " + vllm.frameworks[0].version.str(), "vllm 0.33.0");
  EXPECT_EQ(vllm.frameworks[1].name + " " + vllm.frameworks[1].version.str() + "+" + vllm.frameworks[1].variant, "torch 2.14.0+cu130");
  EXPECT_EQ(vllm.frameworks[1].pinned_by, "vllm 0.33.0");
  EXPECT_EQ(vllm.cuda->truncated(2).str(), "13.0");
  const auto newest = resolve_index_only("frameworks: {vllm: '0.34'}\ngpu: {models: [H100], driver: '580.95.05'}\n");
  ASSERT_FALSE(newest.ok);
  EXPECT_NE(gpuenv::testing::conflicts_text(newest).find("pin_without_wheel: vllm 0.34.0 pins flashinfer-python==0.7.3"), std::string::npos)
      << gpuenv::testing::conflicts_text(newest);
  const auto sglang = resolve_index_only("frameworks: {sglang: latest}\ngpu: {models: [H100], driver: '580.95.05'}\n");
  ASSERT_TRUE(sglang.ok) << gpuenv::testing::conflicts_text(sglang);
  EXPECT_EQ(sglang.frameworks[0].version.str(), "0.5.23");
  EXPECT_EQ(sglang.frameworks[1].version.str(), "2.14.1");
  const auto old_sglang = resolve_index_only("frameworks: {sglang: '0.5.21'}\ngpu: {models: [H100], driver: '580.95.05'}\n");
  ASSERT_FALSE(old_sglang.ok);
  EXPECT_NE(gpuenv::testing::conflicts_text(old_sglang).find("sglang 0.5.21 pins cuda-tile==1.6.0rc5"), std::string::npos);
}

TEST(RecordedFacts, ServingFrameworksKernelsAndDriver) {
  // T4 (sm_75): vLLM's kernels and torch 2.14's cu130 build have sm_75; sglang-kernel starts at sm_80.
  EXPECT_TRUE(resolve_index_only("frameworks: {vllm: latest}\ngpu: {models: [T4], driver: '580.95.05'}\n").ok);
  const auto t4 = resolve_index_only("frameworks: {sglang: latest}\ngpu: {models: [T4], driver: '580.95.05'}\n");
  ASSERT_FALSE(t4.ok);
  EXPECT_NE(gpuenv::testing::conflicts_text(t4).find("arch_framework: sglang 0.5.23+cu130 has machine code for sm_80"), std::string::npos)
      << gpuenv::testing::conflicts_text(t4);
  // V100 (sm_70): CUDA 13 has no sm_70, nor do vLLM's kernels.
  EXPECT_FALSE(resolve_index_only("frameworks: {vllm: latest}\ngpu: {models: [V100], driver: '580.95.05'}\n").ok);
  // CUDA 13.0 needs the R580 driver; an RTX 4090 on R535 has no forward compatibility.
  const auto old = resolve_index_only("frameworks: {vllm: '0.33'}\ngpu: {models: [RTX 4090], driver: '535.183.01'}\n");
  ASSERT_FALSE(old.ok);
  EXPECT_NE(gpuenv::testing::conflicts_text(old).find("suggest: upgrade the driver to >= 580 for vllm 0.33.0+cu130 with torch 2.14.0+cu130"),
            std::string::npos)
      << gpuenv::testing::conflicts_text(old);
  // GB10 (sm_121, Grace): vLLM's aarch64 build has sm_120 machine code; sglang-kernel's has sm_121a.
  for (const char* fw : {"vllm", "sglang"}) {
    const auto gb10 = resolve_index_only(std::string("frameworks: {") + fw + ": latest}\ngpu: {models: [GB10], driver: '590.44.01'}\n");
    ASSERT_TRUE(gb10.ok) << fw << "\n" << gpuenv::testing::conflicts_text(gb10);
    EXPECT_EQ(gb10.platforms, std::vector<Platform>{Platform::arm64()}) << fw;
  }
}

}  // namespace
