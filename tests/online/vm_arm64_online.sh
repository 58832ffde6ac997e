#!/usr/bin/env bash
# Online check (ctest label `online`, off in CI): a linux/arm64 VM disk from the host's Debian mirror (docs/vm.md,
# "arm64"), built on this machine with an arm64 gpuenv inside, and booted under qemu-system-aarch64 (the virt machine,
# TCG, AAVMF) to the pre-flight's verdict. A spec like recipes/examples/vm-debian.yaml with
# `image.platforms: [linux/arm64]` and no vm.kernel (the default follows the platform: linux-image-cloud-arm64):
#   1. locked: the lock is linux/arm64's, pins Debian's arm64 cloud kernel and systemd-boot-efi;
#   2. refused without an arm64 gpuenv (`vm.gpuenv_binary`, exit 2), and with this machine's gpuenv named;
#   3. built as qcow2 with --vm-gpuenv twice, the second from a cache of its own, another directory, umask, time zone
#      and thread count: the same bytes;
#   4. read back: inspect says linux/arm64 and the ARM64 root type; the ESP holds EFI/BOOT/BOOTAA64.EFI; the root's
#      /usr/bin/gpuenv is the arm64 gpuenv named;
#   5. booted over virtio-blk (PCI) and virtio-blk over MMIO: systemd starts the pre-flight, whose verdict the arm64
#      gpuenv writes on the console (`gpuenv-preflight (gpu-node-arm64): could_not_run: ...`), and the VM powers off.
# Prints the build's and each boot's time. Exit 0 passed, 1 failed, 77 skipped (no arm64 gpuenv: say so).
# Usage: vm_arm64_online.sh GPUENV ROOT [ARM64_GPUENV]  (default: $GPUENV_ARM64, else ROOT/build-arm64/cli/gpuenv,
# which scripts/build_arm64.sh makes)
set -euo pipefail
gpuenv=$(realpath "$1")
root=$(realpath "$2")
arm_gpuenv=${3:-${GPUENV_ARM64:-$root/build-arm64/cli/gpuenv}}
[ -f "$arm_gpuenv" ] || { echo "skip: no arm64 gpuenv at $arm_gpuenv (scripts/build_arm64.sh makes build-arm64/cli/gpuenv)"; exit 77; }
arm_gpuenv=$(realpath "$arm_gpuenv")
# e_machine, bytes 18-19 of the ELF header: 183 (0xb7) is AArch64.
[ "$(od -An -tu2 -j18 -N2 "$arm_gpuenv" | tr -d ' ')" = 183 ] || { echo "FAIL: $arm_gpuenv is not an aarch64 program"; exit 1; }
for tool in qemu-system-aarch64 qemu-img mkfs.ext4 mkfs.fat mcopy mdir depmod sfdisk debugfs; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (scripts/deps.sh installs it)"; exit 1; }
done
[ -f /usr/share/AAVMF/AAVMF_CODE.fd ] || { echo "FAIL: /usr/share/AAVMF/AAVMF_CODE.fd is missing (scripts/deps.sh installs qemu-efi-aarch64)"; exit 1; }
out=$(mktemp -d "${TMPDIR:-/tmp}/gpuenv-vm-arm64.XXXXXX")
trap 'rm -rf "$out"' EXIT
trap 'exit 143' TERM INT
unset SOURCE_DATE_EPOCH
fail() { echo "FAIL: $*"; exit 1; }

cat > "$out/vm.yaml" <<'YAML'
name: gpu-node-arm64
base: debian:12
image:
  format: qcow2
  platforms: [linux/arm64]
vm:
  cmdline: "gpuenv.poweroff"
YAML
"$gpuenv" lock "$out/vm.yaml" -o "$out/vm.lock" >/dev/null
grep -qx 'platforms: \["linux/arm64"\]' "$out/vm.lock" || fail "the lock is not linux/arm64's: $(grep '^platforms' "$out/vm.lock")"
grep -q '^  kernel: "linux-image-cloud-arm64"' "$out/vm.lock" || fail "the lock's vm.kernel is not linux-image-cloud-arm64: $(grep -A1 '^vm:' "$out/vm.lock")"
grep -q '^  - {name: "linux-image-[0-9.]*-[0-9]*-cloud-arm64"' "$out/vm.lock" || fail "the lock pins no arm64 cloud kernel"
grep -q '^  - {name: "systemd-boot-efi"' "$out/vm.lock" || fail "the lock pins no systemd-boot-efi"

# Without an arm64 gpuenv the build is refused before anything is unpacked, saying how to name one.
rc=0
"$gpuenv" build "$out/vm.lock" -o "$out/refused.qcow2" > "$out/refused.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q 'vm.gpuenv_binary' "$out/refused.log" && grep -q -- '--vm-gpuenv' "$out/refused.log" \
  || fail "a build without --vm-gpuenv was not refused as vm.gpuenv_binary (exit $rc): $(cat "$out/refused.log")"
rc=0
"$gpuenv" build "$out/vm.lock" -o "$out/refused.qcow2" --vm-gpuenv "$gpuenv" > "$out/refused.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q 'is an x86_64 program' "$out/refused.log" || fail "an x86-64 --vm-gpuenv was not refused (exit $rc): $(cat "$out/refused.log")"
[ ! -e "$out/refused.qcow2" ] || fail "a refused build left a disk"

start=$(date +%s%N)
"$gpuenv" build "$out/vm.lock" --format qcow2 -o "$out/a/disk.qcow2" --vm-gpuenv "$arm_gpuenv" > "$out/build.log" || { cat "$out/build.log"; fail "the arm64 disk did not build"; }
build_ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$out/build.log"
grep -q '(linux/arm64)' "$out/build.log" && grep -q '^wrote .*(qcow2, ' "$out/build.log" || fail "the build does not say linux/arm64 and qcow2"
(umask 077; cd "$out" && TZ=Pacific/Auckland GPUENV_CACHE_DIR="$out/cache-b" "$gpuenv" build vm.lock --format qcow2 -o elsewhere/b.qcow2 --vm-gpuenv "$arm_gpuenv" --threads 1 >/dev/null)
[ "$(sha256sum < "$out/a/disk.qcow2")" = "$(sha256sum < "$out/elsewhere/b.qcow2")" ] || fail "two builds of one arm64 lock differ"
rm -rf "$out/elsewhere" "$out/cache-b"

"$gpuenv" inspect "$out/a/disk.qcow2" --json > "$out/inspect.json"
python3 - "$out/inspect.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["platform"] == "linux/arm64", j["platform"]
assert [(p["name"], p["type_name"]) for p in j["partitions"]] == [("esp", "EFI system partition"), ("root", "Linux root (ARM64)")], j["partitions"]
assert j["partitions"][1]["type"] == "b921b045-1df0-41c3-af44-4c6f280d3fae", j["partitions"][1]
assert j["vm"]["kernel"] == "linux-image-cloud-arm64" and j["spec"] == "gpu-node-arm64", j["vm"]
assert any(p["name"].endswith("-cloud-arm64") and p["name"].startswith("linux-image-") for p in j["packages"]), "no arm64 cloud kernel among the packages"
PY
qemu-img convert -f qcow2 -O raw "$out/a/disk.qcow2" "$out/disk.raw"
parts=$(sfdisk -J "$out/disk.raw")
esp=$(( $(python3 -c 'import json,sys; print(json.load(sys.stdin)["partitiontable"]["partitions"][0]["start"])' <<< "$parts") * 512 ))
rootfs=$(( $(python3 -c 'import json,sys; print(json.load(sys.stdin)["partitiontable"]["partitions"][1]["start"])' <<< "$parts") * 512 ))
MTOOLSRC=/dev/null mdir -/ -b -i "$out/disk.raw@@$esp" ::/EFI > "$out/esp.txt"
grep -qx '::/EFI/BOOT/BOOTAA64.EFI' "$out/esp.txt" && grep -qx '::/EFI/systemd/systemd-bootaa64.efi' "$out/esp.txt" || fail "the ESP lacks the arm64 boot loader: $(cat "$out/esp.txt")"
! grep -qi 'x64' "$out/esp.txt" || fail "the ESP holds an x86-64 boot loader: $(cat "$out/esp.txt")"
debugfs -R 'dump /usr/bin/gpuenv '"$out/gpuenv-inside" "$out/disk.raw?offset=$rootfs" 2>/dev/null
cmp -s "$out/gpuenv-inside" "$arm_gpuenv" || fail "the disk's /usr/bin/gpuenv is not the arm64 gpuenv named"
raw_size=$(stat -c %s "$out/disk.raw"); qcow_size=$(stat -c %s "$out/a/disk.qcow2")
rm -f "$out/disk.raw" "$out/gpuenv-inside"

: > "$out/boots.txt"
for controller in virtio-blk virtio-blk-mmio; do
  cp "$out/a/disk.qcow2" "$out/boot.qcow2"  # booting writes to the disk
  rc=0
  "$root/tests/vm/qemu_boot.sh" --arch arm64 --disk "$out/boot.qcow2" --format qcow2 --console "$out/console-$controller.log" --controller "$controller" \
    --timeout 900 > "$out/boot.txt" || rc=$?
  cat "$out/boot.txt"; sed 's/^boot: //' "$out/boot.txt" >> "$out/boots.txt"
  if [ "$rc" -ne 0 ] || ! grep -aq '^gpuenv-preflight (gpu-node-arm64): could_not_run: ' "$out/console-$controller.log" \
     || ! grep -aq 'reboot: Power down' "$out/console-$controller.log"; then
    echo "FAIL: over $controller the arm64 VM did not report could_not_run and power off (exit $rc):"; tail -40 "$out/console-$controller.log"; exit 1
  fi
  grep -a '^gpuenv-preflight ' "$out/console-$controller.log"
  rm -f "$out/boot.qcow2"
done
printf 'vm arm64 online: build %d ms; raw %d MiB, qcow2 %d MiB; boot to the verdict and power-off under TCG (virt, cortex-a57): %s\n' \
  "$build_ms" $((raw_size >> 20)) $((qcow_size >> 20)) "$(paste -sd, "$out/boots.txt" | sed 's/,/, /g')"
