#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz (every gpuenv library with libFuzzer's coverage, ASan and
# UBSan) and runs each for SECONDS (default 60), starting from the checked-in seeds in fuzz/corpus/<area>/ (the
# target without _fuzz) copied afresh into build-fuzz/corpus/<target>/ on every run.
# Fails when a target crashes, leaks, times out on an input or runs out of memory (libFuzzer then writes the input
# to build-fuzz/artifacts/<target>/); prints each target's final coverage (cov: edges, ft: features).
# Usage: scripts/fuzz.sh [SECONDS [TARGET...]]
# Environment: GPUENV_FUZZ_JOBS (build jobs, default nproc); GPUENV_FUZZ_PARALLEL (targets run at once, default 1);
# GPUENV_FUZZ_BUILD (a build directory configured with clang and -DGPUENV_BUILD_FUZZ=ON to use instead of
# build-fuzz, as scripts/test.sh uses its Sanitize build: the targets are built there, not configured again).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
all_targets=(spec_fuzz constraint_fuzz catalog_codec_fuzz config_fuzz archive_fuzz http_fuzz apt_fuzz wheel_fuzz project_fuzz dpkg_fuzz
             image_fuzz oci_fuzz registry_fuzz validate_fuzz cdi_fuzz multinode_fuzz mark_fuzz attest_fuzz disk_fuzz)
targets=("${all_targets[@]}")
if [ "$#" -gt 0 ]; then targets=("$@"); fi
build=${GPUENV_FUZZ_BUILD:-build-fuzz}
parallel=${GPUENV_FUZZ_PARALLEL:-1}
if [ -z "${GPUENV_FUZZ_BUILD:-}" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUENV_BUILD_TESTS=OFF \
    -DGPUENV_BUILD_BENCH=OFF -DGPUENV_ENABLE_CUDA=OFF -DGPUENV_BUILD_FUZZ=ON >/dev/null
elif ! grep -q '^GPUENV_BUILD_FUZZ:BOOL=ON$' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "fuzz.sh: $build is not a build directory configured with -DGPUENV_BUILD_FUZZ=ON" >&2
  exit 2
fi
cmake --build "$build" -j"${GPUENV_FUZZ_JOBS:-$(nproc)}" --target "${targets[@]}" gpuenv_recipes

# The working corpus: the checked-in seeds, plus what the build alone can make; libFuzzer adds what it finds.
rm -rf "$build/corpus"
mkdir -p "$build/corpus"
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t"
  if [ -d "fuzz/corpus/${t%_fuzz}" ]; then cp fuzz/corpus/"${t%_fuzz}"/* "$build/corpus/$t/"; fi
done
if [ -d "$build/corpus/catalog_codec_fuzz" ]; then head -c 4000 "$build/recipes/catalog.bin" > "$build/corpus/catalog_codec_fuzz/head.bin"; fi
if [ -d "$build/corpus/image_fuzz" ]; then { printf '\000'; head -c 8192 /bin/true; } > "$build/corpus/image_fuzz/elf"; fi

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
scratch=$(mktemp -d "${TMPDIR:-/tmp}/gpuenv-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# One target: its log in artifacts/<target>/last.log, its status in artifacts/<target>/status.
run_target() {
  local t=$1 log="$build/artifacts/$1/last.log"
  # TMPDIR: a target's scratch directory (mkdtemp) lands here and goes with it.
  mkdir -p "$scratch/$t"
  if TMPDIR="$scratch/$t" "$build/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$build/artifacts/$t/" "$build/corpus/$t" >"$log" 2>&1; then
    echo ok > "$build/artifacts/$t/status"
  else
    echo FAILED > "$build/artifacts/$t/status"
  fi
}
# GPUENV_FUZZ_PARALLEL targets at a time, in the order given; a slot frees when any running target ends.
running=0
for t in "${targets[@]}"; do
  rm -f "$build/artifacts/$t/status"
  echo "== $t (${seconds}s)"
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then wait -n || true; running=$((running - 1)); fi
done
wait
failed=()
summary=()
for t in "${targets[@]}"; do
  log="$build/artifacts/$t/last.log"
  status=$(cat "$build/artifacts/$t/status" 2>/dev/null || echo FAILED)
  if [ "$status" != ok ]; then
    failed+=("$t")
    echo "== $t FAILED:"
    tail -n 60 "$log"
  fi
  final=$(grep -E '^#[0-9]+.*(DONE|INITED|pulse|NEW|REDUCE).*cov: ' "$log" | tail -n 1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$final")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$final")
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log")
  summary+=("$(printf '%-20s %-7s cov %6s  ft %6s  runs %9s' "$t" "$status" "${cov:-?}" "${ft:-?}" "${runs:-?}")")
done
echo "== coverage after ${seconds}s per target (cov: edges of the gpuenv libraries and the target; ft: features)"
printf '%s\n' "${summary[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "== fuzzing FAILED: ${failed[*]} (inputs in $build/artifacts/<target>/)" >&2
  exit 1
fi
echo "== fuzzing passed"
