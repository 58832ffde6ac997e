#!/usr/bin/env bash
# Same bytes before and after a refactor: run one gpuenv binary over the example specs and write a summary of
# what it wrote, one line an artifact, so that two binaries (or two runs of one) compare with `diff`.
#
#   scripts/same_bytes.sh GPUENV_BINARY OUTDIR [EXAMPLE...]
#   diff BEFORE/summary.txt AFTER/summary.txt
#
# For each EXAMPLE (recipes/examples/EXAMPLE.yaml; default: the list below), from the repository root:
#   1. lock    the spec into OUTDIR/EXAMPLE.lock (with SAME_BYTES_LOCKS=DIR: copy DIR/EXAMPLE.lock instead, so a
#              later binary builds what an earlier one locked even when the mirror moved since), then lock again
#              and say in OUTDIR/relock.txt whether the fresh lock equals the one used;
#   2. build   the lock: an OCI layout (image digest, every file of the layout, the --json result, inspect --json),
#              or for a VM lock the qcow2 disk (its sha256, the --json result, inspect --json);
#   3. validate --image LAYOUT --backend replay:tests/data/validate/h100x8.yaml (--json report, --junit, --metrics,
#              and the text report), the clock frozen by libfaketime;
#   4. mark    the layout with the report (refused unless it passed: the refusal is recorded), then with a second
#              report of the checks that pass on the replay (health, kernels, throughput, image), and record the
#              --json result, the statement, the envelope, the attestation manifest and the layout's files;
#   5. verify  the marked layout with the public key and inspect --json it (the marks listed).
# OUTDIR/summary.txt holds "EXAMPLE kind sha256 exit_code" lines; OUTDIR/EXAMPLE/ keeps every file behind them
# (and the layout or disk, whose blobs are hard links into the cache). OUTDIR/summary-timing.txt holds the mean
# time of `lock recipes/examples/vm-debian-driver.yaml` (hyperfine, warm cache, 5 runs); it is not compared.
#
# Environment:
#   SAME_BYTES_CACHE   the download cache, GPUENV_CACHE_DIR (default OUTDIR/../cache; share it between runs)
#   SAME_BYTES_WORK    where images are built, validated and marked (default: beside the cache, work/). Reports and
#                      marks name the layout by its path, so runs to be compared must use the same one
#   SAME_BYTES_LOCKS   a directory of EXAMPLE.lock files from an earlier run: build from those
#   SAME_BYTES_KEY     the private key of the marks (default OUTDIR/../key/gpuenv.key, generated once when missing);
#                      its public key is the .pub beside it
#   SAME_BYTES_TIME    the frozen instant of validate, mark and verify (default "2026-12-01 12:00:00", UTC)
#   SAME_BYTES_TIMING  0 leaves out the hyperfine timing
#   SAME_BYTES_BUILD_DRIVER  1 also builds vm-debian-driver (its NVIDIA module compiles for minutes); else locked only
#   SAME_BYTES_FAKETIME_LIB  libfaketime.so.1 (default: Debian's)
#
# What is pinned and why:
#   - SOURCE_DATE_EPOCH=0, TZ=UTC, LC_ALL=C, umask 022; gpuenv's own variables that would change answers
#     (GPUENV_DRIVER, GPUENV_GPUS, GPUENV_CATALOG, GPUENV_CONFIG, GPUENV_MARK_KEY, XDG_CONFIG_HOME) are unset.
#   - validate, mark and verify run under libfaketime with an absolute FAKETIME (a frozen clock, CLOCK_MONOTONIC
#     too): the report's started_at is the instant and every duration_ms is 0. libfaketime comes in by LD_PRELOAD,
#     which the env_vars check reports (a warn): the same in every run on one machine.
#   - Marks are ECDSA P-256 (marks/keys.cpp), and OpenSSL 3.0 signs with a random nonce, so two marks of one
#     statement differ. mark runs with a small LD_PRELOAD shim that makes RAND_priv_bytes return fixed bytes;
#     OpenSSL then derives the nonce from the key and the message alone (bn_rand.c, BN_generate_dsa_nonce), and
#     the envelope is the same bytes each time. verify checks the signatures so made.
#   - vm-debian-driver needs Debian's contrib, non-free and non-free-firmware: it is locked with --host-root
#     OUTDIR/../hostroot, whose apt sources are the host's with those components added.
set -uo pipefail

usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
cd "$(dirname "$0")/.." || exit 4
repo=$PWD

bin=$(readlink -f "$1") || { echo "same_bytes: no binary $1" >&2; exit 2; }
[ -x "$bin" ] || { echo "same_bytes: $1 is not executable" >&2; exit 2; }
mkdir -p "$2" || exit 4
out=$(readlink -f "$2")
shift 2
examples=("$@")
if [ ${#examples[@]} -eq 0 ]; then
  # jax-h200 is left out: every image is also unpacked into the cache by validate --image, and a cache holding
  # these seven examples already takes ~60 GiB. Name it to have it.
  examples=(hello-cuda cuda-l4-debian tensorflow-a100-debian confidential-h100-debian torch-h100 vm-debian
            vm-debian-driver)
fi
if [ -e "$out/summary.txt" ]; then
  echo "same_bytes: $out already holds a run (summary.txt); give an empty directory" >&2
  exit 2
fi

top=$(dirname "$out")
cache=$(readlink -m "${SAME_BYTES_CACHE:-$top/cache}")
work=$(readlink -m "${SAME_BYTES_WORK:-$(dirname "$cache")/work}")
key=$(readlink -m "${SAME_BYTES_KEY:-$top/key/gpuenv.key}")
pub="${key%.key}.pub"
locks=${SAME_BYTES_LOCKS:+$(readlink -f "$SAME_BYTES_LOCKS")}
instant=${SAME_BYTES_TIME:-2026-12-01 12:00:00}
hostroot=$top/hostroot
replay=tests/data/validate/h100x8.yaml

faketime_lib=${SAME_BYTES_FAKETIME_LIB:-}
if [ -z "$faketime_lib" ]; then
  for f in /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1; do
    [ -f "$f" ] && faketime_lib=$f && break
  done
fi
[ -f "$faketime_lib" ] || { echo "same_bytes: no libfaketime (apt-get install faketime)" >&2; exit 4; }
for tool in jq sha256sum gcc; do
  command -v "$tool" >/dev/null || { echo "same_bytes: needs $tool" >&2; exit 4; }
done

export SOURCE_DATE_EPOCH=0 TZ=UTC LC_ALL=C GPUENV_CACHE_DIR=$cache
unset GPUENV_DRIVER GPUENV_GPUS GPUENV_CATALOG GPUENV_CONFIG GPUENV_MARK_KEY XDG_CONFIG_HOME
umask 022
mkdir -p "$cache" "$work" || exit 4

# One run at a time in the work directory: its paths are part of the outputs.
exec 9>"$work/.lock"
flock -n 9 || { echo "same_bytes: another run holds $work" >&2; exit 4; }

tools=$(mktemp -d) || exit 4
trap 'rm -rf "$tools"' EXIT
cat > "$tools/fixed_rand.c" <<'EOF'
/* Fixed bytes for OpenSSL's private randomness: ECDSA's nonce becomes a function of the key and the message. */
#include <stddef.h>
typedef struct ossl_lib_ctx_st OSSL_LIB_CTX;
static void fill(unsigned char *buf, size_t num) { for (size_t i = 0; i < num; ++i) buf[i] = (unsigned char)(0x5a ^ i); }
int RAND_priv_bytes_ex(OSSL_LIB_CTX *ctx, unsigned char *buf, size_t num, unsigned int strength) {
  (void)ctx; (void)strength; fill(buf, num); return 1;
}
int RAND_priv_bytes(unsigned char *buf, int num) { fill(buf, (size_t)num); return 1; }
EOF
gcc -O2 -shared -fPIC -o "$tools/fixed_rand.so" "$tools/fixed_rand.c" || exit 4

frozen() { LD_PRELOAD=$faketime_lib FAKETIME="$instant" "$@"; }
frozen_fixed_rand() { LD_PRELOAD="$tools/fixed_rand.so $faketime_lib" FAKETIME="$instant" "$@"; }

summary=$out/summary.txt
: > "$summary"
: > "$out/relock.txt"
sha() { sha256sum "$1" | cut -d' ' -f1; }
# The files of a directory, by name and content.
tree_sha() { (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1; }
line() { echo "$1 $2 $3 $4" >> "$summary"; }
# record NAME KIND FILE RC: the file's sha256, or "-" when the step wrote none.
record() { if [ -f "$3" ]; then line "$1" "$2" "$(sha "$3")" "$4"; else line "$1" "$2" - "$4"; fi; }
log() { echo "same_bytes: $*" >&2; }

if [ ! -f "$key" ]; then
  mkdir -p "$(dirname "$key")"
  "$bin" key generate -o "$(dirname "$key")" >&2 || { log "key generate failed"; exit 4; }
  [ "$(basename "$key")" = gpuenv.key ] || { log "generated gpuenv.key, but SAME_BYTES_KEY names $key"; exit 4; }
fi

# The host's apt sources with Debian's non-free components, for a spec whose VM takes Debian's NVIDIA driver.
make_hostroot() {
  [ -d "$hostroot/etc/apt" ] && return 0
  mkdir -p "$hostroot/etc/apt/sources.list.d"
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    sed -E 's/^Components:.*/Components: main contrib non-free non-free-firmware/' "$f" > "$hostroot/etc/apt/sources.list.d/$(basename "$f")"
  done
  if [ -f /etc/apt/sources.list ]; then
    sed -E '/^deb(-src)? /s/ main( .*)?$/ main contrib non-free non-free-firmware/' /etc/apt/sources.list > "$hostroot/etc/apt/sources.list"
  fi
  for f in /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -E '/^deb(-src)? /s/ main( .*)?$/ main contrib non-free non-free-firmware/' "$f" > "$hostroot/etc/apt/sources.list.d/$(basename "$f")"
  done
  [ -d /etc/apt/preferences.d ] && cp -a /etc/apt/preferences.d "$hostroot/etc/apt/"
  [ -f /etc/apt/preferences ] && cp -a /etc/apt/preferences "$hostroot/etc/apt/"
  return 0
}
lock_args() {  # extra arguments of `lock` for a spec
  if grep -Eq '^[[:space:]]+driver:' "$1" && grep -Eq '^vm:' "$1"; then make_hostroot; echo "--host-root $hostroot"; fi
}

run_example() {
  local name=$1 spec=recipes/examples/$1.yaml
  local d=$out/$name w=$work/$name rc
  [ -f "$spec" ] || { log "$name: no $spec"; line "$name" spec - 2; return; }
  rm -rf "$d" "$w"
  mkdir -p "$d" "$w"
  # shellcheck disable=SC2046
  local extra; extra=$(lock_args "$spec")

  # 1. lock (or take the earlier run's), then lock again to see whether the mirror moved.
  if [ -n "$locks" ]; then
    if cp "$locks/$name.lock" "$out/$name.lock"; then rc=0; else rc=4; fi
    echo "copied from $locks/$name.lock" > "$d/lock.log"
  else
    # shellcheck disable=SC2086
    "$bin" lock "$spec" $extra -o "$out/$name.lock" > "$d/lock.log" 2>&1
    rc=$?
  fi
  record "$name" lock "$out/$name.lock" "$rc"
  # shellcheck disable=SC2086
  "$bin" lock "$spec" $extra -o "$d/relock.lock" > "$d/relock.log" 2>&1
  local rrc=$? verdict=DIFFERS
  [ -f "$out/$name.lock" ] && [ -f "$d/relock.lock" ] && cmp -s "$out/$name.lock" "$d/relock.lock" && verdict=same
  echo "$name $verdict used=$( [ -f "$out/$name.lock" ] && sha "$out/$name.lock" || echo -) fresh=$( [ -f "$d/relock.lock" ] && sha "$d/relock.lock" || echo -) rc=$rrc" >> "$out/relock.txt"
  [ -f "$out/$name.lock" ] || { log "$name: no lock (exit $rc), see $d/lock.log"; return; }
  cp "$out/$name.lock" "$w/gpuenv.lock"

  # 2. build: a VM disk or an OCI layout.
  if grep -q '^vm:' "$w/gpuenv.lock"; then
    if grep -Eq '^[[:space:]]+driver:' "$spec" && [ "${SAME_BYTES_BUILD_DRIVER:-0}" != 1 ]; then
      log "$name: locked only (SAME_BYTES_BUILD_DRIVER=1 builds its driver)"
      return
    fi
    "$bin" build "$w/gpuenv.lock" --format qcow2 -o "$w/disk.qcow2" --json > "$w/build.json" 2> "$d/build.log"
    rc=$?
    record "$name" build-json "$w/build.json" "$rc"
    record "$name" disk "$w/disk.qcow2" "$rc"
    if [ -f "$w/disk.qcow2" ]; then
      "$bin" inspect "$w/disk.qcow2" --all --json > "$w/inspect.json" 2> "$d/inspect.log"
      record "$name" inspect "$w/inspect.json" $?
    fi
    mv "$w"/* "$d/" 2>/dev/null
    return
  fi

  "$bin" build "$w/gpuenv.lock" -o "$w/image" --json > "$w/build.raw.json" 2> "$d/build.log"
  rc=$?
  # Whether a layer was taken from the cache depends on what ran before, not on the binary.
  jq 'del(.layers[]?.reused)' "$w/build.raw.json" > "$w/build.json" 2>/dev/null || rm -f "$w/build.json"
  record "$name" build-json "$w/build.json" "$rc"
  if [ "$rc" -ne 0 ] || [ ! -f "$w/image/index.json" ]; then
    log "$name: build failed (exit $rc), see $d/build.log"
    mv "$w"/* "$d/" 2>/dev/null
    return
  fi
  line "$name" image "$(jq -r .digest "$w/build.json" | sed 's/^sha256://')" "$rc"
  line "$name" layout "$(tree_sha "$w/image")" "$rc"

  # 3. validate on the recorded H100 x8, the clock frozen.
  frozen "$bin" validate --image "$w/image" --backend "replay:$replay" --json --junit "$w/report.junit.xml" \
    --metrics "$w/report.prom" > "$w/report.json" 2> "$d/validate.log"
  rc=$?
  record "$name" report "$w/report.json" "$rc"
  record "$name" junit "$w/report.junit.xml" "$rc"
  record "$name" metrics "$w/report.prom" "$rc"
  frozen "$bin" validate --image "$w/image" --backend "replay:$replay" > "$w/report.txt" 2> "$d/validate-text.log"
  record "$name" report-text "$w/report.txt" $?

  # 4. mark: with the whole report (refused unless it passed), then with the checks the replay passes.
  frozen_fixed_rand "$bin" mark "$w/image" --report "$w/report.json" --key "$key" --allow-replay --json \
    > "$w/mark-full.json" 2> "$d/mark-full.log"
  record "$name" mark-full "$w/mark-full.json" $?
  frozen "$bin" validate --image "$w/image" --backend "replay:$replay" --json --check health --check kernels \
    --check throughput --check image > "$w/report-markable.json" 2> "$d/validate-markable.log"
  rc=$?
  record "$name" report-markable "$w/report-markable.json" "$rc"
  frozen_fixed_rand "$bin" mark "$w/image" --report "$w/report-markable.json" --key "$key" --allow-replay --json \
    > "$w/mark.json" 2> "$d/mark.log"
  rc=$?
  record "$name" mark "$w/mark.json" "$rc"
  local att n=0 layer
  att=$(jq -r '.manifests[] | select((.annotations["org.opencontainers.image.ref.name"] // "") | endswith(".att")) | .digest' \
        "$w/image/index.json" | sed 's/^sha256://' | head -1)
  if [ -n "$att" ]; then
    record "$name" mark-att "$w/image/blobs/sha256/$att" "$rc"
    for layer in $(jq -r '.layers[].digest' "$w/image/blobs/sha256/$att" | sed 's/^sha256://'); do
      n=$((n + 1))
      record "$name" "mark-envelope-$n" "$w/image/blobs/sha256/$layer" "$rc"
      jq -r .payload "$w/image/blobs/sha256/$layer" | base64 -d > "$w/mark-statement-$n.json"
      record "$name" "mark-statement-$n" "$w/mark-statement-$n.json" "$rc"
    done
  else
    line "$name" mark-att - "$rc"
  fi
  record "$name" index "$w/image/index.json" "$rc"
  line "$name" layout-marked "$(tree_sha "$w/image")" "$rc"

  # 5. verify the marks with the public key, and list them.
  frozen "$bin" verify "$w/image" --key "$pub" --gpu any --driver any --cc any --allow-replay --json \
    > "$w/verify.json" 2> "$d/verify.log"
  record "$name" verify "$w/verify.json" $?
  frozen "$bin" inspect "$w/image" --all --json > "$w/inspect.json" 2> "$d/inspect.log"
  record "$name" inspect "$w/inspect.json" $?

  mv "$w"/* "$d/" 2>/dev/null
}

start=$(date +%s)
for name in "${examples[@]}"; do
  t0=$(date +%s)
  run_example "$name"
  log "$name done in $(( $(date +%s) - t0 )) s"
done
rmdir "$work"/* 2>/dev/null

# The lock of the VM driver example, timed (not compared: the machine's load decides it).
if [ "${SAME_BYTES_TIMING:-1}" != 0 ]; then
  if command -v hyperfine >/dev/null; then
    make_hostroot
    hyperfine --style basic --warmup 1 --runs 5 --export-json "$out/timing.json" \
      "$bin lock recipes/examples/vm-debian-driver.yaml --host-root $hostroot -o $out/.timing.lock" > "$out/timing.log" 2>&1
    rc=$?
    rm -f "$out/.timing.lock"
    if [ "$rc" -eq 0 ]; then
      jq -r '.results[0] | "lock vm-debian-driver mean \(.mean) s stddev \(.stddev) s min \(.min) s max \(.max) s runs \(.times | length)"' \
        "$out/timing.json" > "$out/summary-timing.txt"
    else
      echo "lock vm-debian-driver failed (exit $rc), see timing.log" > "$out/summary-timing.txt"
    fi
  else
    echo "hyperfine missing (apt-get install hyperfine)" > "$out/summary-timing.txt"
  fi
fi

{
  echo "binary $bin"
  echo "binary_sha256 $(sha "$bin")"
  echo "repo $repo $(git -C "$repo" rev-parse HEAD 2>/dev/null)"
  echo "cache $cache"
  echo "work $work"
  echo "key $key $(sha "$pub")"
  echo "locks ${locks:-fresh}"
  echo "instant $instant"
  echo "seconds $(( $(date +%s) - start ))"
} > "$out/run.txt"
log "wrote $summary ($(wc -l < "$summary") lines); relock: $(grep -c ' same ' "$out/relock.txt") same, $(grep -c ' DIFFERS ' "$out/relock.txt") differ"
