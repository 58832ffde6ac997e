#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install dependencies, build gpuenv, and run its main job on an
# example spec. Idempotent. Usage: scripts/setup.sh [SPEC]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGPUENV_BUILD_TESTS=OFF -DGPUENV_BUILD_BENCH=OFF >/dev/null
cmake --build build -j"$(nproc)"
spec=${1:-recipes/examples/torch-h100.yaml}
echo "+ build/cli/gpuenv resolve $spec"
build/cli/gpuenv resolve "$spec"
