#!/usr/bin/env bash
# The build cache shared through a registry (docs/build.md "A cache shared through the registry"), measured side by
# side in one run on one machine, against the real docker-registry on 127.0.0.1, each runner with an empty cache
# directory of its own:
#   1. a cold build of the lock (no shared cache): the baseline every figure is a ratio to;
#   2. `pip download` of the same wheels, and a cold build with --compression zstd (the cold build's floor);
#   3. runner A: builds and pushes with --cache (writes the cache);
#   4. runner B: the same lock with --cache and --push: must upload 0 layers, fetch 0 packages, give A's digest;
#   5. runner B again with one pip package added to the spec: uploads only the layers that changed.
# Needs the host's Python index and Debian mirror (online), pip, docker-registry, curl and bc. Usage:
#   bench/shared_cache.sh [GPUENV] [SPEC] [EXTRA_PIP_PACKAGE]   (defaults: build/cli/gpuenv, the torch example, pyyaml)
set -euo pipefail
cd "$(dirname "$0")/.."
gpuenv=$(realpath "${1:-build/cli/gpuenv}")
spec=${2:-recipes/examples/torch-h100.yaml}
extra=${3:-pyyaml}
# shellcheck source=bench/registry.sh
. bench/registry.sh
reg=127.0.0.1:$port
# shellcheck source=bench/lib.sh
. bench/lib.sh
field() { python3 -c "import json,sys; j=json.load(open('$1')); print(eval('j' + sys.argv[1]))" "$2"; }
cp "$spec" "$work/a.yaml"
with_pip_package "$work/a.yaml" "$work/b.yaml" "$extra"
"$gpuenv" lock "$work/a.yaml" -o "$work/a.lock" >/dev/null
"$gpuenv" lock "$work/b.yaml" -o "$work/b.lock" >/dev/null
"$gpuenv" key generate -o "$work/keys" >/dev/null
cache=(--cache "$reg/ml/cache:main" --cache-key "$work/keys/gpuenv.key" --plain-http)
runner() { GPUENV_CACHE_DIR=$work/cache-$1 "${@:2}"; }

cold=$(seconds runner cold "$gpuenv" build "$work/a.lock" -o "$work/out-cold" --json); cp "$work/last.out" "$work/cold.json"
echo "measured: cold $cold s" >&2
grep -o 'url: "[^"]*\.whl"' "$work/a.lock" | sed 's/^url: "//; s/"$//' > "$work/wheels.txt"
download=$(seconds sh -c "xargs -a '$work/wheels.txt' python3 -m pip download --no-deps --quiet -d '$work/pip'")
rm -rf "$work/pip"
zstd=$(seconds runner zstd "$gpuenv" build "$work/a.lock" -o "$work/out-zstd" --compression zstd --json)
rm -rf "$work/cache-cold" "$work/cache-zstd" "$work/out-zstd"
echo "measured: pip download $download s, zstd cold $zstd s" >&2
a=$(seconds runner a "$gpuenv" build "$work/a.lock" -o "$work/out-a" "${cache[@]}" --push "$reg/ml/app:a" --json); cp "$work/last.out" "$work/a.json"
rm -rf "$work/cache-a"
echo "measured: runner A $a s" >&2
b=$(seconds runner b "$gpuenv" build "$work/a.lock" -o "$work/out-b" "${cache[@]}" --push "$reg/ml/app:b" --json); cp "$work/last.out" "$work/b.json"
packages_b=$( (find "$work/cache-b/blobs" -type f 2>/dev/null || true) | wc -l)
echo "measured: runner B $b s, $packages_b packages in its cache" >&2
added=$(seconds runner b2 "$gpuenv" build "$work/b.lock" -o "$work/out-b2" "${cache[@]}" --push "$reg/ml/app:b2" --json); cp "$work/last.out" "$work/b2.json"

digest_cold=$(field "$work/cold.json" '["digest"]')
[ "$(field "$work/a.json" '["digest"]')" = "$digest_cold" ] || { echo "bench: A's digest is not the cold build's" >&2; exit 1; }
[ "$(field "$work/b.json" '["digest"]')" = "$digest_cold" ] || { echo "bench: B's digest is not A's" >&2; exit 1; }
uploaded_b=$(field "$work/b.json" '["push"]["blobs_uploaded"]')
changed=$(python3 - "$work/a.json" "$work/b2.json" <<'PY'
import json, sys
a = {l["digest"] for l in json.load(open(sys.argv[1]))["layers"]}
b = json.load(open(sys.argv[2]))
print(" ".join(l["name"] for l in b["layers"] if l["digest"] not in a))
PY
)
ratio() { printf '%.4f' "$(echo "$1 / $cold" | bc -l)"; }
printf 'cold build (gzip)          %7.1f s   1.000\n' "$cold"
printf 'pip download of the wheels %7.1f s   %s\n' "$download" "$(ratio "$download")"
printf 'cold build, zstd           %7.1f s   %s   (%.2f x pip download)\n' "$zstd" "$(ratio "$zstd")" "$(echo "$zstd / $download" | bc -l)"
printf 'runner A, --cache --push   %7.1f s   %s\n' "$a" "$(ratio "$a")"
printf 'runner B, same lock        %7.1f s   %s   (%s blobs uploaded, %s packages fetched, digest = A'"'"'s)\n' "$b" "$(ratio "$b")" "$uploaded_b" "$packages_b"
printf 'runner B, +%-14s  %7.1f s   %s   (%s blobs uploaded; changed layers: %s)\n' "$extra" "$added" "$(ratio "$added")" "$(field "$work/b2.json" '["push"]["blobs_uploaded"]')" "$changed"
