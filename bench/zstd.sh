#!/usr/bin/env bash
# Compression benchmark: gpuenv's ParallelZstd (images/oci/parallel_zstd) against the zstd command on the same
# bytes at the same level: `zstd -T0` (the figure issue 4 names: zstd picks its thread count, by default the
# physical cores) and `zstd -T<THREADS>` (the same thread count as gpuenv). The input is a ~500 MiB tar of
# /usr/lib and /usr/share (binaries, libraries, text: mixed compressibility), built once, as bench/gzip.sh
# builds it. Each run is a fresh process reading the (page-cached) tar and writing a file. Also checks the
# output (zstd -t, zstd -dc) and compares it with the zstd command's byte for byte (equal at level 3: see
# images/oci/parallel_zstd.hpp).
# Needs g++, libzstd-dev and zstd (Debian packages), python3; hyperfine when installed, else (or with
# GPUENV_BENCH_INTERLEAVE=1, better on a shared host) python3 times interleaved runs itself.
# Usage: bench/zstd.sh [THREADS (default: nproc)] [LEVEL (default: 3)] [RUNS (default: 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
level=${2:-3}
runs=${3:-3}
work=${GPUENV_ZSTD_BENCH_DIR:-${TMPDIR:-/tmp}/gpuenv-zstd-bench}
mkdir -p "$work"
input=$work/usr.tar
if [ ! -s "$input" ]; then
  echo "building $input (once)"
  # tar is cut at 500 MiB by head, so its SIGPIPE is expected.
  (tar --sort=name -cf - /usr/lib /usr/share 2>/dev/null || true) | head -c $((500 << 20)) > "$input.tmp"
  mv "$input.tmp" "$input"
fi
size=$(stat -c %s "$input")

bench=$work/zstd_bench
"${CXX:-g++}" -std=c++20 -O2 -I. bench/zstd_bench.cpp images/oci/parallel_zstd.cpp base/error.cpp -lzstd -pthread \
  -o "$bench"

names=("gpuenv ParallelZstd, $threads threads, level $level"
       "zstd -T0 -$level"
       "zstd -T$threads -$level")
cmds=("$bench -p $threads -l $level $input $work/ours.zst"
      "zstd -q -f -T0 -$level $input -o $work/zstd-t0.zst"
      "zstd -q -f -T$threads -$level $input -o $work/zstd-tn.zst")
outs=("$work/ours.zst" "$work/zstd-t0.zst" "$work/zstd-tn.zst")

if command -v hyperfine >/dev/null && [ -z "${GPUENV_BENCH_INTERLEAVE:-}" ]; then
  args=()
  for i in "${!cmds[@]}"; do args+=(-n "${names[$i]}" "${cmds[$i]}"); done
  hyperfine --warmup 1 --runs "$runs" --export-json "$work/timing.json" "${args[@]}"
else
  # Round-robin runs (A B C A B C ...) so that a load that drifts (a shared host) hits every command alike.
  echo "timing $runs interleaved runs (after 1 warm-up) of each command with python3"
  python3 - "$work/timing.json" "$runs" "${#cmds[@]}" "${names[@]}" "${cmds[@]}" <<'PY'
import json, os, statistics, subprocess, sys, time
out, runs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names, cmds = sys.argv[4:4 + n], sys.argv[4 + n:4 + 2 * n]
walls = [[] for _ in cmds]
cpus = [[] for _ in cmds]
for cmd in cmds:
    subprocess.run(cmd, shell=True, check=True)
for _ in range(runs):
    for i, cmd in enumerate(cmds):
        before = os.times()
        t = time.monotonic()
        subprocess.run(cmd, shell=True, check=True)
        walls[i].append(time.monotonic() - t)
        after = os.times()
        cpus[i].append((after.children_user - before.children_user, after.children_system - before.children_system))
results = []
for i, name in enumerate(names):
    results.append({"command": name, "mean": statistics.mean(walls[i]),
                    "stddev": statistics.stdev(walls[i]) if runs > 1 else 0.0,
                    "median": statistics.median(walls[i]),
                    "user": statistics.mean(c[0] for c in cpus[i]), "system": statistics.mean(c[1] for c in cpus[i])})
    print(f"{name}: wall {' '.join(f'{w:.2f}' for w in walls[i])} s")
json.dump({"results": results}, open(out, "w"))
PY
fi

zstd -q -t "$work/ours.zst"
zstd -q -dc "$work/ours.zst" | cmp - "$input"
echo "zstd -t and zstd -dc accept gpuenv's output"
for other in zstd-tn zstd-t0; do
  if cmp -s "$work/ours.zst" "$work/$other.zst"; then
    echo "gpuenv's output equals ${other/zstd-t/zstd -T}'s byte for byte"
  else
    echo "gpuenv's output differs from ${other/zstd-t/zstd -T}'s"
  fi
done
python3 - "$work/timing.json" "$size" "${outs[@]}" <<'PY'
import json, os, sys
runs = json.load(open(sys.argv[1]))["results"]
size = int(sys.argv[2])
outs = sys.argv[3:]
for r, out in zip(runs, outs):
    c = os.path.getsize(out)
    cpu = r["user"] + r["system"]
    print(f"{r['command']}: {size / r['mean'] / 1e6:.1f} MB/s (mean {r['mean']:.2f} s ± {r['stddev']:.2f}; "
          f"CPU {cpu:.2f} s), {c} bytes, ratio {c / size:.4f}")
ours = runs[0]
for other in runs[1:]:
    print(f"gpuenv / {other['command']} throughput: {other['mean'] / ours['mean']:.3f} by wall clock, "
          f"{(other['user'] + other['system']) / (ours['user'] + ours['system']):.3f} by CPU time")
PY
