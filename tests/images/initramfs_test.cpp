// The initramfs inits embedded in this build (images/disk/initramfs.hpp): each a static executable of its own
// architecture, the one of the architecture gpuenv was built for always present.
#include <gtest/gtest.h>

#include <sstream>

#include "images/disk/initramfs.hpp"
#include "images/elf/elf.hpp"

namespace {

using namespace gpuenv;
using namespace gpuenv::images;

/// The architectures images/CMakeLists.txt embedded an init for ("amd64 arm64", or one of them).
bool embedded(std::string_view arch) {
  std::istringstream words(GPUENV_INITRAMFS_INIT_ARCHES);
  for (std::string w; words >> w;)
    if (w == arch) return true;
  return false;
}

TEST(InitramfsInit, EachEmbeddedInitIsAStaticExecutableOfItsArchitecture) {
  const std::pair<const char*, std::uint16_t> arches[] = {{"amd64", 62}, {"arm64", 183}};  // e_machine: EM_X86_64, EM_AARCH64
  for (const auto& [arch, machine] : arches) {
    SCOPED_TRACE(arch);
    const std::string_view program = disk::initramfs_init_program_for(arch);
    if (!embedded(arch)) {
      EXPECT_TRUE(program.empty()) << "this build was configured without an " << arch << " init";
      continue;
    }
    auto elf = parse_elf(program, arch);
    ASSERT_TRUE(elf) << elf.error().message;
    EXPECT_EQ(elf->machine, machine);
    EXPECT_EQ(elf->bits, 64);
    EXPECT_TRUE(elf->little_endian);
    EXPECT_EQ(elf->type, 2) << "not a (non-PIE) executable";
    EXPECT_TRUE(elf->interpreter.empty()) << "needs a loader: " << elf->interpreter;
    EXPECT_FALSE(elf->has_dynamic) << "dynamically linked";
  }
}

TEST(InitramfsInit, TheBuildsOwnArchitecturesInitIsTheDefault) {
#if defined(__x86_64__)
  const char* own = "amd64";
#elif defined(__aarch64__)
  const char* own = "arm64";
#else
  GTEST_SKIP() << "gpuenv has no initramfs init for this architecture";
  const char* own = "";
#endif
  EXPECT_TRUE(embedded(own)) << GPUENV_INITRAMFS_INIT_ARCHES;
  EXPECT_FALSE(disk::initramfs_init_program().empty());
  EXPECT_EQ(disk::initramfs_init_program().data(), disk::initramfs_init_program_for(own).data());
}

TEST(InitramfsInit, NoInitForAnUnknownArchitecture) {
  EXPECT_TRUE(disk::initramfs_init_program_for("riscv64").empty());
  EXPECT_TRUE(disk::initramfs_init_program_for("").empty());
  EXPECT_TRUE(disk::initramfs_init_program_for("x86_64").empty()) << "Debian's names, not the kernel's";
}

}  // namespace
