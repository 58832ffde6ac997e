#!/usr/bin/env python3
"""recipes/slurm/gpuenv-slurm-check against a real Slurm (Debian's munge, slurmctld and slurmd) on 127.0.0.1 with
a one-node configuration, driven by status files `gpuenv preflight --backend replay:` writes:
- a failed pre-flight: the health check drains the node with Reason "gpuenv: <check>: ...", and a job is refused;
- a healthy one: the health check resumes the node, and srun runs a job;
- an administrator's drain is neither overwritten nor resumed;
- the prolog alone (the health check still healthy): a failed verdict drains the node and the job does not run;
- the prolog's image check: a job naming a marked image runs; one naming an unmarked image is cancelled with the
  reason in its AdminComment, and the node stays in service.
Every wait is bounded. Skips (77) without the Slurm packages, or when not root (slurmd's prolog and health check
run as root).
Usage: slurm_check.py GPUENV SOURCE_DIR
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testlib  # noqa: E402

GPUENV, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
tools = {name: shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
         for name in ("munged", "slurmctld", "slurmd", "srun", "sinfo", "scontrol", "scancel")}
if not all(tools.values()):
    print("SKIP: Slurm or munge is not installed (" + ", ".join(n for n, p in tools.items() if not p) + "): scripts/deps.sh installs them")
    sys.exit(77)
if os.geteuid() != 0:
    print("SKIP: slurmd runs its health check and prolog as root; run this test as root (CI does)")
    sys.exit(77)

started = time.monotonic()
work = testlib.scratch("gpuenv-slurm-")
os.chmod(work, 0o755)  # munged wants the socket's directories searchable by all
env = testlib.gpuenv_env(work)
failures = []
procs = []


def stop_all():
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def gpuenv(*args, rc=0):
    p = subprocess.run([GPUENV, *args], capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != rc:
        failures.append(f"gpuenv {' '.join(args)}: exit {p.returncode}, expected {rc}: {p.stderr[-400:]}")
    return p


def preflight(replay, rc):
    return testlib.preflight(GPUENV, env, SOURCE, work, replay, rc, failures)


def install_status(src, name):
    """Replaces WORK/NAME with SRC atomically, as the boot unit's write would."""
    tmp = os.path.join(work, name + ".tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, os.path.join(work, name))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fail_and_exit(what):
    failures.append(what)
    for log in ("slurmctld.log", "slurmd.log", "munged.log", "check.log"):
        path = os.path.join(work, log)
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                print(f"---- {log} (tail)\n" + "".join(f.readlines()[-25:]))
    stop_all()
    testlib.finish(failures, "")


# ---- status files from the recorded machines, a marked and an unmarked image ----
healthy = preflight("h200x1.yaml", 0)
faulty = preflight("faults/ecc_uncorrectable.yaml", 1)
keys = os.path.join(work, "keys")
gpuenv("key", "generate", "-o", keys)
lock = os.path.join(SOURCE, "tests/data/locks/empty.lock")
other_lock = os.path.join(work, "other.lock")
with open(lock) as f, open(other_lock, "w") as g:
    g.write(f.read().replace('"empty"', '"other"', 1))
marked, unmarked = os.path.join(work, "marked"), os.path.join(work, "unmarked")
gpuenv("build", lock, "-o", marked, "--tag", "1")
gpuenv("build", other_lock, "-o", unmarked, "--tag", "1")
report = os.path.join(work, "report.json")
with open(report, "w") as f:
    f.write(gpuenv("validate", "--backend", "replay:" + os.path.join(SOURCE, "tests/data/validate/h200x1.yaml"), "--level", "quick",
                   "--image", marked, "--check", "driver_loaded", "--check", "device_nodes", "--json").stdout)
gpuenv("mark", marked, "--report", report, "--key", os.path.join(keys, "gpuenv.key"), "--allow-replay")
if failures:
    testlib.finish(failures, "")

# ---- munge and a one-node Slurm ----
for d in ("munge", "state", "spool"):
    os.makedirs(os.path.join(work, d), mode=0o700)
os.chmod(os.path.join(work, "munge"), 0o755)
key = os.path.join(work, "munge", "munge.key")
with open(key, "wb") as f:
    f.write(os.urandom(1024))
os.chmod(key, 0o400)
sock = os.path.join(work, "munge", "munge.socket")
procs.append(subprocess.Popen([tools["munged"], "--foreground", "--force", "--socket=" + sock, "--key-file=" + key,
                               "--log-file=" + os.path.join(work, "munged.log"), "--pid-file=" + os.path.join(work, "munge", "munged.pid"),
                               "--seed-file=" + os.path.join(work, "munge", "munged.seed")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
deadline = time.monotonic() + 20
while not os.path.exists(sock):
    if time.monotonic() > deadline or procs[-1].poll() is not None:
        fail_and_exit("munged did not create its socket within 20 s")
    time.sleep(0.1)

# The health check and the prolog run the recipe as Slurm would, with the settings a site puts in
# /etc/default/gpuenv-slurm (here a file of the test's own, named by GPUENV_SLURM_DEFAULTS). Each reads its own
# status file, so the prolog can be tried while the health check still sees a healthy node.
recipe = os.path.join(SOURCE, "recipes/slurm/gpuenv-slurm-check")
conf = os.path.join(work, "slurm.conf")
check_log = os.path.join(work, "check.log")
for name, mode in (("healthcheck", "hc"), ("prolog", "prolog")):
    with open(os.path.join(work, name + ".defaults"), "w") as f:
        f.write(f"""GPUENV={GPUENV}
GPUENV_STATUS_FILE={work}/{mode}-status.json
GPUENV_VERIFY_KEYS={keys}/gpuenv.pub
GPUENV_VERIFY_ARGS=--allow-replay
GPUENV_SLURM_LOCAL_IMAGES=1
GPUENV_SLURM_TIMEOUT=10
""")
    wrapper = os.path.join(work, name)
    pause = f"[ -e {work}/hc-paused ] && exit 0\n" if name == "healthcheck" else ""  # the time between two health checks, held open
    with open(wrapper, "w") as f:
        f.write(f"""#!/bin/sh
{pause}export SLURM_CONF={conf} GPUENV_SLURM_DEFAULTS={work}/{name}.defaults GPUENV_CACHE_DIR={work}/cache
exec {recipe} {name} 2>>{check_log}
""")
    os.chmod(wrapper, 0o755)
install_status(healthy, "prolog-status.json")
install_status(faulty, "hc-status.json")

ctld_port, slurmd_port = free_port(), free_port()
user = "root"
with open(conf, "w") as f:
    f.write(f"""ClusterName=gpuenvtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={work}/state
SlurmdSpoolDir={work}/spool
SlurmctldPidFile={work}/slurmctld.pid
SlurmdPidFile={work}/slurmd.pid
SlurmctldLogFile={work}/slurmctld.log
SlurmdLogFile={work}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
ReturnToService=2
HealthCheckProgram={work}/healthcheck
HealthCheckInterval=1
Prolog={work}/prolog
PrologFlags=Alloc
PrologEpilogTimeout=60
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=gpuenv-node NodeHostname={socket.gethostname()} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
PartitionName=gpu Nodes=gpuenv-node Default=YES MaxTime=5 State=UP
""")
senv = dict(env, SLURM_CONF=conf)
procs.append(subprocess.Popen([tools["slurmctld"], "-D", "-f", conf], env=senv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
procs.append(subprocess.Popen([tools["slurmd"], "-D", "-f", conf, "-N", "gpuenv-node"], env=senv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))


def slurm(tool, *args, timeout=30):
    return subprocess.run([tools[tool], *args], capture_output=True, text=True, env=senv, timeout=timeout)


def node():
    p = slurm("sinfo", "--noheader", "--Node", "--nodes=gpuenv-node", "--format=%T|%E", timeout=15)
    state, _, reason = p.stdout.strip().partition("|")
    return state, reason


def wait_node(what, ok, seconds=60):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            fail_and_exit(f"{what}: a daemon exited")
        last = node()
        if ok(*last):
            return last
        time.sleep(0.5)
    fail_and_exit(f"{what}: the node is {last} after {seconds} s")


try:
    # 1. A failed pre-flight: the health check (run by slurmd at start and every second) drains the node.
    state, reason = wait_node("drain by the health check", lambda s, r: s.startswith("drain") and r.startswith("gpuenv: "))
    if not reason.startswith("gpuenv: ecc_errors: GPU 3: "):
        failures.append(f"drain reason: {reason!r}")
    p = slurm("srun", "--immediate=5", "-N1", "echo", "JOB RAN")
    if p.returncode == 0 or "JOB RAN" in p.stdout:
        failures.append(f"a job ran on the drained node: {p.returncode} {p.stdout!r} {p.stderr!r}")

    # 2. Healthy again: resumed, and a job runs.
    install_status(healthy, "hc-status.json")
    wait_node("resume by the health check", lambda s, r: s == "idle" and r == "none")
    p = slurm("srun", "-N1", "echo", "JOB RAN")
    if p.returncode != 0 or p.stdout.strip() != "JOB RAN":
        failures.append(f"srun on the resumed node: {p.returncode} {p.stdout!r} {p.stderr!r}")

    # 3. An administrator's drain stays, whatever gpuenv's verdict; so does its reason.
    slurm("scontrol", "update", "NodeName=gpuenv-node", "State=DRAIN", "Reason=maintenance window")
    install_status(faulty, "hc-status.json")
    time.sleep(3)  # three health checks
    if node() != ("drained", "maintenance window"):
        failures.append(f"an administrator's drain after a failed verdict: {node()}")
    install_status(healthy, "hc-status.json")
    time.sleep(3)
    if node() != ("drained", "maintenance window"):
        failures.append(f"an administrator's drain after a healthy verdict: {node()}")
    slurm("scontrol", "update", "NodeName=gpuenv-node", "State=RESUME")
    wait_node("the administrator's resume", lambda s, r: s == "idle")

    # 4. The prolog on its own: the node's verdict turned failed since the last health check.
    open(os.path.join(work, "hc-paused"), "w").close()
    time.sleep(1.5)  # a health check under way finishes
    install_status(faulty, "prolog-status.json")
    p = slurm("srun", "-N1", "echo", "JOB RAN")
    if p.returncode == 0 or "JOB RAN" in p.stdout:
        failures.append(f"a job ran although the prolog found the node failed: {p.returncode} {p.stdout!r}")
    state, reason = wait_node("drain by the prolog", lambda s, r: s.startswith("drain"), seconds=20)
    if not reason.startswith("gpuenv: ecc_errors: "):
        failures.append(f"the prolog's drain reason: {reason!r}")
    install_status(healthy, "prolog-status.json")
    os.unlink(os.path.join(work, "hc-paused"))  # the next health check finds the node healthy, and the reason its own
    wait_node("resume after the prolog's drain", lambda s, r: s == "idle" and r == "none")

    # 5. The prolog's image check.
    p = slurm("srun", "-N1", "--comment", "gpuenv-image=oci:" + marked, "echo", "MARKED RAN")
    if p.returncode != 0 or p.stdout.strip() != "MARKED RAN":
        failures.append(f"a job naming the marked image: {p.returncode} {p.stdout!r} {p.stderr!r}")
    p = slurm("srun", "-N1", "--comment", "gpuenv-image=oci:" + unmarked, "echo", "UNMARKED RAN")
    if p.returncode == 0 or "UNMARKED RAN" in p.stdout:
        failures.append(f"a job naming an unmarked image ran: {p.returncode} {p.stdout!r}")
    # srun returns once the prolog has failed; slurmctld records the job COMPLETING until the node reports the prolog's
    # end, then CANCELLED: read it until it is no longer COMPLETING (a loaded machine takes a moment).
    deadline = time.monotonic() + 20
    while True:
        jobs = slurm("scontrol", "show", "job", "--oneliner").stdout
        refused = [line for line in jobs.splitlines() if "UNMARKED" not in line and "gpuenv-image=oci:" + unmarked in line]
        if not refused or "JobState=COMPLETING" not in refused[0] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if not refused or "JobState=CANCELLED" not in refused[0] or "AdminComment=gpuenv: image: oci:" + unmarked + " is not proven" not in refused[0]:
        failures.append(f"the refused job: {refused}")
    time.sleep(1)
    if node() != ("idle", "none"):
        failures.append(f"the node after refusing an image: {node()}")
finally:
    stop_all()

print(f"slurm test: {time.monotonic() - started:.1f} s")
testlib.finish(failures, "PASSED: the health check and prolog drain, refuse and resume a real slurmd by gpuenv's verdict")
