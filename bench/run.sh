#!/usr/bin/env bash
# Benchmarks: in-process (Google Benchmark) and whole processes (hyperfine). Usage: bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --bench
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DGPUENV_BUILD_TESTS=OFF -DGPUENV_BUILD_BENCH=ON >/dev/null
cmake --build build-bench -j"$(nproc)"
build-bench/bench/resolver_bench --benchmark_min_time=0.2
export GPUENV_DRIVER=535.183.01 GPUENV_GPUS=H100   # keep host probing out of the figures
hyperfine -N --warmup 5 --runs 50 \
  'build-bench/cli/gpuenv resolve recipes/examples/torch-h100.yaml' \
  'build-bench/cli/gpuenv resolve recipes/examples/jax-h200.yaml' \
  'build-bench/cli/gpuenv matrix --json' \
  'build-bench/cli/gpuenv --version'
