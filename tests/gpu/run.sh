#!/usr/bin/env bash
# The one script for a machine with an NVIDIA GPU: builds, then runs every test labelled `gpu` and the
# hardware-independent suites. Takes a few minutes; run it through the device tool, then give the machine back.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DGPUENV_BUILD_BENCH=OFF >/dev/null
cmake --build build-gpu -j"$(nproc)"
nvidia-smi || true
ctest --test-dir build-gpu -L 'gpu|contract' --output-on-failure
./build-gpu/cli/gpuenv detect
./build-gpu/cli/gpuenv resolve recipes/examples/torch-h100.yaml --gpu H200 --driver "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
