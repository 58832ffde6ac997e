#include "packages/wheels/wheel_tags.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

using gpuenv::packages::is_sdist_filename;
using gpuenv::packages::linux_platform_tags;
using gpuenv::packages::parse_wheel_filename;
using gpuenv::packages::supported_tags;
using gpuenv::packages::tag_rank;
using gpuenv::packages::TargetPlatform;
using gpuenv::packages::WheelName;

namespace {

std::vector<std::string> lines(const std::string& name) {
  std::ifstream in(std::string(GPUENV_SOURCE_DIR) + "/tests/data/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return out;
    start = tab + 1;
  }
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

TargetPlatform target(int minor, int glibc_minor, const char* arch = "x86_64") {
  TargetPlatform t;
  t.python_minor = minor;
  t.glibc_minor = glibc_minor;
  t.arch = arch;
  return t;
}

WheelName wheel(const char* filename) {
  auto parsed = parse_wheel_filename(filename);
  EXPECT_TRUE(parsed.ok()) << filename << ": " << (parsed.ok() ? "" : parsed.error().message);
  return parsed.ok() ? *parsed : WheelName{};
}

void expect_oracle(const TargetPlatform& t, const std::string& file) {
  const auto expected = lines(file);
  ASSERT_GT(expected.size(), 100U) << file;
  const auto got = supported_tags(t);
  ASSERT_EQ(got.size(), expected.size()) << file;
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expected[i]) << file << " line " << i + 1;
}

TEST(SupportedTags, MatchPackagingForCpython311OnGlibc236) {
  expect_oracle(target(11, 36), "wheel_tags_cp311_glibc2_36_x86_64.txt");
}

TEST(SupportedTags, MatchPackagingForCpython312OnGlibc228) {
  expect_oracle(target(12, 28), "wheel_tags_cp312_glibc2_28_x86_64.txt");
}

TEST(SupportedTags, MatchPackagingForCpython38OnGlibc217) {
  expect_oracle(target(8, 17), "wheel_tags_cp38_glibc2_17_x86_64.txt");
}

TEST(SupportedTags, UsePymallocAbiBeforePython38) {
  expect_oracle(target(7, 31), "wheel_tags_cp37_glibc2_31_x86_64.txt");
  EXPECT_EQ(supported_tags(target(7, 31)).front(), "cp37-cp37m-manylinux_2_31_x86_64");
}

TEST(SupportedTags, StopAtGlibc217OnAarch64) {
  expect_oracle(target(10, 35, "aarch64"), "wheel_tags_cp310_glibc2_35_aarch64.txt");
  const auto platforms = linux_platform_tags(target(10, 35, "aarch64"));
  EXPECT_EQ(platforms[platforms.size() - 3], "manylinux_2_17_aarch64");
  EXPECT_EQ(platforms[platforms.size() - 2], "manylinux2014_aarch64");
  EXPECT_EQ(platforms.back(), "linux_aarch64");
}

TEST(SupportedTags, PlaceLegacyManylinuxAliasesAfterTheirGlibc) {
  const auto platforms = linux_platform_tags(target(11, 17));
  const std::vector<std::string> tail(platforms.end() - 4, platforms.end());
  EXPECT_EQ(join(tail), "manylinux_2_6_x86_64,manylinux_2_5_x86_64,manylinux1_x86_64,linux_x86_64");
  EXPECT_EQ(platforms[0], "manylinux_2_17_x86_64");
  EXPECT_EQ(platforms[1], "manylinux2014_x86_64");
}

TEST(WheelFilename, MatchesPackagingOnRecordedNames) {
  const auto rows = lines("wheel_filenames.tsv");
  ASSERT_GT(rows.size(), 20U);
  for (const auto& line : rows) {
    const auto row = fields(line);
    ASSERT_EQ(row.size(), 6U) << line;
    auto parsed = parse_wheel_filename(row[0]);
    if (row[1] == "!") {
      EXPECT_FALSE(parsed.ok()) << row[0] << " should be rejected";
      continue;
    }
    ASSERT_TRUE(parsed.ok()) << row[0] << ": " << parsed.error().message;
    EXPECT_EQ(parsed->name, row[1]) << row[0];
    EXPECT_EQ(parsed->version.str(), row[2]) << row[0];
    EXPECT_EQ(parsed->has_build, row[3] != "-") << row[0];
    if (parsed->has_build) {
      EXPECT_EQ(parsed->build_number, row[3]) << row[0];
    }
    EXPECT_EQ(parsed->build_suffix, row[4]) << row[0];
    EXPECT_EQ(join(parsed->tags), row[5]) << row[0];
  }
}

TEST(WheelFilename, RefusesSourceDistributionsWithTheirOwnError) {
  for (const char* name : {"pkg-1.0.tar.gz", "pkg-1.0.zip", "Pkg-1.0.TAR.GZ", "pkg-1.0.tar.bz2"}) {
    EXPECT_TRUE(is_sdist_filename(name)) << name;
    auto parsed = parse_wheel_filename(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.error().id, "wheel.sdist") << name;
    EXPECT_NE(parsed.error().message.find("source distribution"), std::string::npos);
    EXPECT_FALSE(parsed.error().hint.empty());
  }
  EXPECT_FALSE(is_sdist_filename("pkg-1.0-py3-none-any.whl"));
  auto egg = parse_wheel_filename("pkg-1.0-py3.8.egg");
  ASSERT_FALSE(egg.ok());
  EXPECT_EQ(egg.error().id, "wheel.filename");
}

TEST(WheelFilename, ErrorsSayWhichPartIsWrong) {
  auto bad_version = parse_wheel_filename("pkg-one-py3-none-any.whl");
  ASSERT_FALSE(bad_version.ok());
  EXPECT_NE(bad_version.error().message.find("'one' is not a PEP 440 version"), std::string::npos);
  auto bad_build = parse_wheel_filename("pkg-1.0-x1-py3-none-any.whl");
  ASSERT_FALSE(bad_build.ok());
  EXPECT_NE(bad_build.error().message.find("build tag 'x1'"), std::string::npos);
}

TEST(WheelFilename, IsStricterThanPackagingAboutEmptyParts) {
  EXPECT_FALSE(parse_wheel_filename("-1.0-py3-none-any.whl").ok());
  EXPECT_FALSE(parse_wheel_filename("pkg-1.0-py3--any.whl").ok());
  EXPECT_FALSE(parse_wheel_filename("pkg-1.0-py3.-none-any.whl").ok());
}

TEST(TagRank, PrefersTheMostSpecificSupportedTag) {
  const auto supported = supported_tags(target(11, 36));
  const auto native = tag_rank(wheel("numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"),
                               supported);
  const auto abi3 = tag_rank(wheel("cryptography-42.0.5-cp39-abi3-manylinux_2_28_x86_64.whl"), supported);
  const auto pure = tag_rank(wheel("six-1.16.0-py2.py3-none-any.whl"), supported);
  ASSERT_TRUE(native && abi3 && pure);
  EXPECT_LT(*native, *abi3);
  EXPECT_LT(*abi3, *pure);
  EXPECT_EQ(supported[*pure], "py3-none-any");
  EXPECT_EQ(supported[*native], "cp311-cp311-manylinux_2_17_x86_64");
}

TEST(TagRank, RejectsWheelsForOtherInterpretersOrNewerGlibc) {
  const auto supported = supported_tags(target(11, 17));
  EXPECT_FALSE(tag_rank(wheel("numpy-1.26.4-cp312-cp312-manylinux_2_17_x86_64.whl"), supported));
  EXPECT_FALSE(tag_rank(wheel("cryptography-42.0.5-cp39-abi3-manylinux_2_28_x86_64.whl"), supported));
  EXPECT_FALSE(tag_rank(wheel("pkg-1.0-cp311-cp311-manylinux_2_17_aarch64.whl"), supported));
  EXPECT_FALSE(tag_rank(wheel("pkg-1.0-cp311-cp311-musllinux_1_1_x86_64.whl"), supported));
  EXPECT_FALSE(tag_rank(wheel("pkg-1.0-py2-none-any.whl"), supported));
  EXPECT_TRUE(tag_rank(wheel("pkg-1.0-cp311-cp311-manylinux2014_x86_64.whl"), supported));
}

}  // namespace
