#include "validate/adapters/image_libraries.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fakes/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::validate::find_image_libraries;

// A scratch root filesystem, removed at the end of the test.
class Rootfs {
 public:
  void file(const std::string& relative) {
    fs::create_directories((m_root / relative).parent_path());
    std::ofstream(m_root / relative) << "ELF";
  }
  void link(const std::string& relative, const std::string& target) {
    fs::create_directories((m_root / relative).parent_path());
    fs::create_symlink(target, m_root / relative);
  }
  [[nodiscard]] std::string at(const std::string& relative) const { return (m_root / relative).string(); }
  [[nodiscard]] std::string root() const { return m_root.string(); }

 private:
  gpuenv::testing::TempDir m_dir{"gpuenv-image-libraries"};
  const fs::path& m_root = m_dir.path();
};

TEST(ImageLibraries, FindsWheelToolkitAndDistributionLibrariesNewestMajorFirst) {
  Rootfs r;
  r.file("usr/local/lib/python3.11/dist-packages/nvidia/cublas/lib/libcublasLt.so.12");
  r.file("usr/local/lib/python3.11/dist-packages/nvidia/cublas/lib/libcublas.so.12");
  r.link("usr/local/cuda", "cuda-12.4");
  r.file("usr/local/cuda-12.4/lib64/libcublasLt.so.12.4.5.8");
  r.link("usr/local/cuda-12.4/lib64/libcublasLt.so.12", "libcublasLt.so.12.4.5.8");
  r.file("usr/local/cuda-12.4/lib64/libcublas.so.11");
  r.file("usr/lib/x86_64-linux-gnu/libcublasLt.so.13.0.1");
  r.link("usr/lib/x86_64-linux-gnu/libcublasLt.so.13", "/usr/lib/x86_64-linux-gnu/libcublasLt.so.13.0.1");
  r.file("usr/local/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2");
  r.file("usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5");
  r.link("usr/lib/x86_64-linux-gnu/libnccl.so.2", "libnccl.so.2.21.5");
  auto found = find_image_libraries(r.root());
  EXPECT_EQ(found.cublaslt,
            (std::vector<std::string>{r.at("usr/lib/x86_64-linux-gnu/libcublasLt.so.13.0.1"),
                                      r.at("usr/local/lib/python3.11/dist-packages/nvidia/cublas/lib/libcublasLt.so.12"),
                                      r.at("usr/local/cuda-12.4/lib64/libcublasLt.so.12.4.5.8")}))
      << "an absolute link is followed inside the image; the toolkit seen twice (cuda and cuda-12.4) is listed once";
  EXPECT_EQ(found.cublas,
            (std::vector<std::string>{r.at("usr/local/lib/python3.11/dist-packages/nvidia/cublas/lib/libcublas.so.12"),
                                      r.at("usr/local/cuda-12.4/lib64/libcublas.so.11")}));
  EXPECT_EQ(found.nccl,
            (std::vector<std::string>{r.at("usr/local/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2"),
                                      r.at("usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5")}));
}

TEST(ImageLibraries, LinksNeverLeaveTheImageAndBadNamesAreIgnored) {
  Rootfs r;
  // Absolute and climbing links resolve inside the image, where these targets do not exist.
  r.link("usr/lib/x86_64-linux-gnu/libcublas.so.13", "/etc/hostname");
  r.link("usr/lib/x86_64-linux-gnu/libcublasLt.so.13", "../../../../../../../../etc/hostname");
  r.link("usr/lib/x86_64-linux-gnu/libcublas.so.14", "libcublas.so.14");  // a loop
  r.file("usr/lib/x86_64-linux-gnu/libcublas.so");                        // no major version
  r.file("usr/lib/x86_64-linux-gnu/libcublas.so.12.0");                   // not a soname
  r.file("usr/lib/x86_64-linux-gnu/libcublas.so.x");
  fs::create_directories(r.at("usr/lib64/libcublas.so.12"));              // a directory, not a library
  auto found = find_image_libraries(r.root());
  EXPECT_TRUE(found.cublaslt.empty());
  EXPECT_TRUE(found.cublas.empty());
  EXPECT_TRUE(found.nccl.empty());
}

TEST(ImageLibraries, AnEmptyOrMissingRootHasNoLibraries) {
  EXPECT_TRUE(find_image_libraries("").cublas.empty());
  auto found = find_image_libraries("/nonexistent/gpuenv-rootfs");
  EXPECT_TRUE(found.cublaslt.empty());
  EXPECT_TRUE(found.cublas.empty());
}

}  // namespace
