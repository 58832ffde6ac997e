# The validation kernels: nvcc compiles validation_kernels.cu into one fatbin (SASS for every pinned architecture
# plus PTX for the newest, so GPUs newer than the toolkit still load it by JIT), and the fatbin is embedded in a
# generated C++ source as a byte array, built into the static library `gpuenv_kernels_embedded`, which defines
#   extern const unsigned char gpuenv_validation_fatbin[];
#   extern const std::size_t gpuenv_validation_fatbin_size;
# for cuModuleLoadData (validate/adapters/cuda_session.cpp).
#
# Use: include() this file from validate/CMakeLists.txt when GPUENV_HAVE_CUDA is ON (CMAKE_CUDA_COMPILER set; the
# CUDA language need not be enabled). Without CUDA build the same target from kernels/no_fatbin.cpp instead:
#   add_library(gpuenv_kernels_embedded STATIC kernels/no_fatbin.cpp)
#
# Architectures are pinned per toolkit release, never detected from a GPU at configure time (the build machine
# need not have one). The list is what `nvcc --list-gpu-code` prints from sm_75 upward. For CUDA 13.0 (checked
# with 13.0.88): 75 (Turing: T4), 80 (A100, A30), 86 (A10, A40, RTX 30xx), 87 (Jetson Orin), 88 (listed by 13.0),
# 89 (L4, L40S, RTX 40xx), 90 (H100, H200, GH200), 100 (B200, GB200), 103 (B300, GB300), 110 (Jetson Thor),
# 120 (RTX PRO 6000 Blackwell, RTX 50xx), 121 (GB10 / DGX Spark). CUDA 13.0 removed sm_50 to sm_72 but still
# accepts sm_75 without a deprecation warning, so Turing stays. SASS runs on GPUs of the same major version and
# an equal or higher minor one; PTX for the newest (compute_121) is JIT-compiled by drivers for later GPUs.
# Override with -DGPUENV_CUDA_ARCHS="90;100" to build faster for one machine. The fatbin is embedded by
# cmake/embed_binary.cmake.

if(NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR "kernels.cmake needs CMAKE_CUDA_COMPILER (include it only when GPUENV_HAVE_CUDA is ON)")
endif()

# The toolkit's release (not the GPU's): it decides which architectures nvcc accepts.
execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --version OUTPUT_VARIABLE _gpuenv_nvcc_out RESULT_VARIABLE _gpuenv_nvcc_rc)
if(NOT _gpuenv_nvcc_rc EQUAL 0 OR NOT _gpuenv_nvcc_out MATCHES "release ([0-9]+)\\.([0-9]+)")
  message(FATAL_ERROR "cannot read the CUDA release from ${CMAKE_CUDA_COMPILER} --version")
endif()
set(GPUENV_CUDA_TOOLKIT_VERSION "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")

# Pinned lists, one per toolkit range; only 13.0 was checked against nvcc --list-gpu-code here, the older ones are
# taken from the release notes of those toolkits (12.8 added 100/101/120, 12.9 added 103/121, 13.0 renamed 101 to
# 110 and added 88).
if(GPUENV_CUDA_TOOLKIT_VERSION VERSION_GREATER_EQUAL 13.0)
  set(_gpuenv_default_archs 75 80 86 87 88 89 90 100 103 110 120 121)
elseif(GPUENV_CUDA_TOOLKIT_VERSION VERSION_GREATER_EQUAL 12.9)
  set(_gpuenv_default_archs 75 80 86 87 89 90 100 101 103 120 121)
elseif(GPUENV_CUDA_TOOLKIT_VERSION VERSION_GREATER_EQUAL 12.8)
  set(_gpuenv_default_archs 75 80 86 87 89 90 100 101 120)
elseif(GPUENV_CUDA_TOOLKIT_VERSION VERSION_GREATER_EQUAL 11.8)
  set(_gpuenv_default_archs 75 80 86 87 89 90)
else()
  message(FATAL_ERROR "CUDA ${GPUENV_CUDA_TOOLKIT_VERSION} is too old for the validation kernels (need 11.8 or later)")
endif()
set(GPUENV_CUDA_ARCHS "${_gpuenv_default_archs}" CACHE STRING
    "SASS architectures of the validation kernels (default: every one CUDA ${GPUENV_CUDA_TOOLKIT_VERSION} supports from sm_75)")

set(_gpuenv_gencode "")
set(_gpuenv_newest 0)
foreach(_arch IN LISTS GPUENV_CUDA_ARCHS)
  if(NOT _arch MATCHES "^[0-9]+$")
    message(FATAL_ERROR "GPUENV_CUDA_ARCHS: '${_arch}' is not a number like 90")
  endif()
  list(APPEND _gpuenv_gencode -gencode "arch=compute_${_arch},code=sm_${_arch}")
  if(_arch GREATER _gpuenv_newest)
    set(_gpuenv_newest ${_arch})
  endif()
endforeach()
if(_gpuenv_newest EQUAL 0)
  message(FATAL_ERROR "GPUENV_CUDA_ARCHS is empty")
endif()
list(APPEND _gpuenv_gencode -gencode "arch=compute_${_gpuenv_newest},code=compute_${_gpuenv_newest}")
message(STATUS "gpuenv: validation kernels for sm_{${GPUENV_CUDA_ARCHS}} + compute_${_gpuenv_newest} PTX (CUDA ${GPUENV_CUDA_TOOLKIT_VERSION})")

set(_gpuenv_kernels_dir "${CMAKE_CURRENT_LIST_DIR}")
set(GPUENV_VALIDATION_FATBIN "${CMAKE_CURRENT_BINARY_DIR}/validation_kernels.fatbin")
set(_gpuenv_fatbin_cpp "${CMAKE_CURRENT_BINARY_DIR}/validation_kernels_fatbin.cpp")

# -O3 for device code; no host compilation happens with -fatbin, so the host compiler only preprocesses.
set(_gpuenv_ccbin "")
if(CMAKE_CUDA_HOST_COMPILER)
  set(_gpuenv_ccbin -ccbin "${CMAKE_CUDA_HOST_COMPILER}")
endif()
add_custom_command(
  OUTPUT "${GPUENV_VALIDATION_FATBIN}"
  COMMAND "${CMAKE_CUDA_COMPILER}" ${_gpuenv_ccbin} -std=c++17 -O3 -fatbin ${_gpuenv_gencode}
          -o "${GPUENV_VALIDATION_FATBIN}" "${_gpuenv_kernels_dir}/validation_kernels.cu"
  DEPENDS "${_gpuenv_kernels_dir}/validation_kernels.cu" "${_gpuenv_kernels_dir}/reference.hpp"
  COMMENT "nvcc: validation kernels for sm_{${GPUENV_CUDA_ARCHS}} + compute_${_gpuenv_newest}"
  VERBATIM)

add_custom_command(
  OUTPUT "${_gpuenv_fatbin_cpp}"
  COMMAND "${CMAKE_COMMAND}" "-DIN=${GPUENV_VALIDATION_FATBIN}" "-DOUT=${_gpuenv_fatbin_cpp}" -DSYMBOL=gpuenv_validation_fatbin
          -DFROM=validation_kernels.fatbin -P "${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake"
  DEPENDS "${GPUENV_VALIDATION_FATBIN}" "${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake"
  COMMENT "embedding validation_kernels.fatbin"
  VERBATIM)

# A byte array compiles slowly at higher optimisation for nothing: build it at -O0, without debug info.
add_library(gpuenv_kernels_embedded STATIC "${_gpuenv_fatbin_cpp}")
set_source_files_properties("${_gpuenv_fatbin_cpp}" PROPERTIES COMPILE_OPTIONS "-O0;-g0")
