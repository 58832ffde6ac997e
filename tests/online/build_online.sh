#!/usr/bin/env bash
# Online check (ctest label `online`, off in CI): build the PyTorch example from the host's configured Debian
# mirror and Python index (about 3 GB of downloads), check it with skopeo, run the image's own Python on it,
# and rebuild (a no-op). Uses $GPUENV_CACHE_DIR when set, so a warm cache makes it quick.
set -euo pipefail
gpuenv=$1
root=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$gpuenv" lock "$root/recipes/examples/torch-h100.yaml" -o "$out/torch.lock" >/dev/null
digest=$("$gpuenv" build "$out/torch.lock" -o "$out/image" | tail -1)
skopeo inspect "oci:$out/image" | grep -q "\"Digest\": \"$digest\""
again=$("$gpuenv" build "$out/torch.lock" -o "$out/image")
echo "$again" | grep -q '^unchanged'
[ "$(echo "$again" | tail -1)" = "$digest" ]
version=$("$gpuenv" run "$out/image" --no-gpu -- python3.11 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)')
echo "$version"
[ "$version" = "3.11.2 2.5.1+cu124 12.4" ]
echo "online build: ok ($digest)"
