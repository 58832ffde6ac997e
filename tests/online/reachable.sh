#!/usr/bin/env bash
# Whether the host's Debian mirror and Python index answer, found as gpuenv finds them (`gpuenv sources --json`):
# the first apt repository gpuenv would use (its InRelease) and the Python index (its pip/ page). Exit 0 when all
# answer; 77 with the reason on one line when one does not (ctest's SKIP_RETURN_CODE of the online scripts);
# 1 when gpuenv names none. Usage: reachable.sh GPUENV
set -euo pipefail
gpuenv=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$gpuenv" sources --json > "$tmp/sources.json" || { echo "gpuenv sources failed"; exit 1; }
mapfile -t probes < <(python3 - "$tmp/sources.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for s in j["apt"]["sources"]:
    if s["used"] and s["type"] == "deb":
        base = s["uri"].rstrip("/")
        print(base + "/" + s["suite"].strip("/") + "/InRelease" if s["flat"] else base + "/dists/" + s["suite"] + "/InRelease")
        break
url = j["pip"]["index_url"]["url"]
if url:
    print(url.rstrip("/") + "/pip/")
PY
)
[ "${#probes[@]}" -gt 0 ] || { echo "gpuenv sources names no apt repository and no Python index"; exit 1; }
for url in "${probes[@]}"; do
  code=0
  curl -fsS -o /dev/null --max-time 30 --retry 2 "$url" 2>"$tmp/curl.err" || code=$?
  if [ "$code" -ne 0 ]; then
    echo "skipped: $url cannot be reached (curl exit $code: $(tr -d '\n' < "$tmp/curl.err"))"
    exit 77
  fi
done
