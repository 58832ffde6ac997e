#!/usr/bin/env bash
# apt index benchmark on Debian bookworm main amd64: takes the host's apt list (apt keeps it lz4-compressed)
# and recompresses it with xz as the archive serves it, then runs bench/packages_bench.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DGPUENV_BUILD_TESTS=OFF -DGPUENV_BUILD_BENCH=ON >/dev/null
cmake --build build-bench -j"$(nproc)" --target packages_bench >/dev/null
src=$(ls /var/lib/apt/lists/*_dists_bookworm_main_binary-amd64_Packages* 2>/dev/null | head -1 || true)
if [ -z "$src" ]; then echo "no bookworm main Packages in /var/lib/apt/lists; run apt-get update first" >&2; exit 2; fi
out=$(mktemp --suffix=.xz)
trap 'rm -f "$out"' EXIT
case "$src" in
  *.lz4) lz4 -dc "$src" | xz -6 -T1 > "$out" ;;
  *.xz) cp "$src" "$out" ;;
  *) xz -6 -T1 -c "$src" > "$out" ;;
esac
ls -l "$out"
GPUENV_PACKAGES_XZ=$out build-bench/bench/packages_bench --benchmark_min_time=1
