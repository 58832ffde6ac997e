#!/usr/bin/env bash
# validate --multi-node across two gpuenv processes on the CPU doubles of libnvidia-ml, libcuda and NCCL
# (tests/contract/fake_nvml_full.cpp, cpu_cuda.cpp, cpu_nccl.cpp, found by the CLI through LD_LIBRARY_PATH as the real
# libraries are). MODE loopback: both on 127.0.0.1 (runs everywhere). MODE netns: each in a network namespace of its
# own, joined by a veth pair (10.77.0.1/24 and 10.77.0.2/24); it needs root (CAP_NET_ADMIN) and skips (77), saying
# why, without it. Cases: the happy path (every rank's figure reaches rank 0, MEASURED since there is no RDMA port),
# a rank that never arrives (rank 0 names it, in bounded time), a rank killed by SIGKILL during the all-reduce
# (CPU_NCCL_FAULTS=die: the survivor names it, in bounded time) and, on loopback, rank 0 killed (rank 1 names it).
# On loopback, also recipes/slurm/gpuenv-two-node.sbatch, run as sbatch would with a stand-in srun that starts its
# tasks here with the variables a Slurm step sets.
# Usage: multinode_processes.sh MODE GPUENV FAKE_NVML CPU_CUDA CPU_NCCL
set -euo pipefail
mode=$1 gpuenv=$2 nvml=$3 cuda=$4 nccl=$5

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuenv-multinode.XXXXXX")
ns_a="" ns_b=""
cleanup() {
  local pids
  pids=$(jobs -p || true)
  # shellcheck disable=SC2086  # one pid per word
  if [ -n "$pids" ]; then kill -9 $pids 2>/dev/null || true; fi
  # Deleting a namespace deletes its end of the veth pair, and with it the pair.
  if [ -n "$ns_a" ]; then ip netns del "$ns_a" 2>/dev/null || true; fi
  if [ -n "$ns_b" ]; then ip netns del "$ns_b" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP  # ctest's timeout: the namespaces go too

mkdir "$work/lib" "$work/sys"  # an empty sysfs: no RDMA port, whatever the test machine has
ln -s "$nvml" "$work/lib/libnvidia-ml.so.1"
ln -s "$cuda" "$work/lib/libcuda.so.1"
ln -s "$nccl" "$work/lib/libnccl.so.2"

port=$(( 20000 + $$ % 20000 ))
if [ "$mode" = netns ]; then
  if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo "SKIP: network namespaces need root (CAP_NET_ADMIN) and iproute2's ip"; exit 77
  fi
  ns_a="gpuenv-mn-$$-a" ns_b="gpuenv-mn-$$-b"
  veth_a="gmn$$a" veth_b="gmn$$b"
  if ! ip netns add "$ns_a" 2>"$work/ns.err"; then
    ns_a=""
    echo "SKIP: cannot create a network namespace here: $(cat "$work/ns.err")"; exit 77
  fi
  ip netns add "$ns_b"
  if ! ip link add "$veth_a" type veth peer name "$veth_b" 2>"$work/veth.err"; then
    echo "SKIP: cannot create a veth pair here: $(cat "$work/veth.err")"; exit 77
  fi
  ip link set "$veth_a" netns "$ns_a"
  ip link set "$veth_b" netns "$ns_b"
  ip -n "$ns_a" addr add 10.77.0.1/24 dev "$veth_a"
  ip -n "$ns_b" addr add 10.77.0.2/24 dev "$veth_b"
  for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
  ip -n "$ns_a" link set "$veth_a" up
  ip -n "$ns_b" link set "$veth_b" up
  host_a=10.77.0.1 host_b=10.77.0.2
  in_a=(ip netns exec "$ns_a") in_b=(ip netns exec "$ns_b")
else
  host_a=127.0.0.1 host_b=127.0.0.1
  in_a=() in_b=()
fi

# One rank: RANK NAME [VAR=VALUE...] -- extra gpuenv flags. Writes NAME.json, NAME.err and NAME.rc.
rank() {
  local r=$1 name=$2; shift 2
  local vars=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  local inside=("${in_a[@]}")
  [ "$r" = 1 ] && inside=("${in_b[@]}")
  set +e
  "${inside[@]}" env -i PATH="$PATH" LD_LIBRARY_PATH="$work/lib" HOME="$work" GPUENV_SYSFS_ROOT="$work/sys" CPU_CUDA_MEMORY_MIB=128 \
    CPU_NCCL_ROOT_ADDR="$host_a" "${vars[@]}" \
    timeout -s KILL 60 "$gpuenv" validate --check nccl_allreduce --json --multi-node \
      --peers "$host_a:$port,$host_b" --rank "$r" --run-token "test-$$" --nccl-buffer 16MiB "$@" \
      >"$work/$name.json" 2>"$work/$name.err"
  echo $? >"$work/$name.rc"
  set -e
}

fail() { echo "FAIL: $*"; for f in "$work"/*.json "$work"/*.err; do echo "== $f"; head -c 3000 "$f"; echo; done; exit 1; }
outcome() { python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))
for c in r["checks"]:
  if c["key"]=="nccl_allreduce":
    for o in c["results"]: print(o["status"], o.get("code",""), o["message"])' "$1"; }

# 1. Both ranks: rank 0 reports both ranks' bus bandwidth, measured (no RDMA port to judge it by).
start=$SECONDS
rank 0 ok0 -- & rank 1 ok1 -- & wait
[ "$(cat "$work/ok0.rc")" = 0 ] || fail "rank 0 exited $(cat "$work/ok0.rc")"
[ "$(cat "$work/ok1.rc")" = 0 ] || fail "rank 1 exited $(cat "$work/ok1.rc")"
out0=$(outcome "$work/ok0.json")
echo "$out0" | grep -q '^measured no_threshold 2 nodes x 2 GPU(s), this is rank 0' || fail "rank 0: $out0"
echo "$out0" | grep -q "rank 1 ($host_b): median" || fail "rank 0 lacks rank 1's figure: $out0"
grep -q '"rank1.median_gbs"' "$work/ok0.json" || fail "rank 0 lacks rank 1's metric"
outcome "$work/ok1.json" | grep -q '^measured no_threshold 2 nodes x 2 GPU(s), this is rank 1' || fail "rank 1: $(outcome "$work/ok1.json")"
echo "ok: happy path in $((SECONDS - start)) s: $out0"

# 2. Rank 1 never arrives: rank 0 names it within its rendezvous timeout.
start=$SECONDS
rank 0 missing -- --rendezvous-timeout 3s
took=$((SECONDS - start))
[ "$(cat "$work/missing.rc")" = 1 ] || fail "rank 0 alone exited $(cat "$work/missing.rc")"
out=$(outcome "$work/missing.json")
echo "$out" | grep -q "^fail peer_missing .*rank 1 ($host_b)" || fail "missing peer: $out"
[ "$took" -le 20 ] || fail "rank 0 took $took s to give up"
echo "ok: missing peer named in $took s"

# 3. Rank 1 is killed (SIGKILL) in its second all-reduce: rank 0 names it.
start=$SECONDS
rank 0 survivor -- & rank 1 killed CPU_NCCL_FAULTS=die -- & wait
took=$((SECONDS - start))
[ "$(cat "$work/killed.rc")" = 137 ] || fail "the killed rank exited $(cat "$work/killed.rc"), not by SIGKILL"
[ "$(cat "$work/survivor.rc")" = 1 ] || fail "the survivor exited $(cat "$work/survivor.rc")"
out=$(outcome "$work/survivor.json")
echo "$out" | grep -q "^fail peer_lost .*rank 1 ($host_b)" || fail "dead peer: $out"
[ "$took" -le 30 ] || fail "the survivor took $took s"
echo "ok: dead peer named in $took s: $out"

if [ "$mode" = loopback ]; then
  # 4. Rank 0 is killed: rank 1 names it.
  rank 0 killed0 CPU_NCCL_FAULTS=die -- & rank 1 survivor1 -- & wait
  [ "$(cat "$work/killed0.rc")" = 137 ] || fail "rank 0 exited $(cat "$work/killed0.rc"), not by SIGKILL"
  out=$(outcome "$work/survivor1.json")
  echo "$out" | grep -q "^fail peer_lost .*rank 0 ($host_a)" || fail "dead rank 0: $out"
  echo "ok: dead rank 0 named: $out"
fi

if [ "$mode" = loopback ]; then
  # 5. The two-node acceptance job, its srun a stand-in that starts one task per "node" here.
  mkdir "$work/bin"
  cat >"$work/bin/srun" <<'SRUN'
#!/bin/bash
while [ "${1:-}" != "${1#--}" ]; do shift; done  # srun's own options
printf '%s\n' "$@" >"$(dirname "$0")/../srun.args"  # what every task was given
pids=()
for task in 0 1; do
  SLURM_PROCID=$task SLURM_NTASKS=2 SLURM_STEP_NODELIST=127.0.0.1,127.0.0.1 SLURM_JOB_ID=4242 SLURM_STEP_ID=0 "$@" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || { c=$?; [ "$c" -gt "$rc" ] && rc=$c; }; done
exit "$rc"
SRUN
  chmod +x "$work/bin/srun"
  src=$(cd "$(dirname "$0")/../.." && pwd)
  set +e
  env -i PATH="$work/bin:$PATH" LD_LIBRARY_PATH="$work/lib" HOME="$work" GPUENV_SYSFS_ROOT="$work/sys" CPU_CUDA_MEMORY_MIB=128 \
    CPU_NCCL_ROOT_ADDR=127.0.0.1 GPUENV="$gpuenv" GPUENV_REPORT_DIR="$work" \
    GPUENV_MULTI_NODE_ARGS="--nccl-buffer 16MiB --rendezvous-port $port --rendezvous-timeout 20s" \
    timeout -s KILL 90 "$src/recipes/slurm/gpuenv-two-node.sbatch" >"$work/sbatch.out" 2>&1
  rc=$?
  set -e
  [ "$rc" = 0 ] || fail "the sbatch job exited $rc: $(cat "$work/sbatch.out")"
  out=$(outcome "$work/gpuenv-two-node-4242-rank0.json")
  echo "$out" | grep -q '^measured no_threshold 2 nodes x 2 GPU(s), this is rank 0' || fail "sbatch rank 0: $out"
  [ -s "$work/gpuenv-two-node-4242-rank1.json" ] || fail "the sbatch job wrote no report for rank 1"
  # Every task got the job's random token (not the public job.step default).
  grep -A1 -x -- '--run-token' "$work/srun.args" | tail -1 | grep -qxE '[0-9a-f]{32}' ||
    fail "the sbatch job gave no random --run-token: $(tr '\n' ' ' <"$work/srun.args")"
  echo "ok: recipes/slurm/gpuenv-two-node.sbatch: $out"
fi
