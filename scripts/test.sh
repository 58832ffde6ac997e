#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install dependencies, build, and run the whole test suite twice,
# in a Release build and in an AddressSanitizer + UndefinedBehaviorSanitizer build, then every libFuzzer target for
# GPUENV_FUZZ_SECONDS (default 20) with coverage on the libraries (scripts/fuzz.sh; clang). Idempotent.
# Tests labelled `online` need the internet and are left out unless GPUENV_ONLINE=1; tests labelled `gpu`
# skip themselves (saying why) on machines without an NVIDIA driver.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)
exclude=online
if [ "${GPUENV_ONLINE:-0}" = 1 ]; then exclude='^$'; fi
# Independent readers for the tests (DSSE envelopes: securesystemslib; Kubernetes manifests: kubernetes-validate;
# both from PyPI), in a virtual environment of their own; a test that finds none skips, saying why.
venv=$PWD/build-test-venv
if ! "$venv/bin/python" -c 'import securesystemslib.dsse, cryptography, kubernetes_validate' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet 'securesystemslib[crypto]==1.6.0' 'kubernetes-validate==1.37.0'
fi
# The VM boot test's kernel (tests/images/vm_disk_test.cpp): Debian's cloud kernel, the .deb only (apt-get download:
# nothing is installed on this machine); the test skips, saying why, without it.
vm_dir=$PWD/build-test-vm
if ! ls "$vm_dir"/linux-image-*-cloud-amd64_*.deb >/dev/null 2>&1; then
  kernel=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends:/ {print $2; exit}')
  mkdir -p "$vm_dir"
  if [ -n "$kernel" ]; then (cd "$vm_dir" && apt-get download -q "$kernel" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true); fi
fi
for type in Release Sanitize; do
  dir=build-test-${type,,}
  echo "== $type build ($dir)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DGPUENV_BUILD_BENCH=OFF -DGPUENV_TEST_VENV="$venv" >/dev/null
  cmake --build "$dir" -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$dir" -j"$jobs" --output-on-failure -LE "$exclude"
done
echo "== all tests passed (Release and Sanitize)"
echo "== fuzzing: every target for ${GPUENV_FUZZ_SECONDS:-20}s (scripts/fuzz.sh)"
GPUENV_FUZZ_JOBS=$jobs scripts/fuzz.sh "${GPUENV_FUZZ_SECONDS:-20}"
echo "== all tests and fuzzers passed"
