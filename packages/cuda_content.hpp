#pragma once
// CUDA and cuDNN in an image that no framework fills with its own (a spec with `cuda:` or `cudnn:` and no
// framework, or with `cuda.components` named): which packages bring the resolved versions, from one source.
//
// Sources, in this order (docs/build.md, "CUDA content"):
// 1. NVIDIA's CUDA apt repository, when one is configured: `cuda-cudart-12-9`, `libcublas-12-9`, ...,
//    `libcudnn9-cuda-12`. The component versions of CUDA x.y.z are the ones its `cuda-libraries-x-y`
//    metapackage (version x.y.z-*) depends on; a component that metapackage does not name gets the newest
//    version of its x-y package, and the lock's decisions say so.
// 2. NVIDIA's wheels from the Python index: `cuda-toolkit[cudart,cublas,...]==x.y.z` (NVIDIA's metapackage;
//    its extras pin every component wheel at the release's own versions, so no component version scheme is
//    guessed here), `nvidia-cudnn-cuX==a.b.c.*` and, for nccl, `nvidia-nccl-cuX`.
#include <optional>
#include <string>
#include <vector>

#include "packages/apt/package_index.hpp"
#include "resolver/solver.hpp"
#include "resolver/spec.hpp"

namespace gpuenv::packages {

struct CudaContent {
  resolver::Version cuda;                 ///< x.y.z the lock names
  std::optional<resolver::Version> cudnn; ///< when the lock names one
  std::vector<std::string> components;    ///< from resolver::k_cuda_components
};

/// What the image must hold, or nothing when it needs no CUDA from gpuenv: no CUDA in the resolution, or a
/// framework brings its own and the spec names no components.
std::optional<CudaContent> cuda_content(const resolver::Spec& spec, const resolver::Resolution& resolution);

/// The apt packages ("name=version") of NVIDIA's CUDA repository layout that bring `content`, chosen from
/// `index`; nothing when the index lacks any of them (then `looked_for` lists what was missing). `decisions`
/// gets one line for each version chosen without the metapackage's word.
std::optional<std::vector<std::string>> cuda_apt_packages(const PackageIndex& index, const CudaContent& content,
                                                          std::vector<std::string>& decisions, std::vector<std::string>& looked_for);

/// The PEP 508 requirements for NVIDIA's wheels that bring `content`.
std::vector<std::string> cuda_wheel_requirements(const CudaContent& content);

}  // namespace gpuenv::packages
