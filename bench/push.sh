#!/usr/bin/env bash
# Push throughput against a loopback docker-registry: `gpuenv build LOCK --push` (the image already built, so
# the build itself is a no-op) vs `skopeo copy oci:LAYOUT docker://...` of the same layout, each into a fresh
# repository. Usage: bench/push.sh LOCK LAYOUT   (LAYOUT: where `gpuenv build LOCK -o LAYOUT` wrote the image)
set -euo pipefail
cd "$(dirname "$0")/.."
lock=$1 layout=$2
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
cat > "$work/config.yml" <<CONF
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/storage}}
http: {addr: 127.0.0.1:$port}
CONF
docker-registry serve "$work/config.yml" 2>/dev/null & pid=$!
trap 'kill $pid; rm -rf "$work"' EXIT
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/v2/" && break; sleep 0.1; done
gpuenv=build/cli/gpuenv
"$gpuenv" build "$lock" -o "$layout" --offline >/dev/null

hyperfine -N --runs 3 \
  --prepare "rm -rf $work/storage" \
  -n "gpuenv build --push (image already built)" "$gpuenv build $lock -o $layout --offline --plain-http --push 127.0.0.1:$port/bench/gpuenv:1" \
  -n "skopeo copy" "skopeo copy -q --dest-tls-verify=false oci:$layout docker://127.0.0.1:$port/bench/skopeo:1"
