#!/usr/bin/env python3
"""Every published CC vector gets the verdict its README states, through `gpuenv attest verify --json`.

Usage: cc_vectors.py GPUENV VECTORS_DIR
Reads the vectors at run time (never copies them); exits 77 (ctest's skip) with the reason when VECTORS_DIR is absent.
Each case runs the real binary and checks the claims the README names for that file; every file listed in
vectors.json must be used by a case or be named in NOT_EVIDENCE with why, so a new vector cannot be skipped silently.
The RIM service case serves saved RIM service answers from a loopback HTTP server and then reads them back
--offline from gpuenv's cache.
"""
import base64
import functools
import hashlib
import http.server
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

GPUENV, VECTORS = sys.argv[1], sys.argv[2]
if not os.path.exists(os.path.join(VECTORS, "vectors.json")):
    print(f"SKIP: the published CC evidence is not at {VECTORS} (../shared/cc_vectors beside the checkout)")
    sys.exit(77)

NONCE_2023 = "4cff7f5380ead8fad8ec2c531c110aca4302a88f603792801a8ca29ee151af2e"
NONCE_931D = "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb"
NONCE_SDK = "5bb22e377702d4e1e8215a903ba094826b9ac7f731dee1fe8102958bf2840aca"
NONCE_SDK_GPU = "27a328247bf7935c993341cf587be6f05986ccce4fe7ba2c54100bd616a58f66"
NONCE_AZURE = "690bb51b904351e28100a0610fe60624255c26d7d38c53fb1285ecfed1cab17a"
ZERO = "00" * 32
DEVICE_ROOT = "102bf659d5419614c9d8e6aecebc80454eb26b1df6a769ac720b9a690b167b48"
RIM_ROOT = "12977b5115acb0381179279fffeb5a8c4d264971ebb32298023a465fa41df5d1"

used = set()
failures = []
cache = tempfile.mkdtemp(prefix="gpuenv-cc-cache-")
atexit.register(shutil.rmtree, cache, True)
env = dict(os.environ, GPUENV_CACHE_DIR=cache)
env.pop("GPUENV_RIM_SERVICE_URL", None)


def v(path):
    used.add(path)
    return os.path.join(VECTORS, path)


def gpuenv(*args, expect_rc=None):
    p = subprocess.run([GPUENV, "attest", "verify", "--json", *args], capture_output=True, text=True, env=env, timeout=60)
    if expect_rc is not None and p.returncode != expect_rc:
        failures.append(f"{' '.join(args)}: exit {p.returncode}, expected {expect_rc}: {p.stderr.strip()[:400]}")
        return p.returncode, None
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        return p.returncode, {"stderr": p.stderr, "stdout": p.stdout}


def report(name, nonce, chain, *more, rc=None):
    return gpuenv("--report", v(name), "--cert-chain", v(chain), "--nonce", nonce, *more, expect_rc=rc)


def claim(doc, name, device=0):
    for c in doc["devices"][device]["claims"]:
        if c["name"] == name:
            return c
    return {"status": "absent", "detail": ""}


def expect(case, doc, device=0, verdict=None, **claims):
    if doc is None or "devices" not in doc:
        failures.append(f"{case}: no JSON verdict: {doc}")
        return
    d = doc["devices"][device]
    if verdict and d["verdict"] != verdict:
        failures.append(f"{case}: verdict {d['verdict']}, expected {verdict}: {d['reasons']}")
    for name, want in claims.items():
        name = name.replace("__", ".")
        got = claim(doc, name, device)
        status, _, needle = want.partition(":")
        if got["status"] != status or (needle and needle not in got["detail"]):
            failures.append(f"{case}: claim {name} is {got['status']} ({got['detail']}), expected {want}")


def failed_indices(doc, device=0):
    return [m["index"] for m in doc["devices"][device]["measurements"] if m["status"] == "fail"]


DEVICE_OK = dict(signature="pass", chain="pass", nonce="pass")

# --- trust anchors: the chains' last certificates are the pinned roots (gpuenv carries no copy of either) ---
def der_sha256(pem_path):
    text = open(pem_path).read()
    b64 = "".join(text.split("-----")[2].split())
    return hashlib.sha256(base64.b64decode(b64)).hexdigest()


for root, pin in [("roots/verifier_device_root.pem", DEVICE_ROOT), ("roots/verifier_RIM_root.pem", RIM_ROOT), ("sdk/rims/rim_root.crt", RIM_ROOT)]:
    if der_sha256(v(root)) != pin:
        failures.append(f"{root}: its SHA-256 is not the pinned {pin}")
if der_sha256(v("sdk/rims/incorrect_rim_root.crt")) in (DEVICE_ROOT, RIM_ROOT):
    failures.append("sdk/rims/incorrect_rim_root.crt is one of the pinned roots")

# --- E2E-1: the nvtrust 2023 sample, both RIMs, judged when its RIM signers were valid ---
e1 = ("e2e_nvtrust_2023/attestationReport.hex", NONCE_2023, "e2e_nvtrust_2023/gpuAkCertChain.pem")
rc, doc = report(*e1, "--driver-rim", v("e2e_nvtrust_2023/Driver_RIM_test_no_gpu.swidtag"),
                 "--vbios-rim", v("e2e_nvtrust_2023/1010_0200_882_96005E0001_test_no_gpu.swidtag"), "--at", "2024-06-01", rc=0)
expect("E2E-1", doc, verdict="pass", fwid="not_checked", measurements="pass:32 active measurements match, 1 not compared (NVDEC0 disabled)", driver_rim__chain="pass:sha256 " + RIM_ROOT[:16],
       **dict(DEVICE_OK, chain="pass:sha256 " + DEVICE_ROOT[:16]))
if doc and doc["devices"][0]["driver"] != "545.00":
    failures.append(f"E2E-1: driver {doc['devices'][0]['driver']}")
rc, doc = report(*e1, "--driver-rim", v("e2e_nvtrust_2023/Driver_RIM_test_no_gpu.swidtag"),
                 "--vbios-rim", v("e2e_nvtrust_2023/1010_0200_882_96005E0001_test_no_gpu.swidtag"), rc=1)
expect("E2E-1 today", doc, verdict="fail", driver_rim__cert_validity="fail:expired", driver_rim__signature="pass", measurements="pass")
rc, doc = report(*e1, "--driver-rim", v("e2e_nvtrust_2023/Driver_RIM_test_no_gpu.swidtag"),
                 "--vbios-rim", v("e2e_nvtrust_2023/1010_0200_882_96005E0001_PROD.swidtag"), "--at", "2024-06-01", rc=1)
expect("E2E-1 with the PROD VBIOS RIM", doc, verdict="fail", measurements="fail:VBIOS index 1, 2, 3, 9 differs")
if doc and failed_indices(doc) != [1, 2, 3, 9]:
    failures.append(f"E2E-1 PROD: mismatches {failed_indices(doc)}")
# A policy that tolerates exactly those indices (as NVIDIA's example Rego policy tolerates index 7) passes it.
policy = os.path.join(cache, "allow.yaml")
open(policy, "w").write("version: 1\nallow_mismatch: [1, 2, 3, 9]\n")
rc, doc = report(*e1, "--driver-rim", v("e2e_nvtrust_2023/Driver_RIM_test_no_gpu.swidtag"),
                 "--vbios-rim", v("e2e_nvtrust_2023/1010_0200_882_96005E0001_PROD.swidtag"), "--at", "2024-06-01", "--policy", policy, rc=0)
expect("E2E-1 PROD with allow_mismatch", doc, verdict="pass", measurements="fail")
used.add("sdk/policies/allow_gpu_measurement_mismatch_index_7.rego")

# --- E2E-2: the Azure H100 capture, offline with its RIMs (XML, the RIM service's JSON, and through a loopback service) ---
azure = "e2e_azure_h100_595/"
for f in ["NV_GPU_DRIVER_GH100_595.71.05.xml", "NV_GPU_VBIOS_1010_0210_886_96009F0004.xml"]:
    v(azure + f)
rc, doc = gpuenv("--evidence", v(azure + "gpu-evidence.json"), "--rim-dir", os.path.join(VECTORS, azure), expect_rc=0)
expect("E2E-2 evidence + rim-dir", doc, verdict="pass", fwid="pass", measurements="pass:33 active measurements match, 1 not compared", driver_rim__cert_validity="pass",
       vbios_rim__version="pass", **DEVICE_OK)
if doc and doc["devices"][0]["measurements"] and [m["index"] for m in doc["devices"][0]["measurements"] if m["status"] == "not_checked"] != [35]:
    failures.append("E2E-2: index 35 is not the one skipped (NVDEC0 disabled)")
rc, doc = report(azure + "gpu0-attestation-report.bin", NONCE_AZURE, azure + "gpu0-cert-chain.pem", "--rim-dir", v(azure + "rim-service"), rc=0)
expect("E2E-2 report + saved service answers", doc, verdict="pass", **DEVICE_OK)
for f in ["NV_GPU_DRIVER_GH100_595.71.05.json", "NV_GPU_VBIOS_1010_0210_886_96009F0004.json"]:
    v(azure + "rim-service/" + f)

served = tempfile.mkdtemp(prefix="gpuenv-rim-service-")
atexit.register(shutil.rmtree, served, True)
os.makedirs(os.path.join(served, "v1", "rim"))
for f in os.listdir(os.path.join(VECTORS, azure, "rim-service")):
    with open(os.path.join(VECTORS, azure, "rim-service", f), "rb") as src, open(os.path.join(served, "v1", "rim", f[:-5]), "wb") as dst:
        dst.write(src.read())
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


handler = functools.partial(Quiet, directory=served)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_address[1]}"
rc, doc = gpuenv("--evidence", v(azure + "gpu-evidence.json"), "--rim-service", url, expect_rc=0)
expect("E2E-2 through the RIM service", doc, verdict="pass", measurements="pass")
server.shutdown()
rc, doc = gpuenv("--evidence", v(azure + "gpu-evidence.json"), "--rim-service", url, "--offline", expect_rc=0)
expect("E2E-2 from the cache, offline", doc, verdict="pass", measurements="pass")
rc, doc = gpuenv("--evidence", v(azure + "gpu-evidence.json"), "--rim-service", "http://127.0.0.1:9", "--offline", expect_rc=1)
expect("E2E-2 offline, another service not in the cache", doc, verdict="fail", measurements="not_checked", driver_rim__signature="not_checked:no driver RIM")
rc, doc = gpuenv("--evidence", v(azure + "gpu-evidence.json"), expect_rc=1)
expect("E2E-2 without RIMs", doc, verdict="fail", measurements="not_checked", driver_rim__signature="not_checked:no driver RIM")
# Issue 33, case 1: "arch" is not signed. Called an NVSwitch, the H100's evidence once passed on its 12 VBIOS indices
# alone with another driver's RIM; the kind now comes from the leaf certificate and a contradicting "arch" is refused.
doc_azure = json.load(open(v(azure + "gpu-evidence.json")))
for arch, want_rc in [("LS10", 2), ("NVSWITCH", 2), ("BLACKWELL", 2), ("HOPPER", 1), ("hopper", 1)]:
    edited = os.path.join(cache, f"evidence-{arch}.json")
    json.dump(dict(doc_azure, arch=arch), open(edited, "w"))
    rc, doc = gpuenv("--evidence", edited, "--driver-rim", v("sdk/rims/NV_GPU_DRIVER_GH100_550.144.03.xml"),
                     "--vbios-rim", v(azure + "NV_GPU_VBIOS_1010_0210_886_96009F0004.xml"), expect_rc=want_rc)
    if want_rc == 2 and doc is not None and doc.get("error", {}).get("id") != "attest.arch_mismatch":
        failures.append(f"arch {arch}: not refused as attest.arch_mismatch: {doc}")
    if want_rc == 1:
        expect(f"arch {arch} with another driver's RIM", doc, verdict="fail", driver_rim__version="fail")

# --- published reports with their chains: the device claims ---
rc, doc = report("nvtrust/hopperAttestationReport.txt", NONCE_931D, "nvtrust/hopperCertChain.txt", rc=1)
expect("nvtrust hopper", doc, verdict="fail", fwid="pass", measurements="not_checked", **DEVICE_OK)
if doc and (doc["devices"][0]["driver_rim_id"], doc["devices"][0]["vbios_rim_id"]) != ("NV_GPU_DRIVER_GH100_550.90.07", "NV_GPU_VBIOS_1010_0200_882_96009F0001"):
    failures.append(f"nvtrust hopper: RIM ids {doc['devices'][0]['driver_rim_id']} {doc['devices'][0]['vbios_rim_id']}")
oracle = json.load(open(v("trustee/hopperAttestationReport-claims.txt")))
if doc and (doc["devices"][0]["driver"], doc["devices"][0]["vbios"].lower()) != (oracle["config"]["driver_version"], oracle["config"]["vbios_version"]):
    failures.append("nvtrust hopper: driver or VBIOS differ from trustee's claims")
for chain in ["trustee/hopper_cert_chain_case2.txt", "trustee/hopper_cert_chain_case3.txt", "trustee/hopper_cert_chain_case4.txt"]:
    rc, doc = report("nvtrust/hopperAttestationReport.txt", NONCE_931D, chain, rc=1)
    expect(chain, doc, verdict="fail", chain="fail")

rc, doc = report("sdk/hopperAttestationReport.txt", NONCE_SDK, "sdk/hopperCertChain.txt", "--vbios-rim", v("nvtrust/vbios_rims/1010_0205_862_9600740020_PROD.swidtag"), rc=1)
expect("sdk hopper", doc, fwid="pass", vbios_rim__signature="pass", **DEVICE_OK)
if doc and (doc["devices"][0]["driver"], doc["devices"][0]["vbios"]) != ("580.159.03", "96.00.74.00.20"):
    failures.append("sdk hopper: driver or VBIOS")
if doc and failed_indices(doc) != [9]:
    failures.append(f"sdk hopper vs the old VBIOS RIM: mismatches {failed_indices(doc)}, expected [9]")
used.update(["sdk/spdm_parsed_output.json", "sdk/spdm_req_parsed_output.json"])  # field for field in tests/attest/evidence_test.cpp

sdk_gpu = ("sdk/gpu/hopperAttestationReport.txt", NONCE_SDK_GPU, "sdk/gpu/hopperCertChain.txt")
rc, doc = report(*sdk_gpu, "--vbios-rim", v("e2e_nvtrust_2023/1010_0200_882_96005E0001_PROD.swidtag"), rc=1)
expect("sdk/gpu hopper", doc, fwid="not_checked", **DEVICE_OK)
if doc and (failed_indices(doc) or len(doc["devices"][0]["measurements"]) != 12):
    failures.append("sdk/gpu hopper: the 12 VBIOS indices of the PROD RIM do not all match")
rc, doc = report("sdk/gpu/hopperAttestationReport.txt", ZERO, "sdk/gpu/hopperCertChain.txt", rc=1)
expect("sdk/gpu hopper, zero nonce", doc, verdict="fail", nonce="fail:" + NONCE_SDK_GPU, signature="pass")
rc, doc = report(*sdk_gpu, "--vbios-rim", v("sdk/rims/NV_GPU_VBIOS_1010_0200_882_96005E0001_measurement_mismatch.xml"), rc=1)
expect("sdk vbios measurement_mismatch", doc, vbios_rim__signature="pass", measurements="fail:VBIOS index 9 differs")
if doc and failed_indices(doc) != [9]:
    failures.append(f"sdk vbios measurement_mismatch: {failed_indices(doc)}")
rc, doc = report(*sdk_gpu, "--driver-rim", v("sdk/rims/NV_GPU_DRIVER_GH100_535.86.09_measurement_mismatch.xml"), rc=1)
expect("sdk driver measurement_mismatch (tampered)", doc, verdict="fail", driver_rim__signature="fail:DigestValue")

rc, doc = report("sdk/gpu/hopperAttestationReportExpired.txt", NONCE_931D, "sdk/gpu/hopperCertChainExpired.txt",
                 "--driver-rim", v("sdk/rims/NV_GPU_DRIVER_GH100_570.124.03_expired.xml"), rc=1)
expect("sdk expired", doc, cert_validity="pass", driver_rim__signature="fail:DigestValue", **DEVICE_OK)
rc, doc = report("sdk/gpu/hopperAttestationReportInvalidSignature.txt", NONCE_931D, "sdk/gpu/hopperCertChainExpired.txt", rc=1)
expect("sdk invalid signature", doc, verdict="fail", signature="fail", fwid="fail")

rc, doc = report("sdk/gpu/blackwellAttestationReport.txt", NONCE_931D, "sdk/gpu/blackwellCertChain.txt", rc=1)
expect("sdk blackwell", doc, fwid="pass", **DEVICE_OK)
if doc and (doc["devices"][0]["kind"], doc["devices"][0]["driver_rim_id"], doc["devices"][0]["vbios"]) != ("BLACKWELL", "NV_GPU_CC_DRIVER_GB100_575.32", "97.00.88.00.0F"):
    failures.append(f"sdk blackwell: {doc['devices'][0]['kind']} {doc['devices'][0]['driver_rim_id']} {doc['devices'][0]['vbios']}")

rc, doc = report("trustee/blackwellAttestationReport.txt", NONCE_2023, "trustee/blackwell_cert_chain_case1.txt", rc=1)
expect("trustee blackwell", doc, fwid="pass", **DEVICE_OK)
if doc and doc["devices"][0]["driver_rim_id"] != "NV_GPU_CC_DRIVER_GB202_595.58.03":
    failures.append(f"trustee blackwell: {doc['devices'][0]['driver_rim_id']}")
oracle = json.load(open(v("trustee/blackwellAttestationReport-claims.txt")))
if doc and doc["devices"][0]["driver"] != oracle["config"]["driver_version"]:
    failures.append("trustee blackwell: driver differs from trustee's claims")
for chain in ["trustee/blackwell_cert_chain_case2.txt", "trustee/blackwell_cert_chain_case3.txt"]:
    rc, doc = report("trustee/blackwellAttestationReport.txt", NONCE_2023, chain, rc=1)
    expect(chain, doc, verdict="fail", chain="fail")
used.add("trustee/BLACKWELL_FIXTURE.md")

rc, doc = report("trustee/hopper_coco_report1.txt", ZERO, "trustee/hopper_coco_certs1.txt", rc=2)
if not doc or doc.get("error", {}).get("id") != "attest.trailing":
    failures.append(f"trustee coco report with a trailing byte: not refused as attest.trailing: {doc}")

rc, doc = report("e2e_nvtrust_2023/attestationReport.hex", NONCE_2023, "gonvtrust/invalidCertChain.txt", rc=1)
expect("gonvtrust invalid chain", doc, verdict="fail", chain="fail")

# --- NVSwitch ---
sw = ("sdk/switch/switchAttestationReport.txt", NONCE_931D, "sdk/switch/switchCertChain.txt")
rc, doc = report(*sw, "--vbios-rim", v("sdk/switch/switchVBIOSRim_NV_SWITCH_BIOS_5612_0002_890_9610550001.xml"))
expect("switch", doc, measurements="pass:31 active measurements match", vbios_rim__signature="pass", vbios_rim__chain="pass", driver_rim__signature="absent", **DEVICE_OK)
if doc and doc["devices"][0]["kind"] != "LS10":
    failures.append("switch: not LS10")
rc, doc = report(*sw, "--vbios-rim", v("sdk/rims/NV_SWITCH_BIOS_5612_0002_890_9610550001_invalid_signature.xml"), rc=1)
expect("switch invalid-signature RIM", doc, verdict="fail", vbios_rim__signature="fail")
rc, doc = report(*sw, "--vbios-rim", v("sdk/rims/NV_SWITCH_BIOS_5612_0002_890_9610550001_measurement_mismatch.xml"), rc=1)
expect("switch relabelled RIM", doc, verdict="fail", vbios_rim__signature="fail:DigestValue")
rc, doc = report("sdk/switch/switchAttestationReportInvalidSignature.txt", NONCE_931D, "sdk/switch/switchCertChain.txt", rc=1)
expect("switch invalid signature", doc, verdict="fail", signature="fail")

# --- the SDK's broken and other RIMs ---
rc, doc = report(*sdk_gpu, "--driver-rim", v("sdk/rims/incorrect_signature_driver_rim.xml"), rc=1)
expect("incorrect_signature_driver_rim", doc, verdict="fail", driver_rim__signature="fail:SignatureValue does not verify")
rc, doc = report(*sdk_gpu, "--driver-rim", v("sdk/rims/incorrect_cert_chain_driver_rim.xml"), rc=1)
expect("incorrect_cert_chain_driver_rim", doc, verdict="fail", driver_rim__signature="pass", driver_rim__chain="fail")
rc, doc = report("nvtrust/hopperAttestationReport.txt", NONCE_931D, "nvtrust/hopperCertChain.txt", "--driver-rim", v("sdk/rims/NV_GPU_DRIVER_GH100_550.144.03.xml"), rc=1)
expect("driver RIM 550.144.03 for a 550.90.07 report", doc, driver_rim__signature="pass", driver_rim__chain="pass", driver_rim__version="fail:550.144.03")
vbios_rims = sorted(f for f in os.listdir(os.path.join(VECTORS, "nvtrust/vbios_rims")))
for f in vbios_rims:
    rc, doc = report(*sdk_gpu, "--vbios-rim", v("nvtrust/vbios_rims/" + f), rc=1)
    expect(f, doc, vbios_rim__signature="pass", vbios_rim__chain="pass", vbios_rim__cert_validity="fail:expired")

# --- evidence JSON: one GPU, several GPUs, switches; with a policy that leaves RIMs aside, every device passes ---
device_only = os.path.join(cache, "device-only.yaml")
open(device_only, "w").write("version: 1\nclaims:\n  driver_rim: ignored\n  vbios_rim: ignored\n  measurements: ignored\n")
for f, count in [("sdk/evidence/hopper_evidence.json", 1), ("sdk/evidence/evidence_hopper_590_12.json", 1), ("sdk/evidence/hopper_evidence_cert_hold.json", 1),
                 ("sdk/evidence/multi_gpu_hopper.json", 4), ("sdk/evidence/switch_evidence_ls10.json", 1), ("sdk/evidence/multi_switch_ls10.json", 4),
                 ("ppcie/gpu_evidence.json", 8), ("ppcie/switch_evidence.json", 4)]:
    rc, doc = gpuenv("--evidence", v(f), "--policy", device_only, expect_rc=0)
    if doc and len(doc.get("devices", [])) != count:
        failures.append(f"{f}: {len(doc.get('devices', []))} devices, expected {count}")
        continue
    for i in range(count):
        expect(f"{f}[{i}]", doc, device=i, verdict="pass", cert_validity="pass", revocation="not_checked", **DEVICE_OK)

# --- the CUDA 13.5 opaque format and the FSP report ---
rc, doc = report("sdk_2026_10/blackwellFspAttestationReport.txt", ZERO, "sdk_2026_10/blackwellFspCertChain.txt", rc=1)
expect("blackwell FSP", doc, signature="pass", chain="pass")
if doc and not doc["devices"][0]["nonce"].startswith("d42a0594"):
    failures.append(f"blackwell FSP: nonce {doc['devices'][0]['nonce']}")
rc, doc = report("sdk_2026_10/sample_nvdaod_transcript.txt", ZERO, "sdk_2026_10/blackwellFspCertChain.txt", rc=1)
if doc and (doc["devices"][0]["driver"], doc["devices"][0]["vbios"]) != ("620.12", "96.00.D9.00.0F"):
    failures.append(f"NVDAOD transcript: {doc['devices'][0]['driver']} {doc['devices'][0]['vbios']}")

# --- every vector was used ---
NOT_EVIDENCE = {"README.md", "vectors.json", "sdk/policies/rp-policy-permissive.rego"}  # the permissive Rego is `claims: ...: ignored`
listed = {e["file"] for e in json.load(open(os.path.join(VECTORS, "vectors.json")))}
for f in sorted(listed - used - NOT_EVIDENCE):
    failures.append(f"{f}: listed in vectors.json but no case reads it")

if failures:
    print(f"{len(failures)} of the vectors' verdicts were not reached:")
    for f in failures:
        print("  - " + f)
    sys.exit(1)
print(f"every verdict reached: {len(used)} files")
