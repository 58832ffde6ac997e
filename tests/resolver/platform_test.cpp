// The platform value (resolver/platform.hpp), image.platforms in a spec, the default platforms, and platforms in a
// lock (written, read back, old locks read as linux/amd64).
#include "resolver/platform.hpp"

#include <gtest/gtest.h>

#include "fakes/catalog_fixture.hpp"
#include "resolver/lockfile.hpp"

namespace {

using namespace gpuenv::resolver;

TEST(Platform, EachSpellingReadsToOneValueWithEveryNameItHas) {
  for (const char* text : {"linux/arm64", "linux/arm64/v8", "arm64", "aarch64"}) {
    auto p = parse_platform(text);
    ASSERT_TRUE(p.ok()) << text;
    EXPECT_EQ(*p, Platform::arm64()) << text;
  }
  const Platform arm = Platform::arm64();
  EXPECT_EQ(arm.str(), "linux/arm64");
  EXPECT_EQ(arm.oci_variant(), "v8");
  EXPECT_EQ(arm.triplet(), "aarch64-linux-gnu");
  EXPECT_EQ(arm.machine(), "aarch64");
  EXPECT_EQ(arm.facts().elf_machine, 183);
  EXPECT_EQ(arm.facts().gpt_root_type, "b921b045-1df0-41c3-af44-4c6f280d3fae");
  const Platform amd = *parse_platform("linux/amd64");
  EXPECT_EQ(amd, Platform());
  EXPECT_EQ(amd.debian_arch(), "amd64");
  EXPECT_EQ(amd.machine(), "x86_64");
  EXPECT_EQ(amd.facts().gpt_root_type, "4f68bce3-e8cd-4db1-96e7-fbcaf984b709");
  EXPECT_LT(amd, arm);
}

TEST(Platform, OnesGpuenvDoesNotBuildAreRefusedNamingTheOnesItDoes) {
  for (const char* text : {"linux/arm/v7", "windows/amd64", "linux/riscv64", "linux/arm64/v9", "", "linux/amd64/v3", "linux/"}) {
    auto p = parse_platform(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.error().id, "spec.bad_platform");
    EXPECT_NE(p.error().hint.find("linux/amd64, linux/arm64"), std::string::npos) << p.error().hint;
  }
  EXPECT_NE(parse_platform("linux/amd46").error().hint.find("did you mean linux/amd64"), std::string::npos);
  EXPECT_FALSE(platform_of("linux", "arm", "v7"));
  EXPECT_EQ(platform_of("linux", "arm64", ""), Platform::arm64());
  EXPECT_EQ(platform_of_debian_arch("arm64"), Platform::arm64());
  EXPECT_FALSE(platform_of_debian_arch("i386"));
}

TEST(SpecPlatforms, AreReadInIndexOrderEachOnce) {
  auto s = parse_spec("name: x\nimage: {platforms: [linux/arm64, linux/amd64]}\n", "s.yaml");
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(s->platforms, (std::vector<Platform>{Platform::amd64(), Platform::arm64()}));
  auto one = parse_spec("name: x\nimage: {platforms: linux/arm64}\n", "s.yaml");
  ASSERT_TRUE(one.ok()) << one.error().to_string();
  EXPECT_EQ(one->platforms, std::vector<Platform>{Platform::arm64()});
}

TEST(SpecPlatforms, BadListsAreRefusedWithWhereAndWhatNext) {
  struct Case {
    const char* yaml;
    const char* id;
  } cases[] = {
      {"name: x\nimage: {platforms: [linux/arm64, linux/arm64]}\n", "spec.duplicate"},
      {"name: x\nimage: {platforms: [linux/s390x]}\n", "spec.bad_platform"},
      {"name: x\nimage: {platforms: []}\n", "spec.bad_value"},
      {"name: x\nimage: {format: qcow2, platforms: [linux/amd64, linux/arm64]}\n", "spec.contradictory"},
      {"name: x\nimage: {format: docker-archive, platforms: [linux/amd64, linux/arm64]}\n", "spec.contradictory"},
  };
  for (const auto& c : cases) {
    auto s = parse_spec(c.yaml, "s.yaml");
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_EQ(s.error().id, c.id) << c.yaml << s.error().to_string();
    EXPECT_NE(s.error().where.find("s.yaml:2:"), std::string::npos) << s.error().where;
    EXPECT_FALSE(s.error().hint.empty()) << c.yaml;
  }
}

TEST(ImagePlatforms, GraceGpusGetArm64OthersTheHostsAndTheSpecWins) {
  GpuModel grace;
  grace.name = "GH200";
  grace.host_arch = "arm64";
  GpuModel hopper;
  hopper.name = "H100";
  Spec spec;
  std::string origin;
  EXPECT_EQ(image_platforms(spec, {{"GH200", 90, &grace}}, Platform::amd64(), origin), std::vector<Platform>{Platform::arm64()});
  EXPECT_EQ(origin, "gpu");
  EXPECT_EQ(image_platforms(spec, {{"GH200", 90, &grace}, {"H100", 90, &hopper}}, Platform::amd64(), origin),
            (std::vector<Platform>{Platform::amd64(), Platform::arm64()}));
  EXPECT_EQ(image_platforms(spec, {{"H100", 90, &hopper}}, Platform::arm64(), origin), std::vector<Platform>{Platform::arm64()});
  EXPECT_EQ(origin, "host");
  EXPECT_EQ(image_platforms(spec, {}, Platform::amd64(), origin), std::vector<Platform>{Platform::amd64()});
  spec.platforms = {Platform::amd64()};
  EXPECT_EQ(image_platforms(spec, {{"GH200", 90, &grace}}, Platform::amd64(), origin), std::vector<Platform>{Platform::amd64()});
  EXPECT_EQ(origin, "spec");
}

LockedPackage package(const std::string& name, const std::string& arch, Platform platform) {
  LockedPackage p{name, "1.0-1", PackageKind::deb, arch, "http://deb.example/" + name + "_" + arch + ".deb", *gpuenv::Digest::from_hex(std::string(64, 'a')), "main", 10, platform};
  return p;
}

/// The lock of a spec named NAME resolved for PLATFORMS (empty: none said) with PACKAGES.
Lock lock_for(const std::string& name, const std::vector<Platform>& platforms, const std::vector<LockedPackage>& packages) {
  Spec spec;
  spec.name = name;
  Resolution r;
  r.ok = true;
  r.base = "debian:12";
  r.platforms = platforms;
  return lock_of(spec, r, LockInputs{"s", "c", "gpuenv test"}, packages);
}

TEST(LockPlatforms, AMultiPlatformLockReadsBackPackageByPackage) {
  const Lock lock = lock_for("two", {Platform::amd64(), Platform::arm64()},
                             {package("libc6", "amd64", Platform::amd64()), package("libc6", "arm64", Platform::arm64()), package("tzdata", "all", Platform::arm64())});
  const std::string text = render_lock(lock);
  EXPECT_NE(text.find("platforms: [\"linux/amd64\", \"linux/arm64\"]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("platform: \"linux/arm64\""), std::string::npos);
  auto back = parse_lock(text, "gpuenv.lock");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, lock);
  const Lock arm = lock_for_platform(*back, Platform::arm64());
  EXPECT_EQ(arm.platforms, std::vector<Platform>{Platform::arm64()});
  ASSERT_EQ(arm.packages.size(), 2u);
  EXPECT_EQ(arm.packages[0].architecture, "arm64");
  // One platform other than amd64: the key is written, packages carry none.
  const Lock single = lock_for_platform(lock, Platform::arm64());
  const std::string single_text = render_lock(single);
  EXPECT_NE(single_text.find("platforms: [\"linux/arm64\"]"), std::string::npos);
  EXPECT_EQ(single_text.find("platform: "), std::string::npos);
  EXPECT_EQ(*parse_lock(single_text, "l"), single);
}

TEST(LockPlatforms, ALockWithoutTheKeyIsLinuxAmd64sAndWritesNone) {
  const Lock lock = lock_for("old", {}, {package("libc6", "amd64", Platform::amd64())});
  const std::string text = render_lock(lock);
  EXPECT_EQ(text.find("platform"), std::string::npos) << text;
  auto back = parse_lock(text, "gpuenv.lock");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->platforms, std::vector<Platform>{Platform::amd64()});
  EXPECT_EQ(back->packages.at(0).platform, Platform::amd64());
}

TEST(LockPlatforms, DamagedPlatformsAreRefused) {
  const std::string text = render_lock(lock_for("two", {Platform::amd64(), Platform::arm64()}, {package("libc6", "arm64", Platform::arm64())}));
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  for (const std::string& bad : {edit("platform: \"linux/arm64\"", "platform: \"linux/s390x\""),
                                 edit("[\"linux/amd64\", \"linux/arm64\"]", "[\"linux/arm64\", \"linux/amd64\"]"),
                                 edit("[\"linux/amd64\", \"linux/arm64\"]", "[\"linux/amd64\"]"),
                                 edit(",\n     platform: \"linux/arm64\"", ""), edit("[\"linux/amd64\", \"linux/arm64\"]", "[]")}) {
    auto back = parse_lock(bad, "gpuenv.lock");
    ASSERT_FALSE(back.ok()) << bad;
    EXPECT_TRUE(back.error().id == "lock.bad_value" || back.error().id == "lock.missing") << back.error().to_string();
  }
}

}  // namespace
