#!/usr/bin/env bash
# What `build --attest sbom,provenance` adds to a build (docs/build.md "What an image holds and how it was made"):
# the same lock built into a fresh layout with a warm cache (packages downloaded and unpacked before, layers
# written before: the rebuild a CI pipeline makes), with and without --attest, side by side (hyperfine, runs
# interleaved by alternating the two commands' order of preparation). --attest adds reading the CycloneDX SBOM,
# the provenance, two ECDSA signatures and two records appended to the layout's attestation image.
# Usage: bench/build_attest.sh LOCK [GPUENV]   (default build/cli/gpuenv; the lock's packages are fetched once
# from the host's mirrors if the cache lacks them; needs hyperfine)
set -euo pipefail
cd "$(dirname "$0")/.."
lock=$(realpath "$1")
gpuenv=$(realpath "${2:-build/cli/gpuenv}")
work=$(mktemp -d "${TMPDIR:-/tmp}/gpuenv-bench-attest.XXXXXX")
trap 'rm -rf "$work"' EXIT
export GPUENV_CACHE_DIR=${GPUENV_CACHE_DIR:-$work/cache} SOURCE_DATE_EPOCH=1700000000
"$gpuenv" key generate -o "$work/keys" >/dev/null
"$gpuenv" build "$lock" -o "$work/warm" >/dev/null  # fills the cache: packages, trees, layers
hyperfine -N --warmup 1 --runs 10 \
  --prepare "rm -rf $work/plain $work/attested" \
  -n "build (fresh layout, warm cache)" "$gpuenv build $lock -o $work/plain" \
  -n "build --attest sbom,provenance" "$gpuenv build $lock -o $work/attested --attest sbom,provenance --key $work/keys/gpuenv.key"
