#!/usr/bin/env bash
# validate --record through the real adapter (NVML and the CUDA driver API by dlopen) on the CPU doubles of
# libnvidia-ml, libcuda, cuBLAS and NCCL (tests/contract/), found through LD_LIBRARY_PATH as the real libraries are:
# each run is recorded, the recording replayed with the same selection, and tests/gpu/same_judgement.py (what
# tests/gpu/run.sh uses on a GPU) must find the same judgement and figures. Runs: the quick level on both CPU GPUs
# (the fake NVML's second GPU carries ECC, remap, retired-page and persistence faults); peer copies, NCCL, the link
# under load and host copies at standard (a p2p matrix, an NCCL figure, folded readings under load); and a kernel
# that never finishes (CPU_CUDA_FAULTS=hang:compute_int), which the recording keeps as a hang fault.
# Usage: record_cpu_gpus.sh GPUENV FAKE_NVML CPU_CUDA CPU_CUBLAS CPU_NCCL SAME_JUDGEMENT_PY
set -euo pipefail
gpuenv=$1 nvml=$2 cuda=$3 cublas=$4 nccl=$5 same=$6
work=$(mktemp -d "${TMPDIR:-/tmp}/gpuenv-record.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/lib"
ln -s "$nvml" "$work/lib/libnvidia-ml.so.1"
ln -s "$cuda" "$work/lib/libcuda.so.1"
ln -s "$cublas" "$work/lib/libcublasLt.so.13"
ln -s "$cublas" "$work/lib/libcublas.so.13"
ln -s "$nccl" "$work/lib/libnccl.so.2"
export LD_LIBRARY_PATH="$work/lib"

# record NAME SELECTION...: the run recorded, then replayed with the same selection; both judged alike.
record() {
  local name=$1 rc=0
  shift
  "$gpuenv" validate "$@" --record "$work/$name.yaml" --json > "$work/$name.json" 2> "$work/$name.err" || rc=$?
  if [ "$rc" -gt 1 ]; then echo "FAIL: $name: validate exited $rc"; cat "$work/$name.err"; exit 1; fi
  grep -q "recorded what the nvml+cuda backend answered in $work/$name.yaml" "$work/$name.err" || { echo "FAIL: $name: no note"; cat "$work/$name.err"; exit 1; }
  head -1 "$work/$name.yaml" | grep -q '^# gpuenv-replay-v1 recording: what the nvml+cuda backend answered' || { echo "FAIL: $name: header"; head -3 "$work/$name.yaml"; exit 1; }
  CPU_CUDA_FAULTS= "$gpuenv" validate --backend "replay:$work/$name.yaml" "$@" --json > "$work/$name.replayed.json" 2> "$work/$name.replayed.err" || true
  python3 "$same" "$work/$name.json" "$work/$name.replayed.json" || { echo "FAIL: $name"; exit 1; }
}

record quick --level quick
grep -q 'ecc_volatile_uncorrected: 2' "$work/quick.yaml" || { echo "FAIL: GPU 1's ECC errors are not in the recording"; exit 1; }
record standard --level standard --check p2p_bandwidth --check nccl_allreduce --check pcie_link --check h2d_bandwidth
grep -q '^  p2p:' "$work/standard.yaml" && grep -q '^  nccl_allreduce: {values:' "$work/standard.yaml" || { echo "FAIL: no p2p or NCCL figure"; exit 1; }
CPU_CUDA_FAULTS=hang:compute_int record hang --level quick --gpus 0 --check compute_correctness --check hbm_bandwidth
grep -q -- '- {gpu: 0, method: compute_mismatches}' "$work/hang.yaml" || { echo "FAIL: the hung kernel is not a hang fault"; cat "$work/hang.yaml"; exit 1; }
echo "validate.record_cpu_gpus: ok"
