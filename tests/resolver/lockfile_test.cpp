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
  return render_lock(spec, *r, LockInputs{"spec-digest", "catalog-digest", "gpuenv test"});
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

}  // namespace
