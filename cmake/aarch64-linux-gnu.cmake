# Cross toolchain for linux/arm64 (aarch64) on a Debian amd64 host, through Debian's multiarch: the GCC cross
# compiler (g++-aarch64-linux-gnu), the `:arm64` development packages installed beside the amd64 ones under
# /usr/lib/aarch64-linux-gnu, and qemu-user to run what the build itself runs (the catalog compiler, GoogleTest's
# test discovery). scripts/deps.sh installs all of it; scripts/build_arm64.sh uses this file (docs/arm64.md).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# The multiarch directory: find_library and find_package look in /usr/lib/aarch64-linux-gnu and never in the host's
# /usr/lib/x86_64-linux-gnu. The sysroot is / (multiarch), so there is no CMAKE_SYSROOT.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# pkg-config (FindCURL, FindLibXml2 and FindOpenSSL take their hints from it) reads the arm64 .pc files only: the
# host's would hint at /usr/lib/x86_64-linux-gnu.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
unset(ENV{PKG_CONFIG_PATH})

# What the build runs of its own output goes through qemu-user; the arm64 loader and libraries are in / (multiarch).
find_program(GPUENV_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(NOT GPUENV_QEMU_AARCH64)
  message(FATAL_ERROR "the arm64 build runs its catalog compiler and test discovery under qemu-user: install qemu-user-static (scripts/deps.sh)")
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR ${GPUENV_QEMU_AARCH64} -L /)

# GPUENV_LLD (-fuse-ld=lld): a GCC cross driver looks for ld.lld only beside its own tools (/usr/aarch64-linux-gnu/bin),
# so -B names LLVM's directory, which holds ld.lld and none of the programs (as, ld, collect2) GCC looks up there.
find_program(GPUENV_LD_LLD NAMES ld.lld)
if(GPUENV_LD_LLD)
  file(REAL_PATH "${GPUENV_LD_LLD}" _gpuenv_lld_real)
  get_filename_component(_gpuenv_lld_dir "${_gpuenv_lld_real}" DIRECTORY)
  if(EXISTS "${_gpuenv_lld_dir}/ld.lld" AND NOT EXISTS "${_gpuenv_lld_dir}/as" AND NOT EXISTS "${_gpuenv_lld_dir}/ld")
    foreach(_kind EXE SHARED MODULE)
      set(CMAKE_${_kind}_LINKER_FLAGS_INIT "-B${_gpuenv_lld_dir}")
    endforeach()
  endif()
endif()

# yaml-cpp: Debian 12's libyaml-cpp-dev is not Multi-Arch: same, so its arm64 package cannot sit beside the amd64
# one. The arm64 library (libyaml-cpp0.7:arm64, which is) with the amd64 package's headers, which are the same
# files (arch-independent), stand in for it; where the arm64 package's own CMake files are installed, they are used.
if(NOT EXISTS /usr/lib/aarch64-linux-gnu/cmake/yaml-cpp/yaml-cpp-config.cmake)
  set(yaml-cpp_DIR "${CMAKE_CURRENT_LIST_DIR}/cross-yaml-cpp")
endif()
