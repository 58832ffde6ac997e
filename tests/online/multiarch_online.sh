#!/usr/bin/env bash
# Online check (ctest label `online`, off in CI): one image for an x86 H100 node and a Grace (GH200, arm64) node.
# recipes/examples/torch-gh200.yaml (image.platforms [linux/amd64, linux/arm64]) is
#   1. locked from the host's Debian mirror and Python index (found as gpuenv finds them): each platform has its own
#      torch wheel, and the arm64 one brings NVIDIA's CUDA wheels (torch 2.11 is the first whose aarch64 wheels do);
#   2. built, both platforms into one layout; skopeo reads each image through the index (--override-arch) with the
#      digest gpuenv printed for it and a config of that architecture; a rebuild is a no-op with the same digest;
#   3. run: `python3 -c 'import torch; ...'` natively in the amd64 image and through qemu-aarch64-static in the arm64
#      one (`gpuenv run --platform linux/arm64`), each printing the lock's torch and CUDA versions (never "None");
#   4. timed: the two-platform build against an amd64-only build of the same spec (image.platforms [linux/amd64]),
#      cold (an empty package store and layer memo, the downloads already in the cache, as docs/build.md measures)
#      and warm (a new layout from a filled store), each from a cache of its own holding the same downloads; and the
#      emulated start-up against the native one (the median of 3 runs of the same command, the root unpacked before).
#      The amd64-only lock must pin the same amd64 packages as the two-platform lock, and its image must have the
#      same layers but for the metadata layer (which holds the lock, whose spec differs).
# Uses $GPUENV_CACHE_DIR when set (about 6 GB of downloads on a cold cache; the cold timings add and then remove a
# package store of their own, up to about 25 GB). Exit 0 passed, 1 a check failed, 77 skipped (the reason on one
# line: a mirror cannot be reached, or skopeo, bubblewrap or qemu-aarch64-static is missing).
# Usage: multiarch_online.sh GPUENV ROOT
set -euo pipefail
gpuenv=$(realpath "$1")
root=$(realpath "$2")
rc=0
"$root/tests/online/reachable.sh" "$gpuenv" || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
for tool in skopeo bwrap qemu-aarch64-static; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool is not installed (Debian: skopeo, bubblewrap, qemu-user-static)"; exit 77; }
done
out=$(mktemp -d "${TMPDIR:-/tmp}/gpuenv-multiarch.XXXXXX")
trap 'rm -rf "$out"' EXIT
trap 'exit 143' TERM INT
cache=${GPUENV_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuenv}
export GPUENV_CACHE_DIR=$cache
fail() { echo "multiarch FAIL: $*"; exit 1; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }
secs() { python3 -c "print(f'{$1 / 1000:.1f}')"; }
t0=$(ms)
step() { local now; now=$(ms); printf 'multiarch: %-72s %7s s\n' "$1" "$(secs $((now - t0)))"; t0=$now; }
json() { python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$1"; }

spec=$root/recipes/examples/torch-gh200.yaml
grep -q '^  platforms: \[linux/amd64, linux/arm64\]$' "$spec" || fail "$spec no longer names image.platforms [linux/amd64, linux/arm64]"

# 1. The lock: each platform's packages, the arm64 torch with CUDA.
"$gpuenv" lock "$spec" -o "$out/two.lock" --json > "$out/two.lock.json" 2> "$out/lock.log" || { tail -20 "$out/lock.log"; fail "lock"; }
grep -q '^platforms: \["linux/amd64", "linux/arm64"\]$' "$out/two.lock" || fail "the lock does not name both platforms"
torch=$(json "$out/two.lock.json" 'j["frameworks"]["torch"]["version"]')
cuda=$(json "$out/two.lock.json" 'j["frameworks"]["torch"]["cuda"]')
[ -n "$torch" ] && [ -n "$cuda" ] || fail "the lock names no torch version or CUDA"
python3 - "$out/two.lock.json" "$torch" <<'PY' || fail "the lock's wheels are not what a CUDA torch on both platforms needs"
import json, sys
j, torch = json.load(open(sys.argv[1])), sys.argv[2]
wheels = {}
for p in j["packages"]:
    if p["kind"] == "wheel":
        wheels.setdefault(p["platform"], {})[p["name"]] = p
ok = True
for platform, machine in (("linux/amd64", "x86_64"), ("linux/arm64", "aarch64")):
    w = wheels.get(platform, {})
    t = w.get("torch")
    if not t or t["version"] != torch or not t["architecture"].endswith(machine):
        print(f"{platform}: torch {torch} for {machine} is not pinned: {t}"); ok = False
    cuda = sorted(n for n in w if n.startswith("nvidia-cuda-runtime"))
    if not cuda:
        print(f"{platform}: no NVIDIA CUDA runtime wheel (a CPU-only torch?); wheels: {sorted(w)}"); ok = False
    print(f"{platform}: {len(w)} wheels, torch {t['version'] if t else '-'} ({t['architecture'] if t else '-'}), {', '.join(cuda)}")
sys.exit(0 if ok else 1)
PY
step "locked: torch $torch, CUDA $cuda, $(json "$out/two.lock.json" 'len(j["packages"])') packages for two platforms"

# 2. Built: one index, an image per platform, each read by skopeo through the index; a rebuild is a no-op.
b0=$(ms)
"$gpuenv" build "$out/two.lock" -o "$out/image" --json > "$out/build.json" 2> "$out/build.log" || { tail -20 "$out/build.log"; fail "build"; }
first_build=$(( $(ms) - b0 ))
index=$(json "$out/build.json" 'j["digest"]')
step "built both platforms into one layout (this cache: $cache): $index"
for arch in amd64 arm64; do
  # skopeo's Digest is the index's (what the reference names); the image it chose shows in its layers.
  want=$(json "$out/build.json" "' '.join(l['digest'] for p in j['platforms'] if p['platform'] == 'linux/$arch' for l in p['layers'])")
  skopeo --override-arch "$arch" inspect "oci:$out/image" > "$out/skopeo-$arch.json" 2> "$out/skopeo.log" || { cat "$out/skopeo.log"; fail "skopeo inspect --override-arch $arch"; }
  [ "$(json "$out/skopeo-$arch.json" 'j["Digest"] + " " + j["Architecture"] + " " + j["Os"]')" = "$index $arch linux" ] \
    || fail "skopeo --override-arch $arch reads $(json "$out/skopeo-$arch.json" 'j["Digest"] + " " + j["Architecture"] + " " + j["Os"]'), not $index $arch linux"
  [ "$(json "$out/skopeo-$arch.json" '" ".join(j["Layers"])')" = "$want" ] || fail "skopeo --override-arch $arch reads other layers than gpuenv's linux/$arch image has"
  skopeo --override-arch "$arch" inspect --config "oci:$out/image" > "$out/config-$arch.json" 2> "$out/skopeo.log" || { cat "$out/skopeo.log"; fail "skopeo inspect --config --override-arch $arch"; }
  [ "$(json "$out/config-$arch.json" 'j["architecture"] + "/" + j["os"]')" = "$arch/linux" ] || fail "the $arch image's config is not for $arch/linux"
done
step "skopeo reads the amd64 and arm64 images through the index, each with its layers and config"
"$gpuenv" build "$out/two.lock" -o "$out/image" > "$out/again.log" 2>&1 || { tail -20 "$out/again.log"; fail "rebuild"; }
grep -q '^unchanged' "$out/again.log" || { cat "$out/again.log"; fail "the rebuild was not a no-op"; }
[ "$(tail -1 "$out/again.log")" = "$index" ] || fail "the rebuild printed $(tail -1 "$out/again.log"), not $index"
step "rebuilt: unchanged, the same index digest"

# 3. Run: the amd64 image natively, the arm64 one through qemu-user; both print the lock's torch and CUDA.
probe='import torch; print(torch.__version__, torch.version.cuda)'
check_versions() {  # FILE PLATFORM: the last line is "TORCH[+local] CUDA"
  local line v c
  line=$(tail -1 "$1"); v=${line% *}; c=${line##* }
  [ "${v%%+*}" = "$torch" ] && [ "$c" = "$cuda" ] || { cat "$1"; fail "$2: the image's torch prints '$line', the lock says torch $torch with CUDA $cuda"; }
}
r0=$(ms)
"$gpuenv" run "$out/image" --no-gpu -- python3 -c "$probe" > "$out/run-amd64.log" 2>&1 || { cat "$out/run-amd64.log"; fail "gpuenv run (amd64)"; }
native_first=$(( $(ms) - r0 ))
check_versions "$out/run-amd64.log" linux/amd64
step "run natively (amd64, root unpacked first): $(tail -1 "$out/run-amd64.log")"
r0=$(ms)
"$gpuenv" run --platform linux/arm64 --no-gpu "$out/image" -- python3 -c "$probe" > "$out/run-arm64.log" 2>&1 || { cat "$out/run-arm64.log"; fail "gpuenv run --platform linux/arm64"; }
emulated_first=$(( $(ms) - r0 ))
check_versions "$out/run-arm64.log" linux/arm64
grep -q 'qemu-aarch64-static' "$out/run-arm64.log" || { cat "$out/run-arm64.log"; fail "gpuenv run --platform linux/arm64 did not say it emulates"; }
step "run under emulation (arm64, root unpacked first): $(tail -1 "$out/run-arm64.log")"
median3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
times_of() {  # PLATFORM: three runs of the probe, their times in ms in $times
  local i s
  times=()
  for i in 1 2 3; do
    s=$(ms)
    "$gpuenv" run --platform "$1" --no-gpu "$out/image" -- python3 -c "$probe" > "$out/timed.log" 2>&1 || { cat "$out/timed.log"; fail "timed run $i ($1)"; }
    times+=($(( $(ms) - s )))
    check_versions "$out/timed.log" "$1"
  done
}
times_of linux/amd64; native=("${times[@]}")
times_of linux/arm64; emulated=("${times[@]}")
native_median=$(median3 "${native[@]}"); emulated_median=$(median3 "${emulated[@]}")
step "timed start-ups (3 each): native ${native[*]} ms, emulated ${emulated[*]} ms"

# 4. The same spec for amd64 alone: the same amd64 packages, the same layers but for the metadata.
sed 's/^  platforms: \[linux\/amd64, linux\/arm64\]$/  platforms: [linux\/amd64]/' "$spec" > "$out/torch-gh200-amd64.yaml"
"$gpuenv" lock "$out/torch-gh200-amd64.yaml" -o "$out/one.lock" --json > "$out/one.lock.json" 2> "$out/lock.log" || { tail -20 "$out/lock.log"; fail "lock (amd64 only)"; }
python3 - "$out/two.lock.json" "$out/one.lock.json" <<'PY' || fail "the amd64-only lock does not pin the two-platform lock's amd64 packages"
import json, sys
two, one = (json.load(open(f))["packages"] for f in sys.argv[1:3])
a = sorted((p["kind"], p["name"], p["version"], p["sha256"]) for p in two if p["platform"] == "linux/amd64")
b = sorted((p["kind"], p["name"], p["version"], p["sha256"]) for p in one)
for x in sorted(set(a) ^ set(b)):
    print(("only the two-platform lock: " if x in set(a) else "only the amd64-only lock: ") + " ".join(x))
sys.exit(0 if a == b else 1)
PY
step "the amd64-only lock pins the two-platform lock's amd64 packages"

# Each timed build from a cache of its own: the downloads hard-linked from this cache, no package store, no layers.
timed_builds() {  # NAME LOCK: sets $cold and $warm (ms); leaves $out/NAME-cold.json
  local c=$out/cache-$1 s
  mkdir -p "$c"
  cp -al "$cache/blobs" "$c/blobs"
  cp -a "$cache/refs" "$c/refs"
  s=$(ms)
  GPUENV_CACHE_DIR=$c "$gpuenv" build "$2" -o "$out/$1-cold" --json > "$out/$1-cold.json" 2> "$out/$1.log" || { tail -20 "$out/$1.log"; fail "cold build ($1)"; }
  cold=$(( $(ms) - s ))
  s=$(ms)
  GPUENV_CACHE_DIR=$c "$gpuenv" build "$2" -o "$out/$1-warm" --json > "$out/$1-warm.json" 2> "$out/$1.log" || { tail -20 "$out/$1.log"; fail "warm build ($1)"; }
  warm=$(( $(ms) - s ))
  [ "$(json "$out/$1-cold.json" 'j["digest"]')" = "$(json "$out/$1-warm.json" 'j["digest"]')" ] || fail "the cold and warm builds ($1) differ"
  rm -rf "$c" "$out/$1-cold" "$out/$1-warm"
}
timed_builds one "$out/one.lock"; one_cold=$cold; one_warm=$warm
step "amd64 only: cold $(secs "$one_cold") s, warm $(secs "$one_warm") s"
timed_builds two "$out/two.lock"; two_cold=$cold; two_warm=$warm
step "both platforms: cold $(secs "$two_cold") s, warm $(secs "$two_warm") s"
[ "$(json "$out/two-cold.json" 'j["digest"]')" = "$index" ] || fail "the two-platform build from a fresh store is not $index"
python3 - "$out/build.json" "$out/one-cold.json" <<'PY' || fail "the amd64 image's layers differ between the two builds beyond the metadata layer"
import json, sys
two, one = (json.load(open(f)) for f in sys.argv[1:3])
a = {l["name"]: l["digest"] for p in two["platforms"] if p["platform"] == "linux/amd64" for l in p["layers"]}
b = {l["name"]: l["digest"] for l in one["layers"]}
differ = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
print("amd64 layers that differ between the two-platform and the amd64-only build:", ", ".join(differ) or "none")
sys.exit(0 if differ in ([], ["metadata"]) else 1)
PY
step "the amd64 image's layers are the same in both builds but for the metadata"

size() { du -sb "$1" | cut -f1; }
echo "multiarch: sizes: the two-platform layout $(( $(size "$out/image") / 1048576 )) MiB"
echo "multiarch: build (cache $cache, downloads there unless already): $(secs "$first_build") s"
echo "multiarch: build, two platforms against amd64 only: cold $(secs "$two_cold") s / $(secs "$one_cold") s" \
     "(ratio $(python3 -c "print(round($two_cold / $one_cold, 2))")), warm $(secs "$two_warm") s / $(secs "$one_warm") s"
echo "multiarch: start-up of '$probe' (median of 3): arm64 under qemu-user $(secs "$emulated_median") s, amd64 native $(secs "$native_median") s" \
     "(ratio $(python3 -c "print(round($emulated_median / max(1, $native_median), 1))")); the first runs, unpacking the root: $(secs "$emulated_first") s and $(secs "$native_first") s"
echo "multiarch passed"
