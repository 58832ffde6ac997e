#!/usr/bin/env bash
# Marks against a loopback docker-registry (docs/mark.md): the wall time of `gpuenv mark` (read the attestation
# image, sign, append, write, read back) and of `gpuenv verify` of an image carrying 10 records (every record
# fetched and judged), side by side with `skopeo inspect --raw` of the same attestation tag (one manifest GET,
# the floor of any reader). The image is a small one built offline from a hand-written lock; the records come
# from a replay report (--allow-replay), which exercises the same bytes as a real one.
# Usage: bench/mark.sh [GPUENV]   (default build/cli/gpuenv; needs docker-registry, skopeo, hyperfine)
set -euo pipefail
cd "$(dirname "$0")/.."
gpuenv=${1:-build/cli/gpuenv}
. bench/registry.sh
export GPUENV_CACHE_DIR=$work/cache
ref=127.0.0.1:$port/bench/marked:1
"$gpuenv" key generate -o "$work/keys" >/dev/null
digest=$("$gpuenv" build tests/data/locks/empty.lock -o "$work/img" --push "$ref" --plain-http --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])')
"$gpuenv" validate --backend replay:tests/data/validate/h200x1.yaml --level quick --image "$work/img" --check driver_loaded --json > "$work/report.json"
mark=("$gpuenv" mark "docker://$ref" --report "$work/report.json" --key "$work/keys/gpuenv.key" --allow-replay --plain-http)
for _ in $(seq 10); do "${mark[@]}" >/dev/null; done
verify="$gpuenv verify docker://$ref --key $work/keys/gpuenv.pub --gpu 'NVIDIA H200' --driver 550.90.07 --cc off --allow-replay --plain-http"
eval "$verify" >/dev/null
echo "records: $("$gpuenv" inspect "docker://$ref" --plain-http --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["marks"]))')"
hyperfine -N --warmup 2 --runs 20 \
  -n "gpuenv verify (10 records)" "$verify" \
  -n "skopeo inspect --raw of the .att tag (one GET)" "skopeo inspect --raw --tls-verify=false docker://127.0.0.1:$port/bench/marked:sha256-${digest#sha256:}.att"
hyperfine -N --runs 10 -n "gpuenv mark (an 11th.. 20th record)" "${mark[*]}"
