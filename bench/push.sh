#!/usr/bin/env bash
# Push throughput against a loopback docker-registry: `gpuenv build LOCK --push` (the image already built, so
# the build itself is a no-op) vs `skopeo copy oci:LAYOUT docker://...` of the same layout, each into a fresh
# repository. Usage: bench/push.sh LOCK LAYOUT   (LAYOUT: where `gpuenv build LOCK -o LAYOUT` wrote the image)
set -euo pipefail
cd "$(dirname "$0")/.."
lock=$1 layout=$2
. bench/registry.sh
gpuenv=build/cli/gpuenv
"$gpuenv" build "$lock" -o "$layout" --offline >/dev/null

hyperfine -N --runs 3 \
  --prepare "rm -rf $work/storage" \
  -n "gpuenv build --push (image already built)" "$gpuenv build $lock -o $layout --offline --plain-http --push 127.0.0.1:$port/bench/gpuenv:1" \
  -n "skopeo copy" "skopeo copy -q --dest-tls-verify=false oci:$layout docker://127.0.0.1:$port/bench/skopeo:1"
