// Rule 9 of docs/resolver.md on the synthetic tests/data/arm64_catalog: with linux/arm64 among the image's platforms,
// a framework release whose Linux aarch64 wheels on the Python package index are CPU-only is refused; its aarch64
// build's recorded architectures are checked; what the catalog does not record is said in the notes, not refused.
#include <gtest/gtest.h>

#include <algorithm>

#include "fakes/catalog_fixture.hpp"
#include "resolver/catalog_codec.hpp"
#include "resolver/solver.hpp"

namespace {

using namespace gpuenv::resolver;

const Catalog& arm() { return gpuenv::testing::arm64_catalog(); }

/// Resolves YAML on the arm64 catalog as if on a linux/amd64 machine; DEFAULT_ONLY: no variant index is configured.
Resolution resolve_on_arm64_catalog(const std::string& yaml, bool default_only = true) {
  const Spec spec = gpuenv::testing::spec_of(yaml);
  ResolveRequest req;
  req.spec = &spec;
  auto targets = gpu_targets(arm(), spec.gpu.models, spec.gpu.archs, "t");
  EXPECT_TRUE(targets.ok());
  if (targets) req.gpus = *targets;
  req.driver = spec.gpu.driver;
  req.default_variants_only = default_only;
  req.host_platform = Platform::amd64();
  auto r = resolve(arm(), req);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? std::move(*r) : Resolution{};
}

std::string all_notes(const Resolution& r) {
  std::string out;
  for (const auto& n : r.notes) out += n + "\n";
  return out;
}

bool has_rule(const Resolution& r, Rule rule) {
  return std::any_of(r.conflicts.begin(), r.conflicts.end(), [&](const Violation& v) { return v.rule == rule; });
}

TEST(PlatformFramework, Gh200RefusesAReleaseWhoseAarch64WheelsAreCpuOnly) {
  const auto r = resolve_on_arm64_catalog("frameworks: {torch: '2.10'}\ngpu: {models: [GH200]}\n");
  EXPECT_EQ(r.platforms, std::vector<Platform>{Platform::arm64()});
  ASSERT_FALSE(r.ok);
  ASSERT_FALSE(r.conflicts.empty());
  EXPECT_EQ(r.conflicts.front().rule, Rule::platform_framework);
  EXPECT_EQ(rule_name(Rule::platform_framework), "platform_framework");
  EXPECT_EQ(r.conflicts.front().message,
            "torch 2.10.0's Linux aarch64 wheels on the Python package index are CPU-only, so the linux/arm64 image would have no CUDA; "
            "the first later torch release with CUDA on aarch64 there is 2.11.0");
  // The nearest working answer breaks only the spec's version constraint.
  const std::string text = gpuenv::testing::conflicts_text(r);
  EXPECT_NE(text.find("suggest: torch 2.11.0+cu130"), std::string::npos) << text;
}

TEST(PlatformFramework, AConstraintOfSeveralReleasesPicksOneThatWorksOnEveryPlatform) {
  // 2.12.0 is the newest, but CPU-only on aarch64: the Grace GPU gets 2.11.0, the H100 (this machine's platform) 2.12.0.
  const auto grace = resolve_on_arm64_catalog("frameworks: {torch: '2.*'}\ngpu: {models: [GH200]}\n");
  ASSERT_TRUE(grace.ok) << gpuenv::testing::conflicts_text(grace);
  EXPECT_EQ(grace.frameworks.at(0).version.str(), "2.11.0");
  EXPECT_EQ(grace.frameworks.at(0).variant, "cu130");
  const auto hopper = resolve_on_arm64_catalog("frameworks: {torch: '2.*'}\ngpu: {models: [H100]}\n");
  ASSERT_TRUE(hopper.ok) << gpuenv::testing::conflicts_text(hopper);
  EXPECT_EQ(hopper.platforms, std::vector<Platform>{Platform::amd64()});
  EXPECT_EQ(hopper.frameworks.at(0).version.str(), "2.12.0");
  // A fleet of both builds both platforms, and so needs a release that works on each.
  const auto both = resolve_on_arm64_catalog("frameworks: {torch: '2.*'}\ngpu: {models: [GH200, H100]}\n");
  EXPECT_EQ(both.platforms, (std::vector<Platform>{Platform::amd64(), Platform::arm64()}));
  ASSERT_TRUE(both.ok) << gpuenv::testing::conflicts_text(both);
  EXPECT_EQ(both.frameworks.at(0).version.str(), "2.11.0");
  // The newest release says why it is not the answer when it is the only one asked for.
  const auto newest = resolve_on_arm64_catalog("frameworks: {torch: '2.12'}\ngpu: {models: [GH200]}\n");
  ASSERT_FALSE(newest.ok);
  EXPECT_EQ(newest.conflicts.front().message,
            "torch 2.12.0's Linux aarch64 wheels on the Python package index are CPU-only, so the linux/arm64 image would have no CUDA; "
            "no later torch release in the catalog has CUDA on aarch64 there");
}

TEST(PlatformFramework, AnAmd64FleetIsUnaffected) {
  const auto r = resolve_on_arm64_catalog("frameworks: {torch: '2.10'}\ngpu: {models: [H100]}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  EXPECT_EQ(r.platforms, std::vector<Platform>{Platform::amd64()});
  EXPECT_EQ(r.frameworks.at(0).version.str(), "2.10.0");
  EXPECT_EQ(all_notes(r).find("aarch64"), std::string::npos) << all_notes(r);
}

TEST(PlatformFramework, TheSpecsOwnPlatformsWinOverTheGpusHost) {
  // image.platforms [linux/amd64] with a Grace GPU is the user's choice: no linux/arm64 image, so no aarch64 rule.
  const auto r = resolve_on_arm64_catalog("frameworks: {torch: '2.10'}\ngpu: {models: [GH200]}\nimage: {platforms: [linux/amd64]}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  EXPECT_EQ(r.platforms, std::vector<Platform>{Platform::amd64()});
  EXPECT_EQ(r.platform_origin, "spec");
  EXPECT_FALSE(has_rule(r, Rule::platform_framework));
  // And linux/arm64 named by the spec applies the rule without a Grace GPU.
  const auto named = resolve_on_arm64_catalog("frameworks: {torch: '2.10'}\ngpu: {models: [H100]}\nimage: {platforms: [linux/arm64]}\n");
  ASSERT_FALSE(named.ok);
  EXPECT_TRUE(has_rule(named, Rule::platform_framework)) << gpuenv::testing::conflicts_text(named);
}

TEST(PlatformFramework, ASpecWithoutCudaIsNotRefusedOnArm64) {
  // No framework, cuda or cudnn: a CPU-only image on purpose, which the aarch64 wheels serve.
  const auto r = resolve_on_arm64_catalog("gpu: {models: [GH200]}\n");
  ASSERT_TRUE(r.ok) << gpuenv::testing::conflicts_text(r);
  EXPECT_EQ(r.platforms, std::vector<Platform>{Platform::arm64()});
  EXPECT_FALSE(r.cuda.has_value());
  EXPECT_TRUE(r.frameworks.empty());
}

TEST(PlatformFramework, WhatTheCatalogDoesNotRecordIsNotedNotRefused) {
  // 2.9.0 records nothing about its aarch64 wheels.
  const auto unknown = resolve_on_arm64_catalog("frameworks: {torch: '2.9'}\ngpu: {models: [GH200]}\n");
  ASSERT_TRUE(unknown.ok) << gpuenv::testing::conflicts_text(unknown);
  EXPECT_NE(all_notes(unknown).find("torch 2.9.0: the catalog does not record whether its Linux aarch64 wheels on the Python package index "
                                    "carry CUDA; the linux/arm64 image was not checked for it"),
            std::string::npos)
      << all_notes(unknown);
  // A patch release the catalog lacks takes its series' facts, but not which wheels the index serves for aarch64.
  const auto patch = resolve_on_arm64_catalog("frameworks: {torch: '2.11.1'}\ngpu: {models: [GH200]}\n");
  ASSERT_TRUE(patch.ok) << gpuenv::testing::conflicts_text(patch);
  EXPECT_NE(all_notes(patch).find("torch 2.11.1: the catalog does not record whether its Linux aarch64 wheels"), std::string::npos) << all_notes(patch);
  // With a variant index, torch's other variants come from it, which the catalog does not describe for aarch64.
  const auto indexed = resolve_on_arm64_catalog("frameworks: {torch: '2.10'}\ngpu: {models: [GH200]}\n", /*default_only=*/false);
  ASSERT_TRUE(indexed.ok) << gpuenv::testing::conflicts_text(indexed);
  EXPECT_EQ(indexed.frameworks.at(0).variant, "cu126");
  EXPECT_NE(all_notes(indexed).find("torch 2.10.0+cu126 comes from torch's own wheel index, whose Linux aarch64 wheels the catalog does not record"),
            std::string::npos)
      << all_notes(indexed);
}

TEST(PlatformFramework, TheAarch64BuildsArchitecturesAreChecked) {
  // 2.11.0+cu130's aarch64 build has no sm_75 (its x86_64 build has): a T4 in a linux/arm64 image cannot run it.
  const auto r = resolve_on_arm64_catalog("frameworks: {torch: '2.11'}\ngpu: {models: [T4]}\nimage: {platforms: [linux/arm64]}\n");
  ASSERT_FALSE(r.ok);
  EXPECT_NE(gpuenv::testing::conflicts_text(r).find("arch_framework: torch 2.11.0+cu130's Linux aarch64 build has machine code for sm_80, sm_90, "
                                                    "sm_100, sm_110, sm_120 and no PTX; it cannot run on T4 (sm_75) in the linux/arm64 image"),
            std::string::npos)
      << gpuenv::testing::conflicts_text(r);
  const auto amd = resolve_on_arm64_catalog("frameworks: {torch: '2.11'}\ngpu: {models: [T4]}\n");
  ASSERT_TRUE(amd.ok) << gpuenv::testing::conflicts_text(amd);
}

TEST(PlatformFramework, TheAarch64FactsAreLoadedCheckedAndEncoded) {
  const auto& releases = arm().frameworks.at("torch");
  ASSERT_EQ(releases.size(), 4u);
  EXPECT_FALSE(releases[0].aarch64_cuda.has_value());  // not recorded
  ASSERT_TRUE(releases[1].aarch64_cuda.has_value());
  EXPECT_TRUE(releases[1].aarch64_cuda->empty());  // recorded: CPU-only
  EXPECT_EQ(releases[2].cuda_on_aarch64("cu130"), true);
  EXPECT_EQ(releases[2].cuda_on_aarch64("cu126"), false);
  EXPECT_EQ(releases[0].cuda_on_aarch64("cu128"), std::nullopt);
  EXPECT_EQ(releases[2].variant("cu130")->aarch64_sm, (std::vector<int>{80, 90, 100, 110, 120}));
  EXPECT_TRUE(check_catalog(arm()).empty());
  auto back = decode_catalog(encode_catalog(arm()));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_TRUE(*back == arm());

  Catalog broken = arm();
  auto& b = broken.frameworks.at("torch");
  b[1].aarch64_cuda = std::vector<std::string>{"cu999", "cu128", "cu128"};
  b[3].variants[0].aarch64_sm = {90};
  std::string problems;
  for (const auto& p : check_catalog(broken)) problems += p + "\n";
  EXPECT_NE(problems.find("torch 2.10.0: aarch64_cuda names 'cu999', which is not one of its variants"), std::string::npos) << problems;
  EXPECT_NE(problems.find("torch 2.10.0: aarch64_cuda names 'cu128' twice"), std::string::npos) << problems;
  EXPECT_NE(problems.find("torch 2.12.0 cu130: aarch64_sm/aarch64_ptx recorded, but aarch64_cuda does not list the variant"), std::string::npos) << problems;
}

}  // namespace
