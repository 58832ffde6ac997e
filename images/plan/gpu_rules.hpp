#pragma once
// GPU rules of the image plan (pure; see layer_plan.hpp for the whole plan): one source of CUDA libraries, no
// driver library inside the image, and the loader configuration for the CUDA libraries of NVIDIA's wheels.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "images/plan/layer_plan.hpp"
#include "resolver/lockfile.hpp"

namespace gpuenv::images {

/// Whether a shared library name is one the NVIDIA driver provides at run time (libcuda.so.1,
/// libnvidia-ml.so.1, libnvidia-*.so.*, ...), which must never be inside an image.
bool is_driver_library(std::string_view soname);

/// Checks that the lock brings CUDA libraries (the "cuda" and "cudnn" layers) from one source: .debs or
/// NVIDIA's wheels, never both. Errors: `build.cuda_twice`, naming one package of each kind.
Status check_one_cuda_source(const resolver::Lock& lock);

/// Checks that no regular file of the root is a driver library (stub libraries under a "stubs" directory
/// excepted): a container gets the host's driver at run time. A VM image with vm.driver carries its own, and passes.
/// Errors: `build.driver_in_image`, naming the first such path and the package that installed it.
Status check_no_driver_library(const std::vector<RootEntry>& root, const resolver::Lock& lock);

/// The directories ("/usr/local/lib/python3.11/dist-packages/nvidia/cublas/lib") that hold shared libraries
/// among the files NVIDIA's wheels installed (paths relative to the root, `site_packages` likewise); sorted,
/// each once.
std::vector<std::string> wheel_cuda_library_dirs(const std::vector<std::string>& wheel_files, const std::string& site_packages);

/// A file gpuenv writes into the root.
struct RootFile {
  std::string path;  ///< relative to the root
  std::string text;
};

/// The /etc/ld.so.conf.d entry listing the wheels' CUDA library directories; none when there are none.
std::optional<RootFile> wheel_cuda_loader_config(const std::vector<std::string>& library_dirs);

}  // namespace gpuenv::images
