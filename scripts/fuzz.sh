#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60). Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUENV_BUILD_TESTS=OFF -DGPUENV_BUILD_BENCH=OFF \
  -DGPUENV_BUILD_FUZZ=ON -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target spec_fuzz constraint_fuzz catalog_codec_fuzz apt_fuzz wheel_fuzz gpuenv_recipes
mkdir -p build-fuzz/corpus/spec build-fuzz/corpus/constraint build-fuzz/corpus/codec build-fuzz/corpus/apt build-fuzz/corpus/wheel
{ printf '\000'; head -c 3000 tests/data/apt_closure_packages.txt; } > build-fuzz/corpus/apt/packages
{ printf '\002'; printf 'deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n'; } > build-fuzz/corpus/apt/list
{ printf '\000'; printf '{"meta":{"api-version":"1.1"},"files":[{"filename":"a-1.0-py3-none-any.whl","url":"a.whl","hashes":{}}]}'; } > build-fuzz/corpus/wheel/json
{ printf '\002'; printf 'Metadata-Version: 2.1\nName: a\nVersion: 1.0\nRequires-Dist: b>=1; python_version>"3"\n'; } > build-fuzz/corpus/wheel/metadata
cp fuzz/corpus/spec/* build-fuzz/corpus/spec/
head -c 4000 build-fuzz/recipes/catalog.bin > build-fuzz/corpus/codec/head.bin
printf '>=12.1,<13' > build-fuzz/corpus/constraint/range
build-fuzz/fuzz/spec_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 build-fuzz/corpus/spec
build-fuzz/fuzz/constraint_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 build-fuzz/corpus/constraint
build-fuzz/fuzz/catalog_codec_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 build-fuzz/corpus/codec
build-fuzz/fuzz/apt_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 build-fuzz/corpus/apt
build-fuzz/fuzz/wheel_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 build-fuzz/corpus/wheel
