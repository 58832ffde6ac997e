// Contract tests of the real file adapter (atomic writes, limited reads) against a temporary directory.
#include "cli/io.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;

class Io : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("gpuenv-io-" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
};

TEST_F(Io, AtomicWriteReplacesWholeFile) {
  const std::string p = (dir / "f").string();
  ASSERT_TRUE(gpuenv::cli::write_file_atomic(p, "one").ok());
  ASSERT_TRUE(gpuenv::cli::write_file_atomic(p, "two").ok());
  EXPECT_EQ(*gpuenv::cli::read_file_limited(p, 100), "two");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
}

TEST_F(Io, AtomicWriteFailureLeavesNothing) {
  if (::geteuid() == 0) {
    // root ignores directory permissions; use a missing directory instead
    auto st = gpuenv::cli::write_file_atomic((dir / "missing" / "f").string(), "x");
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.error().kind, gpuenv::ErrorKind::environment);
  } else {
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_FALSE(gpuenv::cli::write_file_atomic((dir / "f").string(), "x").ok());
    fs::permissions(dir, fs::perms::owner_all);
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 0);
}

TEST_F(Io, ReadRefusesLargeFilesWithoutReadingThem) {
  const std::string p = (dir / "big").string();
  { std::ofstream(p) << "x"; }
  fs::resize_file(p, 100u << 20);  // sparse 100 MB
  auto r = gpuenv::cli::read_file_limited(p, 1u << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "yaml.too_large");
}

TEST_F(Io, ReadRefusesDirectoriesAndMissingFiles) {
  EXPECT_EQ(gpuenv::cli::read_file_limited(dir.string(), 10).error().id, "io.not_a_file");
  EXPECT_EQ(gpuenv::cli::read_file_limited((dir / "nope").string(), 10).error().kind, gpuenv::ErrorKind::usage);
}

TEST(Sha256, MatchesKnownVector) {
  EXPECT_EQ(gpuenv::cli::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace

#include "cli/progress.hpp"

namespace {

TEST(ProgressLine, FormatsFilesBytesRateAndEta) {
  gpuenv::FetchProgress p{3, 10, 50u << 20, 150u << 20};
  EXPECT_EQ(gpuenv::cli::ProgressLine::format(p, 2.0), "  3/10 files  50.0/150.0 MiB  25.0 MiB/s  ETA 0m04s");
  gpuenv::FetchProgress unknown{1, 2, 1u << 20, 0};
  EXPECT_EQ(gpuenv::cli::ProgressLine::format(unknown, 1.0), "  1/2 files  1.0 MiB  1.0 MiB/s");
}

}  // namespace
