#pragma once
// The image's own cuBLASLt and cuBLAS, found in its unpacked root filesystem, so that gemm_consistency and
// gemm_tflops with `--image` run through the libraries the image ships (issue 5: "through the image's
// cuBLAS/cuBLASLt"), not whatever the host has. The real CUDA session dlopens them by absolute path; cuBLASLt is
// loaded first, so the image's libcublas binds to the image's libcublasLt (the loader matches DT_NEEDED by soname
// against what is already loaded) rather than to a host copy of another version.
#include <string>
#include <vector>

namespace gpuenv::validate {

/// Absolute paths on the host of the image's BLAS libraries, newest major version first.
struct ImageBlas {
  std::vector<std::string> cublaslt;  ///< .../libcublasLt.so.12
  std::vector<std::string> cublas;    ///< .../libcublas.so.12
};

/// Looks for `libcublasLt.so.N` and `libcublas.so.N` where images put them: the pip wheels' nvidia/cublas/lib
/// under every python3.* site or dist-packages directory (/usr/local/lib, /usr/lib, /opt/conda/lib), the CUDA
/// toolkit (/usr/local/cuda*/lib64 and targets/*/lib), and the distribution's library directories. Symbolic links
/// are followed inside `rootfs` (an absolute target is taken relative to it, never to the host's root); a link
/// that leaves the root filesystem, loops, or ends in something that is not a regular file is ignored. Never fails:
/// an unreadable directory contributes nothing.
ImageBlas find_image_blas(const std::string& rootfs);

}  // namespace gpuenv::validate
