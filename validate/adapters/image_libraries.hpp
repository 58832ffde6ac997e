#pragma once
// The image's own cuBLASLt, cuBLAS and NCCL, found in its unpacked root filesystem, so that gemm_consistency,
// gemm_tflops and nccl_allreduce with `--image` run through the libraries the image ships (issue 5: "through the
// image's cuBLAS/cuBLASLt"), not whatever the host has. The real CUDA session dlopens them by absolute path; cuBLASLt is
// loaded first, so the image's libcublas binds to the image's libcublasLt (the loader matches DT_NEEDED by soname
// against what is already loaded) rather than to a host copy of another version.
#include <string>
#include <vector>

namespace gpuenv::validate {

/// Absolute paths on the host of the image's CUDA libraries, newest major version first.
struct ImageLibraries {
  std::vector<std::string> cublaslt;  ///< .../libcublasLt.so.12
  std::vector<std::string> cublas;    ///< .../libcublas.so.12
  std::vector<std::string> nccl;      ///< .../libnccl.so.2
};

/// Looks for `libcublasLt.so.N`, `libcublas.so.N` and `libnccl.so.N` where images put them: the pip wheels'
/// nvidia/cublas/lib and nvidia/nccl/lib under every python3.* site or dist-packages directory (/usr/local/lib, /usr/lib, /opt/conda/lib), the CUDA
/// toolkit (/usr/local/cuda*/lib64 and targets/*/lib), and the distribution's library directories. Symbolic links
/// are followed inside `rootfs` (an absolute target is taken relative to it, never to the host's root); a link
/// that leaves the root filesystem, loops, or ends in something that is not a regular file is ignored. Never fails:
/// an unreadable directory contributes nothing.
ImageLibraries find_image_libraries(const std::string& rootfs);

}  // namespace gpuenv::validate
