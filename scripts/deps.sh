#!/usr/bin/env bash
# Installs gpuenv's build and test dependencies from Debian 12's packages. Idempotent: installs only what is missing.
set -euo pipefail
packages=(build-essential cmake ninja-build lld cpio pkg-config libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libssl-dev libxml2-dev libcurl4-openssl-dev libarchive-dev zlib1g-dev libzstd-dev zstd
          libtomlplusplus-dev
          gpgv gnupg debian-archive-keyring
          libgtest-dev libbenchmark-dev python3 python3-venv clang libclang-rt-14-dev
          skopeo umoci docker-registry bubblewrap curl openssl systemd prometheus python3-yaml
          munge slurmctld slurmd slurm-client
          e2fsprogs kmod fdisk dosfstools mtools qemu-utils qemu-system-x86 ovmf systemd-boot-efi
          qemu-user-static qemu-system-arm qemu-efi-aarch64)
# linux/arm64 (docs/arm64.md): the GCC cross compiler and the `:arm64` libraries gpuenv and its tests link, installed
# beside the amd64 ones (Multi-Arch: same); CLI11 and nlohmann-json are headers only (Architecture: all). Debian 12's
# libyaml-cpp-dev is not Multi-Arch: same, so only its library comes as :arm64 (cmake/cross-yaml-cpp takes the
# headers from the amd64 package).
arm64_packages=(g++-aarch64-linux-gnu libssl-dev:arm64 libxml2-dev:arm64 libcurl4-openssl-dev:arm64 libarchive-dev:arm64
                zlib1g-dev:arm64 libzstd-dev:arm64 libgtest-dev:arm64 libyaml-cpp0.7:arm64)
packages+=("${arm64_packages[@]}")
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
# The `:arm64` packages need arm64 as a foreign architecture of dpkg (the update below then reads its indexes).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then "${sudo_cmd[@]}" dpkg --add-architecture arm64; fi
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
