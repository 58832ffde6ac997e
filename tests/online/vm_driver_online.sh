#!/usr/bin/env bash
# Online check (ctest label `online`, off in CI): a VM disk with Debian's NVIDIA driver built in (docs/vm.md, "The
# driver"). The apt sources are the host's own repositories with Debian's contrib, non-free and non-free-firmware
# components added (the driver, its helpers and its firmware live there). Locks recipes/examples/vm-debian-driver.yaml
# with gpuenv.poweroff: the lock must name the driver version of the module package and pin the kernel's headers
# only in build_packages. Builds it twice (the second under another umask, time zone, directory and thread count:
# make -j1 against -jN, no SOURCE_DATE_EPOCH; the raw disks must be the same bytes) and as qcow2 from each cache (the
# same file); boots it under q35, TCG and OVMF over virtio-blk (tests/vm/qemu_boot.sh) and reads the console: the driver unit's modinfo line (the lock's driver version,
# built for the lock's kernel) and the pre-flight's `could_not_run` (no GPU in the VM), then the power-off. An H200
# against Debian 12's 535 driver must be unsatisfiable (exit 3). Prints build times, sizes and the boot time.
# Usage: vm_driver_online.sh GPUENV ROOT
set -euo pipefail
gpuenv=$(realpath "$1")
root=$(realpath "$2")
for tool in qemu-system-x86_64 qemu-img mkfs.ext4 mkfs.fat mcopy depmod bwrap python3; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (scripts/deps.sh installs it)"; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
unset SOURCE_DATE_EPOCH  # what most users build with: every time the epoch 0
export GPUENV_CACHE_DIR="$out/cache"  # a cache of the test's own: the first build compiles the module
# The host's Debian repositories, with the components Debian's driver needs.
"$gpuenv" sources --json | python3 -c '
import json, sys
print("sources:\n  apt:")
for s in json.load(sys.stdin)["apt"]["sources"]:
    if s["used"] and not s["flat"]:
        keys = s["signed_by"]
        print("    - uri: %s\n      suite: %s\n      components: [main, contrib, non-free, non-free-firmware]" % (s["uri"], s["suite"]))
        if keys: print("      signed_by: %s" % keys[0])
' > "$out/sources.yaml"
sed 's/^  kernel: linux-image-cloud-amd64$/  kernel: linux-image-cloud-amd64\n  cmdline: "gpuenv.poweroff"/' "$root/recipes/examples/vm-debian-driver.yaml" > "$out/vm.yaml"
cat "$out/sources.yaml" >> "$out/vm.yaml"
"$gpuenv" lock "$out/vm.yaml" -o "$out/vm.lock" >/dev/null
driver=$(sed -n 's/^    version: "\([0-9.]*\)"$/\1/p' "$out/vm.lock")
kernel=$(sed -n 's/^  - {name: "linux-image-\([0-9.]*-[0-9]*-cloud-amd64\)".*/\1/p' "$out/vm.lock")
[ -n "$driver" ] && [ -n "$kernel" ] || { echo "FAIL: the lock names no driver version or no kernel"; exit 1; }
python3 - "$out/vm.lock" "$kernel" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
image, build = text.split("\nbuild_packages:\n")
names = lambda t: set(re.findall(r'\{name: "([^"]+)"', t))
assert "linux-headers-" + sys.argv[2] in names(build) and "nvidia-kernel-dkms" in names(build), sorted(names(build))
leaked = [n for n in names(image) if n.startswith(("linux-headers-", "linux-compiler-", "linux-kbuild-")) or n in ("gcc-12", "cpp-12", "make", "nvidia-kernel-dkms")]
assert not leaked, ("headers or compiler in the image", leaked)
assert {"firmware-nvidia-gsp", "libnvidia-ml1", "libcuda1"} <= names(image), sorted(names(image))
PY

start=$(date +%s%N)
"$gpuenv" build "$out/vm.lock" --format raw -o "$out/a/disk.raw" > "$out/a.log"
build_ms=$(( ($(date +%s%N) - start) / 1000000 ))
grep -q "^  driver    $driver, nvidia-current.ko built$" "$out/a.log" || { echo "FAIL: the first build did not compile the module:"; cat "$out/a.log"; exit 1; }
# The second build compiles the module again (a cache of its own: nothing kept from the first), with make -j1.
(umask 077; cd "$out" && TZ=Pacific/Auckland GPUENV_CACHE_DIR="$out/cache2" "$gpuenv" build vm.lock --format raw -o elsewhere/b.raw --threads 1 >/dev/null)
a=$(sha256sum < "$out/a/disk.raw"); b=$(sha256sum < "$out/elsewhere/b.raw")
[ "$a" = "$b" ] || { echo "FAIL: two builds of one driver lock differ"; exit 1; }
# The qcow2 takes the module the first build kept in the cache.
start=$(date +%s%N)
"$gpuenv" build "$out/vm.lock" --format qcow2 -o "$out/disk.qcow2" > "$out/qcow2.log" 2>&1
rebuild_ms=$(( ($(date +%s%N) - start) / 1000000 ))
grep -q '^  driver    .*from the cache' "$out/qcow2.log" || { echo "FAIL: the rebuild did not take the built module from the cache:"; cat "$out/qcow2.log"; exit 1; }
qemu-img compare -q -f raw -F qcow2 "$out/a/disk.raw" "$out/disk.qcow2" || { echo "FAIL: the qcow2 holds another disk"; exit 1; }
raw_size=$(stat -c %s "$out/a/disk.raw"); raw_alloc=$(( $(stat -c %b "$out/a/disk.raw") * 512 )); qcow_size=$(stat -c %s "$out/disk.qcow2")

# A qcow2 from the second cache (its module compiled there) is the same file.
(umask 077; cd "$out" && TZ=Asia/Kolkata GPUENV_CACHE_DIR="$out/cache2" "$gpuenv" build vm.lock --format qcow2 -o elsewhere/other.qcow2 --threads 1 >/dev/null)
[ "$(sha256sum < "$out/disk.qcow2")" = "$(sha256sum < "$out/elsewhere/other.qcow2")" ] || { echo "FAIL: two qcow2 builds of one driver lock differ"; exit 1; }

cp --sparse=always "$out/a/disk.raw" "$out/boot.raw"
start=$(date +%s%N)
rc=0
"$root/tests/vm/qemu_boot.sh" --disk "$out/boot.raw" --console "$out/console.log" --controller virtio-blk --timeout 300 || rc=$?
boot_ms=$(( ($(date +%s%N) - start) / 1000000 ))
expected="gpuenv-driver (gpu-node): nvidia-current version $driver vermagic $kernel "
if [ "$rc" -ne 0 ] || ! grep -aqF "$expected" "$out/console.log" || ! grep -aq '^gpuenv-preflight (gpu-node): could_not_run: ' "$out/console.log" \
   || ! grep -aq 'reboot: Power down' "$out/console.log"; then
  echo "FAIL: the VM did not show the driver ($expected...), report could_not_run and power off (exit $rc):"; tail -40 "$out/console.log"; exit 1
fi
grep -a '^gpuenv-driver \|^gpuenv-preflight ' "$out/console.log"

# Debian 12's driver (535) cannot run an H200 (the catalog's minimum is newer): unsatisfiable, exit 3, no lock.
sed 's/models: \[H100\]/models: [H200]/' "$out/vm.yaml" > "$out/h200.yaml"
rc=0
"$gpuenv" lock "$out/h200.yaml" -o "$out/h200.lock" > "$out/h200.log" 2>&1 || rc=$?
if [ "$rc" -ne 3 ] || ! grep -q "H200 needs driver >= .*; the driver is $driver, from vm.driver (nvidia-kernel-dkms " "$out/h200.log" || [ -e "$out/h200.lock" ]; then
  echo "FAIL: an H200 against the packaged $driver driver was not refused as unsatisfiable (exit $rc):"; cat "$out/h200.log"; exit 1
fi
printf 'vm driver online: driver %s for %s; build %d ms (the packages downloaded, the module compiled), %d ms as qcow2 with the module from the cache; raw %d MiB (%d MiB allocated), qcow2 %d MiB; boot to the verdict and power-off under TCG %d ms\n' \
  "$driver" "$kernel" "$build_ms" "$rebuild_ms" $((raw_size >> 20)) $((raw_alloc >> 20)) $((qcow_size >> 20)) "$boot_ms"
