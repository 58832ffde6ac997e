#!/usr/bin/env bash
# Online check (ctest label `online`, off in CI): lock the PyTorch example against the host's configured
# Debian mirror and Python index, twice, and compare the locks byte for byte.
set -euo pipefail
gpuenv=$1
root=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export GPUENV_CACHE_DIR=$out/cache
"$gpuenv" lock "$root/recipes/examples/torch-h100.yaml" -o "$out/a.lock"
"$gpuenv" lock "$root/recipes/examples/torch-h100.yaml" -o "$out/b.lock" >/dev/null
cmp "$out/a.lock" "$out/b.lock"
grep -q 'name: "torch", version: "2.5.1", kind: "wheel"' "$out/a.lock"
grep -q 'name: "python3", .*kind: "deb"' "$out/a.lock"
grep -q 'name: "nvidia-cudnn-cu12", version: "9.1.0.70"' "$out/a.lock"
echo "online lock: ok"
