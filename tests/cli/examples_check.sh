#!/usr/bin/env bash
# Every example spec resolves (exit 0) or is unsatisfiable by design (exit 3, named here), as a process.
set -uo pipefail
gpuenv=$1
root=$2
status=0
for spec in "$root"/recipes/examples/*.yaml; do
  "$gpuenv" resolve "$spec" --json >/dev/null
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: $spec exited $rc"
    status=1
  fi
done
# The serving examples bring the torch their framework pins (recipes/catalog/vllm.yaml, sglang.yaml).
expect_pin() {  # SPEC FRAMEWORK VERSION TORCH
  if ! "$gpuenv" resolve "$root/recipes/examples/$1.yaml" --json | python3 -c '
import json, sys
fw, version, torch = sys.argv[1:]
got = json.load(sys.stdin)["frameworks"]
ok = got.get(fw, {}).get("version") == version and got.get("torch", {}).get("version") == torch
ok = ok and got["torch"].get("pinned_by") == fw + " " + version
sys.exit(0 if ok else "resolves to " + json.dumps({k: [v["version"], v.get("pinned_by")] for k, v in got.items()}))
' "$2" "$3" "$4"; then
    echo "FAIL: $1 should resolve to $2 $3 with the torch it pins, $4"
    status=1
  fi
}
expect_pin vllm-h100 vllm 0.33.0 2.14.0
expect_pin sglang-h100 sglang 0.5.23 2.14.1
exit $status
