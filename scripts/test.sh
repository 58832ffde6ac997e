#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install dependencies, build, and run the whole test suite twice, then
# fuzz, then an online smoke against the host's mirrors. This is what CI runs (.ci/run); docs/ci.md says what each
# phase costs and why. Idempotent.
#   1. Release: GCC, Ninja, lld, -O2, a unity build, warnings are errors; every unit and contract test.
#   2. Sanitize: clang, -O1 -g1, AddressSanitizer + UndefinedBehaviorSanitizer, one build that serves both the
#      tests and the libFuzzer targets (the gpuenv libraries also carry libFuzzer's coverage, -fsanitize=fuzzer-no-link;
#      only the fuzz executables link libFuzzer); every unit and contract test again, under the sanitizers.
#   3. Fuzzing: every target for GPUENV_FUZZ_SECONDS (default 20), GPUENV_FUZZ_PARALLEL (default 2) at a time
#      (scripts/fuzz.sh, on the Sanitize build's executables).
#   4. The online smoke (tests/online/smoke.sh), right after the Release tests: a real image locked and built twice
#      from two caches to one digest and run, the VM example built twice to the same bytes and booted; skipped, saying so, when the host's mirrors cannot be reached; it fails the
#      run when they can be and a check fails. GPUENV_SMOKE=0 leaves it out.
# Ends with a table of the phases in seconds and the ten slowest tests, also when a phase fails.
# Tests labelled `online` need the internet and are left out unless GPUENV_ONLINE=1; tests labelled `gpu` skip
# themselves (saying why) on machines without an NVIDIA driver. Tests that time
# themselves (RUN_SERIAL) run alone; the rest run GPUENV_TEST_JOBS (default twice the cores) at a time: many
# tests wait on processes and sockets, not the CPU. Every test has a timeout (its own, else GPUENV_TEST_TIMEOUT,
# default 300 s), so a hang fails the run in minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)
test_jobs=${GPUENV_TEST_JOBS:-$((jobs * 2))}
test_timeout=${GPUENV_TEST_TIMEOUT:-300}
exclude=online
if [ "${GPUENV_ONLINE:-0}" = 1 ]; then exclude='^$'; fi

# The timing table: one row a phase (name, seconds, what it did), printed at the end whatever happened.
phase_rows=()
phase_name=
phase_t0=0
run_t0=$(date +%s%N)
slow_logs=()
begin() { phase_name=$1; phase_t0=$(date +%s%N); echo "== $1"; }
end() {
  phase_rows+=("$(printf '%-34s %8.1f  %s' "$phase_name" "$(( ($(date +%s%N) - phase_t0) / 1000000 ))e-3" "${1:-}")")
  phase_name=
}
table() {
  local rc=$?
  set +e +o pipefail  # the table never changes the exit status (head closing its pipe early is not a failure)
  if [ -n "$phase_name" ]; then end "(stopped here, exit $rc)"; fi
  echo
  echo "== timing (seconds; docs/ci.md)"
  printf '%-34s %8s  %s\n' phase seconds notes
  printf '%s\n' "${phase_rows[@]}"
  printf '%-34s %8.1f\n' total "$(( ($(date +%s%N) - run_t0) / 1000000 ))e-3"
  if [ "${#slow_logs[@]}" -gt 0 ]; then
    echo "== the ten slowest tests"
    # ctest's lines: "  12/1289 Test  #12: Name ......   Passed    1.23 sec"
    for log in "${slow_logs[@]}"; do
      [ -f "$log" ] || continue
      sed -nE "s/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1 $(basename "$(dirname "$log")")/p" "$log"
    done | sort -rn | head -n 10 | awk '{printf "%8.2f  %-22s %s\n", $1, $3, $2}'
  fi
  exit "$rc"
}
trap table EXIT

# ctest over one build, into the build's ctest.log.
run_tests() {
  local dir=$1 log=$1/ctest.log rc
  slow_logs+=("$log")
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$dir" -j"$test_jobs" --timeout "$test_timeout" --output-on-failure -LE "$exclude" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  tests_ran="$(grep -cE '^ *[0-9]+/[0-9]+ +Test +#' "$log" || true) tests"
  return "$rc"
}

begin dependencies
scripts/deps.sh
# Independent readers for the tests, all from PyPI, in a virtual environment of their own; a test that finds none
# skips, saying why: DSSE envelopes (securesystemslib), Kubernetes manifests (kubernetes-validate), and the build's
# attestations (tests/marks/attest_oracles.py): CycloneDX against its published 1.6 schema (cyclonedx-python-lib's
# bundled schemas, jsonschema), SPDX 2.3 (spdx-tools), in-toto Statement v1 and SLSA provenance v1 (in-toto-attestation,
# the in-toto project's reader of Statement v1; the `in-toto` package reads only links and layouts), locks (PyYAML).
# The probe names a module of each, so an older venv is upgraded in place.
venv=$root/build-test-venv
if ! "$venv/bin/python" -c 'import securesystemslib.dsse, cryptography, kubernetes_validate, cyclonedx.validation.json, jsonschema, spdx_tools.spdx.validation.document_validator, in_toto_attestation.predicates.provenance.v1.provenance_pb2, yaml' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet 'securesystemslib[crypto]==1.6.0' 'kubernetes-validate==1.37.0' \
    'cyclonedx-python-lib[json-validation]==11.12.0' 'spdx-tools==0.8.5' 'in-toto-attestation==0.9.3' 'PyYAML==6.0.4'
fi
# The VM boot tests' kernels (tests/images/vm_disk_test.cpp): Debian's cloud kernel and its generic one (the only
# one of the two with an AHCI driver), the .debs only (apt-get download: nothing is installed on this machine); the
# tests skip, saying why, without them.
vm_dir=$root/build-test-vm
mkdir -p "$vm_dir"
for flavour in cloud-amd64 amd64; do
  # linux-image-*-amd64_*.deb matches the cloud kernel's file too: the flavour is what precedes the version.
  if ! ls "$vm_dir" | grep -q "^linux-image-[0-9.]*-[0-9]*-${flavour}_.*\.deb$"; then
    kernel=$(apt-cache depends "linux-image-$flavour" 2>/dev/null | awk '/Depends:/ {print $2; exit}')
    if [ -n "$kernel" ]; then (cd "$vm_dir" && apt-get download -q "$kernel" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true); fi
  fi
done
# The arm64 boot test's (VmBoot.AnArm64DiskBootsUnderAavmf): Debian's arm64 cloud kernel and systemd-boot-efi's arm64
# .deb, where arm64 is a dpkg architecture (scripts/deps.sh adds it); the test skips, saying why, without them.
if dpkg --print-foreign-architectures | grep -qx arm64; then
  if ! ls "$vm_dir" | grep -q "^linux-image-[0-9.]*-[0-9]*-cloud-arm64_.*_arm64\.deb$"; then
    kernel=$(apt-cache depends "linux-image-cloud-arm64:arm64" 2>/dev/null | awk '/Depends:/ {print $2; exit}')
    if [ -n "$kernel" ]; then (cd "$vm_dir" && apt-get download -q "$kernel" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true); fi
  fi
  if ! ls "$vm_dir" | grep -q '^systemd-boot-efi_.*_arm64\.deb$'; then
    (cd "$vm_dir" && apt-get download -q systemd-boot-efi:arm64 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  fi
fi
end "apt packages, test venv, the VM tests' kernels"

# One build: configure and build it, then its tests, each a phase. NAME, DIR, what the build is (for the table), then
# the build's own cmake options; the options both builds share are here. CC and CXX come from the caller.
build_and_test() {
  local name=$1 dir=$2 what=$3
  shift 3
  begin "$name: configure and build"
  cmake -S . -B "$dir" -G Ninja "$@" -DCMAKE_UNITY_BUILD=ON -DGPUENV_LLD=ON -DGPUENV_WERROR=ON \
    -DGPUENV_TEST_CXX_FLAGS=-O0 -DGPUENV_BUILD_BENCH=OFF -DGPUENV_TEST_VENV="$venv" >/dev/null
  cmake --build "$dir" -j"$jobs"
  end "$what, Ninja, lld, unity (tests' own sources -O0), -Werror"
  begin "$name: tests"
  tests_ran=
  run_tests "$dir" || { end "$tests_ran, FAILED"; exit 1; }
  end "$tests_ran, -j$test_jobs"
}

# Release: GCC (Debian's default compiler, so its warnings are checked), -O2.
release=build-test-release
build_and_test Release "$release" "g++ $(g++ -dumpfullversion), -O2" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG"

# The online smoke, with the Release binary, before the long Sanitize build, so that a broken end to end fails early.
if [ "${GPUENV_SMOKE:-1}" = 1 ]; then
  begin "online smoke"
  smoke_rc=0
  tests/online/smoke.sh "$release/cli/gpuenv" "$root" || smoke_rc=$?
  case $smoke_rc in
    0) end "passed" ;;
    77) end "skipped: the host's mirrors cannot be reached" ;;
    *) end "FAILED"; exit 1 ;;
  esac
fi

# Sanitize: clang, one build for the sanitizer tests and the fuzzers.
sanitize=build-test-sanitize
CC=clang CXX=clang++ build_and_test Sanitize "$sanitize" \
  "clang $(clang -dumpversion), ASan + UBSan, fuzzer-no-link on the libraries" \
  -DCMAKE_BUILD_TYPE=Sanitize -DGPUENV_BUILD_FUZZ=ON
echo "== all tests passed (Release and Sanitize)"

begin "fuzzing"
GPUENV_FUZZ_BUILD=$sanitize GPUENV_FUZZ_PARALLEL=${GPUENV_FUZZ_PARALLEL:-2} scripts/fuzz.sh "${GPUENV_FUZZ_SECONDS:-20}"
end "every target ${GPUENV_FUZZ_SECONDS:-20} s, ${GPUENV_FUZZ_PARALLEL:-2} at a time"

echo "== all tests and fuzzers passed"
