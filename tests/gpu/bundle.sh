#!/usr/bin/env bash
# Packs gpuenv and the GPU contract tests, built here, with the shared libraries they need that a GPU machine's
# image may lack (yaml-cpp, libcurl, libarchive, OpenSSL, ...), into one compressed file that the device tool
# can carry, so that tests/gpu/run.sh need not configure and build gpuenv there (that image has nvcc and CMake but
# not gpuenv's -dev packages, and nothing can be installed there).
#
#   tests/gpu/bundle.sh BUILD_DIR [OUT_FILE]      (default OUT_FILE: .gpu-bundle.tar.gz, ignored by git)
#
# glibc, libstdc++ and libgcc_s are left out: the machine's own (newer) ones are used. The binaries are stripped.
set -euo pipefail
build="${1:?usage: tests/gpu/bundle.sh BUILD_DIR [OUT_FILE]}"
out="${2:-.gpu-bundle.tar.gz}"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/gpuenv-bundle/bin" "$stage/gpuenv-bundle/lib"
for exe in cli/gpuenv tests/contract_tests; do
  [ -x "$build/$exe" ] || { echo "bundle: $build/$exe is missing: build it first" >&2; exit 1; }
  cp "$build/$exe" "$stage/gpuenv-bundle/bin/"
  strip --strip-unneeded "$stage/gpuenv-bundle/bin/$(basename "$exe")"
  ldd "$build/$exe" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|ld-linux*|libresolv.so.*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
      *) cp -L -n "$lib" "$stage/gpuenv-bundle/lib/" ;;
    esac
  done
done
# gzip, not zstd: the GPU machine's image is not known to have the zstd tool, and tar there must unpack it.
tar -C "$stage" -cf - gpuenv-bundle | gzip -9 > "$out"
echo "bundle: $out, $(du -h "$out" | cut -f1) ($(ls "$stage/gpuenv-bundle/lib" | wc -l) libraries)"
