#!/usr/bin/env python3
"""`gpuenv attest` and validate's cc_attestation on recorded evidence: the whole live path without a GPU.

Usage: live_replay.py GPUENV SOURCE_DIR VECTORS_DIR
The replay files are made at run time from the Azure H100 capture in VECTORS_DIR (read, never copied into the
repository) over the repository's recorded H200 inventory; exits 77 (ctest's skip) when VECTORS_DIR is absent.
Checks: a passing attestation with NVML's versions, CC environment and mode as claims; --set-ready only after a
pass; dev-tools mode, a driver NVML disagrees with and a foreign nonce each failing their own claim; validate's
cc_attestation check at quick when the lock requires CC, its claims as figures in the report.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testlib  # noqa: E402

GPUENV, SOURCE, VECTORS = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
AZURE = os.path.join(VECTORS, "e2e_azure_h100_595")
if not os.path.exists(os.path.join(AZURE, "gpu0-attestation-report.bin")):
    print(f"SKIP: the published CC evidence is not at {VECTORS} (../shared/cc_vectors beside the checkout)")
    sys.exit(77)

work = testlib.scratch("gpuenv-attest-replay-")
env = testlib.gpuenv_env(work)
failures = []

report = open(os.path.join(AZURE, "gpu0-attestation-report.bin"), "rb").read()
chain = open(os.path.join(AZURE, "gpu0-cert-chain.pem")).read()
NONCE = "690bb51b904351e28100a0610fe60624255c26d7d38c53fb1285ecfed1cab17a"


def replay(name, cc_state="on", driver="595.71.05", vbios="96.00.9F.00.04", nonce=NONCE):
    """A replay over the recorded H200 with the Azure evidence for GPU 0."""
    return testlib.write_cc_replay(os.path.join(work, name + ".yaml"), SOURCE, report, nonce, chain, driver, vbios, cc_state)


def run(*args, rc):
    p = subprocess.run([GPUENV, *args], capture_output=True, text=True, env=env, timeout=120)
    if p.returncode != rc:
        failures.append(f"gpuenv {' '.join(args[:3])}...: exit {p.returncode}, expected {rc}: {p.stderr.strip()[:300]}")
        return None
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        failures.append(f"gpuenv {' '.join(args[:3])}...: not JSON: {p.stdout[:300]}")
        return None


def claims(doc):
    return {c["name"]: c["status"] for c in doc["devices"][0]["claims"]} if doc else {}


good = replay("good")
doc = run("attest", "--backend", "replay:" + good, "--rim-dir", AZURE, "--json", rc=0)
c = claims(doc)
for name in ["signature", "chain", "fwid", "nonce", "measurements", "driver_nvml", "vbios_nvml", "cc_environment", "dev_tools"]:
    if c.get(name) != "pass":
        failures.append(f"attest on the good replay: claim {name} is {c.get(name)}")
if doc and (doc.get("nonce_source"), doc.get("backend"), doc.get("ready_set")) != ("recorded", "replay", False):
    failures.append(f"attest: nonce_source/backend/ready_set {doc.get('nonce_source')} {doc.get('backend')} {doc.get('ready_set')}")
doc = run("attest", "--backend", "replay:" + good, "--rim-dir", AZURE, "--set-ready", "--json", rc=0)
if doc and doc.get("ready_set") is not True:
    failures.append("attest --set-ready after a pass did not set the ready state")

doc = run("attest", "--backend", "replay:" + good, "--json", rc=1)  # no RIMs: measurements not checked
if doc and claims(doc).get("measurements") != "not_checked":
    failures.append("attest without RIMs: measurements were judged")
doc = run("attest", "--backend", "replay:" + good, "--set-ready", "--json", rc=1)
if doc and doc.get("ready_set") is not False:
    failures.append("attest --set-ready set the ready state after a failure")

for name, kwargs, claim in [("devtools", {"cc_state": "devtools"}, "dev_tools"), ("other_driver", {"driver": "595.58.03"}, "driver_nvml"),
                            ("other_vbios", {"vbios": "96.00.9F.00.01"}, "vbios_nvml"), ("foreign_nonce", {"nonce": "00" * 32}, "nonce")]:
    doc = run("attest", "--backend", "replay:" + replay(name, **kwargs), "--rim-dir", AZURE, "--set-ready", "--json", rc=1)
    if doc and (claims(doc).get(claim) != "fail" or doc.get("ready_set")):
        failures.append(f"attest on {name}: claim {claim} is {claims(doc).get(claim)}, ready_set {doc.get('ready_set')}")

off = replay("off", cc_state="off")
p = subprocess.run([GPUENV, "attest", "--backend", "replay:" + off], capture_output=True, text=True, env=env, timeout=60)
if p.returncode != 4 or "confidential computing is off" not in p.stderr:
    failures.append(f"attest with CC off: exit {p.returncode}, {p.stderr.strip()[:200]}")

# validate: the lock requires CC, so cc_attestation runs even at quick; its claims are figures of the report.
lock_text = open(os.path.join(SOURCE, "tests/data/golden/torch-h100.lock")).read().replace('confidential: "off"', 'confidential: "required"')
lock = os.path.join(work, "cc.lock")
open(lock, "w").write(lock_text)
doc = run("validate", "--backend", "replay:" + good, "--lock", lock, "--level", "quick", "--check", "cc_attestation", "--rim-dir", AZURE, "--json", rc=0)
if doc:
    check = next((c for c in doc["checks"] if c["key"] == "cc_attestation"), None)
    result = check["results"][0] if check and check.get("results") else {}
    metrics = {m["name"]: m["value"] for m in result.get("metrics", [])}
    if result.get("status") != "pass" or metrics.get("attested") != 1 or metrics.get("claim_measurements") != 1 or metrics.get("claim_revocation") != -1:
        failures.append(f"validate cc_attestation: {result.get('status')} {result.get('message')} {metrics}")
doc = run("validate", "--backend", "replay:" + replay("devtools2", cc_state="devtools"), "--lock", lock, "--level", "quick", "--check",
          "cc_attestation", "--rim-dir", AZURE, "--json", rc=1)
if doc:
    check = next((c for c in doc["checks"] if c["key"] == "cc_attestation"), None)
    result = check["results"][0] if check and check.get("results") else {}
    if result.get("status") != "fail" or "dev_tools" not in result.get("message", ""):
        failures.append(f"validate cc_attestation in dev-tools mode: {result.get('status')} {result.get('message')}")

testlib.finish(failures, "attest and cc_attestation on recorded evidence: every case as expected")
