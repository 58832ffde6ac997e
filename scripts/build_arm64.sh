#!/usr/bin/env bash
# Builds gpuenv for linux/arm64 (aarch64) on this amd64 Debian 12 machine with Debian's cross toolchain and `:arm64`
# development packages (scripts/deps.sh installs them; docs/arm64.md). Release, the options of CI's Release build.
# Usage: scripts/build_arm64.sh [BUILD_DIR] [TARGET...]
#   BUILD_DIR  default build-arm64; the binary is BUILD_DIR/cli/gpuenv (ELF aarch64)
#   TARGET     what to build, default gpuenv; `all` also builds the test executables, which
#              tests/arm64/unit_suite.sh runs under qemu-user
# GPUENV_JOBS (default: the number of cores) compiles that many sources at once.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-arm64}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(gpuenv); fi
for tool in aarch64-linux-gnu-g++ qemu-aarch64-static; do
  command -v "$tool" >/dev/null || { echo "build_arm64: $tool is missing: run scripts/deps.sh" >&2; exit 1; }
done
cmake -S . -B "$dir" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON -DGPUENV_LLD=ON \
  -DGPUENV_WERROR=ON -DGPUENV_TEST_CXX_FLAGS=-O0 -DGPUENV_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir" -j"${GPUENV_JOBS:-$(nproc)}" --target "${targets[@]}"
if [ -e "$dir/cli/gpuenv" ]; then
  file -L "$dir/cli/gpuenv" | grep -q 'ARM aarch64' || { echo "build_arm64: $dir/cli/gpuenv is not an aarch64 executable" >&2; exit 1; }
  echo "build_arm64: $dir/cli/gpuenv (linux/arm64)"
fi
