#!/usr/bin/env python3
"""recipes/ci/: the GitLab CI and GitHub Actions examples parse as YAML, build on a CPU runner and validate on a GPU
runner after the build, attach the JUnit report, mark only through validate --mark; and every gpuenv flag they use is
one the command has (checked against `gpuenv <command> --help` of the binary under test).
Usage: ci_recipes.py GPUENV SOURCE_DIR
"""
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testlib  # noqa: E402

GPUENV, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
failures = []
helps = {}


def flags_exist(command_text, where):
    for line in command_text.replace("\\\n", " ").splitlines():
        m = re.search(r"\bgpuenv ([a-z]+)\b(.*)", line)
        if not m:
            continue
        sub = m.group(1)
        if sub not in helps:
            helps[sub] = subprocess.run([GPUENV, sub, "--help"], capture_output=True, text=True, timeout=30).stdout
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", m.group(2)):
            if flag not in helps[sub]:
                failures.append(f"{where}: gpuenv {sub} has no {flag}")


gitlab = yaml.safe_load(open(os.path.join(SOURCE, "recipes/ci/gitlab-ci.yml")))
build, validate = gitlab.get("build", {}), gitlab.get("validate", {})
if "gpu" in build.get("tags", []) or "gpu" not in validate.get("tags", []) or validate.get("needs") != ["build"]:
    failures.append("gitlab: build must run on a CPU runner and validate on a gpu runner after it")
if validate.get("artifacts", {}).get("reports", {}).get("junit") != "gpuenv-junit.xml":
    failures.append("gitlab: the JUnit report is not attached")
for job in ("build", "validate"):
    flags_exist("\n".join(gitlab[job]["script"]), f"gitlab {job}")

github = yaml.safe_load(open(os.path.join(SOURCE, "recipes/ci/github-actions.yml")))
jobs = github.get("jobs", {})
if jobs.get("build", {}).get("runs-on") != "ubuntu-latest" or "gpu" not in jobs.get("validate", {}).get("runs-on", []) or jobs.get("validate", {}).get("needs") != "build":
    failures.append("github: build must run on a hosted runner and validate on a gpu runner after it")
steps = jobs.get("validate", {}).get("steps", [])
if not any(s.get("with", {}).get("path") == "gpuenv-junit.xml" for s in steps):
    failures.append("github: the JUnit report is not uploaded")
for job in ("build", "validate"):
    flags_exist("\n".join(s.get("run", "") for s in jobs[job]["steps"]), f"github {job}")
for name, text in (("gitlab", open(os.path.join(SOURCE, "recipes/ci/gitlab-ci.yml")).read()), ("github", open(os.path.join(SOURCE, "recipes/ci/github-actions.yml")).read())):
    if "gpuenv mark " in text or "--mark" not in text or "--junit" not in text:
        failures.append(f"{name}: mark through validate --mark (only a passing validation marks), with --junit")
    # Issue 32: the GPU runner needs gpuenv alone; it validates the pushed image by its registry reference.
    if "skopeo" in text or 'validate --image "docker://$IMAGE"' not in text:
        failures.append(f"{name}: the GPU runner must validate --image docker://$IMAGE with gpuenv alone (no skopeo)")

testlib.finish(failures, "recipes/ci: both pipelines parse, split CPU and GPU runners, attach JUnit, and use only flags gpuenv has")
