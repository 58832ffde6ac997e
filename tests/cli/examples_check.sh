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
exit $status
