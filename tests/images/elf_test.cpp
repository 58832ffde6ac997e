// The ELF reader on real files of this machine, on hand-made damage, and on random corruption.
#include "images/elf/elf.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>

namespace {

using namespace gpuenv;
using namespace gpuenv::images;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A small real shared object: the host's libz (part of the build's dependencies through libcurl).
std::string libz_path() {
  for (const char* p : {"/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib64/libz.so.1"})
    if (::access(p, R_OK) == 0) return p;
  return "";
}

TEST(Elf, ReadsSonameAndNeededOfARealLibrary) {
  const std::string path = libz_path();
  if (path.empty()) GTEST_SKIP() << "no libz.so.1 on this machine";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto elf = parse_elf_fd(fd, path);
  ::close(fd);
  ASSERT_TRUE(elf.ok()) << elf.error().to_string();
  EXPECT_EQ(elf->bits, 64);
  EXPECT_TRUE(elf->little_endian);
  EXPECT_EQ(elf->type, 3);
  EXPECT_EQ(elf->machine, 62);
  EXPECT_EQ(elf->soname, "libz.so.1");
  EXPECT_NE(std::find(elf->needed.begin(), elf->needed.end(), "libc.so.6"), elf->needed.end());
  EXPECT_EQ(ld_cache_flags(*elf), 0x0303u);
}

TEST(Elf, ReadsTheInterpreterOfAnExecutable) {
  auto elf = parse_elf(slurp("/bin/sh"), "/bin/sh");
  ASSERT_TRUE(elf.ok()) << elf.error().to_string();
  EXPECT_TRUE(elf->has_dynamic);
  EXPECT_NE(elf->interpreter.find("ld-linux"), std::string::npos) << elf->interpreter;
  EXPECT_NE(std::find(elf->needed.begin(), elf->needed.end(), "libc.so.6"), elf->needed.end());
  EXPECT_TRUE(elf->soname.empty());
}

TEST(Elf, ATextFileIsNotElf) {
  auto elf = parse_elf(std::string_view("/* GNU ld script */\nGROUP ( libc.so.6 )\n"), "libc.so");
  ASSERT_FALSE(elf.ok());
  EXPECT_EQ(elf.error().id, "elf.not_elf");
  EXPECT_FALSE(parse_elf(std::string_view(""), "empty").ok());
}

TEST(Elf, TruncatedFilesAreMalformedNotCrashes) {
  const std::string bytes = slurp("/bin/sh");
  ASSERT_GT(bytes.size(), 4096u);
  for (std::size_t n : {std::size_t{5}, std::size_t{20}, std::size_t{63}, std::size_t{64}, std::size_t{200}, std::size_t{1000}, bytes.size() / 2}) {
    auto elf = parse_elf(std::string_view(bytes).substr(0, n), "cut");
    ASSERT_FALSE(elf.ok()) << "cut at " << n;
    EXPECT_EQ(elf.error().id, "elf.malformed") << "cut at " << n << ": " << elf.error().to_string();
  }
}

TEST(Elf, RandomDamageNeverCrashesOrReadsOutOfBounds) {
  const std::string path = libz_path();
  if (path.empty()) GTEST_SKIP() << "no libz.so.1 on this machine";
  const std::string original = slurp(path);
  std::mt19937 rng(7);
  int refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < flips; ++i) {
      // Aim at the headers and the dynamic segment, where the offsets live.
      const std::size_t at = rng() % 2 == 0 ? rng() % 512 : rng() % bytes.size();
      bytes[at] = static_cast<char>(rng());
    }
    auto elf = parse_elf(bytes, "damaged");
    if (!elf.ok()) ++refused;
  }
  EXPECT_GT(refused, 0);
}

TEST(Elf, CacheFlagsFollowGlibcForI386) {
  ElfInfo loader{32, true, 3, 3, 0, true, "", "ld-linux.so.2", {}, "", ""};
  EXPECT_EQ(ld_cache_flags(loader), 0x0001u);
  ElfInfo lib{32, true, 3, 3, 0, true, "", "libfoo.so.1", {"libc.so.6"}, "", ""};
  EXPECT_EQ(ld_cache_flags(lib), 0x0003u);
  ElfInfo arm64{64, true, 3, 183, 0, true, "", "libfoo.so.1", {}, "", ""};
  EXPECT_EQ(ld_cache_flags(arm64), 0x0a03u);
  ElfInfo unknown{64, true, 3, 9999, 0, true, "", "x", {}, "", ""};
  EXPECT_EQ(ld_cache_flags(unknown), 0u);
}

}  // namespace
