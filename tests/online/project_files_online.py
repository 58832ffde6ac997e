#!/usr/bin/env python3
"""Online check (ctest label `online`): a project's own dependency file, locked by gpuenv, pins what pip and uv choose.

Usage: project_files_online.py GPUENV ROOT BUILD_DIR [FORMAT...]

FORMAT is any of requirements, environment.yml, pyproject.toml, uv.lock, pylock.toml (default: all five).

The project is written by this script (PYPROJECT below): a pyproject.toml with ranges on pure-Python and binary
dependencies (numpy, pyyaml, requests[socks], attrs), a marker on platform_machine (markupsafe on x86_64, pycparser
on aarch64), one on the Python version (tomli below 3.12; numpy's newest release needs 3.12, so uv.lock forks it),
one for win32 (colorama: never on Linux), an extra `fast` (msgpack, ujson) and a dependency group `test` (pluggy,
iniconfig): 10 to 15 wheels. The real tools, installed with pip at pinned versions (TOOLS) into
BUILD_DIR/online-venv-project, make the other files from it, on the index `gpuenv sources` names (uv is pointed at
it with --default-index; pip-compile is pip and reads pip's configuration, as gpuenv does):

  - uv.lock: `uv lock` (universal). pylock.toml: `uv export --format pylock.toml --extra fast --group test` of it
    (uv bakes the selection in: the file defines no extras, so gpuenv is given none for it).
  - per target, requirements.txt with hashes: `pip-compile --generate-hashes --extra fast --no-strip-extras` of
    pyproject.toml plus the group's lines (pip-tools has no --group) where the target is this machine's platform and
    Python (pip-compile resolves for the interpreter that runs it and has no option for another platform), else
    `uv pip compile --generate-hashes --python-version X.Y --python-platform ARCH-manylinux_2_G --only-binary :all:
    --extra fast --group pyproject.toml:test pyproject.toml` (G: the target's glibc, at most the newest uv knows).
    Also, for every target, the universal `uv export --format requirements.txt` of uv.lock (markers and hashes).
  - per target, environment.yml: `python=X.Y`, `pip` and a `pip:` list holding that requirements file's lines.

Targets (TARGETS): linux/amd64 Python 3.11 (debian:12; no spec at all when this machine is x86_64: the default),
linux/arm64 Python 3.11 (debian:12) and linux/arm64 Python 3.13 (debian:13, from the Debian mirror `gpuenv
sources` names). For each format, target and selection, `gpuenv lock [SPEC] --from FILE [--extra fast --group test]
--json` (and once per target a spec with `packages.python_project: {file: uv.lock, extras, groups}`) is run, and
every wheel it pins for the target (name, version, sha256) is compared with the oracle's:

  - The wheel of each pin: pip, the pinned one (the script runs itself again with the tools' venv Python, since
    pip_agreement_online.pip_choice runs sys.executable's pip): `pip install --dry-run --ignore-installed --report
    --no-deps --only-binary=:all: --python-version X.Y --implementation cp --abi cpXY --platform TAG... -r PINS`
    (TAG: the full tag list gpuenv computes for the lock's glibc, pip_agreement_online.linux_platform_tags). PINS
    carry --hash for every file of each version, so pip is in hash-checking mode and takes, for each pin, the best
    wheel for the target's tags among the files the project lists: the choice gpuenv must make. PINS' markers are
    evaluated for the target by this script (pip's vendored `packaging`, the target's python_version,
    platform_machine, sys_platform linux), since pip judges markers for the interpreter that runs it, not for
    --platform/--python-version; --no-deps for the same reason (PINS is already a whole closure for the target,
    and pip would judge its dependencies' markers for this machine). pip's report must name exactly PINS.
  - PINS, which names and versions, per format:
    requirements, environment.yml: the requirements file itself (its pins are what gpuenv must keep).
    pyproject.toml (gpuenv resolves the ranges with its own resolver): uv's answer for the target, `uv pip compile`
    of pyproject.toml as above (with the extra and group, and without), run with uv even where pip-compile made the
    requirements file. uv is a full resolver that applies markers and Requires-Python for --python-version and
    --python-platform, and with ranges both take the newest versions that fit.
    uv.lock, pylock.toml: `uv export --format requirements.txt [--extra fast --group test] --no-emit-project` of the
    same uv.lock: every locked package the selection reaches, each with the marker under which uv's own graph walk
    needs it and the sha256 of every file of its locked version.

Also checked: the amd64 requirements file with the sha256 of the wheel gpuenv chose for pyyaml altered (wherever the
file lists it) makes `gpuenv lock` exit 3 with wheel.hash_not_listed, naming pyyaml (docs/spec.md, "A project file").

Prints a table per format (each file/selection and target: wheels compared, agreeing, differing; the format's total)
and every difference. Work files stay in BUILD_DIR/online-project-files.
Exit status: 0 every wheel agrees, 1 a difference or a failure (each printed), 2 bad usage, 77 a mirror cannot be
reached (skip).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pip_agreement_online as pa  # noqa: E402 - the sibling oracle's functions: pip_choice, compare, tags, run

SKIP = pa.SKIP
TOOLS = {"uv": "0.13.9", "pip-tools": "7.7.0", "pip": "26.3"}  # installed into BUILD_DIR/online-venv-project
FORMATS = ("requirements", "environment.yml", "pyproject.toml", "uv.lock", "pylock.toml")
EXTRAS, GROUPS = ["fast"], ["test"]

PYPROJECT = """\
[project]
name = "oracle-project"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = [
    "numpy>=1.26,<3",
    "pyyaml>=6.0,<7",
    "requests[socks]>=2.31,<3",
    "attrs>=23.1",
    "markupsafe>=2.1 ; platform_machine == 'x86_64'",
    "pycparser>=2.21 ; platform_machine == 'aarch64'",
    "tomli>=2.0 ; python_version < '3.12'",
    "colorama>=0.4.6 ; sys_platform == 'win32'",
]

[project.optional-dependencies]
fast = ["msgpack>=1.0,<2", "ujson>=5.8"]

[dependency-groups]
test = ["pluggy>=1.5", "iniconfig>=2.0"]
"""


@dataclass
class Target:
    key: str       # short name in the table
    platform: str  # linux/amd64 or linux/arm64
    python: str    # X.Y
    base: str      # debian:12, debian:13
    suite: str     # the Debian suite of BASE (a spec source for it when it is not the host's)

    @property
    def arch(self):
        return pa.UV_PLATFORMS[self.platform]


TARGETS = [
    Target("amd64-py3.11", "linux/amd64", "3.11", "debian:12", "bookworm"),
    Target("arm64-py3.11", "linux/arm64", "3.11", "debian:12", "bookworm"),
    Target("arm64-py3.13", "linux/arm64", "3.13", "debian:13", "trixie"),
]


class Failure(Exception):
    pass


def log_tail(path, n=25):
    return pa.tail(path, n) if Path(path).exists() else ""


def check(cmd, log, cwd=None, env=None, what=None):
    """Runs CMD (output into LOG); raises Failure with LOG's end when it fails."""
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run([str(c) for c in cmd], stdout=f, stderr=subprocess.STDOUT, cwd=cwd, env=env, timeout=1800).returncode
    if rc != 0:
        raise Failure(f"{what or Path(str(cmd[0])).name} exited {rc}:\n{log_tail(log)}")
    return time.monotonic() - t0


# --- tools -------------------------------------------------------------------------------------------------------

def tools_venv(build_dir):
    """BUILD_DIR/online-venv-project with TOOLS at their versions; returns its bin directory."""
    venv = Path(build_dir) / "online-venv-project"
    bin_ = venv / "bin"
    log = Path(build_dir) / "online-venv-project.log"
    want = {f"{k}=={v}" for k, v in TOOLS.items()}
    if (bin_ / "python").exists():
        have = subprocess.run([bin_ / "python", "-m", "pip", "freeze", "--all"], capture_output=True, text=True).stdout
        have = {canonical_line(l) for l in have.splitlines()}
        if {canonical_line(w) for w in want} <= have and (bin_ / "uv").exists() and (bin_ / "pip-compile").exists():
            return bin_
    else:
        check([sys.executable, "-m", "venv", venv], log, what="python3 -m venv")
    check([bin_ / "python", "-m", "pip", "install", "--quiet", *sorted(want)], log, what="pip install " + " ".join(sorted(want)))
    return bin_


def canonical_line(line):
    name, _, version = line.partition("==")
    return pa.canonical(name) + "==" + version.strip()


def uv_env(bin_):
    return dict(os.environ, UV_CACHE_DIR=str(bin_.parent / "uv-cache"), UV_NO_CONFIG="1")


def uv_index_args(indexes):
    args = ["--default-index", indexes[0]] if indexes else []
    for extra in indexes[1:]:
        args += ["--index", extra]
    return args


def uv_max_manylinux(bin_, arch):
    """The newest manylinux_2_N uv's --python-platform knows for ARCH (it has a fixed list)."""
    text = subprocess.run([bin_ / "uv", "pip", "compile", "--help"], capture_output=True, text=True).stdout
    found = [int(m) for m in re.findall(rf"{arch}-manylinux_2_(\d+)", text)]
    return max(found) if found else 17


# --- requirements text -------------------------------------------------------------------------------------------

def logical_lines(text):
    """A requirements file's logical lines: comments dropped, continuations joined, whitespace collapsed."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        if cur.strip():
            out.append(" ".join(cur.split()))
        cur = ""
    if cur.strip():
        out.append(" ".join(cur.split()))
    return out


def marker_env(target):
    return {"python_version": target.python, "python_full_version": target.python + ".0", "platform_machine": target.arch,
            "sys_platform": "linux", "os_name": "posix", "platform_system": "Linux", "implementation_name": "cpython",
            "implementation_version": target.python + ".0", "platform_python_implementation": "CPython"}


def for_target(text, target):
    """TEXT's requirement lines whose marker holds for TARGET, without the marker (pip would judge it for this
    machine); options (--hash and the rest) kept."""
    from pip._vendor.packaging.markers import Marker
    out = []
    for line in logical_lines(text):
        if line.startswith("-"):
            out.append(line)
            continue
        m = re.search(r"\s--", line)
        req, opts = (line[:m.start()], line[m.start():]) if m else (line, "")
        req, _, marker = req.partition(";")
        if marker.strip() and not Marker(marker.strip()).evaluate(marker_env(target)):
            continue
        out.append(req.strip() + opts)
    return "".join(line + "\n" for line in out)


def names_in(text):
    return {pa.canonical(re.split(r"[\s\[=<>!~;]", line, maxsplit=1)[0]) for line in logical_lines(text) if not line.startswith("-")}


# --- gpuenv ------------------------------------------------------------------------------------------------------

def gpuenv_run(gpuenv, args, log):
    """Runs gpuenv (waiting a little when the binary is being rebuilt); returns its exit status."""
    for _ in range(12):
        if os.access(gpuenv, os.X_OK):
            break
        time.sleep(10)
    with open(log, "w") as f:
        return subprocess.run([gpuenv, *args], stdout=f, stderr=subprocess.STDOUT, timeout=1800).returncode


def spec_for(target, out, debian_source, project=None):
    """TARGET's spec in OUT; with PROJECT (file name beside the spec, extras, groups) as packages.python_project."""
    spec = out / (f"spec-{target.key}.yaml" if not project else f"gpuenv-{target.key}.yaml")
    text = (f"schema: gpuenv-spec-v1\nname: oracle-{target.key.replace('.', '')}\nbase: {target.base}\n"
            f"python: \"{target.python}\"\nimage:\n  platforms: [{target.platform}]\n")
    if project:
        text += (f"packages:\n  python_project:\n    file: {project[0]}\n    extras: {json.dumps(project[1])}\n"
                 f"    groups: {json.dumps(project[2])}\n")
    if target.suite != debian_source["suite"]:
        text += (f"sources:\n  apt:\n    - uri: {debian_source['uri']}\n      suite: {target.suite}\n"
                 f"      components: [main]\n")
        if debian_source.get("signed_by"):
            text += f"      signed_by: {debian_source['signed_by'][0]}\n"
    spec.write_text(text)
    return spec


def gpuenv_lock(gpuenv, target, spec, project_file, selection, out, tag):
    """`gpuenv lock [SPEC] [--from FILE ...] --json` for TARGET: (pinned wheels name -> (version, sha256, file), glibc)."""
    args = ["lock"] + ([str(spec)] if spec else [])
    if project_file:
        args += ["--from", str(project_file)]
        for e in selection.get("extras", []):
            args += ["--extra", e]
        for g in selection.get("groups", []):
            args += ["--group", g]
    log = out / f"gpuenv-{tag}.json"
    rc = gpuenv_run(gpuenv, args + ["-o", str(out / f"gpuenv-{tag}.lock"), "--json"], log)
    if rc != 0:
        raise Failure(f"gpuenv {' '.join(args)} exited {rc}:\n{log_tail(log)}")
    lock = json.loads(log.read_text())
    python = lock["python"] if isinstance(lock["python"], str) else lock["python"]["version"]
    mine = [p for p in lock["packages"] if p.get("platform", "linux/amd64") == target.platform]
    if ".".join(str(python).split(".")[:2]) != target.python or not mine:
        platforms = sorted({p.get("platform", "linux/amd64") for p in lock["packages"]})
        raise Failure(f"gpuenv {' '.join(args)} locked Python {python} for {platforms}, not {target.python} for {target.platform}")
    libc = [p["version"] for p in mine if p["name"] == "libc6"]
    if not libc or not re.match(r"\d+\.\d+", libc[0]):
        raise Failure(f"gpuenv {' '.join(args)}: the lock has no libc6 for {target.platform}")
    glibc = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", libc[0]).groups())
    pinned = {pa.canonical(p["name"]): (pa.normal_version(p["version"]), p["sha256"], p["url"].rsplit("/", 1)[-1])
              for p in mine if p["kind"] == "wheel"}
    return pinned, glibc


# --- the project's files ----------------------------------------------------------------------------------------

def make_project(bin_, out, indexes):
    proj = out / "project"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(PYPROJECT)
    env = uv_env(bin_)
    check([bin_ / "uv", "lock", "--no-config", *uv_index_args(indexes)], out / "uv-lock.log", cwd=proj, env=env, what="uv lock")
    sel = [a for e in EXTRAS for a in ("--extra", e)] + [a for g in GROUPS for a in ("--group", g)]
    for name, args in (("uv-export", sel), ("uv-export-plain", [])):
        (out / name).mkdir()
        check([bin_ / "uv", "export", "--no-config", "--frozen", "--format", "requirements.txt", *args, "--no-emit-project",
               "-o", out / name / "requirements.txt"], out / f"{name}.log", cwd=proj, env=env, what="uv export --format requirements.txt")
    check([bin_ / "uv", "export", "--no-config", "--frozen", "--format", "pylock.toml", *sel, "-o", proj / "pylock.toml"],
          out / "uv-export-pylock.log", cwd=proj, env=env, what="uv export --format pylock.toml")
    return proj


def uv_compile(bin_, proj, target, glibc, indexes, dest, log, selected=True):
    arch_max = uv_max_manylinux(bin_, target.arch)
    platform = f"{target.arch}-manylinux_{glibc[0]}_{min(glibc[1], arch_max) if glibc[0] == 2 else glibc[1]}"
    sel = [a for e in EXTRAS for a in ("--extra", e)] + [a for g in GROUPS for a in ("--group", f"pyproject.toml:{g}")]
    sel = sel if selected else []
    dest.parent.mkdir(parents=True)
    check([bin_ / "uv", "pip", "compile", "--no-config", "--quiet", "--generate-hashes", "--python-version", target.python,
           "--python-platform", platform, "--only-binary", ":all:", *uv_index_args(indexes), *sel, "pyproject.toml", "-o", dest],
          log, cwd=proj, env=uv_env(bin_), what=f"uv pip compile --python-platform {platform}")


def pip_compile(bin_, proj, dest, log):
    """pip-tools for this machine's interpreter: pyproject.toml with the extra, and the groups' lines (pip-compile
    has no --group) from a .in file beside it."""
    groups = tomllib.loads(PYPROJECT)["dependency-groups"]
    (proj / "groups.in").write_text("".join(r + "\n" for g in GROUPS for r in groups[g]))
    sel = [f"--extra={e}" for e in EXTRAS]
    check([bin_ / "pip-compile", "--quiet", "--generate-hashes", "--no-strip-extras", "--no-emit-find-links", *sel,
           "-o", dest, "pyproject.toml", "groups.in"], log, cwd=proj, what="pip-compile")


def environment_yml(requirements, target, dest):
    lines = [line for line in logical_lines(requirements.read_text())]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("name: oracle-project\nchannels: [conda-forge]\ndependencies:\n"
                    f"  - python={target.python}\n  - pip\n  - pip:\n" + "".join(f"      - {json.dumps(l)}\n" for l in lines))


# --- main --------------------------------------------------------------------------------------------------------

def main(argv):
    if len(argv) < 4 or any(f not in FORMATS for f in argv[4:]):
        print(__doc__.splitlines()[2])
        return 2
    gpuenv, root, build_dir = (str(Path(a).resolve()) for a in argv[1:4])
    formats = argv[4:] or list(FORMATS)
    reach = subprocess.run([f"{root}/tests/online/reachable.sh", gpuenv], capture_output=True, text=True)
    if reach.returncode != 0:
        print("project_files: " + (reach.stdout + reach.stderr).strip())
        return SKIP if reach.returncode == SKIP else 1
    try:
        bin_ = tools_venv(build_dir)
    except Failure as e:
        print(f"project_files FAIL: {e}")
        return 1
    if Path(sys.prefix).resolve() != bin_.parent.resolve():
        # The oracle's pip is the pinned one (pip_choice runs sys.executable's pip; pip 23.2 refuses a wheel whose
        # Requires-Python excludes the running interpreter even with --python-version in hash-checking mode).
        os.execv(bin_ / "python", [str(bin_ / "python"), str(Path(__file__).resolve()), *argv[1:]])
    out = Path(build_dir) / "online-project-files"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sources = json.loads(subprocess.run([gpuenv, "sources", "--json"], capture_output=True, text=True, check=True).stdout)
    indexes = [u["url"] for u in [sources["pip"]["index_url"]] + sources["pip"].get("extra_index_urls", []) if u.get("url")]
    debian = next((s for s in sources["apt"]["sources"] if s["used"] and s["type"] == "deb" and not s["flat"]), None)
    if debian is None:
        print("project_files FAIL: gpuenv sources names no Debian repository to take the targets' bases from")
        return 1
    try:
        proj = make_project(bin_, out, indexes)
    except Failure as e:
        print(f"project_files FAIL: {e}")
        return 1
    versions = {t: subprocess.run(c, capture_output=True, text=True).stdout.strip().splitlines()[0] for t, c in (
        ("uv", [bin_ / "uv", "--version"]), ("pip-tools", [bin_ / "pip-compile", "--version"]),
        ("pip (oracle)", [sys.executable, "-m", "pip", "--version"]), ("gpuenv", [gpuenv, "--version"]))}
    print("project_files: tools: " + "; ".join(f"{k}: {v}" for k, v in versions.items()))
    print(f"project_files: index {', '.join(indexes) or '(pip default)'}; work directory {out}")
    host = (os.uname().machine, f"{sys.version_info.major}.{sys.version_info.minor}")

    rows, problems = [], []
    oracle_cache = {}
    hash_check_source = None
    for target in TARGETS:
        tdir = out / target.key
        tdir.mkdir()
        spec = spec_for(target, tdir, debian)
        try:
            _, glibc = gpuenv_lock(gpuenv, target, spec, None, {}, tdir, "probe")
            tags = pa.linux_platform_tags(target.arch, *glibc)
            # The requirements file for this target, and uv's answer for the pyproject (the same run where uv makes both).
            uv_answer = tdir / "uv-compile" / "requirements.txt"
            uv_compile(bin_, proj, target, glibc, indexes, uv_answer, tdir / "uv-compile.log")
            uv_answer_plain = tdir / "uv-compile-plain" / "requirements.txt"
            uv_compile(bin_, proj, target, glibc, indexes, uv_answer_plain, tdir / "uv-compile-plain.log", selected=False)
            requirements = tdir / "requirements" / "requirements.txt"
            requirements.parent.mkdir()
            if host == (target.arch, target.python):
                pip_compile(bin_, proj, requirements, tdir / "pip-compile.log")
                made_by = "pip-compile"
            else:
                shutil.copy(uv_answer, requirements)
                made_by = "uv pip compile"
            environment_yml(requirements, target, tdir / "conda" / "environment.yml")
        except Failure as e:
            problems.append(f"{target.key}: the project's files could not be made: {e}")
            continue
        print(f"project_files: {target.key} ({target.platform}, Python {target.python}, {target.base}, glibc "
              f"{glibc[0]}.{glibc[1]}): requirements.txt by {made_by}")
        plain = host[0] == "x86_64" and target.key == "amd64-py3.11"  # the default: no spec at all
        both = {"extras": EXTRAS, "groups": GROUPS}
        selected = " ".join(f"+{x}" for x in EXTRAS + GROUPS)
        project_spec = spec_for(target, proj, debian, ("uv.lock", EXTRAS, GROUPS))
        cases = [  # format, what is locked, the file (None: the spec names it), its selection, the oracle's pins
            ("requirements", made_by, requirements, {}, requirements),
            ("requirements", "uv export (markers)", out / "uv-export" / "requirements.txt", {}, out / "uv-export" / "requirements.txt"),
            ("environment.yml", made_by, tdir / "conda" / "environment.yml", {}, requirements),
            ("pyproject.toml", selected, proj / "pyproject.toml", both, uv_answer),
            ("pyproject.toml", "no extra/group", proj / "pyproject.toml", {}, uv_answer_plain),
            ("uv.lock", selected, proj / "uv.lock", both, out / "uv-export" / "requirements.txt"),
            ("uv.lock", "no extra/group", proj / "uv.lock", {}, out / "uv-export-plain" / "requirements.txt"),
            ("uv.lock", "spec python_project", None, {}, out / "uv-export" / "requirements.txt"),
            ("pylock.toml", f"exported {selected}", proj / "pylock.toml", {}, out / "uv-export" / "requirements.txt"),
        ]
        for n, (fmt, what, project_file, selection, oracle_file) in enumerate(cases):
            if fmt not in formats:
                continue
            tag = f"{n}-{fmt.replace('.', '-')}"
            try:
                this_spec = project_spec if project_file is None else None if plain else spec
                pinned, lock_glibc = gpuenv_lock(gpuenv, target, this_spec, project_file, selection, tdir, tag)
                if lock_glibc != glibc:
                    raise Failure(f"the lock's glibc {lock_glibc} is not the probe's {glibc}")
                key = (str(oracle_file), target.key)
                if key not in oracle_cache:
                    odir = tdir / f"pip-{Path(oracle_file).parent.name}"
                    odir.mkdir(exist_ok=True)
                    flat = odir / "for-target.txt"
                    flat.write_text(for_target(Path(oracle_file).read_text(), target))
                    chosen, problem, _ = pa.pip_choice(odir, target.platform, ["--no-deps", "-r", str(flat)], target.python, tags)
                    if problem:
                        raise Failure(f"the oracle: {problem}")
                    want = names_in(flat.read_text())
                    if set(chosen) != want:
                        raise Failure(f"the oracle: pip's report names {sorted(chosen)}, the pins are {sorted(want)}")
                    oracle_cache[key] = chosen
                chosen = oracle_cache[key]
            except Failure as e:
                rows.append((fmt, what, target.key, 0, 0, 0, "FAILED"))
                problems.append(f"{fmt} ({what}) {target.key}: {e}")
                continue
            lines = pa.compare("pip", pinned, chosen)
            compared = len(set(pinned) | set(chosen))
            rows.append((fmt, what, target.key, compared, compared - len(lines), len(lines), ""))
            problems += [f"{fmt} ({what}) {target.key}: {line}" for line in lines]
            if n == 0 and target.key == "amd64-py3.11":
                hash_check_source = (requirements, pinned, spec, plain, target)

    # One altered hash: the sha256 of the wheel gpuenv chose for pyyaml, replaced wherever the file lists it.
    hash_row = "not run (needs the amd64 requirements lock: format requirements)"
    if hash_check_source:
        requirements, pinned, spec, plain, target = hash_check_source
        victim = next((n for n in ("pyyaml", "numpy") if n in pinned), None)
        sha = pinned[victim][1] if victim else None
        text = requirements.read_text()
        if not sha or sha not in text:
            hash_row = f"FAILED: the sha256 gpuenv chose for {victim} is not in {requirements}"
            problems.append("hash check: " + hash_row)
        else:
            bad = requirements.parent.parent / "altered" / "requirements.txt"
            bad.parent.mkdir()
            bad.write_text(text.replace(sha, sha[:-1] + ("0" if sha[-1] != "0" else "1")))
            log = bad.parent / "gpuenv.log"
            rc = gpuenv_run(gpuenv, ["lock"] + ([] if plain else [str(spec)]) + ["--from", str(bad), "-o", str(bad.parent / "x.lock")], log)
            said = log.read_text(errors="replace")
            if rc == 3 and re.search(rf"\b{victim}\b", said, re.I) and "wheel.hash_not_listed" in said:
                hash_row = f"ok: exit 3 naming {victim}: {said.strip().splitlines()[0][:160]}"
            else:
                hash_row = f"FAILED: exit {rc} (want 3, wheel.hash_not_listed, naming {victim}):\n{log_tail(log)}"
                problems.append("hash check: " + hash_row)

    print("\nproject_files: gpuenv's wheels against the oracle (name, version, sha256)")
    print(f"  {'format':<16}{'file / selection':<22}{'target':<14}{'compared':>9}{'agree':>7}{'differ':>8}")
    for fmt in formats:
        mine = [r for r in rows if r[0] == fmt]
        for r in mine:
            print(f"  {r[0]:<16}{r[1]:<22}{r[2]:<14}{r[3]:>9}{r[4]:>7}{r[5]:>8}  {r[6]}")
        total = [sum(r[i] for r in mine) for i in (3, 4, 5)]
        failed = sum(1 for r in mine if r[6])
        pct = f"{100 * total[1] / total[0]:.0f}%" if total[0] else "-"
        print(f"  {fmt:<16}{'ALL':<22}{'':<14}{total[0]:>9}{total[1]:>7}{total[2]:>8}  {pct}{f', {failed} run(s) failed' if failed else ''}")
    print(f"  altered hash: {hash_row}")
    for p in problems:
        print("project_files: " + p)
    print("project_files passed" if not problems else f"project_files FAIL: {len(problems)} problem(s)")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
