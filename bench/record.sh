#!/usr/bin/env bash
# What `validate --record FILE` adds to a run, side by side with the same run without it: the recorded 8x H100 at
# standard through the replay backend (the recording's own cost: every answer kept, the file rendered, read back
# and written), and the real adapter on two CPU GPUs at quick (the CPU doubles of tests/contract; needs a build with
# tests; it exits 1 on the fake NVML's faulty second GPU, so exit codes are ignored there).
# Usage: bench/record.sh [BUILD_DIR]   (default build; needs hyperfine: scripts/deps.sh --bench)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
gpuenv=$build/cli/gpuenv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
replay="--backend replay:tests/data/validate/h100x8.yaml --level standard --json"
hyperfine -N --warmup 3 --runs 30 \
  -n "replay 8x H100, standard" "$gpuenv validate $replay" \
  -n "... with --record" "$gpuenv validate $replay --record $work/h100x8.yaml"
echo "recording: $(wc -c < "$work/h100x8.yaml") bytes"
if [ -f "$build/tests/libcpu_cuda.so" ]; then
  mkdir "$work/lib"
  ln -s "$PWD/$build/tests/libfake_nvml_full.so" "$work/lib/libnvidia-ml.so.1"
  ln -s "$PWD/$build/tests/libcpu_cuda.so" "$work/lib/libcuda.so.1"
  ln -s "$PWD/$build/tests/libcpu_cublas.so" "$work/lib/libcublasLt.so.13"
  ln -s "$PWD/$build/tests/libcpu_nccl.so" "$work/lib/libnccl.so.2"
  LD_LIBRARY_PATH=$work/lib hyperfine -N -i --warmup 2 --runs 10 \
    -n "CPU GPUs, quick" "$gpuenv validate --level quick --json" \
    -n "... with --record" "$gpuenv validate --level quick --json --record $work/cpu.yaml"
fi
