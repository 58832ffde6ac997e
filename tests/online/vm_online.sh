#!/usr/bin/env bash
# Online check (ctest label `online`, off in CI): a VM disk from Debian's archive (docs/vm.md). Locks
# recipes/examples/vm-debian.yaml with gpuenv.poweroff on the kernel command line, builds it twice without
# SOURCE_DATE_EPOCH (the second from a cache of its own, under another umask, time zone, directory, name and thread
# count: the raw disks must be the same bytes, and so must two qcow2 files), checks the qcow2 is the same disk,
# boots copies under q35, TCG and OVMF (tests/vm/qemu_boot.sh) over virtio-blk, virtio-scsi and NVMe and reads the
# pre-flight's verdict from the serial console: `could_not_run` (no NVIDIA driver), then the VM powers itself off;
# pushes it as a KubeVirt containerDisk to a loopback registry and reads it back; boots it with cloud-init; and
# builds the generic kernel (linux-image-amd64, whose disk drivers and ext4 are all modules) and boots it over AHCI,
# which the cloud kernel has no driver for. Prints build time, sizes and each boot's time.
# Usage: vm_online.sh GPUENV ROOT
set -euo pipefail
gpuenv=$(realpath "$1")
root=$(realpath "$2")
for tool in qemu-system-x86_64 qemu-img mkfs.ext4 mkfs.fat mcopy depmod docker-registry skopeo curl ssh-keygen sfdisk debugfs; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (scripts/deps.sh installs it)"; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
unset SOURCE_DATE_EPOCH  # what most users build with: every time the epoch 0
boot_helper=$root/tests/vm/qemu_boot.sh
# boot_to_verdict DISK CONTROLLER HOST [QEMU ARGS...]: boots a copy of DISK and checks the console for HOST's
# verdict and the power-off; the boot's time goes to $out/boots.txt.
boot_to_verdict() {
  local disk=$1 controller=$2 host=$3 rc=0
  shift 3
  cp --sparse=always "$disk" "$out/boot-$controller.raw"  # booting writes to the disk
  "$boot_helper" --disk "$out/boot-$controller.raw" --console "$out/console-$controller.log" --controller "$controller" --timeout 300 -- "$@" \
    > "$out/boot.txt" || rc=$?
  cat "$out/boot.txt"; sed 's/^boot: //' "$out/boot.txt" >> "$out/boots.txt"
  if [ "$rc" -ne 0 ] || ! grep -aq "^gpuenv-preflight ($host): could_not_run: " "$out/console-$controller.log" || ! grep -aq 'reboot: Power down' "$out/console-$controller.log"; then
    echo "FAIL: over $controller the VM did not report could_not_run for $host and power off (exit $rc):"; tail -40 "$out/console-$controller.log"; exit 1
  fi
  grep -a '^gpuenv-preflight ' "$out/console-$controller.log"
  rm -f "$out/boot-$controller.raw"
}
sed 's/^  kernel: linux-image-cloud-amd64$/  kernel: linux-image-cloud-amd64\n  cmdline: "gpuenv.poweroff"/' "$root/recipes/examples/vm-debian.yaml" > "$out/vm.yaml"
"$gpuenv" lock "$out/vm.yaml" -o "$out/vm.lock" >/dev/null
grep -q '^  - {name: "linux-image-[0-9.]*-[0-9]*-cloud-amd64"' "$out/vm.lock" || { echo "FAIL: the lock pins no cloud kernel"; exit 1; }
start=$(date +%s%N)
"$gpuenv" build "$out/vm.lock" --format raw -o "$out/a/disk.raw"
build_ms=$(( ($(date +%s%N) - start) / 1000000 ))
(umask 077; cd "$out" && TZ=Pacific/Auckland GPUENV_CACHE_DIR="$out/cache-b" "$gpuenv" build vm.lock --format raw -o elsewhere/b.raw --threads 1 >/dev/null)
a=$(sha256sum < "$out/a/disk.raw"); b=$(sha256sum < "$out/elsewhere/b.raw")
[ "$a" = "$b" ] || { echo "FAIL: two builds of one lock differ"; cmp "$out/a/disk.raw" "$out/elsewhere/b.raw" | head -1; exit 1; }
"$gpuenv" build "$out/vm.lock" --format qcow2 -o "$out/disk.qcow2" >/dev/null
(umask 077; cd "$out" && TZ=Asia/Kolkata GPUENV_CACHE_DIR="$out/cache-b" "$gpuenv" build vm.lock --format qcow2 -o elsewhere/other.qcow2 --threads 1 >/dev/null)
[ "$(sha256sum < "$out/disk.qcow2")" = "$(sha256sum < "$out/elsewhere/other.qcow2")" ] || { echo "FAIL: two qcow2 builds of one lock differ"; exit 1; }
qemu-img compare -q -f raw -F qcow2 "$out/a/disk.raw" "$out/disk.qcow2" || { echo "FAIL: the qcow2 holds another disk"; exit 1; }
# inspect reads the disk back: its partitions and the lock inside its root, with the kernel the lock pinned.
"$gpuenv" inspect "$out/disk.qcow2" --json > "$out/inspect.json"
python3 - "$out/inspect.json" "$out/vm.lock" <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1]))
kernel = re.search(r'name: "(linux-image-[0-9.]+-[0-9]+-cloud-amd64)"', open(sys.argv[2]).read()).group(1)
assert j["schema"] == "gpuenv-inspect-disk-v1" and j["format"] == "qcow2", j
assert [p["name"] for p in j["partitions"]] == ["esp", "root"], j["partitions"]
assert kernel in [p["name"] for p in j["packages"]], (kernel, len(j["packages"]))
assert j["vm"]["kernel"] == "linux-image-cloud-amd64" and j["spec"] == "gpu-node", j
PY
raw_size=$(stat -c %s "$out/a/disk.raw"); raw_alloc=$(( $(stat -c %b "$out/a/disk.raw") * 512 )); qcow_size=$(stat -c %s "$out/disk.qcow2")

for controller in virtio-blk virtio-scsi nvme; do boot_to_verdict "$out/a/disk.raw" "$controller" gpu-node; done

# Pushed as a KubeVirt containerDisk to a registry on 127.0.0.1 (Debian's docker-registry): one layer holding
# disk/gpu-node.qcow2, owned 107:107, with the disk's bytes.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' "$out/registry" "$port" > "$out/registry.yml"
docker-registry serve "$out/registry.yml" > "$out/registry.log" 2>&1 &
registry_pid=$!
trap 'kill $registry_pid 2>/dev/null; rm -rf "$out"' EXIT
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/v2/" >/dev/null && break; sleep 0.2; done
"$gpuenv" build "$out/vm.lock" --format qcow2 -o "$out/disk.qcow2" --push "127.0.0.1:$port/vm/gpu-node:1" --plain-http | tail -1
skopeo copy -q --src-tls-verify=false "docker://127.0.0.1:$port/vm/gpu-node:1" "oci:$out/pulled:1"
layer=$(skopeo inspect "oci:$out/pulled:1" | python3 -c 'import json,sys; l=json.load(sys.stdin)["Layers"]; assert len(l)==1; print(l[0][7:])')
tar --numeric-owner -tvf "$out/pulled/blobs/sha256/$layer" | grep -q '^-r--r----- 107/107 .* disk/gpu-node.qcow2$' || { echo "FAIL: the containerDisk layer is not /disk/gpu-node.qcow2 owned 107:107"; exit 1; }
[ "$(tar -xOf "$out/pulled/blobs/sha256/$layer" disk/gpu-node.qcow2 | sha256sum)" = "$(sha256sum < "$out/disk.qcow2")" ] || { echo "FAIL: the pushed disk differs"; exit 1; }

# cloud-init (vm.cloud_init): booted with a NoCloud seed (a FAT volume labelled CIDATA: meta-data and user-data, as
# cloud-init's NoCloud datasource reads them) and a NIC the cloud kernel drives (virtio-net, QEMU's user network with
# DHCP). The verdict line must name the host the metadata names, ssh.service must start, and after the power-off
# the root holds the user-data's key in the default user's authorized_keys and cloud-init's SSH host keys.
sed 's/^  kernel: linux-image-cloud-amd64$/  kernel: linux-image-cloud-amd64\n  cmdline: "gpuenv.poweroff"\n  cloud_init: true/' "$root/recipes/examples/vm-debian.yaml" > "$out/ci.yaml"
"$gpuenv" lock "$out/ci.yaml" -o "$out/ci.lock" >/dev/null
"$gpuenv" build "$out/ci.lock" --format raw -o "$out/ci.raw" >/dev/null
ssh-keygen -q -t ed25519 -N '' -C gpuenv-online -f "$out/key"
printf 'instance-id: gpuenv-online-1\nlocal-hostname: ci-node\n' > "$out/meta-data"
printf '#cloud-config\nssh_authorized_keys:\n  - %s\n' "$(cat "$out/key.pub")" > "$out/user-data"
truncate -s 2M "$out/seed.img" && mkfs.fat -n CIDATA "$out/seed.img" >/dev/null && MTOOLSRC=/dev/null mcopy -i "$out/seed.img" "$out/meta-data" "$out/user-data" ::/
start=$(date +%s%N)
rc=0
"$boot_helper" --disk "$out/ci.raw" --console "$out/ci-console.log" --controller virtio-blk --memory 1536 --timeout 300 -- \
  -drive "if=none,id=s0,format=raw,file=$out/seed.img" -device virtio-blk-pci,drive=s0 -nic user,model=virtio-net-pci >/dev/null || rc=$?
ci_boot_ms=$(( ($(date +%s%N) - start) / 1000000 ))
if [ "$rc" -ne 0 ] || ! grep -aq '^gpuenv-preflight (ci-node): could_not_run: ' "$out/ci-console.log" || ! grep -aq 'Started .*ssh.service' "$out/ci-console.log" \
   || ! grep -aq 'reboot: Power down' "$out/ci-console.log"; then
  echo "FAIL: the cloud-init VM did not name its metadata's host, start ssh and power off (exit $rc):"; grep -a 'cloud-init\|ssh\|gpuenv' "$out/ci-console.log" | tail -30; exit 1
fi
offset=$(( $(sfdisk -J "$out/ci.raw" | python3 -c 'import json,sys; print(json.load(sys.stdin)["partitiontable"]["partitions"][1]["start"])') * 512 ))
debugfs -R 'cat /home/debian/.ssh/authorized_keys' "$out/ci.raw?offset=$offset" 2>/dev/null | grep -qF "$(cut -d' ' -f2 "$out/key.pub")" \
  || { echo "FAIL: the user-data's key is not in /home/debian/.ssh/authorized_keys"; exit 1; }
debugfs -R 'stat /etc/ssh/ssh_host_ed25519_key.pub' "$out/ci.raw?offset=$offset" 2>/dev/null | grep -q 'Type: regular' \
  || { echo "FAIL: cloud-init made no SSH host key"; exit 1; }
grep -a '^gpuenv-preflight ' "$out/ci-console.log"

# Debian's generic kernel: NVMe, AHCI and ext4 are modules too, which the initramfs loads. It boots over AHCI (SATA),
# which the cloud kernel has no driver for.
sed 's/^  kernel: linux-image-cloud-amd64$/  kernel: linux-image-amd64\n  cmdline: "gpuenv.poweroff"/' "$root/recipes/examples/vm-debian.yaml" > "$out/generic.yaml"
"$gpuenv" build "$out/generic.yaml" --format raw -o "$out/generic.raw" > "$out/generic.log" 2>&1 || { echo "FAIL: the generic kernel's disk"; tail -5 "$out/generic.log"; exit 1; }
grep -q '^  disks     from the initramfs: nvme, virtio-blk, virtio-scsi, ahci, hyperv, xen-blkfront$' "$out/generic.log" \
  || { echo "FAIL: the generic kernel's initramfs does not drive every controller:"; cat "$out/generic.log"; exit 1; }
boot_to_verdict "$out/generic.raw" ahci gpu-node
printf 'vm online: build %d ms; raw %d MiB (%d MiB allocated), qcow2 %d MiB; boot to the verdict and power-off under TCG: %s (the last: the generic kernel); with cloud-init (NoCloud, virtio-blk) %d ms\n' \
  "$build_ms" $((raw_size >> 20)) $((raw_alloc >> 20)) $((qcow_size >> 20)) "$(paste -sd, "$out/boots.txt" | sed 's/,/, /g')" "$ci_boot_ms"
