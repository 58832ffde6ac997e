#!/usr/bin/env bash
# Installs gpuenv's build and test dependencies from Debian 12's packages. Idempotent: installs only what is missing.
set -euo pipefail
packages=(build-essential cmake ninja-build lld cpio pkg-config libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libssl-dev libxml2-dev libcurl4-openssl-dev libarchive-dev zlib1g-dev libzstd-dev zstd
          gpgv gnupg debian-archive-keyring
          libgtest-dev libbenchmark-dev python3 python3-venv clang libclang-rt-14-dev
          skopeo umoci docker-registry bubblewrap curl openssl systemd prometheus python3-yaml
          munge slurmctld slurmd slurm-client
          e2fsprogs kmod fdisk dosfstools mtools qemu-utils qemu-system-x86 ovmf systemd-boot-efi)
if [ "${1:-}" = "--bench" ]; then packages+=(hyperfine pigz bc python3-pip); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
