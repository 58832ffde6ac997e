#!/usr/bin/env bash
# Attestation verification time per device (docs/attestation.md; issue 17's target: <= 50 ms per GPU without
# network). Side by side, with hyperfine:
#   - the process floor: `gpuenv --version` (start-up, no verification);
#   - one H100 end to end, offline: the Azure capture with both RIMs from a directory (report, chain, two XML
#     signatures and chains, 34 golden measurements);
#   - eight H100s of NVIDIA's PPCIe sample, device claims only (no RIMs published for them);
#   - `openssl verify` of one device chain (the chain alone, the cheapest piece, as a reference point).
# Per device = (time - floor) / devices. Reads the published evidence from ../shared/cc_vectors.
# Usage: bench/attest.sh [GPUENV]   (default build/cli/gpuenv; needs hyperfine and openssl)
set -euo pipefail
cd "$(dirname "$0")/.."
gpuenv=${1:-build/cli/gpuenv}
vectors=../shared/cc_vectors
[ -d "$vectors" ] || { echo "the published CC evidence is not at $vectors"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GPUENV_CACHE_DIR=$work/cache
printf 'version: 1\nclaims:\n  driver_rim: ignored\n  vbios_rim: ignored\n  measurements: ignored\n' > "$work/device-only.yaml"
csplit -s -z -f "$work/cert" "$vectors/e2e_azure_h100_595/gpu0-cert-chain.pem" '/-----BEGIN CERTIFICATE-----/' '{*}'
cat "$work/cert01" "$work/cert02" "$work/cert03" > "$work/untrusted.pem"
"$gpuenv" attest verify --evidence "$vectors/e2e_azure_h100_595/gpu-evidence.json" --rim-dir "$vectors/e2e_azure_h100_595" >/dev/null
"$gpuenv" attest verify --evidence "$vectors/ppcie/gpu_evidence.json" --policy "$work/device-only.yaml" >/dev/null
hyperfine -N --warmup 3 --runs 30 --export-json "$work/out.json" \
  -n "floor: gpuenv --version" "$gpuenv --version" \
  -n "1 H100, both RIMs, offline" "$gpuenv attest verify --evidence $vectors/e2e_azure_h100_595/gpu-evidence.json --rim-dir $vectors/e2e_azure_h100_595" \
  -n "8 H100, device claims" "$gpuenv attest verify --evidence $vectors/ppcie/gpu_evidence.json --policy $work/device-only.yaml" \
  -n "openssl verify, one device chain" "openssl verify -no_check_time -CAfile $work/cert04 -untrusted $work/untrusted.pem $work/cert00"
python3 - "$work/out.json" <<'PY'
import json, sys
r = {x["command"]: x["mean"] * 1000 for x in json.load(open(sys.argv[1]))["results"]}
floor = r["floor: gpuenv --version"]
one, eight = r["1 H100, both RIMs, offline"], r["8 H100, device claims"]
print(f"floor {floor:.1f} ms; 1 GPU with RIMs {one - floor:.1f} ms above the floor; 8 GPUs {(eight - floor) / 8:.1f} ms per GPU above the floor;"
      f" openssl verify of one chain {r['openssl verify, one device chain']:.1f} ms (whole process)")
PY
