#!/usr/bin/env bash
# Online check (ctest label `online`, off in CI): the CUDA-only example (recipes/examples/cuda-l4-debian.yaml:
# CUDA and cuDNN, no framework) built from the host's Debian mirror and Python index holds libcudart, libcublas
# and libcudnn at the lock's versions, read from the image's layers, and a program compiled against the CUDA
# headers and those libraries prints the lock's versions under `gpuenv run` (no GPU needed).
# Needs the CUDA headers (cuda_runtime_api.h, cudnn.h) under $CUDA_HOME/include (default /usr/local/cuda).
set -euo pipefail
gpuenv=$1
root=$2
inc=${CUDA_HOME:-/usr/local/cuda}/include
if [ ! -f "$inc/cuda_runtime_api.h" ] || [ ! -f "$inc/cudnn.h" ]; then echo "skip: no CUDA and cuDNN headers in $inc"; exit 77; fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$gpuenv" lock "$root/recipes/examples/cuda-l4-debian.yaml" -o "$out/cuda.lock" >/dev/null
cuda=$(sed -n 's/^cuda: "\(.*\)"/\1/p' "$out/cuda.lock")
cudnn=$(sed -n 's/^cudnn: "\(.*\)"/\1/p' "$out/cuda.lock")
"$gpuenv" build "$out/cuda.lock" -o "$out/image" >/dev/null
# The layers, as the manifest names them.
manifest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"].split(":")[1])' "$out/image/index.json")
mkdir -p "$out/tree"
for layer in $(python3 -c 'import json,sys; print(" ".join(l["digest"].split(":")[1] for l in json.load(open(sys.argv[1]))["layers"]))' "$out/image/blobs/sha256/$manifest"); do
  tar -xzf "$out/image/blobs/sha256/$layer" -C "$out/tree"
done
site=$out/tree/usr/local/lib/python3.11/dist-packages
for lib in nvidia/cuda_runtime/lib/libcudart.so.12 nvidia/cublas/lib/libcublas.so.12 nvidia/cudnn/lib/libcudnn.so.9; do
  [ -f "$site/$lib" ] || { echo "FAIL: the layers have no $lib"; exit 1; }
done
# The wheels' versions are the lock's releases: cuDNN a.b.c.*, and CUDA's components as cuda-toolkit x.y.z pins them.
ls -d "$site"/nvidia_cudnn_cu12-"$cudnn".*.dist-info >/dev/null || { echo "FAIL: no nvidia-cudnn-cu12 $cudnn.*"; exit 1; }
ls -d "$site"/cuda_toolkit-"$cuda"*.dist-info >/dev/null || { echo "FAIL: no cuda-toolkit $cuda"; exit 1; }
cc -DWITH_CUDNN -I"$inc" -o "$out/cuda_versions" "$root/tests/data/cuda_versions.c" "$site/nvidia/cuda_runtime/lib/libcudart.so.12" "$site/nvidia/cudnn/lib/libcudnn.so.9"
got=$("$gpuenv" run "$out/image" --no-gpu --bind "$out/cuda_versions:/tmp/probe/cuda_versions" -- /tmp/probe/cuda_versions)
IFS=. read -r cmaj cmin _ <<<"$cuda"
IFS=. read -r dmaj dmin dpatch <<<"$cudnn"
want="cudart $((cmaj * 1000 + cmin * 10)) cudnn $((dmaj * 10000 + dmin * 100 + dpatch))"
echo "lock: CUDA $cuda, cuDNN $cudnn; in the image: $got"
[ "$got" = "$want" ] || { echo "FAIL: expected '$want'"; exit 1; }
echo "cuda content: ok"
