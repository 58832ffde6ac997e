#!/usr/bin/env bash
# The one script for a machine with an NVIDIA GPU (run it through the device tool, then give the machine back).
# Runs the GPU contract tests, times `validate --level quick`, runs `validate --level standard --json`, runs the
# long level's gemm_sustained for a minute, marks a small image good and verifies the mark, and cross-checks hbm_bandwidth against a PyTorch device-to-device copy
# and bf16 gemm_tflops against torch.matmul on the same GPU, printing short tables; where MIG is already on, runs the
# quick level once per MIG instance (skipped, saying so, where it is not). Records the standard run as a replay file
# (validate --record: recorded.yaml, the GPU's recording for tests/data/validate/) and runs `gpuenv attest` read
# only (never --set-ready). Writes what it measured under build-gpu/out, and with $OUT set packs all of it into
# $OUT/gpu-run.tar.gz beside copies of the main files (the device tool brings back at most 8 files). Read-only on the
# GPU: no clocks, power, ECC, MIG, persistence or CC change.
#
# gpuenv comes from .gpu-bundle.tar.gz when it is there (tests/gpu/bundle.sh makes it here; carry it), since the
# GPU machine's image has nvcc and CMake but not gpuenv's -dev packages; else it is built there. Here:
#   cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release -DGPUENV_BUILD_BENCH=OFF
#   cmake --build build-rel -j2 --target gpuenv contract_tests && tests/gpu/bundle.sh build-rel
# then the device tool's run with command "bash tests/gpu/run.sh", carry [".gpu-bundle.tar.gz"], timeout 480.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=build-gpu/out
rm -rf "$out" && mkdir -p "$out"
# Whatever happens below, what was measured comes back: one archive and the main files (at most 8 files return).
pack() {
  [ -n "${OUT:-}" ] || return 0
  tar -C "$out" -czf "$OUT/gpu-run.tar.gz" . 2>/dev/null
  for f in recorded.yaml standard.json crosscheck.txt durations.txt attest.json verify.txt; do
    [ -f "$out/$f" ] && cp "$out/$f" "$OUT/"
  done
  return 0
}
trap pack EXIT
nvidia-smi --query-gpu=index,name,pci.device_id,driver_version,memory.total --format=csv | tee "$out/nvidia-smi.csv"

# cuBLAS(Lt) and NCCL, which gpuenv dlopens, may be only in the toolkit or in the Python environment there.
sites=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
extra=$(for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/*/lib $(for s in $sites; do echo "$s/nvidia"; done); do
          [ -d "$d" ] && find "$d/" -maxdepth 3 \( -name 'libcublasLt.so.*' -o -name 'libnccl.so.*' \) 2>/dev/null
        done | xargs -r -n1 dirname | sort -u | tr '\n' ':')
echo "extra library directories: ${extra:-none}"

if [ -f .gpu-bundle.tar.gz ]; then
  rm -rf /tmp/gpuenv-bundle && tar -C /tmp -xzf .gpu-bundle.tar.gz || exit 1
  libs="/tmp/gpuenv-bundle/lib:${extra}${LD_LIBRARY_PATH:-}"
  gpuenv=(env LD_LIBRARY_PATH="$libs" /tmp/gpuenv-bundle/bin/gpuenv)
  # The tests that need a GPU (the others use fakes built here, at paths that do not exist there).
  env LD_LIBRARY_PATH="$libs" /tmp/gpuenv-bundle/bin/contract_tests --gtest_filter='*OnGpu*' 2>&1 | tail -25 | tee "$out/contract.txt"
else
  arch="${GPUENV_GPU_ARCH:-90}"   # H100/H200; the full list is built by CI, one architecture is enough here
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DGPUENV_BUILD_BENCH=OFF -DGPUENV_CUDA_ARCHS="$arch" >/dev/null || exit 1
  cmake --build build-gpu -j"$(nproc)" --target gpuenv contract_tests validate_tests 2>&1 | tail -3 || exit 1
  gpuenv=(env LD_LIBRARY_PATH="${extra}${LD_LIBRARY_PATH:-}" ./build-gpu/cli/gpuenv)
  (cd build-gpu && LD_LIBRARY_PATH="${extra}${LD_LIBRARY_PATH:-}" ctest -L 'gpu|contract' --output-on-failure 2>&1 | tail -15) | tee "$out/contract.txt"
fi
"${gpuenv[@]}" detect | tee "$out/detect.txt"

# Wall time in seconds with bash and GNU date only (bc is not known to be on the GPU machine).
seconds_since() { local ms=$(( ($(date +%s%N) - $1) / 1000000 )); printf '%d.%03d' $((ms / 1000)) $((ms % 1000)); }
start=$(date +%s%N)
"${gpuenv[@]}" validate --level quick --gpus 0 --json > "$out/quick.json" 2> "$out/quick.err"
quick_rc=$?
quick_s=$(seconds_since "$start")
echo "quick: exit $quick_rc in ${quick_s} s (target <= 15 s)"

start=$(date +%s%N)
timeout 300 "${gpuenv[@]}" validate --level standard --gpus 0 --json --junit "$out/standard.xml" --record "$out/recorded.yaml" \
  > "$out/standard.json" 2> "$out/standard.err"
standard_rc=$?
standard_s=$(seconds_since "$start")
echo "standard: exit $standard_rc in ${standard_s} s"; tail -2 "$out/standard.err"
# The recording replayed here and now: the same judgement from the file as from the GPU (docs/replay.md).
if [ -f "$out/recorded.yaml" ]; then
  "${gpuenv[@]}" validate --backend "replay:$out/recorded.yaml" --level standard --gpus 0 --json > "$out/replayed.json" 2> "$out/replayed.err"
  python3 tests/gpu/same_judgement.py "$out/standard.json" "$out/replayed.json" | tee "$out/replayed.txt"
fi
# Where the time goes, and every check that did not pass.
python3 - "$out/quick.json" "$out/standard.json" <<'PY' | tee "$out/durations.txt"
import json, sys
for path in sys.argv[1:]:
    try: r = json.load(open(path))
    except Exception as e: print("%s: no report (%s)" % (path, e)); continue
    print("%s: %s, %.1f s, %s" % (r.get("level"), r.get("status"), r.get("duration_ms", 0) / 1e3, r.get("backend")))
    for c in sorted(r["checks"], key=lambda c: -c.get("duration_ms", 0)):
        bad = [x for x in c["results"] if x["status"] not in ("pass",)]
        print("  %-20s %6.2f s %-5s %s" % (c["key"], c.get("duration_ms", 0) / 1e3, c["status"],
              "; ".join("%s:%s %s" % (x["gpu"], x.get("code") or "", x["message"][:90]) for x in bad)[:200]))
PY

python3 - "$out/standard.json" <<'PY' | tee "$out/crosscheck.txt"
import json, sys, time
report = json.load(open(sys.argv[1]))
for c in report["checks"]:
    for r in c["results"]:
        if r["status"] in ("fail", "warn"): print("  %-20s %s %s %s" % (c["key"], r["status"], r["code"], r["message"][:120]))
try:
    import torch
except Exception as e:
    print("no PyTorch here (%s): no cross-check" % e); sys.exit(0)
dev = torch.device("cuda:0")
def median(xs): xs = sorted(xs); return xs[len(xs) // 2]
# Device-to-device copy: bytes read plus written, as hbm_bandwidth counts them.
n = 1 << 30
a = torch.empty(n, dtype=torch.uint8, device=dev).random_(0, 255); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
torch.cuda.synchronize(); samples = []
for _ in range(10):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); b.copy_(a); e.record(); torch.cuda.synchronize()
    samples.append(2 * n / (s.elapsed_time(e) / 1e3) / 1e9)
torch_copy = median(samples)
del a, b
# bf16 matmul, 8192^3.
m = 8192
x = torch.randn(m, m, device=dev, dtype=torch.bfloat16); y = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
for _ in range(3): x @ y
torch.cuda.synchronize(); samples = []
for _ in range(10):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); x @ y; e.record(); torch.cuda.synchronize()
    samples.append(2 * m ** 3 / (s.elapsed_time(e) / 1e3) / 1e12)
torch_mm = median(samples)
hbm = None; bf16 = None
for c in report["checks"]:
    for r in c["results"]:
        if r["gpu"] != 0: continue
        for mt in r.get("metrics", []):
            if c["key"] == "hbm_bandwidth" and mt["name"].startswith("median"): hbm = mt["value"]
            if c["key"] == "gemm_tflops" and "bf16" in mt["name"] and "median" in mt["name"]: bf16 = mt["value"]
print("%-28s %12s %12s %8s %8s" % ("metric", "gpuenv", "pytorch", "ratio", "target"))
if hbm: print("%-28s %12.1f %12.1f %8.3f %8s" % ("hbm_bandwidth GB/s", hbm, torch_copy, hbm / torch_copy, ">=0.90"))
else: print("hbm_bandwidth: no gpuenv figure; pytorch copy %.1f GB/s" % torch_copy)
if bf16: print("%-28s %12.1f %12.1f %8.3f %8s" % ("gemm_tflops bf16 TFLOPS", bf16, torch_mm, bf16 / torch_mm, ">=0.90"))
else: print("gemm_tflops bf16: no gpuenv figure; torch.matmul %.1f TFLOPS" % torch_mm)
PY
pack  # so far, in case the machine's time runs out below
# The long level's sustained load alone (a minute of verified bf16 GEMMs with health read every 250 ms).
timeout 150 "${gpuenv[@]}" validate --level long --check gemm_sustained --gpus 0 --json > "$out/sustained.json" 2> "$out/sustained.err"
echo "gemm_sustained: exit $?"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); [print(" ", x["status"], x.get("code",""), x["message"][:160], {m["name"]: round(m["value"],1) for m in x.get("metrics",[])}) for c in r["checks"] for x in c["results"]]' "$out/sustained.json" 2>&1 | tee "$out/sustained.txt"
# validate --multi-node with the real NCCL (docs/validate.md "More than one node"): ncclGetUniqueId, ncclCommInitRank
# in a group and the all-reduce, as one rank on 127.0.0.1 (GPU 0); with two GPUs, as two processes of one GPU each.
# MEASURED unless the machine has active RDMA ports. Bounded: 120 s each.
port=$(( 29600 + RANDOM % 200 ))
timeout -s KILL 120 "${gpuenv[@]}" validate --check nccl_allreduce --gpus 0 --json --multi-node --peers "127.0.0.1:$port" --rank 0 \
  > "$out/multinode1.json" 2> "$out/multinode1.err"
echo "multi-node, one rank: exit $?"
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  for r in 0 1; do
    timeout -s KILL 120 "${gpuenv[@]}" validate --check nccl_allreduce --gpus "$r" --json --multi-node \
      --peers "127.0.0.1:$((port + 1)),127.0.0.1" --rank "$r" > "$out/multinode2-rank$r.json" 2> "$out/multinode2-rank$r.err" &
  done
  wait
fi
for f in "$out"/multinode*.json; do
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); [print(" ", sys.argv[1].split("/")[-1], x["status"], x.get("code",""), x["message"][:240]) for c in r["checks"] for x in c["results"]]' "$f" 2>&1
done | tee "$out/multinode.txt"
# Marking for real (docs/mark.md): a small image validated at the quick level on this GPU, marked in its layout,
# and verified with auto (this host's GPU, driver and CC mode).
"${gpuenv[@]}" key generate -o "$out/keys" --force >/dev/null
"${gpuenv[@]}" build tests/data/locks/empty.lock -o "$out/marked" --tag 1 >/dev/null 2>"$out/mark.err"
"${gpuenv[@]}" validate --level quick --gpus 0 --image "$out/marked" --mark --key "$out/keys/gpuenv.key" --json > "$out/marked.json" 2>>"$out/mark.err"
echo "validate --mark: exit $?"; tail -4 "$out/mark.err"
"${gpuenv[@]}" verify "$out/marked" --key "$out/keys/gpuenv.pub" 2>&1 | tee "$out/verify.txt"
# gpuenv attest against the real NVML, read only (never --set-ready): with CC off it says so and exits 4.
timeout 120 "${gpuenv[@]}" attest --json > "$out/attest.json" 2> "$out/attest.err"
attest_rc=$?
python3 - "$out/attest.json" "$attest_rc" <<'PY' | tee "$out/attest.txt"
import json, sys
try: d = json.load(open(sys.argv[1]))
except Exception as e: print("attest: exit %s, no JSON (%s)" % (sys.argv[2], e)); sys.exit(0)
e = d.get("error") or {}
print("attest: exit %s, %s" % (sys.argv[2], ("%s [%s]" % (e.get("message"), e.get("id"))) if e else json.dumps(d)[:600]))
PY
"${gpuenv[@]}" resolve recipes/examples/torch-h100.yaml --gpu H200 --driver "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)" | tail -3
# MIG, only where it is already on (gpuenv and this script never change the MIG mode or the layout): the quick level
# on every instance from one run (a child process per instance), timed against the quick budget, then once per
# instance with CUDA_VISIBLE_DEVICES naming it (opened in-process) for comparison; each bounded.
mig_mode=$(nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader -i 0 2>/dev/null | tr -d ' ')
if [ "$mig_mode" = "Enabled" ]; then
  nvidia-smi -L | tee "$out/mig_layout.txt"
  start=$(date +%s%N)
  timeout 120 "${gpuenv[@]}" validate --level quick --gpus 0 --json > "$out/mig_all.json" 2> "$out/mig_all.err"
  echo "MIG: quick on every instance of GPU 0: exit $? in $(seconds_since "$start") s (target <= 15 s)"
  n=0
  for uuid in $(nvidia-smi -L | grep -o 'MIG-[0-9a-fA-F-]*' | head -7); do
    n=$((n + 1))
    start=$(date +%s%N)
    CUDA_VISIBLE_DEVICES="$uuid" timeout 60 "${gpuenv[@]}" validate --level quick --gpus 0 --json > "$out/mig_$n.json" 2> "$out/mig_$n.err"
    echo "MIG $uuid: quick exit $? in $(seconds_since "$start") s"
  done
  python3 - "$out"/mig_*.json <<'PY' | tee "$out/mig.txt"
import json, sys
for path in sys.argv[1:]:
    try: r = json.load(open(path))
    except Exception as e: print("%s: no report (%s)" % (path, e)); continue
    print("%s: %s, %.1f s, %d MIG devices" % (path.rsplit("/", 1)[-1], r.get("status"), r.get("duration_ms", 0) / 1e3, len(r.get("mig_devices", []))))
    for c in r["checks"]:
        for x in c["results"]:
            if x.get("mig"): print("  %-20s GI %-3s %-8s %s" % (c["key"], x["mig"]["gpu_instance_id"], x["status"], x["message"][:110]))
PY
else
  echo "MIG: skipped (MIG mode on GPU 0 is '${mig_mode:-unknown}', not Enabled; gpuenv never changes it)" | tee "$out/mig.txt"
fi
echo "quick_rc=$quick_rc standard_rc=$standard_rc"
