// Stands in for the embedded validation kernels when gpuenv is built without CUDA: the same symbols with size 0.
// The CUDA session then opens contexts but answers the kernel checks with `cuda.no_kernels`.
#include <cstddef>

extern const unsigned char gpuenv_validation_fatbin[];
extern const std::size_t gpuenv_validation_fatbin_size;

const unsigned char gpuenv_validation_fatbin[1] = {0};
const std::size_t gpuenv_validation_fatbin_size = 0;
