// Rules of the solver on a small synthetic catalog, so each rule is tested apart from the real data.
#include "resolver/solver.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "fakes/catalog_fixture.hpp"

namespace {

using namespace gpuenv::resolver;


const Catalog& mini() { return gpuenv::testing::mini_catalog(); }

Resolution solve(const std::string& yaml, std::optional<std::string> driver = std::nullopt) {
  const Spec spec = gpuenv::testing::spec_of(yaml);
  ResolveRequest req;
  req.spec = &spec;
  auto targets = gpu_targets(mini(), spec.gpu.models, spec.gpu.archs, "t");
  EXPECT_TRUE(targets.ok());
  if (targets) req.gpus = *targets;
  if (driver) req.driver = *Constraint::parse(*driver);
  else req.driver = spec.gpu.driver;
  auto r = resolve(mini(), req);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? *r : Resolution{};
}

TEST(ArchRules, MachineCodeRunsOnSameMajorNewerMinorOnly) {
  EXPECT_TRUE(sass_runs_on(86, 89));
  EXPECT_TRUE(sass_runs_on(80, 86));
  EXPECT_FALSE(sass_runs_on(89, 86));
  EXPECT_FALSE(sass_runs_on(90, 100));
  EXPECT_FALSE(sass_runs_on(100, 120));
  EXPECT_TRUE(ptx_runs_on(90, 120));
  EXPECT_FALSE(ptx_runs_on(90, 86));
}

TEST(Solver, PrefersNewestFrameworkAndItsDefaultVariant) {
  auto r = solve("frameworks: {torch: latest}\ngpu: {models: [H100], driver: '550.54.15'}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  ASSERT_EQ(r.frameworks.size(), 1u);
  EXPECT_EQ(r.frameworks[0].version.str(), "2.5.1");
  EXPECT_EQ(r.frameworks[0].variant, "cu121");  // default before the newer cu124
  EXPECT_EQ(r.cuda->str(), "12.1.1");           // newest update of the variant's CUDA
  EXPECT_EQ(r.python->str(), "3.11");
  EXPECT_EQ(r.driver_min.str(), "525.60.13");
  EXPECT_FALSE(r.forward_compat);
}

TEST(Solver, HonoursTheSpecsCudaConstraint) {
  auto r = solve("cuda: '12.4'\nframeworks: {torch: latest}\ngpu: {models: [H100], driver: '550.54.15'}\n");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.frameworks[0].variant, "cu124");
  EXPECT_EQ(r.cudnn->str(), "9.1.0");
}

TEST(Solver, DriverFloorIsTheMaximumOfItsParts) {
  auto r = solve("frameworks: {torch: latest}\ngpu: {models: [H100], confidential: required}\n");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.driver_min.str(), "535.104.05");
  EXPECT_EQ(r.driver_floor.front().why, "confidential computing on H100");
}

TEST(Solver, GpuNewerThanEveryToolkitOfTheFrameworkIsUnsatisfiable) {
  // RTX 5090 (sm_120): torch 2.0.1 has only CUDA 11.7/11.8 variants, whose toolkits end at sm_90.
  auto r = solve("frameworks: {torch: '2.0.1'}\ngpu: {models: [RTX 5090], driver: '570.86.16'}\n");
  EXPECT_FALSE(r.ok);
  const std::string text = gpuenv::testing::conflicts_text(r);
  EXPECT_NE(text.find("arch_cuda: CUDA 11.8 supports sm_35 to sm_90; RTX 5090 is sm_120"), std::string::npos) << text;
  EXPECT_NE(text.find("suggest: torch 2.5.1+cu128"), std::string::npos) << text;
}

TEST(Solver, PtxJitRaisesTheFloorWhenItIsUsed) {
  // An sm_100 GPU: CUDA 12.8 covers it, but torch 2.5.1+cu128 has machine code only up to sm_90, so its
  // compute_90 PTX must be JIT-compiled, which needs the CUDA 12.8 driver (minor compatibility does not cover JIT).
  auto r = solve("cuda: '12.8'\nframeworks: {torch: '2.5.1'}\ngpu: {archs: [sm_100]}\n", "580.65.06");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  EXPECT_EQ(r.frameworks[0].variant, "cu128");
  EXPECT_EQ(r.driver_min.str(), "570.26");
  auto old = solve("cuda: '12.8'\nframeworks: {torch: '2.5.1'}\ngpu: {archs: [sm_100]}\n", "560.28.03");
  EXPECT_FALSE(old.ok);
}

TEST(Solver, ForwardCompatibilityOnDataCenterGpus) {
  // H100 on R470 (below the 12.x floor): cuda-compat 12.4 supports branch 470, so cu124 works with it,
  // but native combinations come first: torch 2.5.1+cu118 runs natively on 470.
  auto r = solve("frameworks: {torch: '2.5.1'}\ngpu: {models: [A100], driver: '470.199.02'}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  EXPECT_FALSE(r.forward_compat);
  EXPECT_EQ(r.frameworks[0].variant, "cu118");
  auto compat = solve("cuda: '12.4'\nframeworks: {torch: '2.5.1'}\ngpu: {models: [A100], driver: '470.199.02'}\n");
  ASSERT_TRUE(compat.ok) << gpuenv::testing::conflicts_text(compat);
  EXPECT_TRUE(compat.forward_compat);
  EXPECT_EQ(compat.compat_package->str(), "12.4");
}

TEST(Solver, NoForwardCompatibilityOnConsumerGpus) {
  auto r = solve("cuda: '12.4'\nframeworks: {torch: '2.5.1'}\ngpu: {models: [RTX 4090], driver: '520.61.05'}\n");
  EXPECT_FALSE(r.ok);
  const std::string text = gpuenv::testing::conflicts_text(r);
  EXPECT_NE(text.find("RTX 4090 is not a data-center GPU"), std::string::npos) << text;
}

TEST(Solver, UnsatisfiableExplainsAndSuggests) {
  auto r = solve("frameworks: {torch: '2.5.1'}\ngpu: {models: [A100], driver: '450.80.02'}\n");
  // 2.5.1's oldest variant is cu118 (floor 450.80.02 with minor compatibility) -> fits natively.
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  auto u = solve("frameworks: {torch: '2.5.1'}\ngpu: {models: [A100], driver: '450.51.06'}\n");
  ASSERT_FALSE(u.ok);
  const std::string text = gpuenv::testing::conflicts_text(u);
  EXPECT_NE(text.find("torch 2.5.1 needs CUDA >= 11.8 and so a driver >= 450.80.02; driver 450.51.06 supports no CUDA release"),
            std::string::npos) << text;
  EXPECT_NE(text.find("upgrade the driver to >= 450.80.02 for torch 2.5.1+cu118"), std::string::npos) << text;
}

TEST(Solver, SuggestsAnOlderFrameworkThatFits) {
  // ubuntu 24.04 has Python 3.12, which torch 2.0.1 does not support; 2.5.1 does.
  auto p = solve("base: ubuntu:24.04\nframeworks: {torch: '2.0.1'}\ngpu: {models: [A100], driver: '550.54.15'}\n");
  ASSERT_FALSE(p.ok);
  const std::string text = gpuenv::testing::conflicts_text(p);
  EXPECT_NE(text.find("torch 2.0.1 supports Python 3.8 to 3.11; ubuntu:24.04 provides Python 3.12"), std::string::npos) << text;
  EXPECT_NE(text.find("suggest: torch 2.5.1+cu121"), std::string::npos) << text;
}

TEST(Solver, SpecConstraintsThatCannotMeet) {
  auto r = solve("cuda: '12.6'\nframeworks: {torch: '2.5.1'}\n");
  ASSERT_FALSE(r.ok);
  const std::string text = gpuenv::testing::conflicts_text(r);
  EXPECT_NE(text.find("the spec asks for CUDA '12.6'"), std::string::npos) << text;
  auto none = solve("frameworks: {torch: '3.0'}\n");
  ASSERT_FALSE(none.ok);
  EXPECT_NE(gpuenv::testing::conflicts_text(none).find("no torch release in the catalog matches '3.0' (known: 2.0.1 to 2.5.1)"),
            std::string::npos);
}

TEST(Solver, ConfidentialComputingNeedsACapableModel) {
  auto r = solve("frameworks: {torch: latest}\ngpu: {models: [A100], confidential: required}\n");
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.conflicts.front().rule, Rule::confidential);
  auto a = solve("frameworks: {torch: latest}\ngpu: {archs: [sm_90], confidential: required}\n");
  ASSERT_FALSE(a.ok);
  EXPECT_NE(gpuenv::testing::conflicts_text(a).find("by architecture only"), std::string::npos);
}

TEST(Solver, WithoutGpuOrDriverItSaysWhatWasNotChecked) {
  auto r = solve("frameworks: {torch: latest}\n");
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.archs.empty());
  ASSERT_EQ(r.notes.size(), 2u);
  EXPECT_NE(r.notes[0].find("not checked"), std::string::npos);
}

TEST(Solver, PlainCudaPicksNewestToolkitAndCudnnWhenAsked) {
  auto r = solve("cuda: '12.*'\ncudnn: '9'\ngpu: {models: [H100], driver: '550.54.15'}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  EXPECT_EQ(r.cuda->str(), "12.4.0");  // 12.8 is outside cuDNN 9.1.0's CUDA range
  EXPECT_EQ(r.cudnn->str(), "9.1.0");
  auto no_cudnn = solve("cuda: '12.*'\ngpu: {models: [H100]}\n");
  EXPECT_EQ(no_cudnn.cuda->str(), "12.8.0");
  EXPECT_FALSE(no_cudnn.cudnn.has_value());
}

// Issue 32: no framework, `cuda:` or `cudnn:` means no CUDA, not the newest toolkit's driver floor.
TEST(Solver, ASpecThatAsksForNoCudaGetsNoneAndOnlyItsGpusFloor) {
  auto bare = solve("packages: {apt: [python3-minimal]}\n");
  ASSERT_TRUE(bare.ok) << gpuenv::testing::conflicts_text(bare);
  EXPECT_FALSE(bare.cuda.has_value());
  EXPECT_FALSE(bare.cudnn.has_value());
  EXPECT_TRUE(bare.driver_min.empty()) << bare.driver_min.str();
  EXPECT_TRUE(bare.driver_floor.empty());
  EXPECT_TRUE(bare.driver_mode.empty());
  EXPECT_TRUE(std::any_of(bare.notes.begin(), bare.notes.end(), [](const std::string& n) { return n.find("asks for no CUDA") != std::string::npos; }));
  // An old driver is fine when the GPU runs on it; the GPU's own floor is all that is left.
  auto h100 = solve("gpu: {models: [H100], driver: '530.30.02'}\n");
  ASSERT_TRUE(h100.ok) << gpuenv::testing::conflicts_text(h100);
  EXPECT_FALSE(h100.cuda.has_value());
  EXPECT_EQ(h100.driver_min.str(), "525.60.13");
  ASSERT_EQ(h100.driver_floor.size(), 1u);
  EXPECT_EQ(h100.driver_floor[0].rule_if_unmet, Rule::gpu_driver);
  EXPECT_FALSE(h100.forward_compat);
  // Below the GPU's floor is still refused, for the GPU and not for a CUDA the image does not hold.
  auto old = solve("gpu: {models: [H100], driver: '470.82.01'}\n");
  ASSERT_FALSE(old.ok);
  EXPECT_EQ(old.conflicts.front().rule, Rule::gpu_driver) << gpuenv::testing::conflicts_text(old);
  EXPECT_EQ(old.conflicts.front().message.find("CUDA"), std::string::npos) << gpuenv::testing::conflicts_text(old);
  // Confidential computing keeps its own floor.
  auto cc = solve("gpu: {models: [H100], confidential: required}\n");
  ASSERT_TRUE(cc.ok);
  EXPECT_EQ(cc.driver_min.str(), "535.104.05");
  // Any one of the three asks for CUDA again.
  EXPECT_TRUE(solve("cudnn: '9'\n").cuda.has_value());
  EXPECT_TRUE(solve("cuda: {components: [nvcc]}\n").cuda.has_value());
  EXPECT_TRUE(solve("frameworks: {torch: latest}\n").cuda.has_value());
}

TEST(Solver, UnknownBaseIsASpecError) {
  const Spec spec = gpuenv::testing::spec_of("base: alpine:3.20\n");
  ResolveRequest req;
  req.spec = &spec;
  auto r = resolve(mini(), req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "spec.unknown_base");
}

TEST(Solver, UnknownGpuModelSuggestsAName) {
  auto t = gpu_targets(mini(), {"H10"}, {}, "s.yaml:3:5");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().hint.find("did you mean 'H100'"), std::string::npos) << t.error().hint;
}

TEST(Matrix, ListsEveryVariantWithItsFloor) {
  auto rows = matrix(mini(), "torch");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 6u);
  EXPECT_EQ((*rows)[0].variant, "cu117");
  EXPECT_EQ((*rows)[0].driver_min.str(), "450.80.02");
  EXPECT_EQ((*rows)[0].driver_native.str(), "515.65.01");
  EXPECT_FALSE(matrix(mini(), "caffe").ok());
}

}  // namespace
