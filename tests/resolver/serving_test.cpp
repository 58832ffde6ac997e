// Frameworks that pin torch (vLLM, SGLang) on the synthetic tests/data/serving_catalog: the release brings the torch it
// pins, torch's rules apply to that torch as well as the framework's own, a torch the spec names must agree with the
// pin, and a release pinning a package the index serves no wheel of is refused (docs/resolver.md, rule 10).
#include <gtest/gtest.h>

#include <algorithm>

#include "fakes/catalog_fixture.hpp"
#include "resolver/catalog_codec.hpp"
#include "resolver/solver.hpp"

namespace {

using namespace gpuenv::resolver;

const Catalog& serving() { return gpuenv::testing::serving_catalog(); }

Resolution resolve_serving(const std::string& yaml) {
  const Spec spec = gpuenv::testing::spec_of(yaml);
  ResolveRequest req;
  req.spec = &spec;
  auto targets = gpu_targets(serving(), spec.gpu.models, spec.gpu.archs, "t");
  EXPECT_TRUE(targets.ok());
  if (targets) req.gpus = *targets;
  req.driver = spec.gpu.driver;
  req.host_platform = Platform::amd64();
  auto r = resolve(serving(), req);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? std::move(*r) : Resolution{};
}

const ChosenFramework* chosen(const Resolution& r, const std::string& name) {
  const auto it = std::find_if(r.frameworks.begin(), r.frameworks.end(), [&](const ChosenFramework& f) { return f.name == name; });
  return it == r.frameworks.end() ? nullptr : &*it;
}

bool has_conflict(const Resolution& r, Rule rule, const std::string& text) {
  return std::any_of(r.conflicts.begin(), r.conflicts.end(),
                     [&](const Violation& v) { return v.rule == rule && v.message.find(text) != std::string::npos; });
}

TEST(ServingFramework, ResolvesWithTheTorchItPins) {
  const auto r = resolve_serving("frameworks: {vllm: '0.9'}\ngpu: {models: [H100], driver: '570.26'}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  ASSERT_EQ(r.frameworks.size(), 2u);
  const ChosenFramework* vllm = chosen(r, "vllm");
  const ChosenFramework* torch = chosen(r, "torch");
  ASSERT_TRUE(vllm && torch);
  EXPECT_EQ(vllm->version.str(), "0.9.0");
  EXPECT_EQ(vllm->variant, "cu128");
  EXPECT_TRUE(vllm->pinned_by.empty());
  EXPECT_EQ(torch->version.str(), "2.7.0");
  EXPECT_EQ(torch->variant, "cu128");
  EXPECT_EQ(torch->pinned_by, "vllm 0.9.0");
  EXPECT_EQ(r.cuda->str(), "12.8.0");
  EXPECT_EQ(r.cudnn->str(), "9.1.0");  // torch's bundled cuDNN
  EXPECT_EQ(r.python->str(), "3.11");
  const bool said = std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
    return n.find("torch 2.7.0+cu128 is the torch vllm 0.9.0 pins (torch==2.7.0") != std::string::npos;
  });
  EXPECT_TRUE(said);
}

TEST(ServingFramework, LatestSkipsAReleaseThatPinsAPackageWithoutAWheel) {
  const auto r = resolve_serving("frameworks: {vllm: latest}\ngpu: {models: [H100], driver: '570.26'}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  EXPECT_EQ(chosen(r, "vllm")->version.str(), "0.9.0");  // 0.10.0 is newer, and not installable
}

TEST(ServingFramework, AReleaseThatPinsAPackageWithoutAWheelIsRefusedWithTheReason) {
  const auto r = resolve_serving("frameworks: {vllm: '0.10'}\ngpu: {models: [H100], driver: '570.26'}\n");
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(rule_name(Rule::pin_without_wheel), "pin_without_wheel");
  EXPECT_TRUE(has_conflict(r, Rule::pin_without_wheel,
                           "vllm 0.10.0 pins flashinfer-python==0.2.9, of which the Python package index serves no wheel"))
      << gpuenv::testing::conflicts_text(r);
  const std::string text = gpuenv::testing::conflicts_text(r);
  EXPECT_NE(text.find("suggest: vllm 0.9.0+cu128 with torch 2.7.0+cu128"), std::string::npos) << text;
}

TEST(ServingFramework, ABlackwellGpuTheFrameworksKernelsLackIsRefusedThoughTorchCoversIt) {
  // torch 2.7.0+cu128 has sm_120; vllm 0.9.0's kernels stop at sm_100.
  const auto r = resolve_serving("frameworks: {vllm: '0.9'}\ngpu: {models: [RTX 5090], driver: '570.86.16'}\n");
  ASSERT_FALSE(r.ok);
  EXPECT_TRUE(has_conflict(r, Rule::arch_framework, "vllm 0.9.0+cu128 has machine code for sm_75, sm_80, sm_86, sm_89, sm_90, sm_100 and no PTX; "
                                                    "it cannot run on RTX 5090 (sm_120)"))
      << gpuenv::testing::conflicts_text(r);
  EXPECT_FALSE(has_conflict(r, Rule::arch_framework, "torch 2.7.0"));
}

TEST(ServingFramework, AGpuTheFrameworksKernelsCoverButItsTorchDoesNotIsRefused) {
  // sm_75: vllm 0.9.0's kernels have it, its torch 2.7.0+cu128 does not.
  const auto r = resolve_serving("frameworks: {vllm: '0.9'}\ngpu: {archs: [sm_75], driver: '570.26'}\n");
  ASSERT_FALSE(r.ok);
  EXPECT_TRUE(has_conflict(r, Rule::arch_framework, "torch 2.7.0+cu128 has machine code for sm_80, sm_86, sm_90, sm_100, sm_120"))
      << gpuenv::testing::conflicts_text(r);
  EXPECT_FALSE(has_conflict(r, Rule::arch_framework, "vllm 0.9.0"));
}

TEST(ServingFramework, ADriverTooOldForTheCudaOfThePinIsUnsatisfiable) {
  // CUDA 12 needs 525.60.13; an RTX 4090 is no data-center GPU, so forward compatibility does not apply.
  const auto r = resolve_serving("frameworks: {vllm: '0.9'}\ngpu: {models: [RTX 4090], driver: '515.65.01'}\n");
  ASSERT_FALSE(r.ok);
  EXPECT_TRUE(has_conflict(r, Rule::driver, "needs driver >= 525.60.13")) << gpuenv::testing::conflicts_text(r);
  const std::string text = gpuenv::testing::conflicts_text(r);
  EXPECT_NE(text.find("suggest: upgrade the driver to >= 525.60.13 for vllm 0.9.0+cu128 with torch 2.7.0+cu128"), std::string::npos) << text;
}

TEST(ServingFramework, ATorchInTheSpecThatDisagreesWithThePinIsExplained) {
  const auto r = resolve_serving("frameworks: {torch: '2.5', vllm: '0.9'}\ngpu: {models: [H100], driver: '570.26'}\n");
  ASSERT_FALSE(r.ok);
  ASSERT_FALSE(r.conflicts.empty());
  EXPECT_EQ(r.conflicts.front().rule, Rule::framework_pin);
  EXPECT_EQ(rule_name(Rule::framework_pin), "framework_pin");
  EXPECT_EQ(r.conflicts.front().message, "vllm '0.9' pins torch 2.7.0; the spec asks for torch '2.5'");
  const std::string text = gpuenv::testing::conflicts_text(r);
  EXPECT_NE(text.find("suggest: torch 2.7.0+cu128 with vllm 0.9.0+cu128"), std::string::npos) << text;
}

TEST(ServingFramework, ATorchInTheSpecThatAgreesIsTheSpecsOwn) {
  const auto r = resolve_serving("frameworks: {torch: '2.7', vllm: latest}\ngpu: {models: [H100], driver: '570.26'}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  ASSERT_EQ(r.frameworks.size(), 2u);
  EXPECT_EQ(r.frameworks[0].name, "torch");  // the spec's order: torch first
  EXPECT_TRUE(r.frameworks[0].pinned_by.empty());
  EXPECT_EQ(chosen(r, "vllm")->version.str(), "0.9.0");
}

TEST(ServingFramework, ATorchInTheSpecNarrowsTheFrameworksReleases) {
  // vllm latest with torch 2.5: only vllm 0.8.0 pins torch 2.5.1.
  const auto r = resolve_serving("frameworks: {torch: '2.5', vllm: latest}\ngpu: {models: [H100], driver: '570.26'}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  EXPECT_EQ(chosen(r, "vllm")->version.str(), "0.8.0");
  EXPECT_EQ(chosen(r, "torch")->version.str(), "2.5.1");
  EXPECT_EQ(r.cuda->truncated(2).str(), "12.1");
}

TEST(ServingFramework, TwoFrameworksThatPinDifferentTorchesConflict) {
  const auto r = resolve_serving("frameworks: {vllm: '0.8', sglang: '0.4.1'}\ngpu: {models: [H100], driver: '570.26'}\n");
  ASSERT_FALSE(r.ok);
  ASSERT_FALSE(r.conflicts.empty());
  EXPECT_EQ(r.conflicts.front().rule, Rule::framework_pin);
  EXPECT_EQ(r.conflicts.front().message, "vllm '0.8' pins torch 2.5.1; sglang '0.4.1' pins torch 2.7.0; one image holds one torch");
}

TEST(ServingFramework, TheTorchBothPinIsShared) {
  const auto r = resolve_serving("frameworks: {vllm: '0.9', sglang: latest}\ngpu: {models: [H100], driver: '570.26'}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  EXPECT_EQ(r.frameworks.size(), 3u);
  EXPECT_EQ(chosen(r, "sglang")->version.str(), "0.4.1");
  EXPECT_EQ(chosen(r, "torch")->pinned_by, "vllm 0.9.0");
}

TEST(ServingFramework, ThePythonRangeOfTheFrameworkAppliesBesideItsTorchs) {
  // ubuntu:24.04 has Python 3.12: torch 2.5.1 takes it, sglang 0.4.0 (3.10 to 3.11) does not.
  const auto r = resolve_serving("base: ubuntu:24.04\nframeworks: {sglang: '0.4.0'}\ngpu: {models: [H100], driver: '570.26'}\n");
  ASSERT_FALSE(r.ok);
  EXPECT_TRUE(has_conflict(r, Rule::python_framework, "sglang 0.4.0 supports Python 3.10 to 3.11")) << gpuenv::testing::conflicts_text(r);
}

TEST(ServingFramework, APatchReleaseTheCatalogLacksTakesNoNeighboursFacts) {
  // Each release pins its own torch, so the series rule does not apply (it does for torch, tensorflow and jax).
  const auto r = resolve_serving("frameworks: {vllm: '0.9.1'}\ngpu: {models: [H100], driver: '570.26'}\n");
  ASSERT_FALSE(r.ok);
  EXPECT_TRUE(has_conflict(r, Rule::framework_version, "no vllm release in the catalog matches '0.9.1' (known: 0.8.0 to 0.10.0)"))
      << gpuenv::testing::conflicts_text(r);
}

TEST(ServingFramework, MatrixListsThePinnedTorchWithItsCudnnAndPython) {
  auto rows = matrix(serving(), "vllm");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 3u);
  const MatrixRow& r = (*rows)[1];
  EXPECT_EQ(r.framework, "vllm");
  EXPECT_EQ(r.version.str(), "0.9.0");
  ASSERT_TRUE(r.torch.has_value());
  EXPECT_EQ(r.torch->str(), "2.7.0");
  ASSERT_TRUE(r.cudnn.has_value());
  EXPECT_EQ(r.cudnn->str(), "9.1.0");
  EXPECT_EQ(r.python_min.str(), "3.9");
  EXPECT_EQ(r.python_max.str(), "3.12");
  EXPECT_TRUE(r.pins_without_wheel.empty());
  EXPECT_EQ((*rows)[2].pins_without_wheel, std::vector<std::string>{"flashinfer-python==0.2.9"});
  auto sglang = matrix(serving(), "sglang");
  ASSERT_TRUE(sglang.ok());
  EXPECT_EQ(sglang->size(), 2u);
}

TEST(ServingFramework, ThePinsAreCheckedAgainstTheCatalogsTorch) {
  Catalog c = serving();
  EXPECT_EQ(check_catalog(c), std::vector<std::string>{});
  FrameworkRelease& r = c.frameworks["vllm"][0];
  r.torch = *Version::parse("2.6.0");
  r.pins.push_back("flashinfer");
  r.pins_without_wheel.push_back("xformers==0.0.30");
  c.frameworks["sglang"][0].variants[0].cuda = *Version::parse("12.4");
  const auto problems = check_catalog(c);
  const auto has = [&](const std::string& text) {
    return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) { return p.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(has("vllm 0.8.0: it pins torch 2.6.0, which torch.yaml does not record"));
  EXPECT_TRUE(has("vllm 0.8.0: pin 'flashinfer' is not name==version"));
  EXPECT_TRUE(has("vllm 0.8.0: pins_without_wheel names 'xformers==0.0.30', which pins does not list"));
  EXPECT_TRUE(has("sglang 0.4.0 cu121: CUDA 12.4, torch 2.5.1+cu121 has 12.1"));
}

TEST(ServingFramework, ThePinsSurviveTheCompiledEncoding) {
  const Catalog& c = serving();
  auto round = decode_catalog(encode_catalog(c));
  ASSERT_TRUE(round.ok()) << round.error().to_string();
  EXPECT_TRUE(*round == c);
  EXPECT_EQ(round->frameworks.at("vllm")[2].pins_without_wheel, std::vector<std::string>{"flashinfer-python==0.2.9"});
  EXPECT_EQ(round->frameworks.at("sglang")[1].torch->str(), "2.7.0");
}

}  // namespace
