#!/usr/bin/env bash
# recipes/systemd/ checked by systemd's own parser: `systemd-analyze verify` of gpuenv-preflight.service and of a
# stand-in slurmd.service and kubelet.service carrying gpuenv's drop-ins must print nothing (it warns about unknown
# keys, bad values and missing executables but still exits 0, so any output fails the test). A copy with a typo
# must be caught, which proves the check can fail.
# Usage: systemd_units.sh GPUENV SOURCE_DIR   (exit 77, ctest's skip, without systemd-analyze)
set -euo pipefail
gpuenv=$(realpath "$1")
src=$2
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze is not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The unit names /usr/bin/gpuenv; verify checks that the executable exists, so point it at the one under test.
sed "s|/usr/bin/gpuenv|$gpuenv|" "$src/recipes/systemd/gpuenv-preflight.service" > "$work/gpuenv-preflight.service"
for daemon in slurmd kubelet; do
  printf '[Unit]\nDescription=stand-in %s\n[Service]\nExecStart=/bin/true\n' "$daemon" > "$work/$daemon.service"
  cp -r "$src/recipes/systemd/$daemon.service.d" "$work/"
done
verify() { (cd "$work" && systemd-analyze verify --man=no "$@" 2>&1); }
out=$(verify ./gpuenv-preflight.service ./slurmd.service ./kubelet.service)
if [ -n "$out" ]; then echo "systemd-analyze verify complained:"; echo "$out"; exit 1; fi
grep -q '^ExecStart=/usr/bin/gpuenv preflight .*--status-file /run/gpuenv/status.json$' "$src/recipes/systemd/gpuenv-preflight.service" \
  || { echo "the unit does not run gpuenv preflight into /run/gpuenv/status.json"; exit 1; }
# gpuenv itself must accept the unit's command line (systemd-analyze cannot tell): run it, on a recorded machine,
# into a status file of the test's own.
exec_line=$(sed -n 's|^ExecStart=/usr/bin/gpuenv ||p' "$src/recipes/systemd/gpuenv-preflight.service" | sed "s|/run/gpuenv/status.json|$work/status.json|")
# shellcheck disable=SC2086
if ! run_out=$("$gpuenv" $exec_line --backend "replay:$src/tests/data/validate/h200x1.yaml" 2>&1) || [ ! -s "$work/status.json" ]; then
  echo "gpuenv refused the unit's command line ($exec_line): $run_out"; exit 1
fi
for key in 'Type=oneshot' 'RemainAfterExit=yes' 'ConditionPathExists=/proc/driver/nvidia/version' 'WantedBy=multi-user.target' 'TimeoutStartSec='; do
  grep -q "^$key" "$work/gpuenv-preflight.service" || { echo "the unit lacks $key"; exit 1; }
done
# The check can fail: a typo in a copy is reported.
printf '[Service]\nTimeoutStartSek=1\n' >> "$work/gpuenv-preflight.service"
bad=$(verify ./gpuenv-preflight.service)
case "$bad" in *"Unknown key 'TimeoutStartSek'"*) ;; *) echo "a typo went unnoticed: $bad"; exit 1 ;; esac
echo "systemd-analyze verify accepts gpuenv-preflight.service and the slurmd and kubelet drop-ins"
