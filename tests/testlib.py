"""Helpers shared by the Python test scripts that drive the gpuenv binary (tests/attest/*.py, tests/fleet/*.py)."""
import atexit
import os
import shutil
import sys
import tempfile


def scratch(prefix):
    """A fresh temporary directory, removed when the script exits."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


def gpuenv_env(work):
    """The environment for gpuenv: its own cache under WORK, and none of the variables that would change a test's answer."""
    env = dict(os.environ, GPUENV_CACHE_DIR=os.path.join(work, "cache"))
    for name in ("GPUENV_BACKEND", "GPUENV_RIM_SERVICE_URL"):
        env.pop(name, None)
    return env


def preflight(gpuenv_binary, env, source, work, replay, rc, failures):
    """`gpuenv preflight` of the recording tests/data/validate/REPLAY into WORK/<name>.status.json; an exit other
    than RC is added to FAILURES. Returns the status file's path."""
    import subprocess
    path = os.path.join(work, os.path.basename(replay) + ".status.json")
    p = subprocess.run([gpuenv_binary, "preflight", "--backend", "replay:" + os.path.join(source, "tests/data/validate", replay), "--status-file", path],
                       capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != rc:
        failures.append(f"preflight {replay}: exit {p.returncode}, expected {rc}: {p.stderr[-300:]}")
    return path


def finish(failures, passed):
    """Prints the failures and exits 1, or prints PASSED and exits 0."""
    if failures:
        print(f"{len(failures)} failures:")
        for f in failures:
            print("  - " + f)
        sys.exit(1)
    print(passed)
    sys.exit(0)


def write_cc_replay(path, source, report, nonce_hex, chain, driver="595.71.05", vbios="96.00.9F.00.04", cc_state="on"):
    """A replay over the repository's recorded H200 whose GPU 0 serves REPORT (bytes) and CHAIN (PEM) as CC evidence."""
    chain_block = "\n".join("          " + line for line in chain.strip().splitlines())
    ready = "" if cc_state == "off" else "\n    cc_gpus_ready: false"
    with open(path, "w") as f:
        f.write(f"""schema: gpuenv-replay-v1
extends: {os.path.join(source, "tests/data/validate/h200x1.yaml")}
inventory:
  driver:
    version: "{driver}"
    cc_state: {cc_state}{ready}
    cc_environment: production
scenario:
  measurements:
    - gpu: 0
      cc_evidence:
        report: "{report.hex()}"
        nonce: "{nonce_hex}"
        vbios_version: "{vbios}"
        cert_chain: |
{chain_block}
""")
    return path
