#!/usr/bin/env python3
"""`gpuenv status` against the status files `gpuenv preflight` writes (from replays of the repository's recordings):
healthy 0, failed 1 naming the checks, could not run / missing / unreadable / stale 4, a bad --max-age 2; text and
gpuenv-status-v1 JSON.
Usage: status_check.py GPUENV SOURCE_DIR
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testlib  # noqa: E402

GPUENV, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
work = testlib.scratch("gpuenv-status-")
env = testlib.gpuenv_env(work)
failures = []


def gpuenv(*args):
    return subprocess.run([GPUENV, *args], capture_output=True, text=True, env=env, timeout=120)


def status(path, *more):
    p = gpuenv("status", "--status-file", path, "--json", *more)
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        return p.returncode, {"stdout": p.stdout, "stderr": p.stderr}


def preflight(replay, rc):
    return testlib.preflight(GPUENV, env, SOURCE, work, replay, rc, failures)


healthy = preflight("h200x1.yaml", 0)
rc, doc = status(healthy)
if (rc, doc.get("schema"), doc.get("state"), doc.get("failed"), doc.get("level")) != (0, "gpuenv-status-v1", "healthy", [], "quick") \
        or not isinstance(doc.get("age_s"), int) or doc["age_s"] < 0 or doc["age_s"] > 600:
    failures.append(f"healthy: {rc} {doc}")
p = gpuenv("status", "--status-file", healthy)
if p.returncode != 0 or not p.stdout.startswith("healthy: the pre-flight passed (quick, "):
    failures.append(f"healthy, text: {p.returncode} {p.stdout!r}")

failed = preflight("faults/ecc_uncorrectable.yaml", 1)
rc, doc = status(failed)
checks = [f["check"] for f in doc.get("failed", [])]
if rc != 1 or doc.get("state") != "failed" or "ecc_errors" not in checks or not all(f["message"] for f in doc["failed"]):
    failures.append(f"failed: {rc} {doc}")
p = gpuenv("status", "--status-file", failed)
if p.returncode != 1 or "  ecc_errors GPU 3 [ecc_uncorrectable]: " not in p.stdout:
    failures.append(f"failed, text: {p.returncode} {p.stdout!r}")

rc, doc = status(preflight("faults/no_driver.yaml", 4))
if (rc, doc.get("state")) != (4, "could_not_run"):
    failures.append(f"could not run: {rc} {doc}")

rc, doc = status(os.path.join(work, "absent.json"))
if (rc, doc.get("state")) != (4, "missing") or "has not run" not in doc.get("reason", ""):
    failures.append(f"missing: {rc} {doc}")
garbage = os.path.join(work, "garbage.json")
open(garbage, "w").write('{"schema": "something else"}')
rc, doc = status(garbage)
if (rc, doc.get("state")) != (4, "unreadable"):
    failures.append(f"unreadable: {rc} {doc}")

old = json.load(open(healthy))
old["started_at"] = "2026-01-01T00:00:00Z"
stale = os.path.join(work, "stale.json")
json.dump(old, open(stale, "w"))
rc, doc = status(stale, "--max-age", "24h")
if (rc, doc.get("state")) != (4, "stale") or "more than --max-age 24h" not in doc.get("reason", ""):
    failures.append(f"stale: {rc} {doc}")
rc, doc = status(stale)  # without --max-age any age is accepted
if (rc, doc.get("state")) != (0, "healthy"):
    failures.append(f"old but no --max-age: {rc} {doc}")
rc, doc = status(healthy, "--max-age", "soon")
if rc != 2 or doc.get("error", {}).get("id") != "status.max_age":
    failures.append(f"bad --max-age: {rc} {doc}")

# Issue 33, cases 14 and 15: an exit code read whole (1099511627776 once read as 0: healthy), a duration_ms that no
# pre-flight has, and a verdict dated in the future (after a clock step at boot) are never fresh under --max-age.
def edited(name, change):
    doc = json.load(open(healthy))
    change(doc)
    path = os.path.join(work, name + ".json")
    json.dump(doc, open(path, "w"))
    return path
for value in [1099511627776, 256, -1, 2 ** 64 - 1]:
    rc, doc = status(edited("code", lambda d: d.__setitem__("exit_code", value)))
    if (rc, doc.get("state")) != (4, "unreadable") or "is not an exit code" not in doc.get("reason", ""):
        failures.append(f"exit_code {value}: {rc} {doc.get('state')} {doc.get('reason')}")
for value in [-5000, 10 ** 12, 2 ** 63 + 5]:
    rc, doc = status(edited("duration", lambda d: d.__setitem__("duration_ms", value)))
    if (rc, doc.get("state")) != (4, "unreadable"):
        failures.append(f"duration_ms {value}: {rc} {doc.get('state')} {doc.get('reason')}")
future = edited("future", lambda d: d.__setitem__("started_at", "2099-01-01T00:00:00Z"))
rc, doc = status(future, "--max-age", "7d")
if (rc, doc.get("state")) != (4, "stale") or "from now" not in doc.get("reason", ""):
    failures.append(f"a verdict from 2099 under --max-age: {rc} {doc.get('state')} {doc.get('reason')}")
soon = edited("skew", lambda d: d.__setitem__("started_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))))
rc, doc = status(soon, "--max-age", "7d")
if (rc, doc.get("state")) != (0, "healthy"):
    failures.append(f"a minute of clock skew: {rc} {doc.get('state')} {doc.get('reason')}")

# Issue 33, case 8: a status file's text (anyone who writes the file chooses it) reaches the terminal, Slurm's drain
# reason and container logs made safe: no escape, no forged line, no right-to-left override.
def hostile(d):
    d["exit_code"] = 1
    d["checks"] = [{"key": "ecc\x1b[2J", "status": "fail",
                    "results": [{"status": "fail", "gpu": 0, "code": "x\u202ey", "message": "bad\nhealthy: the pre-flight passed \u202egnp.exe\x1b]0;t\x07"}]}]
forged = edited("hostile", hostile)
for args in [(), ("--drain-reason",)]:
    p = gpuenv("status", "--status-file", forged, *args)
    if p.returncode != 1 or any(c in p.stdout for c in "\x1b\x07\u202e") or len(p.stdout.strip().splitlines()) != (1 if args else 2) \
            or "\\u{202e}" not in p.stdout or "\\x1b" not in p.stdout:
        failures.append(f"hostile status text {args}: exit {p.returncode} {p.stdout!r}")

# Kubernetes: NFD's feature file (labels that expire) and the taints, decided by gpuenv, applied by the DaemonSet.
def features(path, *more):
    out = os.path.join(work, "features")
    p = gpuenv("status", "--status-file", path, "--node-features", out, *more)
    text = open(out).read() if os.path.exists(out) else ""
    return p.returncode, text
rc, text = features(healthy)
expiry = re.search(r"^# \+expiry-time=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$", text, re.M)
lines = [l for l in text.splitlines() if not l.startswith("#")]
if rc != 0 or not expiry or "gpuenv.dev/status=healthy" not in lines or "gpuenv.dev/level=quick" not in lines or "gpuenv.dev/cc=off" not in lines \
        or not any(re.fullmatch(r"gpuenv\.dev/driver=[0-9.]+", l) for l in lines):
    failures.append(f"features of a healthy node: {rc} {text!r}")
else:
    left = time.mktime(time.strptime(expiry.group(1), "%Y-%m-%dT%H:%M:%SZ")) - time.mktime(time.gmtime())
    if not 7000 < left <= 7300:
        failures.append(f"default expiry is {left} s away, not 2h")
rc, text = features(failed, "--feature-ttl", "10m")
if rc != 1 or "gpuenv.dev/status=failed" not in text or "gpuenv.dev/failed-check=ecc_errors" not in text:
    failures.append(f"features of a failed node: {rc} {text!r}")
rc, text = features(os.path.join(work, "absent.json"))
if rc != 4 or "gpuenv.dev/status=missing" not in text:
    failures.append(f"features of a node without a status: {rc} {text!r}")
for line in [l for l in text.splitlines() if not l.startswith("#")]:
    value = line.split("=", 1)[1]
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?", value):
        failures.append(f"not a label value: {line}")
p = gpuenv("status", "--status-file", healthy, "--node-features", os.path.join(work, "f2"), "--feature-ttl", "later")
if p.returncode != 2 or "status.feature_ttl" not in p.stderr:
    failures.append(f"bad --feature-ttl: {p.returncode} {p.stderr[:200]}")
STARTUP = "startup-taint.cluster-autoscaler.kubernetes.io/gpuenv"
for path, rc_want, want in [(healthy, 0, [STARTUP + ":NoSchedule-", "gpuenv.dev/unhealthy:NoSchedule-"]),
                            (failed, 1, [STARTUP + ":NoSchedule-", "gpuenv.dev/unhealthy=ecc_errors:NoSchedule"]),
                            (os.path.join(work, "absent.json"), 4, []), (stale, 4, [])]:
    p = gpuenv("status", "--status-file", path, "--taints", *(["--max-age", "24h"] if path == stale else []))
    if p.returncode != rc_want or p.stdout.splitlines() != want:
        failures.append(f"taints for {os.path.basename(path)}: {p.returncode} {p.stdout.splitlines()}")
rc, doc = status(failed, "--taints")
if doc.get("taints") != [STARTUP + ":NoSchedule-", "gpuenv.dev/unhealthy=ecc_errors:NoSchedule"]:
    failures.append(f"taints in JSON: {doc.get('taints')}")

# Slurm: the drain reason, one line beginning "gpuenv:", nothing when healthy; in JSON with the GPU models and driver.
for path, rc_want, want in [(healthy, 0, None), (failed, 1, "gpuenv: ecc_errors: GPU 3: "), (os.path.join(work, "absent.json"), 4, "gpuenv: missing: no status file"),
                            (garbage, 4, "gpuenv: unreadable: ")]:
    p = gpuenv("status", "--status-file", path, "--drain-reason")
    lines = p.stdout.splitlines()
    if p.returncode != rc_want or (want is None and lines) or (want and (len(lines) != 1 or not lines[0].startswith(want) or len(lines[0]) > 256)):
        failures.append(f"--drain-reason for {os.path.basename(path)}: {p.returncode} {p.stdout!r}")
rc, doc = status(failed)
if not doc.get("drain_reason", "").startswith("gpuenv: ecc_errors: GPU 3: ") or doc.get("gpus") != ["NVIDIA H100 80GB HBM3"] or not doc.get("driver"):
    failures.append(f"drain_reason, gpus and driver in JSON: {doc.get('drain_reason')!r} {doc.get('gpus')} {doc.get('driver')!r}")
p = gpuenv("status", "--status-file", failed, "--drain-reason", "--taints")
if p.returncode != 2:
    failures.append(f"--drain-reason with --taints: exit {p.returncode}")

# verify --host-status: the GPU model, driver and CC mode from the pre-flight's status instead of NVML.
keys = os.path.join(work, "keys")
layout = os.path.join(work, "img")
report = os.path.join(work, "report.json")
gpuenv("key", "generate", "-o", keys)
gpuenv("build", os.path.join(SOURCE, "tests/data/locks/empty.lock"), "-o", layout, "--tag", "1")
open(report, "w").write(gpuenv("validate", "--backend", "replay:" + os.path.join(SOURCE, "tests/data/validate/h200x1.yaml"), "--level", "quick",
                               "--image", layout, "--check", "driver_loaded", "--check", "device_nodes", "--json").stdout)
p = gpuenv("mark", layout, "--report", report, "--key", os.path.join(keys, "gpuenv.key"), "--allow-replay")
if p.returncode != 0:
    failures.append(f"mark for verify --host-status: {p.returncode} {p.stderr[-300:]}")
l4 = preflight("l4x1.yaml", 0)
for host, rc_want in [(healthy, 0), (l4, 1), (os.path.join(work, "absent.json"), 4)]:
    p = gpuenv("verify", "--key", os.path.join(keys, "gpuenv.pub"), "--allow-replay", "--host-status", host, "--json", "--", layout)
    if p.returncode != rc_want or (rc_want == 4 and "verify.no_host" not in p.stdout + p.stderr):
        failures.append(f"verify --host-status {os.path.basename(host)}: exit {p.returncode}, expected {rc_want}: {(p.stdout + p.stderr)[-300:]}")

# --wait-fabric: bounded on an NVSwitch system whose fabric never comes up, immediate where it is up or absent.
down = os.path.join(work, "fabric_down.yaml")
open(down, "w").write(f"""schema: gpuenv-replay-v1
extends: {os.path.join(SOURCE, "tests/data/validate/h100x8.yaml")}
inventory:
  driver:
    fabric_manager_running: false
""")
for replay, wait, slow, note in [(down, "2s", True, "waited 2 s for the NVSwitch fabric, and it is not up"),
                                 (os.path.join(SOURCE, "tests/data/validate/h100x8.yaml"), "60s", False, "the NVSwitch fabric was up after 0 s"),
                                 (os.path.join(SOURCE, "tests/data/validate/h200x1.yaml"), "60s", False, None)]:
    path = os.path.join(work, "wait.status.json")
    start = time.monotonic()
    p = gpuenv("preflight", "--backend", "replay:" + replay, "--wait-fabric", wait, "--status-file", path, "--json")
    elapsed = time.monotonic() - start
    notes = json.load(open(path)).get("notes", []) if os.path.exists(path) else []
    if (slow and not 2 <= elapsed < 30) or (not slow and elapsed >= 10) or (note and note not in notes) or (not note and any("fabric" in n for n in notes)):
        failures.append(f"--wait-fabric {wait} on {os.path.basename(replay)}: {elapsed:.1f} s, notes {notes}, exit {p.returncode} {p.stderr[:200]}")
p = gpuenv("preflight", "--backend", "replay:" + os.path.join(SOURCE, "tests/data/validate/h200x1.yaml"), "--wait-fabric", "soon",
           "--status-file", os.path.join(work, "x.json"))
if p.returncode != 2 or "preflight.wait_fabric" not in p.stderr:
    failures.append(f"--wait-fabric soon: exit {p.returncode} {p.stderr[:200]}")

testlib.finish(failures, "gpuenv status: every state and exit code as documented")
