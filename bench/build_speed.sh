#!/usr/bin/env bash
# Builds at the speed of what changed (docs/build.md), side by side in one run on one machine:
#   1. cold build of a spec in a fresh cache, downloads included, against the floor: `pip download` of the same
#      wheels plus `pigz -6` of the image's uncompressed layers (what any builder must at least do here);
#   2. the same spec with one pip package added, built into the same output (the iteration an ML engineer does);
#   3. back to the first spec;
#   4. `gpuenv run` of the first image (its layers unpacked) and of the second (sharing all but two layers);
#   5. the base layer of the same spec with a slim base (`base: {distro: ..., variant: slim}`) against the
#      required-set base of step 1.
# Needs the host's Python index and Debian mirror (online), pip, pigz and bc (scripts/deps.sh --bench). Usage:
#   bench/build_speed.sh [GPUENV] [SPEC] [EXTRA_PIP_PACKAGE]   (defaults: build-bench/cli/gpuenv, the torch example, pyyaml)
# Writes one line per figure; the cache and outputs live in a temporary directory removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
gpuenv=${1:-build-bench/cli/gpuenv}
spec=${2:-recipes/examples/torch-h100.yaml}
extra=${3:-pyyaml}
if [ ! -x "$gpuenv" ]; then
  cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DGPUENV_BUILD_TESTS=OFF -DGPUENV_BUILD_BENCH=ON >/dev/null
  cmake --build build-bench -j"$(nproc)" --target gpuenv >/dev/null
fi
command -v pigz >/dev/null || { echo "pigz missing (apt-get install pigz)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GPUENV_CACHE_DIR=$work/cache
# shellcheck source=bench/lib.sh
. bench/lib.sh

cp "$spec" "$work/a.yaml"
with_pip_package "$work/a.yaml" "$work/b.yaml" "$extra"
python3 - "$work/a.yaml" "$work/slim.yaml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r'^base:\s*([^\s#]+)', text, re.M)
slim = "base: {distro: '%s', variant: slim}" % (m.group(1) if m else "debian:12")
open(sys.argv[2], "w").write(re.sub(r'^base:.*$', slim, text, flags=re.M) if m else slim + "\n" + text)
PY
"$gpuenv" lock "$work/a.yaml" -o "$work/a.lock" >/dev/null
"$gpuenv" lock "$work/b.yaml" -o "$work/b.lock" >/dev/null
"$gpuenv" lock "$work/slim.yaml" -o "$work/slim.lock" >/dev/null

cold=$(seconds "$gpuenv" build "$work/a.lock" -o "$work/out")
# The floor: the same wheels downloaded by pip, and the image's layers compressed by pigz.
grep -o 'url: "[^"]*\.whl"' "$work/a.lock" | sed 's/^url: "//; s/"$//' > "$work/wheels.txt"
download=$(seconds sh -c "xargs -a '$work/wheels.txt' python3 -m pip download --no-deps --quiet -d '$work/pip'")
manifest=$(python3 -c "import json,sys; print(json.load(open('$work/out/index.json'))['manifests'][0]['digest'][7:])")
layers=$(python3 -c "import json; m=json.load(open('$work/out/blobs/sha256/$manifest')); print(' '.join(l['digest'][7:] for l in m['layers']))")
for l in $layers; do gzip -dc "$work/out/blobs/sha256/$l" > "$work/layer-$l.tar"; done
compress=$(seconds sh -c "for f in '$work'/layer-*.tar; do pigz -6 -c \"\$f\" > /dev/null; done")
rm -f "$work"/layer-*.tar
added=$(seconds "$gpuenv" build "$work/b.lock" -o "$work/out")
back=$(seconds "$gpuenv" build "$work/a.lock" -o "$work/out")
"$gpuenv" build "$work/b.lock" -o "$work/out-b" >/dev/null 2>"$work/last.err" || { cat "$work/last.err" >&2; exit 1; }
run_first=$(seconds "$gpuenv" run "$work/out" --no-gpu -- /bin/true)
run_second=$(seconds "$gpuenv" run "$work/out-b" --no-gpu -- /bin/true)
"$gpuenv" build "$work/slim.lock" -o "$work/out-slim" >/dev/null 2>"$work/last.err" || { cat "$work/last.err" >&2; exit 1; }
# The base layer's compressed size and package count, from the manifest and the build's own layer report.
base_layer() { "$gpuenv" inspect "$1" --json | python3 -c "
import json, sys
j = json.load(sys.stdin)
l = next(l for l in j['layers'] if l.get('name') == 'base')
print('%.1f MiB, %d packages' % (l['size'] / 1048576, len(l.get('packages', []))))"; }
base_required=$(base_layer "$work/out")
base_slim=$(base_layer "$work/out-slim")
floor=$(echo "$download + $compress" | bc)
printf 'cold build            %8.1f s   floor %.1f s (pip download %.1f s + pigz %.1f s)   ratio %.2f\n' "$cold" "$floor" "$download" "$compress" "$(echo "$cold / $floor" | bc -l)"
printf 'one package added     %8.1f s\n' "$added"
printf 'back to the first     %8.1f s\n' "$back"
printf 'run, first image      %8.1f s\n' "$run_first"
printf 'run, second image     %8.1f s   (shares its big layers with the first)\n' "$run_second"
printf 'base layer, required  %s\n' "$base_required"
printf 'base layer, slim      %s\n' "$base_slim"
