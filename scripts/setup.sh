#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install dependencies, build gpuenv, and do its main job once:
# build a small image (recipes/examples/hello-cuda.yaml: Debian 12, Python and the CUDA runtime, from the
# host's Debian mirror and Python index), run a program in it, and validate this machine (the real backend
# where an NVIDIA GPU is present, else the recorded 8x H100 through the replay backend). Idempotent.
# Usage: scripts/setup.sh [SPEC]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGPUENV_BUILD_TESTS=OFF -DGPUENV_BUILD_BENCH=OFF >/dev/null
cmake --build build -j"$(nproc)"
gpuenv=build/cli/gpuenv
spec=${1:-recipes/examples/hello-cuda.yaml}
name=$(sed -n 's/^name: *//p' "$spec" | head -1)
out=gpuenv-out/${name:-image}
mkdir -p gpuenv-out

echo "+ $gpuenv lock $spec -o $out.lock"
"$gpuenv" lock "$spec" -o "$out.lock"
echo "+ $gpuenv build $out.lock -o $out"
"$gpuenv" build "$out.lock" -o "$out"

gpu=0
if "$gpuenv" detect --json 2>/dev/null | python3 -c 'import json, sys; sys.exit(0 if json.load(sys.stdin)["gpus"] else 1)'; then gpu=1; fi
run_flags=(--no-gpu)
[ "$gpu" = 1 ] && run_flags=()
echo "+ $gpuenv run $out ${run_flags[*]} -- python3 (ask the image's CUDA runtime its version)"
"$gpuenv" run "$out" "${run_flags[@]}" -- python3 -c '
import ctypes
v = ctypes.c_int()
rc = ctypes.CDLL("libcudart.so.12").cudaRuntimeGetVersion(ctypes.byref(v))
print("CUDA runtime in the image: %d.%d (cudaRuntimeGetVersion returned %d)" % (v.value // 1000, v.value % 1000 // 10, rc))'

if [ "$gpu" = 1 ]; then
  echo "+ $gpuenv validate --level quick --lock $out.lock   (this machine's GPUs)"
  "$gpuenv" validate --level quick --lock "$out.lock"
else
  echo "+ $gpuenv validate --level quick --backend replay:tests/data/validate/h100x8.yaml"
  echo "  no NVIDIA GPU here: validating the recorded 8x H100 machine through the replay backend instead"
  "$gpuenv" validate --level quick --backend replay:tests/data/validate/h100x8.yaml
fi
echo "setup done: the image is in $out (gpuenv inspect $out)"
