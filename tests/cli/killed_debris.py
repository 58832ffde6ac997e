#!/usr/bin/env python3
"""What a killed gpuenv leaves is removed by the next run of the same command and by `gpuenv cache prune` (issue 33,
cases 9 to 12). A SIGKILL leaves temporaries named for the killed process's PID; each case plants what a kill left
(named for a process of this machine that has exited) beside a live writer's file, runs the command again, and checks that the dead
writer's file is gone and the live one's is not: a mark and a build into an archive, a download in the cache's tmp.
Then one real kill: `gpuenv mark` into an archive stopped with SIGKILL while it writes, and the next mark.
Usage: killed_debris.py GPUENV SOURCE_DIR
"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testlib  # noqa: E402

GPUENV, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
work = testlib.scratch("gpuenv-debris-")
env = testlib.gpuenv_env(work)
env["SOURCE_DATE_EPOCH"] = "1700000000"
failures = []


def gpuenv(*args, timeout=300):
    return subprocess.run([GPUENV, *args], capture_output=True, text=True, env=env, timeout=timeout)


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


# Where PIDs mean something (base/file_io.hpp writer_host): the boot id's first 12 hex digits and the PID namespace.
HOST = open("/proc/sys/kernel/random/boot_id").read().replace("-", "").strip()[:12] + "n" + str(os.stat("/proc/self/ns/pid").st_ino)


def plant(path, size):
    with open(path, "wb") as f:
        f.truncate(size)
    return path


archive = os.path.join(work, "t.tar")
lock = os.path.join(SOURCE, "tests/data/locks/empty.lock")
# Case 11: a build into an archive, killed, left its temporary archive beside the output.
dead = plant(os.path.join(work, f".t.tar.tmp.{dead_pid()}.{HOST}.0.0badf00d"), 300 << 20)
live = plant(os.path.join(work, f".t.tar.tmp.{os.getpid()}.{HOST}.0.cafecafe"), 10)
p = gpuenv("build", lock, "--format", "oci-archive", "-o", archive, "--tag", "1")
if p.returncode != 0:
    failures.append(f"build into an archive: exit {p.returncode} {p.stderr[-300:]}")
if os.path.exists(dead) or not os.path.exists(live):
    failures.append(f"build --format oci-archive: the dead writer's temporary is {'still there' if os.path.exists(dead) else 'gone'}, "
                    f"the live one's {'kept' if os.path.exists(live) else 'removed'}")
os.unlink(live)

# Case 9: a mark into an archive, killed, left a copy of the archive beside it (300 MB each time).
report = os.path.join(work, "report.json")
keys = os.path.join(work, "keys")
gpuenv("key", "generate", "-o", keys)
# validate --image reads a layout (issue 32 will add archives and registries): the same lock's layout is the same image.
same = os.path.join(work, "same")
gpuenv("build", lock, "-o", same, "--tag", "1")
v = gpuenv("validate", "--backend", "replay:" + os.path.join(SOURCE, "tests/data/validate/h200x1.yaml"), "--level", "quick", "--image", same,
           "--check", "driver_loaded", "--check", "device_nodes", "--json")
open(report, "w").write(v.stdout)
for i in range(3):
    plant(os.path.join(work, f".t.tar.tmp.{dead_pid()}.{HOST}.{i}.0badf00d"), 300 << 20)
p = gpuenv("mark", archive, "--report", report, "--key", os.path.join(keys, "gpuenv.key"), "--allow-replay")
if p.returncode != 0:
    failures.append(f"mark into an archive: exit {p.returncode} {p.stderr[-300:]}")
left = [n for n in os.listdir(work) if n.startswith(".t.tar.tmp.")]
if left:
    failures.append(f"mark left the dead writers' temporaries: {left}")

# The real thing: a mark killed while it writes the archive (SIGSTOP holds it at a point where its temporary
# exists, then SIGKILL), and the next mark, which removes what it left.
big = os.path.join(work, "big.tar")
with open(archive, "rb") as src, open(big, "wb") as dst:
    dst.write(src.read())
proc = subprocess.Popen([GPUENV, "mark", big, "--report", report, "--key", os.path.join(keys, "gpuenv.key"), "--allow-replay"], env=env,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
seen = None
deadline = time.monotonic() + 30
while time.monotonic() < deadline and proc.poll() is None and not seen:
    seen = next((n for n in os.listdir(work) if n.startswith(".big.tar.tmp.")), None)
if seen:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    p = gpuenv("mark", big, "--report", report, "--key", os.path.join(keys, "gpuenv.key"), "--allow-replay")
    left = [n for n in os.listdir(work) if n.startswith(".big.tar.tmp.")]
    if p.returncode != 0 or left:
        failures.append(f"after a killed mark: exit {p.returncode}, left {left}: {p.stderr[-300:]}")
else:
    proc.wait()
    print("note: the mark finished before its temporary was seen; the planted cases above stand for the kill")

# Case 12: a killed download left cache/tmp/*.part, removed neither by the next build nor by `cache prune --all`.
tmp = os.path.join(work, "cache", "tmp")
os.makedirs(tmp, exist_ok=True)
for command in (["cache", "prune", "--all"], ["build", lock, "-o", os.path.join(work, "layout"), "--tag", "1"]):
    dead_part = plant(os.path.join(tmp, f"{dead_pid()}-{HOST}-3-1234567.part"), 50 << 20)
    dead_blob = plant(os.path.join(tmp, f"{dead_pid()}-{HOST}-4-7654321"), 10)
    live_part = plant(os.path.join(tmp, f"{os.getpid()}-{HOST}-5-42.part"), 10)
    p = gpuenv(*command)
    if p.returncode != 0:
        failures.append(f"{' '.join(command[:2])}: exit {p.returncode} {p.stderr[-300:]}")
    if os.path.exists(dead_part) or os.path.exists(dead_blob) or not os.path.exists(live_part):
        failures.append(f"{' '.join(command[:2])}: dead download {'kept' if os.path.exists(dead_part) else 'removed'}, "
                        f"dead blob {'kept' if os.path.exists(dead_blob) else 'removed'}, live download {'kept' if os.path.exists(live_part) else 'removed'}")
    os.unlink(live_part)

testlib.finish(failures, "what killed runs left is removed by the next run and by cache prune")
