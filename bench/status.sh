#!/usr/bin/env bash
# `gpuenv status` wall time (issue 18's target: <= 20 ms), side by side with the process floor (`gpuenv --version`)
# and `cat` of the same status file. The status file is what `gpuenv preflight` writes for the recorded 8x H100.
# Usage: bench/status.sh [GPUENV]   (default build/cli/gpuenv; needs hyperfine)
set -euo pipefail
cd "$(dirname "$0")/.."
gpuenv=${1:-build/cli/gpuenv}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GPUENV_CACHE_DIR=$work/cache
"$gpuenv" preflight --backend replay:tests/data/validate/h100x8.yaml --status-file "$work/status.json" >/dev/null
echo "status file: $(wc -c < "$work/status.json") bytes"
hyperfine -N --warmup 5 --runs 100 \
  -n "gpuenv status" "$gpuenv status --status-file $work/status.json" \
  -n "gpuenv status --json --max-age 24h" "$gpuenv status --status-file $work/status.json --json --max-age 24h" \
  -n "floor: gpuenv --version" "$gpuenv --version" \
  -n "cat of the status file" "cat $work/status.json"
