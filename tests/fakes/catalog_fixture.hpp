#pragma once
// The catalog's YAML sources (recipes/catalog, what gpuenv embeds compiled) and the synthetic mini catalog, each
// loaded once per test binary with the resolver alone, and helpers to build specs from text.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "resolver/catalog.hpp"
#include "resolver/solver.hpp"
#include "resolver/spec.hpp"

namespace gpuenv::testing {

/// Every *.yaml of DIR, in name order, loaded as one catalog; a failure fails the test.
inline resolver::Catalog load_or_fail(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".yaml") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  std::vector<std::pair<std::string, std::string>> owned;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    owned.emplace_back(p, text.str());
  }
  std::vector<resolver::CatalogFile> files;
  for (const auto& [p, t] : owned) files.push_back({p, t});
  auto c = resolver::load_catalog(files);
  if (!c) {
    ADD_FAILURE() << c.error().to_string();
    return resolver::Catalog{};
  }
  return std::move(*c);
}

/// The real catalog, from its YAML sources (tests/app checks that the compiled-in one equals it).
inline const resolver::Catalog& catalog() {
  static const resolver::Catalog loaded = load_or_fail(GPUENV_SOURCE_DIR "/recipes/catalog");
  return loaded;
}

/// The synthetic catalog of tests/data/mini_catalog (rules tested apart from the real data).
inline const resolver::Catalog& mini_catalog() {
  static const resolver::Catalog loaded = load_or_fail(GPUENV_SOURCE_DIR "/tests/data/mini_catalog");
  return loaded;
}

/// The synthetic catalog of tests/data/serving_catalog (frameworks that pin torch: vLLM, SGLang).
inline const resolver::Catalog& serving_catalog() {
  static const resolver::Catalog loaded = load_or_fail(GPUENV_SOURCE_DIR "/tests/data/serving_catalog");
  return loaded;
}

/// The synthetic catalog of tests/data/arm64_catalog (the linux/arm64 rules: a Grace GPU, torch releases whose
/// aarch64 wheels are CPU-only, CUDA builds, or not recorded).
inline const resolver::Catalog& arm64_catalog() {
  static const resolver::Catalog loaded = load_or_fail(GPUENV_SOURCE_DIR "/tests/data/arm64_catalog");
  return loaded;
}

inline resolver::Spec spec_of(const std::string& yaml) {
  auto s = resolver::parse_spec(yaml, "test.yaml");
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().to_string());
  return s.ok() ? std::move(*s) : resolver::Spec{};
}

/// Resolves `yaml` with GPUs and driver from the spec (as the CLI does without flags or host).
inline resolver::Resolution resolve_yaml(const std::string& yaml) {
  const resolver::Spec spec = spec_of(yaml);
  resolver::ResolveRequest req;
  req.spec = &spec;
  auto targets = resolver::gpu_targets(catalog(), spec.gpu.models, spec.gpu.archs, "test.yaml");
  EXPECT_TRUE(targets.ok()) << (targets.ok() ? "" : targets.error().to_string());
  if (targets) req.gpus = *targets;
  req.driver = spec.gpu.driver;
  auto r = resolver::resolve(catalog(), req);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? std::move(*r) : resolver::Resolution{};
}

inline std::string conflicts_text(const resolver::Resolution& r) {
  std::string s;
  for (const auto& c : r.conflicts) s += std::string(resolver::rule_name(c.rule)) + ": " + c.message + "\n";
  for (const auto& c : r.suggestions) s += "suggest: " + c + "\n";
  return s;
}

}  // namespace gpuenv::testing
