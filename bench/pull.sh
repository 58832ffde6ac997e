#!/usr/bin/env bash
# Pull throughput against a loopback docker-registry (issue 32): the layout pushed once, then pulled into an empty
# place each run by `gpuenv run docker://REF -- true` and by `skopeo copy docker://REF oci:DIR`. gpuenv's run also
# unpacks the image, which skopeo does not, so it is measured twice: from an empty cache (pull + unpack + run), and
# with the layers already unpacked and the blobs removed (the pull, plus linking the unpacked layers and starting
# the sandbox): the second is the pull compared with skopeo's. Needs docker-registry, skopeo, hyperfine, bubblewrap
# (scripts/deps.sh --bench). Usage: bench/pull.sh LAYOUT [RUNS]   (LAYOUT: an image gpuenv built, e.g.
# gpuenv-out/hello-cuda after scripts/setup.sh; build/cli/gpuenv is the binary measured)
set -euo pipefail
layout=$(realpath "$1") runs=${2:-5}
cd "$(dirname "$0")/.."
. bench/registry.sh
gpuenv=$(realpath "${GPUENV:-build/cli/gpuenv}")
ref=127.0.0.1:$port/bench/pull:1
skopeo copy -q --dest-tls-verify=false "oci:$layout" "docker://$ref"
# The unpacked layers that the third case keeps.
GPUENV_CACHE_DIR=$work/warm "$gpuenv" run "docker://$ref" --plain-http --no-gpu -- true

hyperfine -N --runs "$runs" --export-markdown "$work/pull.md" \
  -n "skopeo copy (pull)" --prepare "rm -rf $work/skopeo" "skopeo copy -q --src-tls-verify=false docker://$ref oci:$work/skopeo:1" \
  -n "gpuenv run, empty cache (pull + unpack)" --prepare "rm -rf $work/cold" "env GPUENV_CACHE_DIR=$work/cold $gpuenv run docker://$ref --plain-http --no-gpu -- true" \
  -n "gpuenv run, layers unpacked, no blobs (pull)" --prepare "rm -rf $work/warm/base-images" "env GPUENV_CACHE_DIR=$work/warm $gpuenv run docker://$ref --plain-http --no-gpu -- true"
cat "$work/pull.md"
echo "image: $(du -sh "$layout" | cut -f1) in $(find "$layout/blobs" -type f | wc -l) blobs"
