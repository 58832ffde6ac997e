#!/usr/bin/env bash
# Compression benchmark: gpuenv's ParallelGzip (images/oci/parallel_gzip) against pigz on the same bytes, same
# level, same thread count, same block size: a ~500 MiB tar of /usr/lib and /usr/share (binaries, libraries,
# text: mixed compressibility), built once. Each run is a fresh process reading the (page-cached) tar and
# writing a file. Also checks the output (gzip -t, gzip -dc) and compares it with pigz's byte for byte.
# Needs g++, zlib, pigz, gzip and hyperfine (Debian packages); python3 for the MB/s summary.
# Usage: bench/gzip.sh [THREADS (default: nproc)] [LEVEL (default: 6)]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
level=${2:-6}
work=${GPUENV_GZIP_BENCH_DIR:-${TMPDIR:-/tmp}/gpuenv-gzip-bench}
mkdir -p "$work"
input=$work/usr.tar
if [ ! -s "$input" ]; then
  echo "building $input (once)"
  # tar is cut at 500 MiB by head, so its SIGPIPE is expected.
  (tar --sort=name -cf - /usr/lib /usr/share 2>/dev/null || true) | head -c $((500 << 20)) > "$input.tmp"
  mv "$input.tmp" "$input"
fi
size=$(stat -c %s "$input")

bench=$work/gzip_bench
"${CXX:-g++}" -std=c++20 -O2 -I. bench/gzip_bench.cpp images/oci/parallel_gzip.cpp base/error.cpp -lz -pthread -o "$bench"

ours="$bench -p $threads -l $level -b 128 $input $work/ours.gz"
ours_1m="$bench -p $threads -l $level -b 1024 $input $work/ours-1m.gz"
pigz_cmd="pigz -n -$level -p $threads -b 128 -c $input > $work/pigz.gz"

hyperfine --warmup 1 --runs 3 --export-json "$work/hyperfine.json" \
  -n "gpuenv ParallelGzip, $threads threads, level $level, 128 KiB blocks" "$ours" \
  -n "pigz, $threads threads, level $level, 128 KiB blocks" "$pigz_cmd" \
  -n "gpuenv ParallelGzip, $threads threads, level $level, 1 MiB blocks" "$ours_1m"

gzip -t "$work/ours.gz"
gzip -dc "$work/ours.gz" | cmp - "$input"
echo "gzip -t and gzip -dc accept gpuenv's output"
if cmp -s <(tail -c +11 "$work/ours.gz") <(tail -c +11 "$work/pigz.gz") && \
   cmp -s <(head -c 9 "$work/ours.gz") <(head -c 9 "$work/pigz.gz"); then
  echo "gpuenv's output equals pigz -n's apart from the OS byte (255 vs 3)"
else
  echo "gpuenv's output differs from pigz -n's"
fi
if command -v python3 >/dev/null; then
  python3 - "$work/hyperfine.json" "$size" "$work/ours.gz" "$work/pigz.gz" "$work/ours-1m.gz" <<'PY'
import json, os, sys
runs = json.load(open(sys.argv[1]))["results"]
size = int(sys.argv[2])
outs = sys.argv[3:]
for r, out in zip(runs, [outs[0], outs[1], outs[2]]):
    c = os.path.getsize(out)
    cpu = r["user"] + r["system"]
    print(f"{r['command']}: {size / r['mean'] / 1e6:.1f} MB/s (mean {r['mean']:.2f} s ± {r['stddev']:.2f}; "
          f"CPU {cpu:.2f} s), {c} bytes, ratio {c / size:.4f}")
ours, pigz = runs[0], runs[1]
print(f"gpuenv/pigz throughput: {pigz['mean'] / ours['mean']:.3f} by wall clock, "
      f"{(pigz['user'] + pigz['system']) / (ours['user'] + ours['system']):.3f} by CPU time "
      f"(the fair figure when other processes share the cores); "
      f"size gpuenv/pigz: {os.path.getsize(outs[0]) / os.path.getsize(outs[1]):.5f}")
PY
fi
