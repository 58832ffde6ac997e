#!/usr/bin/env bash
# GPU check: the real NVML adapter must see the driver and every GPU nvidia-smi lists. Exit 77 = skipped.
set -euo pipefail
gpuenv=$1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA driver on this machine (nvidia-smi absent or failing)"
  exit 77
fi
out=$("$gpuenv" detect --json)
echo "$out"
want_driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1 | tr -d ' ')
want_count=$(nvidia-smi -L | wc -l)
python3 - "$want_driver" "$want_count" <<PY
import json, sys
d = json.loads('''$out''')
assert d["source"] == "nvml", d["source"]
assert d["driver"]["version"] == sys.argv[1], (d["driver"], sys.argv[1])
assert len(d["gpus"]) == int(sys.argv[2]), len(d["gpus"])
for g in d["gpus"]:
    assert g["arch"] and g["memory_bytes"] > 0 and g["uuid"].startswith("GPU-"), g
print("gpu.detect_real_driver: ok")
PY
