#!/usr/bin/env python3
"""The independent oracle (tests/marks/attest_oracles.py) on what the real gpuenv writes, offline: a lock of two
.debs (one with an epoch and a '+' in its version that Depends on the other, Architecture: all) and a wheel (a
mixed-case name, License-Expression: MIT in its METADATA), served by a proxy on 127.0.0.1 under a .test host name
(RFC 2606; the SPDX download-location grammar spdx-tools applies wants a host name, not an address), is built twice
with `--attest sbom,provenance --key`, from two caches; the oracle passes the first layout against the lock and the
second (--same-as) and fails it against another key; CycloneDX holds the Depends edge and the licence; a lock of
two platforms (linux/amd64, linux/arm64) builds an image whose every platform passes (--platform). The online smoke
does the same on hello-cuda.
Usage: attest_oracles_build.py GPUENV SOURCE_DIR VENV (skips, 77, without dpkg-deb or the venv's readers)
"""
import base64
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.parse
import zipfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testlib  # noqa: E402

GPUENV, SOURCE, VENV = (os.path.abspath(a) for a in sys.argv[1:4])
ORACLE = os.path.join(SOURCE, "tests/marks/attest_oracles.py")
python = os.path.join(VENV, "bin", "python")
if not os.access(python, os.X_OK):
    print(f"SKIP: no {python} (scripts/test.sh makes the test venv)")
    sys.exit(77)
if not shutil.which("dpkg-deb"):
    print("SKIP: no dpkg-deb to make the fixture's packages (scripts/deps.sh installs dpkg-dev)")
    sys.exit(77)

work = testlib.scratch("gpuenv-oracles-build-")
repo = os.path.join(work, "repo")
os.makedirs(repo)
failures = []


def make_deb(name, version, arch, depends=""):
    tree = os.path.join(work, f"deb-{name}-{arch}")
    os.makedirs(os.path.join(tree, "DEBIAN"))
    os.makedirs(os.path.join(tree, "usr/share", name))
    with open(os.path.join(tree, "DEBIAN/control"), "w") as f:
        f.write(f"Package: {name}\nVersion: {version}\nArchitecture: {arch}\nMaintainer: gpuenv tests <tests@example.org>\n"
                + (f"Depends: {depends}\n" if depends else "") + "Description: a package of the oracle's fixture\n")
    with open(os.path.join(tree, "usr/share", name, "README"), "w") as f:
        f.write(f"{name} {version}\n")
    out = os.path.join(repo, f"{name}_{version.split(':')[-1]}_{arch}.deb")
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", tree, out], check=True, capture_output=True, timeout=60)
    return out


def make_wheel():
    files = {"oracle_demo/__init__.py": b"answer = 42\n",
             "Oracle_Demo-1.0.dist-info/METADATA": b"Metadata-Version: 2.4\nName: Oracle_Demo\nVersion: 1.0\nLicense-Expression: MIT\n",
             "Oracle_Demo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: gpuenv-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n" for n, d in files.items())
    files["Oracle_Demo-1.0.dist-info/RECORD"] = (record + "Oracle_Demo-1.0.dist-info/RECORD,,\n").encode()
    out = os.path.join(repo, "oracle_demo-1.0-py3-none-any.whl")
    with zipfile.ZipFile(out, "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
    return out


# oracle-tool depends on oracle-data (an edge both SBOMs must show); the wheel states its licence (PEP 639).
data_deb, wheel = make_deb("oracle-data", "0.3", "all"), make_wheel()
packages = {arch: [("oracle-tool", "1:2.0-1+deb12u1", "deb", arch, make_deb("oracle-tool", "1:2.0-1+deb12u1", arch, "oracle-data (>= 0.1)")),
                   ("oracle-data", "0.3", "deb", "all", data_deb),
                   ("Oracle_Demo", "1.0", "wheel", "any", wheel)] for arch in ("amd64", "arm64")}


class Proxy(http.server.BaseHTTPRequestHandler):
    """An HTTP proxy that serves the fixture's files by name, whatever host the absolute URL names."""

    def do_GET(self):
        path = os.path.join(repo, os.path.basename(urllib.parse.urlsplit(self.path).path))
        if not os.path.isfile(path):
            self.send_error(404)
            return
        with open(path, "rb") as f:
            data = f.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
threading.Thread(target=server.serve_forever, daemon=True).start()

with open(os.path.join(SOURCE, "tests/data/locks/empty.lock")) as f:
    lock = f.read()
lock = lock.replace("packages: []\n", "").replace("python: null", 'python: "3.11"')
lock = lock.replace('"spec-digest"', '"' + hashlib.sha256(b"the oracle's spec").hexdigest() + '"')


def write_lock(path, archs):
    """The lock of PACKAGES for ARCHS: one platform, or several (each package then names its own)."""
    text = lock + ("" if len(archs) == 1 else "platforms: [" + ", ".join(f'"linux/{a}"' for a in archs) + "]\n") + "packages:\n"
    for arch in archs:
        for name, version, kind, package_arch, deb in packages[arch]:
            with open(deb, "rb") as f:
                data = f.read()
            text += (f'  - {{name: "{name}", version: "{version}", kind: "{kind}", architecture: "{package_arch}", size: {len(data)},\n'
                     f'     sha256: "{hashlib.sha256(data).hexdigest()}",\n     url: "http://repo.gpuenv.test/{os.path.basename(deb)}",\n'
                     f'     source: "fixture"' + ("" if len(archs) == 1 else f',\n     platform: "linux/{arch}"') + "}\n")
    with open(path, "w") as f:
        f.write(text)
    return path


lock_path = write_lock(os.path.join(work, "gpuenv.lock"), ["amd64"])
multi_lock = write_lock(os.path.join(work, "multi.lock"), ["amd64", "arm64"])

env = testlib.gpuenv_env(work)
env.update(http_proxy=f"http://127.0.0.1:{server.server_address[1]}", SOURCE_DATE_EPOCH="1700000000")
for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
    env.pop(name, None)


def gpuenv(*args, cache="cache"):
    return subprocess.run([GPUENV, *args], capture_output=True, text=True, env=dict(env, GPUENV_CACHE_DIR=os.path.join(work, cache)), timeout=300)


for keys in ("keys", "other"):
    p = gpuenv("key", "generate", "-o", os.path.join(work, keys))
    if p.returncode != 0:
        failures.append(f"key generate: exit {p.returncode}: {p.stderr[-300:]}")
layouts = []
for n, cache in ((1, "cache-a"), (2, "cache-b")):
    out = os.path.join(work, f"image-{n}")
    p = gpuenv("build", lock_path, "-o", out, "--attest", "sbom,provenance", "--key", os.path.join(work, "keys/gpuenv.key"), cache=cache)
    if p.returncode != 0:
        failures.append(f"build {n} --attest sbom,provenance: exit {p.returncode}: {p.stderr[-600:]}")
    layouts.append(out)
multi = os.path.join(work, "multi")
p = gpuenv("build", multi_lock, "-o", multi, "--attest", "sbom,provenance", "--key", os.path.join(work, "keys/gpuenv.key"), cache="cache-a")
if p.returncode != 0:
    failures.append(f"build of two platforms --attest sbom,provenance: exit {p.returncode}: {p.stderr[-600:]}")
server.shutdown()
if failures:
    testlib.finish(failures, "")


def oracle(*args):
    p = subprocess.run([python, ORACLE, *args], capture_output=True, text=True, timeout=300)
    if p.returncode == 77:
        print("SKIP: " + p.stdout.strip()[-300:])
        sys.exit(77)
    return p.returncode, p.stdout + p.stderr


rc, out = oracle(layouts[0], os.path.join(work, "keys/gpuenv.pub"), "--lock", lock_path, "--same-as", layouts[1])
print(out.strip())
if rc != 0:
    failures.append(f"the oracle refuses what gpuenv wrote (exit {rc}); its lines are above")
for line in ("PASS packages: 3 packages", "and the lock's 3", "PASS same-as"):
    if line not in out:
        failures.append(f"the oracle's output lacks '{line}'")
# what the oracle compares between the two SBOMs must be there to compare: the edge, the licence
with open(os.path.join(layouts[0], "sbom.cdx.json")) as f:
    bom = json.load(f)
refs = {c["bom-ref"]: c["name"] for c in bom["components"]}
edges = {(refs.get(d["ref"]), refs.get(t)) for d in bom["dependencies"] for t in d["dependsOn"]}
if ("oracle-tool", "oracle-data") not in edges:
    failures.append(f"CycloneDX lacks the edge oracle-tool -> oracle-data (its Depends): {sorted(map(str, edges))}")
licences = {c["name"]: c.get("licenses") for c in bom["components"]}
if licences.get("Oracle_Demo") not in ([{"expression": "MIT"}], [{"license": {"id": "MIT"}}]):
    failures.append(f"CycloneDX lacks the wheel's licence (License-Expression: MIT): {licences.get('Oracle_Demo')}")
for platform in ("linux/amd64", "linux/arm64"):
    rc, out = oracle(multi, os.path.join(work, "keys/gpuenv.pub"), "--lock", multi_lock, "--platform", platform)
    if rc != 0:
        failures.append(f"the oracle refuses {platform} of the two-platform image (exit {rc}):\n{out[-1500:]}")
    else:
        print(f"{platform} of the two-platform image: " + "; ".join(l.split(":")[0] for l in out.splitlines()))
rc, out = oracle(layouts[0], os.path.join(work, "other/gpuenv.pub"), "--lock", lock_path)
if rc != 1 or "FAIL signatures" not in out or "FAIL statements" in out:
    failures.append(f"against another key the oracle should fail the signatures only (exit {rc}):\n{out[-800:]}")
testlib.finish(failures, "PASSED: the oracle accepts gpuenv's SBOMs, statements and signatures and refuses another key")
