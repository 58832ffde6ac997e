#!/usr/bin/env bash
# The online smoke (scripts/test.sh runs it in CI after the test suites; ctest's online.smoke too): what the unit
# tests cannot show, end to end against the host's Debian mirror and Python index (found as gpuenv finds them:
# `gpuenv sources`). recipes/examples/hello-cuda.yaml is
#   1. locked twice, from two empty caches: the two locks must be the same bytes;
#   2. built from that lock twice, from the two caches, the second in another directory under umask 077, another
#      time zone and one thread: the two images must have the same manifest digest, and so must a rebuild;
#   3. run (`gpuenv run --no-gpu`): the image's CUDA runtime answers its version; pushed to the real docker-registry
#      on 127.0.0.1, run as docker://REF from an empty cache (it prints 42) and validated by that reference on the
#      recorded 8x H100, with the pull timed beside `skopeo copy`;
# and recipes/examples/vm-debian.yaml (a VM disk, docs/vm.md), without SOURCE_DATE_EPOCH as most users build it,
#   4. built twice as raw disks, from the two caches, into two directories under two names, the second under umask
#      077, another time zone and one thread: the same bytes;
#   5. booted under q35, TCG and OVMF over virtio-blk (KubeVirt's default bus; a module of Debian's cloud kernel,
#      which the disk's initramfs loads) to the pre-flight's verdict on the serial console, and powered off.
# Exit 0 passed, 1 a check failed, 77 skipped because a mirror cannot be reached (said on the first line).
# Prints each step's time. Usage: smoke.sh GPUENV ROOT
set -euo pipefail
gpuenv=$(realpath "$1")
root=$(realpath "$2")
out=$(mktemp -d "${TMPDIR:-/tmp}/gpuenv-smoke.XXXXXX")
trap 'rm -rf "$out"' EXIT
trap 'exit 143' TERM INT
export SOURCE_DATE_EPOCH=1700000000
fail() { echo "smoke FAIL: $*"; exit 1; }
t0=$(date +%s%N)
step() { local now; now=$(date +%s%N); printf 'smoke: %-58s %6.1f s\n' "$1" "$(( (now - t0) / 1000000 ))e-3"; t0=$now; }

# Reachability: the first apt repository gpuenv would use (its InRelease) and the Python index it would use
# (tests/online/reachable.sh, shared with the other online scripts; 77 and the reason when one does not answer).
reach=0
"$root/tests/online/reachable.sh" "$gpuenv" || reach=$?
[ "$reach" -eq 0 ] || { [ "$reach" -eq 77 ] && exit 77; fail "the reachability probe failed"; }
step "the mirrors answer"

spec=$root/recipes/examples/hello-cuda.yaml
GPUENV_CACHE_DIR=$out/cache-a "$gpuenv" lock "$spec" -o "$out/a.lock" > "$out/lock-a.log" 2>&1 || { tail -20 "$out/lock-a.log"; fail "lock (cache a)"; }
GPUENV_CACHE_DIR=$out/cache-b "$gpuenv" lock "$spec" -o "$out/b.lock" > "$out/lock-b.log" 2>&1 || { tail -20 "$out/lock-b.log"; fail "lock (cache b)"; }
cmp -s "$out/a.lock" "$out/b.lock" || { diff "$out/a.lock" "$out/b.lock" | head -20; fail "two locks of one spec from two caches differ"; }
step "hello-cuda locked twice, the same bytes ($(grep -c '^  - {name:' "$out/a.lock") packages)"

digest_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["digest"])' "$1"; }
GPUENV_CACHE_DIR=$out/cache-a "$gpuenv" build "$out/a.lock" -o "$out/a/image" --json > "$out/build-a.json" 2> "$out/build-a.log" \
  || { tail -20 "$out/build-a.log"; fail "build (cache a)"; }
step "built from cache a"
mkdir -p "$out/elsewhere"
(umask 077; cd "$out/elsewhere" && GPUENV_CACHE_DIR=$out/cache-b TZ=Pacific/Auckland "$gpuenv" build ../a.lock -o img --threads 1 --json \
   > "$out/build-b.json" 2> "$out/build-b.log") || { tail -20 "$out/build-b.log"; fail "build (cache b, umask 077, TZ, one thread)"; }
step "built from cache b (umask 077, TZ=Pacific/Auckland, --threads 1)"
a=$(digest_of "$out/build-a.json"); b=$(digest_of "$out/build-b.json")
[ "$a" = "$b" ] || fail "two builds of one lock from two caches differ: $a and $b"
GPUENV_CACHE_DIR=$out/cache-a "$gpuenv" build "$out/a.lock" -o "$out/a/image" --json > "$out/build-c.json" 2> "$out/build-c.log" \
  || { tail -20 "$out/build-c.log"; fail "rebuild (cache a)"; }
c=$(digest_of "$out/build-c.json")
[ "$a" = "$c" ] || fail "a rebuild from the same cache differs: $a and $c"
step "the same digest three times: $a"

# Issue 39: the lock built twice more with --attest sbom,provenance, from the two warm caches; the independent oracle
# (tests/marks/attest_oracles.py, with the test venv's readers) judges the first layout against the lock and the
# second (the same documents, the provenance's two times apart); what --attest adds to a build from a warm cache.
venv=${GPUENV_TEST_VENV:-$root/build-test-venv}
"$gpuenv" key generate -o "$out/keys" > /dev/null 2>&1 || fail "key generate"
# Into new directories (a directory that already holds the image is left as it is): without --attest, then with it.
t1=$(date +%s%N)
GPUENV_CACHE_DIR=$out/cache-a "$gpuenv" build "$out/a.lock" -o "$out/plain" > "$out/plain.log" 2>&1 || { tail -20 "$out/plain.log"; fail "build (cache a, again)"; }
t_plain=$(( ($(date +%s%N) - t1) / 1000000 ))
for n in a b; do
  t1=$(date +%s%N)
  GPUENV_CACHE_DIR=$out/cache-$n "$gpuenv" build "$out/a.lock" -o "$out/att-$n" --attest sbom,provenance --key "$out/keys/gpuenv.key" --json \
    > "$out/att-$n.json" 2> "$out/att-$n.log" || { tail -20 "$out/att-$n.log"; fail "build --attest sbom,provenance (cache $n)"; }
  if [ "$n" = a ]; then t_att=$(( ($(date +%s%N) - t1) / 1000000 )); fi
done
[ "$(digest_of "$out/att-a.json")" = "$a" ] || fail "build --attest changed the image's digest"
if [ -x "$venv/bin/python" ]; then
  "$venv/bin/python" "$root/tests/marks/attest_oracles.py" "$out/att-a" "$out/keys/gpuenv.pub" --lock "$out/a.lock" --same-as "$out/att-b" \
    > "$out/oracle.log" 2>&1 || { cat "$out/oracle.log"; fail "the attestation oracle refuses hello-cuda's SBOM, provenance or signatures"; }
  sed 's/^/  /' "$out/oracle.log"
  step "hello-cuda --attest: CycloneDX, SPDX, provenance and signatures pass the oracle; build ${t_att} ms, ${t_plain} ms without"
else
  step "hello-cuda --attest built twice (build ${t_att} ms, ${t_plain} ms without); no test venv at $venv: the oracle left out"
fi

GPUENV_CACHE_DIR=$out/cache-a "$gpuenv" run "$out/a/image" --no-gpu -- python3 -c '
import ctypes
v = ctypes.c_int()
rc = ctypes.CDLL("libcudart.so.12").cudaRuntimeGetVersion(ctypes.byref(v))
print("cudart %d.%d rc %d" % (v.value // 1000, v.value % 1000 // 10, rc))' > "$out/run.log" 2>&1 || { cat "$out/run.log"; fail "gpuenv run"; }
cuda=$(sed -n 's/^  version: "\(.*\)"$/\1/p' "$spec" | head -1)
grep -qx "cudart $cuda rc 0" "$out/run.log" || { cat "$out/run.log"; fail "the image's CUDA runtime did not answer $cuda"; }
step "run: the image's CUDA runtime answers $cuda"

# The image by its registry reference (issue 32): pushed to the real docker-registry on 127.0.0.1, then run and
# validated from an empty cache with gpuenv alone; the pull is timed beside skopeo copy of the same image.
if command -v docker-registry >/dev/null 2>&1; then
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p "$out/registry"
  printf 'version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$out/registry/storage" "$port" > "$out/registry/config.yml"
  docker-registry serve "$out/registry/config.yml" > "$out/registry/log" 2>&1 &
  registry_pid=$!
  trap 'kill "$registry_pid" 2>/dev/null || true; rm -rf "$out"' EXIT
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  ref=127.0.0.1:$port/smoke/hello-cuda:1
  export GPUENV_INSECURE_REGISTRIES=127.0.0.1:$port
  GPUENV_CACHE_DIR=$out/cache-a "$gpuenv" build "$out/a.lock" -o "$out/a/image" --push "$ref" --json > "$out/push.json" 2> "$out/push.log" \
    || { tail -20 "$out/push.log"; cat "$out/registry/log"; fail "build --push to the loopback registry"; }
  [ "$(digest_of "$out/push.json")" = "$a" ] || fail "the pushed image's digest is not the built one's"
  step "pushed to docker-registry on 127.0.0.1:$port"
  ms() { echo $(( $(date +%s%N) / 1000000 )); }
  p0=$(ms)
  GPUENV_CACHE_DIR=$out/cache-pull "$gpuenv" run "docker://$ref" --no-gpu -- python3 -c 'print(6*7)' > "$out/run-pull.log" 2>&1 \
    || { cat "$out/run-pull.log"; fail "gpuenv run docker://$ref from an empty cache"; }
  p1=$(ms)
  [ "$(tail -1 "$out/run-pull.log")" = 42 ] || { cat "$out/run-pull.log"; fail "gpuenv run docker://$ref did not print 42"; }
  step "run docker://$ref from an empty cache prints 42 (pull, unpack, run: $((p1 - p0)) ms)"
  code=0
  GPUENV_CACHE_DIR=$out/cache-pull "$gpuenv" validate --image "docker://$ref" --backend "replay:$root/tests/data/validate/h100x8.yaml" --level quick \
    --json > "$out/validate-pull.json" 2> "$out/validate-pull.log" || code=$?
  [ "$code" -le 1 ] || { cat "$out/validate-pull.log"; fail "validate --image docker://$ref could not run (exit $code)"; }
  grep -q "$a" "$out/validate-pull.json" || { head -40 "$out/validate-pull.json"; fail "the report of validate --image docker://$ref does not name $a"; }
  step "validate --image docker://$ref ran on the recording (exit $code) and names its digest"
  if command -v skopeo >/dev/null 2>&1; then
    # The pull both ways, each into an empty place: skopeo copy to an OCI layout, and gpuenv run with the layers
    # already unpacked (cache-pull's) and its blobs removed, so that it pulls and does not unpack (bench/pull.sh
    # measures the same with more runs).
    s0=$(ms)
    skopeo copy -q --src-tls-verify=false "docker://$ref" "oci:$out/skopeo-copy:1" > "$out/skopeo.log" 2>&1 || { cat "$out/skopeo.log"; fail "skopeo copy"; }
    s1=$(ms)
    rm -rf "$out/cache-pull/base-images"
    g0=$(ms)
    GPUENV_CACHE_DIR=$out/cache-pull "$gpuenv" run "docker://$ref" --no-gpu -- true > "$out/run-pull2.log" 2>&1 || { cat "$out/run-pull2.log"; fail "run after the blobs were removed"; }
    g1=$(ms)
    step "pull: gpuenv $((g1 - g0)) ms, skopeo copy $((s1 - s0)) ms (ratio $(python3 -c "print(round($((g1 - g0)) / max(1, $((s1 - s0))), 2))"))"
  fi
  kill "$registry_pid" 2>/dev/null || true
  unset GPUENV_INSECURE_REGISTRIES
else
  step "the registry steps skipped: docker-registry is not installed"
fi

sed 's/^  kernel: linux-image-cloud-amd64$/  kernel: linux-image-cloud-amd64\n  cmdline: "gpuenv.poweroff"/' "$root/recipes/examples/vm-debian.yaml" > "$out/vm.yaml"
grep -q 'gpuenv.poweroff' "$out/vm.yaml" || fail "recipes/examples/vm-debian.yaml no longer names linux-image-cloud-amd64 as this smoke expects"
env -u SOURCE_DATE_EPOCH GPUENV_CACHE_DIR=$out/cache-a "$gpuenv" build "$out/vm.yaml" --format raw -o "$out/vm-a/gpu-node.raw" > "$out/vm-a.log" 2>&1 \
  || { tail -20 "$out/vm-a.log"; fail "VM build (cache a)"; }
step "the VM example built from cache a ($(sed -n 's/^wrote .*(raw, \(.*\); the raw disk.*/\1/p' "$out/vm-a.log"))"
(umask 077; cd "$out/elsewhere" && env -u SOURCE_DATE_EPOCH GPUENV_CACHE_DIR=$out/cache-b TZ=America/St_Johns "$gpuenv" build ../vm.yaml --format raw \
   -o vm-b/other-name.raw --threads 1 > "$out/vm-b.log" 2>&1) || { tail -20 "$out/vm-b.log"; fail "VM build (cache b, umask 077, TZ, one thread)"; }
step "the VM example built from cache b (umask 077, TZ=America/St_Johns, --threads 1)"
if ! cmp -s "$out/vm-a/gpu-node.raw" "$out/elsewhere/vm-b/other-name.raw"; then
  fail "two builds of the VM example differ: $(cmp "$out/vm-a/gpu-node.raw" "$out/elsewhere/vm-b/other-name.raw" 2>&1 | head -1)"
fi
step "the same disk twice: $(sha256sum < "$out/vm-a/gpu-node.raw" | cut -c1-16)..."
rm -f "$out/elsewhere/vm-b/other-name.raw"
rc=0
"$root/tests/vm/qemu_boot.sh" --disk "$out/vm-a/gpu-node.raw" --console "$out/vm-console.log" --controller virtio-blk --timeout 300 > "$out/vm-boot.log" 2>&1 || rc=$?
verdict=$(grep -a '^gpuenv-preflight (gpu-node): could_not_run: ' "$out/vm-console.log" | head -1 | tr -d '\r' || true)
if [ "$rc" -ne 0 ] || [ -z "$verdict" ] || ! grep -aq 'reboot: Power down' "$out/vm-console.log"; then
  cat "$out/vm-boot.log"; tail -30 "$out/vm-console.log"; fail "the VM did not boot over virtio-blk to the pre-flight's verdict and power off"
fi
step "booted over virtio-blk: ${verdict:0:60}..."
echo "smoke passed"
