#!/usr/bin/env python3
"""Online check (ctest label `online`): gpuenv's wheel resolver chooses what pip and uv choose.

Usage: pip_agreement_online.py GPUENV ROOT BUILD_DIR [SPEC]

SPEC (default recipes/examples/torch-gh200.yaml, image.platforms [linux/amd64, linux/arm64]) is locked with
`gpuenv lock --json`. For each platform of the lock, the wheels gpuenv pinned (name, version, sha256) are compared
with what these choose for the same requirements (the lock's `wheel_requirements`: the framework pins, the CUDA
wheels when any, the spec's pip packages), the same Python (the lock's, CPython ABI) and the same platform:

  - pip (`python3 -m pip install --dry-run --ignore-installed --report R.json --only-binary=:all:
    --python-version X.Y --implementation cp --abi cpXY --platform TAG...`), TAG being every tag of the full list
    gpuenv computes (packages/wheels/wheel_tags.cpp, linux_platform_tags: manylinux_2_G down to 2_17 on aarch64,
    2_5 on x86_64, the legacy aliases, linux_ARCH; G the glibc of the lock's libc6 for that platform), since
    pip's --platform does not expand a manylinux tag to the older ones. pip uses its own configuration (the
    index gpuenv found there too). Compared: names, versions and each wheel's sha256.
  - uv (`uv pip compile --python-platform ARCH-manylinux_2_G --format pylock.toml`, installed with pip into a
    virtual environment under BUILD_DIR), on the index `gpuenv sources` names (uv does not read pip's
    configuration). Compared: names and versions, and that the wheel gpuenv pinned is one of those uv lists for
    its version.

pip evaluates the dependencies' environment markers against the interpreter that runs it, not the target
(--platform changes the tags only), so a marker on platform_machine is judged for this machine; uv judges them
for --python-platform. A difference that only such a marker explains is reported as pip's, and is not a failure
when uv agrees with gpuenv.

Exit status: 0 gpuenv agrees, 1 a difference (each printed), 2 bad usage, 77 a mirror cannot be reached (skip).
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

SKIP = 77
UV_PLATFORMS = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def normal_version(v):
    try:
        from pip._vendor.packaging.version import Version
        return str(Version(v))
    except Exception:  # noqa: BLE001 - an unparsable version is compared as written
        return v


def linux_platform_tags(arch, glibc_major, glibc_minor):
    """The platform tags gpuenv gives a target (packages/wheels/wheel_tags.cpp, after packaging._manylinux)."""
    too_old = (2, 4) if arch in ("x86_64", "i686") else (2, 16)
    maxima = [(glibc_major, glibc_minor)] + [(m, 50) for m in range(glibc_major - 1, 1, -1)]
    out = []
    for major, max_minor in maxima:
        min_minor = too_old[1] if major == too_old[0] else -1
        for minor in range(max_minor, min_minor, -1):
            out.append(f"manylinux_{major}_{minor}_{arch}")
            legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}.get(minor) if major == 2 else None
            if legacy:
                out.append(f"{legacy}_{arch}")
    out.append(f"linux_{arch}")
    return out


def run(cmd, log, env=None, timeout=1800):
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode
    return rc, time.monotonic() - t0


def tail(path, n=20):
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])


def pip_choice(out, platform, requirements, python, tags):
    report = out / f"pip-{platform.replace('/', '-')}.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--target", str(out / "pip-target"),
           "--report", str(report), "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
           "--abi", "cp" + python.replace(".", ""), "--quiet"]
    for t in tags:
        cmd += ["--platform", t]
    rc, took = run(cmd + requirements, out / "pip.log")
    if rc != 0:
        return None, f"pip failed (exit {rc}):\n{tail(out / 'pip.log')}", took
    chosen = {}
    for item in json.load(open(report))["install"]:
        info = item["download_info"].get("archive_info", {})
        sha = info.get("hashes", {}).get("sha256") or info.get("hash", "sha256=").split("=", 1)[1]
        chosen[canonical(item["metadata"]["name"])] = (normal_version(item["metadata"]["version"]), {sha},
                                                         item["download_info"]["url"].rsplit("/", 1)[-1])
    return chosen, None, took


def uv_binary(build_dir):
    venv = Path(build_dir) / "online-venv"
    uv = venv / "bin" / "uv"
    if uv.exists():
        return uv, None
    rc, _ = run([sys.executable, "-m", "venv", str(venv)], Path(build_dir) / "online-venv.log")
    if rc == 0:
        rc, _ = run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "uv"], Path(build_dir) / "online-venv.log")
    if rc != 0 or not uv.exists():
        return None, f"uv could not be installed into {venv}:\n{tail(Path(build_dir) / 'online-venv.log')}"
    return uv, None


def uv_choice(uv, out, build_dir, platform, requirements, python, glibc, indexes):
    reqs = out / "requirements.in"
    reqs.write_text("".join(r + "\n" for r in requirements))
    target = f"{UV_PLATFORMS[platform]}-manylinux_{glibc[0]}_{glibc[1]}"
    result = out / f"pylock.{platform.replace('/', '-')}.toml"  # uv takes only pylock.toml or pylock.NAME.toml
    cmd = [str(uv), "pip", "compile", "--no-config", "--quiet", "--no-header", "--python-version", python,
           "--python-platform", target, "--only-binary", ":all:", "--format", "pylock.toml", "-o", str(result)]
    if indexes:
        cmd += ["--default-index", indexes[0]]
        for extra in indexes[1:]:
            cmd += ["--index", extra]
    env = dict(os.environ, UV_CACHE_DIR=str(Path(build_dir) / "online-venv" / "uv-cache"))
    rc, took = run(cmd + [str(reqs)], out / "uv.log", env=env)
    if rc != 0:
        return None, f"uv pip compile --python-platform {target} failed (exit {rc}):\n{tail(out / 'uv.log')}", took
    chosen = {}
    for p in tomllib.loads(result.read_text()).get("packages", []):
        wheels = {w.get("name", w.get("url", "").rsplit("/", 1)[-1]): w.get("hashes", {}).get("sha256") for w in p.get("wheels", [])}
        chosen[canonical(p["name"])] = (normal_version(p["version"]), set(wheels.values()) - {None}, ", ".join(sorted(wheels)))
    return chosen, None, took


def compare(tool, pinned, chosen):
    """Lines saying where gpuenv's pins (name -> (version, sha256, filename)) and TOOL's choices (name -> (version,
    the sha256s of the wheels it would take, their names)) differ; an empty set of sha256s is not compared."""
    out = []
    for name in sorted(set(pinned) | set(chosen)):
        a, b = pinned.get(name), chosen.get(name)
        if a is None:
            out.append(f"{tool} chose {name} {b[0]} ({b[2]}); gpuenv pinned no {name}")
        elif b is None:
            out.append(f"gpuenv pinned {name} {a[0]} ({a[2]}); {tool} chose no {name}")
        elif a[0] != b[0]:
            out.append(f"{name}: gpuenv {a[0]} ({a[2]}), {tool} {b[0]} ({b[2]})")
        elif b[1] and a[1] not in b[1]:
            out.append(f"{name} {a[0]}: gpuenv's wheel {a[2]} (sha256 {a[1][:16]}...) is not {tool}'s: {b[2]}")
    return out


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__.splitlines()[2])
        return 2
    gpuenv, root, build_dir = (str(Path(a).resolve()) for a in argv[1:4])
    spec = argv[4] if len(argv) == 5 else f"{root}/recipes/examples/torch-gh200.yaml"
    reach = subprocess.run([f"{root}/tests/online/reachable.sh", gpuenv], capture_output=True, text=True)
    if reach.returncode != 0:
        print("pip_agreement: " + (reach.stdout + reach.stderr).strip())
        return SKIP if reach.returncode == SKIP else 1
    with tempfile.TemporaryDirectory(prefix="gpuenv-pip-agreement.") as tmp:
        out = Path(tmp)
        rc, took = run([gpuenv, "lock", spec, "-o", str(out / "spec.lock"), "--json"], out / "lock.json")
        if rc != 0:
            print(f"pip_agreement FAIL: gpuenv lock {spec} exited {rc}:\n{tail(out / 'lock.json')}")
            return 1
        lock = json.loads((out / "lock.json").read_text())
        print(f"pip_agreement: locked {Path(spec).name} in {took:.1f} s; requirements: {' '.join(lock['wheel_requirements'])}")
        sources = json.loads(subprocess.run([gpuenv, "sources", "--json"], capture_output=True, text=True, check=True).stdout)
        indexes = [u["url"] for u in [sources["pip"]["index_url"]] + sources["pip"].get("extra_index_urls", []) if u.get("url")]
        python = lock["python"] if isinstance(lock["python"], str) else lock["python"]["version"]
        python = ".".join(python.split(".")[:2])
        uv, uv_problem = uv_binary(build_dir)
        if uv_problem:
            print(f"pip_agreement: {uv_problem}")
        failures = 0
        for platform in sorted({p["platform"] for p in lock["packages"]}):
            mine = [p for p in lock["packages"] if p["platform"] == platform]
            pinned = {canonical(p["name"]): (normal_version(p["version"]), p["sha256"], p["url"].rsplit("/", 1)[-1])
                      for p in mine if p["kind"] == "wheel"}
            libc = [p["version"] for p in mine if p["name"] == "libc6"]
            if not libc or not re.match(r"\d+\.\d+", libc[0]):
                print(f"pip_agreement FAIL: the lock has no libc6 for {platform}, so the glibc of its wheels' tags is unknown")
                return 1
            glibc = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", libc[0]).groups())
            tags = linux_platform_tags(UV_PLATFORMS[platform], *glibc)
            print(f"pip_agreement: {platform}: gpuenv pinned {len(pinned)} wheels; glibc {glibc[0]}.{glibc[1]} (libc6 {libc[0]}), "
                  f"{len(tags)} platform tags ({tags[0]} ... {tags[-1]})")
            chosen, problem, took = pip_choice(out, platform, lock["wheel_requirements"], python, tags)
            pip_lines = [problem] if problem else compare("pip", pinned, chosen)
            broken = {"pip": bool(problem), "uv": False}
            uv_lines = []
            if uv:
                uv_chosen, problem, uv_took = uv_choice(uv, out, build_dir, platform, lock["wheel_requirements"], python, glibc, indexes)
                uv_lines = [problem] if problem else compare("uv", pinned, uv_chosen)
                broken["uv"] = bool(problem)
            for tool, lines, t in (("pip", pip_lines, took), ("uv", uv_lines, uv_took if uv else 0)):
                if tool == "uv" and not uv:
                    continue
                if broken[tool]:
                    print(f"pip_agreement: {platform}: {tool} could not be compared: {lines[0]}")
                    failures += 1
                    continue
                if not lines:
                    print(f"pip_agreement: {platform}: {tool} agrees ({len(pinned)} wheels, {t:.1f} s)")
                    continue
                # pip judges markers for this machine: a difference uv does not see is pip's (see the docstring).
                excused = tool == "pip" and uv and not uv_lines and not broken["uv"] and UV_PLATFORMS[platform] != os.uname().machine
                word = "differs (pip judges environment markers for this machine; uv, which judges them for the target, agrees with gpuenv)" if excused else "DIFFERS"
                print(f"pip_agreement: {platform}: {tool} {word}:")
                for line in lines:
                    print("  " + line)
                failures += 0 if excused else 1
        print("pip_agreement passed" if failures == 0 else f"pip_agreement FAIL: {failures} disagreement(s)")
        return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
