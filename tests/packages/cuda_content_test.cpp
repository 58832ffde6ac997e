// Which packages bring CUDA and cuDNN into an image that no framework fills (images/cuda_content.hpp).
#include "packages/cuda_content.hpp"

#include <gtest/gtest.h>

#include "fakes/catalog_fixture.hpp"

namespace {

using namespace gpuenv;
using namespace gpuenv::packages;
using gpuenv::resolver::Version;

std::string stanza(const std::string& name, const std::string& version, const std::string& depends = "") {
  return "Package: " + name + "\nVersion: " + version + "\nArchitecture: amd64\n" + (depends.empty() ? "" : "Depends: " + depends + "\n") +
         "Filename: ./" + name + "_" + version + "_amd64.deb\nSize: 10\nSHA256: " + std::string(64, 'a') + "\n\n";
}

// NVIDIA's CUDA repository layout, with two releases of CUDA 12.9 and two cuDNN releases.
PackageIndex nvidia_index() {
  PackageIndex index;
  const std::string text = stanza("cuda-libraries-12-9", "12.9.0-1", "cuda-cudart-12-9 (>= 12.9.37), libcublas-12-9 (>= 12.9.0.13)") +
                           stanza("cuda-libraries-12-9", "12.9.1-1", "cuda-cudart-12-9 (>= 12.9.79), libcublas-12-9 (>= 12.9.1.4), libcufft-12-9 (>= 11.4.1.4)") +
                           stanza("cuda-cudart-12-9", "12.9.37-1") + stanza("cuda-cudart-12-9", "12.9.79-1") +
                           stanza("libcublas-12-9", "12.9.0.13-1") + stanza("libcublas-12-9", "12.9.1.4-1") +
                           stanza("cuda-nvrtc-12-9", "12.9.41-1") + stanza("cuda-nvrtc-12-9", "12.9.86-1") +
                           stanza("libnccl2", "2.27.3-1+cuda12.9") + stanza("libnccl2", "2.27.3-1+cuda13.0") +
                           stanza("libcudnn9-cuda-12", "9.17.0.29-1") + stanza("libcudnn9-cuda-12", "9.18.0.77-1") +
                           stanza("libcudnn9-cuda-13", "9.17.0.29-1");
  EXPECT_TRUE(index.add(text, RepositoryRef{"http://127.0.0.1/cuda/", "./", "", "Packages"}, {"amd64", "all"}).ok());
  return index;
}

CudaContent content(const char* cuda, const char* cudnn, std::vector<std::string> components = {"cudart", "cublas"}) {
  CudaContent c;
  c.cuda = *Version::parse(cuda);
  if (cudnn) c.cudnn = *Version::parse(cudnn);
  c.components = std::move(components);
  return c;
}

TEST(CudaContent, OnlyWhenAskedAndNoFrameworkBringsItsOwn) {
  const auto r = gpuenv::testing::resolve_yaml("cuda: '12.9'\ncudnn: '9'\ngpu: {models: [L4]}\n");
  const auto spec = gpuenv::testing::spec_of("cuda: '12.9'\ncudnn: '9'\ngpu: {models: [L4]}\n");
  const auto c = cuda_content(spec, r);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->components, (std::vector<std::string>{"cudart", "cublas"}));
  EXPECT_TRUE(c->cudnn.has_value());
  // A framework brings its own CUDA: nothing more, unless components are named.
  const std::string torch = "frameworks: {torch: '2.5.1'}\ngpu: {models: [H100]}\n";
  EXPECT_FALSE(cuda_content(gpuenv::testing::spec_of(torch), gpuenv::testing::resolve_yaml(torch)).has_value());
  const std::string with_nvcc = "cuda: {components: [nvcc]}\nframeworks: {torch: '2.5.1'}\ngpu: {models: [H100]}\n";
  const auto nvcc = cuda_content(gpuenv::testing::spec_of(with_nvcc), gpuenv::testing::resolve_yaml(with_nvcc));
  ASSERT_TRUE(nvcc.has_value());
  EXPECT_EQ(nvcc->components, std::vector<std::string>{"nvcc"});
  EXPECT_FALSE(nvcc->cudnn.has_value());  // torch's own cuDNN
  // Nothing asked: no CUDA libraries.
  const std::string plain = "gpu: {models: [L4]}\npackages: {pip: [numpy]}\n";
  EXPECT_FALSE(cuda_content(gpuenv::testing::spec_of(plain), gpuenv::testing::resolve_yaml(plain)).has_value());
}

TEST(CudaContent, AptVersionsAreTheOnesTheReleasesMetapackageNames) {
  const PackageIndex index = nvidia_index();
  std::vector<std::string> decisions, looked_for;
  const auto pkgs = cuda_apt_packages(index, content("12.9.1", "9.17.0"), decisions, looked_for);
  ASSERT_TRUE(pkgs.has_value()) << (looked_for.empty() ? "" : looked_for.front());
  EXPECT_EQ(*pkgs, (std::vector<std::string>{"cuda-cudart-12-9=12.9.79-1", "libcublas-12-9=12.9.1.4-1", "libcudnn9-cuda-12=9.17.0.29-1"}));
  const auto older = cuda_apt_packages(index, content("12.9.0", nullptr), decisions, looked_for);
  ASSERT_TRUE(older.has_value());
  EXPECT_EQ(*older, (std::vector<std::string>{"cuda-cudart-12-9=12.9.37-1", "libcublas-12-9=12.9.0.13-1"}));
}

TEST(CudaContent, ComponentsTheMetapackageDoesNotNameAreChosenAndSaidSo) {
  const PackageIndex index = nvidia_index();
  std::vector<std::string> decisions, looked_for;
  const auto pkgs = cuda_apt_packages(index, content("12.9.1", nullptr, {"cudart", "nvrtc", "nccl"}), decisions, looked_for);
  ASSERT_TRUE(pkgs.has_value());
  EXPECT_EQ(*pkgs, (std::vector<std::string>{"cuda-cudart-12-9=12.9.79-1", "cuda-nvrtc-12-9=12.9.86-1", "libnccl2=2.27.3-1+cuda12.9"}));
  std::string all;
  for (const auto& d : decisions) all += d + "\n";
  EXPECT_NE(all.find("does not name cuda-nvrtc-12-9"), std::string::npos) << all;
  EXPECT_NE(all.find("NCCL built for CUDA 12.9"), std::string::npos) << all;
}

TEST(CudaContent, ARepositoryWithoutTheReleaseIsNotUsed) {
  const PackageIndex index = nvidia_index();
  std::vector<std::string> decisions, looked_for;
  EXPECT_FALSE(cuda_apt_packages(index, content("12.8.1", "9.17.0"), decisions, looked_for).has_value());
  ASSERT_FALSE(looked_for.empty());
  EXPECT_EQ(looked_for.front(), "cuda-libraries-12-8 12.8.1");
  looked_for.clear();
  EXPECT_FALSE(cuda_apt_packages(index, content("12.9.1", "9.5.1"), decisions, looked_for).has_value());
  EXPECT_EQ(looked_for, std::vector<std::string>{"libcudnn9-cuda-12 9.5.1"});
  PackageIndex debian;  // Debian's archive has none of NVIDIA's names
  looked_for.clear();
  EXPECT_FALSE(cuda_apt_packages(debian, content("12.9.1", nullptr), decisions, looked_for).has_value());
}

TEST(CudaContent, WheelsComeFromNvidiasMetapackageAtTheReleasesVersion) {
  EXPECT_EQ(cuda_wheel_requirements(content("12.9.1", "9.17.0")),
            (std::vector<std::string>{"cuda-toolkit[cudart,cublas]==12.9.1", "nvidia-cudnn-cu12==9.17.0.*"}));
  EXPECT_EQ(cuda_wheel_requirements(content("13.0.2", nullptr, {"cudart", "nccl"})),
            (std::vector<std::string>{"cuda-toolkit[cudart]==13.0.2", "nvidia-nccl-cu13"}));
}

}  // namespace
