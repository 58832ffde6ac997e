// The catalog a workflow loads: the one compiled into gpuenv equals its YAML sources, with the same digest.
#include "app/catalog.hpp"

#include <gtest/gtest.h>

#include "fakes/catalog_fixture.hpp"

namespace {

TEST(CatalogCodec, CompiledCatalogEqualsTheYamlSources) {
  auto from_yaml = gpuenv::app::load_catalog_from(GPUENV_SOURCE_DIR "/recipes/catalog");
  ASSERT_TRUE(from_yaml.ok()) << from_yaml.error().to_string();
  EXPECT_TRUE(from_yaml->catalog == gpuenv::testing::catalog());
  auto embedded = gpuenv::app::load_catalog_from("");
  ASSERT_TRUE(embedded.ok()) << embedded.error().to_string();
  EXPECT_TRUE(embedded->catalog == gpuenv::testing::catalog());
  EXPECT_EQ(embedded->origin, "embedded");
  EXPECT_EQ(from_yaml->sha256, embedded->sha256);  // locks record the same digest either way
}

TEST(CatalogCodec, ADirectoryWithoutYamlIsAUsageError) {
  auto empty = gpuenv::app::load_catalog_from(GPUENV_SOURCE_DIR "/tests/data/golden");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().id, "catalog.empty");
  EXPECT_EQ(empty.error().kind, gpuenv::ErrorKind::usage);
}

}  // namespace
