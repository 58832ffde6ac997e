#!/usr/bin/env bash
# data_read against dd and fio on the same file (issue 38: "within 10% of fio or dd on the same file"). Makes a file
# of SIZE_GIB GiB of random bytes in DIR, then RUNS times, alternating which goes first: `gpuenv validate --check
# data_read --data FILE` (O_DIRECT, 8 MiB reads), `dd if=FILE iflag=direct bs=8M of=/dev/null`, and, when fio is
# installed, `fio --rw=read --bs=8m --direct=1 --ioengine=psync --iodepth=1` (the same access pattern: one stream of
# 8 MiB direct reads). Prints each run and the medians with ratios. Rates in GB/s (10^9 bytes a second), as dd and
# fio's bw_bytes count them. Without fio its column says why it is empty; dd alone still answers. On a shared or
# virtual disk the rates vary from run to run: take many runs and read the medians.
# Usage: bench/data_read.sh [GPUENV] [DIR] [SIZE_GIB] [RUNS]
#   (defaults: build/cli/gpuenv, build/bench-data-read (a directory on the disk to measure, not a tmpfs), 2, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
gpuenv=${1:-build/cli/gpuenv}
dir=${2:-build/bench-data-read}
size_gib=${3:-2}
runs=${4:-5}
mkdir -p "$dir"
work=$(mktemp -d "$dir/bench-XXXXXX")
trap 'rm -rf "$work"' EXIT
file=$work/data.bin
echo "making $size_gib GiB of random bytes in $file ($(df -T "$dir" | awk 'NR==2 {print $2 " on " $1}'))"
dd if=/dev/urandom of="$file" bs=8M count=$((size_gib * 128)) iflag=fullblock oflag=direct status=none
sync "$file"
have_fio=yes
command -v fio >/dev/null || have_fio="no (fio is not installed: apt-get install fio)"

gpuenv_rate() {
  local json
  json=$("$gpuenv" validate --check data_read --data "$file" --level standard --json) || true
  echo "$json" | jq -e -r '.checks[] | select(.key == "data_read") | .results[0].metrics[] | select(.name == "read_gbs") | .value' ||
    { echo "bench: gpuenv gave no read_gbs:" >&2; echo "$json" >&2; exit 1; }
}
dd_rate() {
  # "2147483648 bytes (2.1 GB, 2.0 GiB) copied, 1.21 s, 1.8 GB/s": bytes over seconds, with more digits than dd prints.
  dd if="$file" of=/dev/null bs=8M iflag=direct 2>&1 | awk '/copied/ {for (i = 1; i <= NF; i++) if ($i == "s,") s = $(i - 1); printf "%.4f\n", $1 / s / 1e9}'
}
fio_rate() {
  fio --name=seqread --filename="$file" --rw=read --bs=8m --direct=1 --ioengine=psync --iodepth=1 --numjobs=1 \
      --size="${size_gib}g" --output-format=json | jq -r '.jobs[0].read.bw_bytes / 1e9'
}

g=(); d=(); f=(); rd=()
printf '%-4s %12s %12s %12s %14s\n' run "gpuenv GB/s" "dd GB/s" "fio GB/s" "gpuenv / dd"
for i in $(seq 1 "$runs"); do
  if [ $((i % 2)) = 1 ]; then a=$(gpuenv_rate); b=$(dd_rate); else b=$(dd_rate); a=$(gpuenv_rate); fi
  c="-"; [ "$have_fio" = yes ] && c=$(printf "%.3f" "$(fio_rate)")
  g+=("$a"); d+=("$b"); [ "$c" != "-" ] && f+=("$c")
  r=$(echo "scale=4; $a / $b" | bc); rd+=("$r")
  printf '%-4s %12.3f %12.3f %12s %14.3f\n' "$i" "$a" "$b" "$c" "$r"
done

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
mg=$(median "${g[@]}"); md=$(median "${d[@]}")
printf 'median %10.3f %12.3f %12s\n' "$mg" "$md" "$([ ${#f[@]} -gt 0 ] && printf '%.3f' "$(median "${f[@]}")" || echo -)"
echo "gpuenv / dd:  $(echo "scale=3; $mg / $md" | bc) (medians); $(median "${rd[@]}") (median of the runs' ratios: each pair ran back to back)"
if [ ${#f[@]} -gt 0 ]; then echo "gpuenv / fio: $(echo "scale=3; $mg / $(median "${f[@]}")" | bc)"; else echo "fio: $have_fio"; fi
