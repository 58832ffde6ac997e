#!/usr/bin/env python3
"""The whole CC attestation path on evidence this test makes, so that it runs wherever openssl is (CI included),
with or without the published vectors.

Usage: synthetic_replay.py GPUENV SOURCE_DIR
The test makes a 5-certificate chain of its own (root, three intermediates, a leaf named like a Hopper GSP's) and an
SPDM report shaped as NVIDIA's, signed with the leaf's P-384 key by `openssl dgst`, then serves it from a replay
file over the repository's recorded H200. Everything gpuenv can check without NVIDIA's keys must pass (signature,
nonce, NVML's versions, CC settings), and the verdict must fail for the one right reason: the chain does not end in
NVIDIA's device identity root. Through `gpuenv attest`, `validate --check cc_attestation` and `attest verify`.
Exits 77 (ctest's skip) without openssl.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testlib  # noqa: E402

GPUENV, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
if not shutil.which("openssl"):
    print("SKIP: openssl is not installed: the test cannot make its evidence")
    sys.exit(77)
work = testlib.scratch("gpuenv-attest-synthetic-")
env = testlib.gpuenv_env(work)
failures = []


def ssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=work)


# The chain: root -> ica1 -> ica2 -> ica3 -> leaf, P-384 throughout, as a GPU's is shaped.
open(os.path.join(work, "ca.cnf"), "w").write("[ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n[leaf]\nbasicConstraints=critical,CA:FALSE\n")
names = ["root", "ica1", "ica2", "ica3", "leaf"]
subjects = {"root": "/CN=Synthetic Root", "ica1": "/CN=Synthetic ICA 1", "ica2": "/CN=Synthetic ICA 2", "ica3": "/CN=Synthetic ICA 3",
            "leaf": "/O=NVIDIA Corporation/CN=GH100 A01 GSP FMC LF"}
ssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384", "-nodes", "-keyout", "root.key", "-out", "root.pem",
    "-subj", subjects["root"], "-days", "3650", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
for issuer, name in zip(names, names[1:]):
    ssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384", "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
        "-subj", subjects[name])
    ssl("x509", "-req", "-in", name + ".csr", "-CA", issuer + ".pem", "-CAkey", issuer + ".key", "-set_serial", str(names.index(name) + 16),
        "-days", "3650", "-extfile", "ca.cnf", "-extensions", "leaf" if name == "leaf" else "ca", "-out", name + ".pem")
chain = "".join(open(os.path.join(work, n + ".pem")).read() for n in reversed(names))  # leaf first
open(os.path.join(work, "chain.pem"), "w").write(chain)

# The report: GET_MEASUREMENTS (the nonce at bytes 4..35), MEASUREMENTS with two blocks and NVIDIA's legacy opaque
# data (driver 595.71.05, VBIOS 96.00.9F.00.04, project 1010/0210/886, NVDEC0 disabled), signed by the leaf.
nonce = bytes(range(100, 132))
request = bytes([0x11, 0xE0, 0x01, 0xFF]) + nonce + b"\x00"
blocks = b"".join(struct.pack("<BBHBH", i, 1, 51, 1, 48) + bytes([i]) * 48 for i in (1, 2))
def tlv(kind, value):
    return struct.pack("<HH", kind, len(value)) + value
opaque = tlv(3, b"595.71.05\x00") + tlv(6, bytes([0x00, 0x9F, 0x00, 0x96, 0x04, 0, 0, 0])) + tlv(11, b"\x55") + tlv(17, b"1010\x00") \
    + tlv(18, b"0210\x00") + tlv(15, b"886\x00")
response = bytes([0x11, 0x60, 0, 0, 2]) + struct.pack("<I", len(blocks))[:3] + blocks + bytes(32) + struct.pack("<H", len(opaque)) + opaque
signed = request + response
open(os.path.join(work, "signed.bin"), "wb").write(signed)
ssl("dgst", "-sha384", "-sign", "leaf.key", "-out", "sig.der", "signed.bin")
der = open(os.path.join(work, "sig.der"), "rb").read()
def der_int(b, at):  # (value, next offset) of the INTEGER at b[at]
    assert b[at] == 0x02
    n = b[at + 1]
    return int.from_bytes(b[at + 2:at + 2 + n], "big"), at + 2 + n
at = 3 if der[1] & 0x80 else 2
r, at = der_int(der, at)
s, _ = der_int(der, at)
report = signed + r.to_bytes(48, "big") + s.to_bytes(48, "big")
open(os.path.join(work, "report.bin"), "wb").write(report)

replay = testlib.write_cc_replay(os.path.join(work, "synthetic.yaml"), SOURCE, report, nonce.hex(), chain)


def run(*args, rc):
    p = subprocess.run([GPUENV, *args], capture_output=True, text=True, env=env, timeout=120)
    if p.returncode != rc:
        failures.append(f"gpuenv {' '.join(args[:3])}...: exit {p.returncode}, expected {rc}: {p.stderr.strip()[:300]}")
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        failures.append(f"gpuenv {' '.join(args[:3])}...: not JSON: {p.stdout[:300]}")
        return None


def expect_claims(case, doc, **want):
    claims = {c["name"]: c for c in doc["devices"][0]["claims"]} if doc else {}
    for name, status in want.items():
        name = name.replace("__", ".")
        got = claims.get(name, {"status": "absent", "detail": ""})
        wanted, _, needle = status.partition(":")
        if got["status"] != wanted or needle not in got["detail"]:
            failures.append(f"{case}: claim {name} is {got['status']} ({got['detail']}), expected {status}")


CHECKABLE = dict(signature="pass", nonce="pass", cert_validity="pass", fwid="not_checked", chain="fail:not NVIDIA's device identity root")
doc = run("attest", "--backend", "replay:" + replay, "--set-ready", "--json", rc=1)
expect_claims("attest", doc, driver_nvml="pass", vbios_nvml="pass", cc_environment="pass", dev_tools="pass", measurements="not_checked", **CHECKABLE)
if doc and (doc["devices"][0]["driver_rim_id"], doc["devices"][0]["vbios_rim_id"], doc.get("ready_set")) != (
        "NV_GPU_DRIVER_GH100_595.71.05", "NV_GPU_VBIOS_1010_0210_886_96009F0004", False):
    failures.append(f"attest: RIM ids or ready state: {doc['devices'][0]['driver_rim_id']} {doc['devices'][0]['vbios_rim_id']} {doc.get('ready_set')}")

doc = run("attest", "verify", "--report", os.path.join(work, "report.bin"), "--cert-chain", os.path.join(work, "chain.pem"), "--nonce", nonce.hex(),
          "--json", rc=1)
expect_claims("attest verify", doc, **CHECKABLE)
doc = run("attest", "verify", "--report", os.path.join(work, "report.bin"), "--cert-chain", os.path.join(work, "chain.pem"), "--nonce", "ab" * 32,
          "--json", rc=1)
expect_claims("attest verify, another nonce", doc, nonce="fail:" + nonce.hex(), signature="pass")
tampered = bytearray(report)
tampered[40] ^= 1  # a measurement byte under the signature
open(os.path.join(work, "tampered.bin"), "wb").write(tampered)
doc = run("attest", "verify", "--report", os.path.join(work, "tampered.bin"), "--cert-chain", os.path.join(work, "chain.pem"), "--nonce", nonce.hex(),
          "--json", rc=1)
expect_claims("attest verify, a changed byte", doc, signature="fail")

# Malformed input is exit 2 with what and where, never a crash: a truncated report (its byte offset), evidence JSON
# that lacks a field, a RIM file that is not XML, a policy with an unknown claim.
def error_of(*args):
    p = subprocess.run([GPUENV, "attest", "verify", "--json", *args], capture_output=True, text=True, env=env, timeout=60)
    try:
        return p.returncode, json.loads(p.stdout).get("error", {})
    except json.JSONDecodeError:
        return p.returncode, {"stdout": p.stdout[:200], "stderr": p.stderr[:200]}
files = {"truncated.bin": report[:200], "evidence.json": b'{"nonce": "00", "evidence_list": [{"evidence": "AAAA"}]}', "rim.xml": b"<not xml",
         "policy.yaml": b"version: 1\nclaims:\n  signatur: required\n"}
for name, data in files.items():
    open(os.path.join(work, name), "wb").write(data)
base = ["--cert-chain", os.path.join(work, "chain.pem"), "--nonce", nonce.hex()]
for case, args, want_id, needle in [
        ("a truncated report", ["--report", os.path.join(work, "truncated.bin"), *base], "attest.bad_report", "at byte"),
        ("evidence JSON without a certificate", ["--evidence", os.path.join(work, "evidence.json")], "attest.bad_evidence", ""),
        ("a RIM that is not XML", ["--report", os.path.join(work, "report.bin"), *base, "--driver-rim", os.path.join(work, "rim.xml")], "attest.bad_rim", "not well-formed"),
        ("a policy with an unknown claim", ["--report", os.path.join(work, "report.bin"), *base, "--policy", os.path.join(work, "policy.yaml")], "policy.unknown_key", "signatur")]:
    rc, error = error_of(*args)
    if rc != 2 or error.get("id") != want_id or needle not in error.get("message", "") + error.get("where", ""):
        failures.append(f"{case}: exit {rc}, {error}")

lock = os.path.join(work, "cc.lock")
open(lock, "w").write(open(os.path.join(SOURCE, "tests/data/golden/torch-h100.lock")).read().replace('confidential: "off"', 'confidential: "required"'))
doc = run("validate", "--backend", "replay:" + replay, "--lock", lock, "--level", "quick", "--check", "cc_attestation", "--json", rc=1)
if doc:
    check = next((c for c in doc["checks"] if c["key"] == "cc_attestation"), {})
    result = (check.get("results") or [{}])[0]
    metrics = {m["name"]: m["value"] for m in result.get("metrics", [])}
    if (result.get("status"), result.get("code")) != ("fail", "cc_attestation_failed") or "chain" not in result.get("message", "") \
            or (metrics.get("claim_signature"), metrics.get("claim_chain"), metrics.get("claim_measurements")) != (1, 0, -1):
        failures.append(f"validate cc_attestation: {result.get('status')} {result.get('code')} {result.get('message')} {metrics}")

testlib.finish(failures, "the attestation path on synthetic evidence: everything checkable passed, and the verdict failed for the chain")
