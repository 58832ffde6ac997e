// The progress line of fetches.
#include "cli/progress.hpp"

#include <gtest/gtest.h>

namespace {

TEST(ProgressLine, FormatsFilesBytesRateAndEta) {
  gpuenv::FetchProgress p{3, 10, 50u << 20, 150u << 20};
  EXPECT_EQ(gpuenv::cli::ProgressLine::format(p, 2.0), "  3/10 files  50.0/150.0 MiB  25.0 MiB/s  ETA 0m04s");
  gpuenv::FetchProgress unknown{1, 2, 1u << 20, 0};
  EXPECT_EQ(gpuenv::cli::ProgressLine::format(unknown, 1.0), "  1/2 files  1.0 MiB  1.0 MiB/s");
}

}  // namespace
