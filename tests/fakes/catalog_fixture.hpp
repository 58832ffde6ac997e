#pragma once
// The embedded catalog, loaded once per test binary, and helpers to build specs from text.
#include <gtest/gtest.h>

#include "cli/commands.hpp"
#include "resolver/catalog.hpp"
#include "resolver/solver.hpp"
#include "resolver/spec.hpp"

namespace gpuenv::testing {

inline cli::LoadedCatalog load_or_fail(const std::string& dir) {
  auto c = cli::load_catalog_from(dir);
  if (!c) {
    ADD_FAILURE() << c.error().to_string();
    return cli::LoadedCatalog{};
  }
  return std::move(*c);
}

/// The catalog compiled into gpuenv.
inline const resolver::Catalog& catalog() {
  static const cli::LoadedCatalog loaded = load_or_fail("");
  return loaded.catalog;
}

/// The synthetic catalog of tests/data/mini_catalog (rules tested apart from the real data).
inline const resolver::Catalog& mini_catalog() {
  static const cli::LoadedCatalog loaded = load_or_fail(GPUENV_SOURCE_DIR "/tests/data/mini_catalog");
  return loaded.catalog;
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
