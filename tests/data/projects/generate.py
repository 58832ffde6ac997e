#!/usr/bin/env python3
"""Regenerates the uv-written files of tests/data/projects and expected.txt, what uv itself says each selection
installs in each environment (project_toml_test.cpp checks gpuenv against it).

Needs uv (pip install uv), Python 3.10, 3.11 and 3.12 interpreters for the pylock checks (--python310 etc.), and
an index: uv's own settings (UV_INDEX_URL, uv.toml). URLs in the files written here have their host replaced by the
placeholder http://127.0.0.1:1/ (nothing in the tests reaches it); pep751/pylock.toml, written by hand, is turned
back into real URLs with --index-url and --files-url only for uv's check.

  generate.py --uv UV --python310 P --python311 P --python312 P --index-url URL --files-url URL
"""
import argparse
import os
import re
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PLACEHOLDER = "http://127.0.0.1:1/"
ENVS = [("3.9", "x86_64"), ("3.10", "aarch64"), ("3.11", "x86_64"), ("3.12", "aarch64")]
DEMO_SELECTIONS = [([], []), (["all"], ["dev"]), (["cli"], ["lint"])]


def run(args, cwd=None, stdin=None):
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never")
    done = subprocess.run(args, cwd=cwd, input=stdin, env=env, check=True, capture_output=True, text=True)
    return done.stdout + done.stderr  # uv pip install --dry-run reports on stderr


def placeholder(text):
    return re.sub(r'https?://[^/" ]+/', PLACEHOLDER, text)


def flags(extras, groups):
    return [a for e in extras for a in ("--extra", e)] + [a for g in groups for a in ("--group", g)]


def pins(text):
    """name==version lines (uv pip compile) or " + name==version" (uv pip install --dry-run); the project itself,
    installed from its directory, is left out as gpuenv leaves it out."""
    found = [l.strip().lstrip("+ ").strip() for l in text.splitlines() if re.match(r"^ ?\+? ?[a-z0-9][^ ]*==", l)]
    return sorted(f for f in found if "(from file:" not in f)


def line(file, extras, groups, python, machine, found):
    return " | ".join([file, ",".join(extras) or "-", ",".join(groups) or "-", python, machine, " ".join(found)])


def lock_project(a, work, name):
    os.makedirs(os.path.join(work, name))
    shutil.copy(os.path.join(HERE, name, "pyproject.toml"), os.path.join(work, name))
    run([a.uv, "lock", "-q"], cwd=os.path.join(work, name))
    with open(os.path.join(work, name, "uv.lock")) as f, open(os.path.join(HERE, name, "uv.lock"), "w") as out:
        out.write(placeholder(f.read()))


def uv_lock_expectations(a, work, name, selections, envs):
    out = []
    for extras, groups in selections:
        exported = run([a.uv, "export", "--frozen", "--format", "requirements-txt", "--no-hashes", "--no-annotate",
                        "--no-header", "--no-default-groups", "--no-emit-project"] + flags(extras, groups),
                       cwd=os.path.join(work, name))
        for python, machine in envs:
            compiled = run([a.uv, "pip", "compile", "--no-deps", "--no-header", "--no-annotate", "--python-version",
                            python, "--python-platform", machine + "-unknown-linux-gnu", "-"], stdin=exported)
            out.append(line(name + "/uv.lock", extras, groups, python, machine, pins(compiled)))
            direct = run([a.uv, "pip", "compile", "--no-deps", "--no-header", "--no-annotate", "--python-version",
                          python, "--python-platform", machine + "-unknown-linux-gnu", "pyproject.toml"]
                         + flags(extras, groups), cwd=os.path.join(work, name))
            out.append(line(name + "/pyproject.toml", extras, groups, python, machine, pins(direct)))
    return out


def pylock_expectations(a, path, label, selections, pythons):
    out = []
    for extras, groups in selections:
        for python, machine in [(p, m) for p in pythons for m in ("x86_64", "aarch64")]:
            installed = run([a.uv, "pip", "install", "--dry-run", "--python", pythons[python], "-r", path,
                             "--python-platform", machine + "-unknown-linux-gnu"] + flags(extras, groups))
            out.append(line(label, extras, groups, python, machine, pins(installed)))
    return out


def main():
    p = argparse.ArgumentParser()
    for opt in ("--uv", "--python310", "--python311", "--python312", "--index-url", "--files-url"):
        p.add_argument(opt, required=True)
    a = p.parse_args()
    pythons = {"3.10": a.python310, "3.11": a.python311, "3.12": a.python312}
    expected = []
    with tempfile.TemporaryDirectory() as work:
        for name in ("demo", "conflicting"):
            lock_project(a, work, name)
        demo = os.path.join(work, "demo")
        run([a.uv, "export", "--frozen", "--format", "pylock.toml", "--no-default-groups", "--no-header", "-o",
             "pylock.toml"], cwd=demo)
        run([a.uv, "pip", "compile", "pyproject.toml", "--universal", "--python-version", "3.9", "--extra", "cli",
             "--format", "pylock.toml", "--no-header", "-o", "pylock.compile.toml"], cwd=demo)
        for f in ("pylock.toml", "pylock.compile.toml"):
            with open(os.path.join(demo, f)) as src, open(os.path.join(HERE, "demo", f), "w") as out:
                out.write(placeholder(src.read()))
        expected += uv_lock_expectations(a, work, "demo", DEMO_SELECTIONS, ENVS)
        expected += uv_lock_expectations(a, work, "conflicting", [([], []), (["old"], []), (["new"], [])],
                                         [("3.11", "x86_64")])
        expected = [l for l in expected if not l.startswith("conflicting/pyproject.toml")]
        for f in ("pylock.toml", "pylock.compile.toml"):
            expected += pylock_expectations(a, os.path.join(demo, f), "demo/" + f, [([], [])], pythons)
        pep751 = os.path.join(work, "pylock.pep751.toml")
        with open(os.path.join(HERE, "pep751", "pylock.toml")) as src, open(pep751, "w") as out:
            out.write(src.read().replace(PLACEHOLDER + "simple", a.index_url).replace(PLACEHOLDER, a.files_url))
        expected += pylock_expectations(a, pep751, "pep751/pylock.toml", [([], []), (["cli"], []), ([], ["lint"]), (["cli"], ["dev", "lint"])],
                                        pythons)
    with open(os.path.join(HERE, "expected.txt"), "w") as out:
        out.write("# file | extras | groups | python | machine | what uv installs (generate.py)\n")
        out.write("\n".join(expected) + "\n")


if __name__ == "__main__":
    main()
