#!/usr/bin/env bash
# Boots a VM disk under QEMU the one way every test does (tests/images/vm_disk_test.cpp, tests/online/*.sh):
# TCG, UEFI firmware (a fresh copy of its variable store each time), the serial console to a file, no reboot, and the
# disk on the controller asked for. --arch amd64 (the default): q35, OVMF from Debian's ovmf. --arch arm64: the virt
# machine with a Cortex-A57 (--cpu to change it), AAVMF from Debian's qemu-efi-aarch64 (qemu-system-aarch64 from
# qemu-system-arm); its serial port is a PL011 (ttyAMA0), which the firmware's ACPI SPCR table names to the kernel.
#   virtio-blk        -device virtio-blk-pci          (QEMU's if=virtio; KubeVirt's default bus)
#   virtio-scsi       -device virtio-scsi-pci + scsi-hd (Google Cloud's default)
#   nvme              -device nvme                    (AWS Nitro and Graviton, Google Cloud's NVMe)
#   ahci              -device ich9-ahci + ide-hd      (SATA)
#   virtio-blk-mmio   -device virtio-blk-device       (arm64 only: virtio over MMIO, the virt machine's own transport)
#   virtio-scsi-mmio  -device virtio-scsi-device + scsi-hd (arm64 only)
# Usage: qemu_boot.sh --disk FILE --console FILE [--arch amd64|arm64] [--controller NAME] [--format raw|qcow2]
#                     [--timeout S] [--memory MiB] [--cpu MODEL] [-- EXTRA QEMU ARGUMENTS]
# The disk is booted as it is: booting writes to it, so pass a copy where its bytes matter. Exits with QEMU's status
# (0 when the guest powered off), or 124 when the timeout (default 300 s) ran out. Prints the boot's seconds on
# stdout: "boot: CONTROLLER N.N s".
set -euo pipefail
disk= console= controller=virtio-blk format=raw timeout_s=300 memory=1024 arch=amd64 cpu=cortex-a57
while [ $# -gt 0 ]; do
  case $1 in
    --disk) disk=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --console) console=$2; shift 2 ;;
    --controller) controller=$2; shift 2 ;;
    --format) format=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --memory) memory=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "qemu_boot.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$disk" ] && [ -n "$console" ] || { echo "qemu_boot.sh: --disk and --console are required" >&2; exit 2; }
case $arch in
  amd64)
    code=/usr/share/OVMF/OVMF_CODE_4M.fd vars=/usr/share/OVMF/OVMF_VARS_4M.fd firmware_package=ovmf
    qemu=qemu-system-x86_64 qemu_package=qemu-system-x86 machine=(-machine q35,accel=tcg) ;;
  arm64)
    code=/usr/share/AAVMF/AAVMF_CODE.fd vars=/usr/share/AAVMF/AAVMF_VARS.fd firmware_package=qemu-efi-aarch64
    qemu=qemu-system-aarch64 qemu_package=qemu-system-arm machine=(-machine virt,accel=tcg -cpu "$cpu") ;;
  *) echo "qemu_boot.sh: unknown architecture '$arch' (amd64, arm64)" >&2; exit 2 ;;
esac
for f in "$code" "$vars"; do [ -f "$f" ] || { echo "qemu_boot.sh: $f is missing (scripts/deps.sh installs $firmware_package)" >&2; exit 2; }; done
command -v "$qemu" >/dev/null || { echo "qemu_boot.sh: $qemu is missing (scripts/deps.sh installs $qemu_package)" >&2; exit 2; }
drive="if=none,id=d0,format=$format,file=$disk"
case $controller in
  virtio-blk) devices=(-device virtio-blk-pci,drive=d0) ;;
  virtio-scsi) devices=(-device virtio-scsi-pci,id=scsi0 -device scsi-hd,bus=scsi0.0,drive=d0) ;;
  nvme) devices=(-device nvme,drive=d0,serial=gpuenv0) ;;
  ahci) devices=(-device ich9-ahci,id=sata0 -device ide-hd,bus=sata0.0,drive=d0) ;;
  virtio-blk-mmio) [ "$arch" = arm64 ] && devices=(-device virtio-blk-device,drive=d0) ;;
  virtio-scsi-mmio) [ "$arch" = arm64 ] && devices=(-device virtio-scsi-device,id=scsi0 -device scsi-hd,bus=scsi0.0,drive=d0) ;;
esac
[ -n "${devices+x}" ] || { echo "qemu_boot.sh: unknown controller '$controller' for $arch (virtio-blk, virtio-scsi, nvme, ahci; arm64 also virtio-blk-mmio, virtio-scsi-mmio)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/gpuenv-qemu.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$vars" "$work/vars.fd"
start=$(date +%s%N)
rc=0
timeout "$timeout_s" "$qemu" "${machine[@]}" -m "$memory" -nographic -no-reboot -monitor none -display none \
  -drive "if=pflash,format=raw,readonly=on,file=$code" -drive "if=pflash,format=raw,file=$work/vars.fd" \
  -drive "$drive" "${devices[@]}" -serial "file:$console" "$@" >"$work/qemu.log" 2>&1 || rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf 'boot: %s %d.%d s\n' "$controller" $((ms / 1000)) $((ms % 1000 / 100))
[ "$rc" -eq 0 ] || { echo "qemu exit $rc:"; tail -5 "$work/qemu.log"; } >&2
exit "$rc"
