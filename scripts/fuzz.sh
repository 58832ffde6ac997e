#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60). Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUENV_BUILD_TESTS=OFF -DGPUENV_BUILD_BENCH=OFF \
  -DGPUENV_BUILD_FUZZ=ON -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target spec_fuzz constraint_fuzz catalog_codec_fuzz apt_fuzz wheel_fuzz image_fuzz gpuenv_recipes
mkdir -p build-fuzz/corpus/spec build-fuzz/corpus/constraint build-fuzz/corpus/codec build-fuzz/corpus/apt build-fuzz/corpus/wheel build-fuzz/corpus/image
{ printf '\000'; head -c 3000 tests/data/apt_closure_packages.txt; } > build-fuzz/corpus/apt/packages
{ printf '\002'; printf 'deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n'; } > build-fuzz/corpus/apt/list
{ printf '\000'; printf '{"meta":{"api-version":"1.1"},"files":[{"filename":"a-1.0-py3-none-any.whl","url":"a.whl","hashes":{}}]}'; } > build-fuzz/corpus/wheel/json
{ printf '\002'; printf 'Metadata-Version: 2.1\nName: a\nVersion: 1.0\nRequires-Dist: b>=1; python_version>"3"\n'; } > build-fuzz/corpus/wheel/metadata
cp fuzz/corpus/spec/* build-fuzz/corpus/spec/
{ printf '\000'; head -c 8192 /bin/true; } > build-fuzz/corpus/image/elf
{ printf '\001'; printf 'schema: "gpuenv-lock-v1"\ngenerator: "gpuenv"\nspec: {name: "a", sha256: "x"}\nbase: "debian:12"\ncuda: null\ncudnn: null\npython: "3.11"\ndriver: {min: "525.60.13"}\npackages:\n  - {name: "a", version: "1", kind: "deb", architecture: "all", size: 1, sha256: "%064d", url: "http://mirror.example/a.deb", source: "s"}\n' 0; } > build-fuzz/corpus/image/lock
{ printf '\002'; printf 'Package: *\nPin: release a=stable, o=Debian\nPin-Priority: 990\n\nPackage: /^lib/ src:foo\nPin: version 1.2*\nPin-Priority: -1\n'; } > build-fuzz/corpus/image/pref
{ printf '\003'; printf '127.0.0.1:5000/team/image:1.0@sha256:%064d' 0; } > build-fuzz/corpus/image/ref
{ printf '\004'; printf 'Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push"'; } > build-fuzz/corpus/image/challenge
{ printf '\005'; printf '{"auths":{"https://registry.example.com/v1/":{"auth":"dTpw"}}}'; } > build-fuzz/corpus/image/config
head -c 4000 build-fuzz/recipes/catalog.bin > build-fuzz/corpus/codec/head.bin
printf '>=12.1,<13' > build-fuzz/corpus/constraint/range
build-fuzz/fuzz/spec_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 build-fuzz/corpus/spec
build-fuzz/fuzz/constraint_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 build-fuzz/corpus/constraint
build-fuzz/fuzz/catalog_codec_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 build-fuzz/corpus/codec
build-fuzz/fuzz/apt_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 build-fuzz/corpus/apt
build-fuzz/fuzz/wheel_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 build-fuzz/corpus/wheel
build-fuzz/fuzz/image_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 build-fuzz/corpus/image
