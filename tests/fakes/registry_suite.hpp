#pragma once
// A test suite that shares one real docker-registry on 127.0.0.1 (fakes/docker_registry.hpp), started once for
// the suite and stopped after it; each test skips, saying why, where the registry could not start.
#include <gtest/gtest.h>

#include "fakes/docker_registry.hpp"

namespace gpuenv::testing {

template <DockerRegistry::Setup k_setup>
class RegistrySuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { s_registry = new DockerRegistry(k_setup); }
  static void TearDownTestSuite() {
    delete s_registry;
    s_registry = nullptr;
  }
  /// A fixture's own SetUp calls this first and returns when IsSkipped().
  void SetUp() override {
    if (!s_registry->skip_reason().empty()) GTEST_SKIP() << s_registry->skip_reason();
  }

  static inline DockerRegistry* s_registry = nullptr;
};

}  // namespace gpuenv::testing
