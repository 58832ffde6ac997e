#!/usr/bin/env python3
"""recipes/kubernetes/: the manifests against Kubernetes' own schemas (the PyPI package kubernetes-validate, strict:
no unknown field), and what they promise:
- the DaemonSet requests no nvidia.com/gpu, tolerates every taint gpuenv status sets, mounts the feature file's
  directory where its command writes it, and runs only gpuenv flags that exist;
- the RBAC grants exactly get and patch on nodes;
- the agent's shell loop, run once as written in the manifest, with the real gpuenv on status files the pre-flight
  wrote from recordings and a recording kubectl on PATH (a double of the real one, which needs a cluster): it writes
  the feature file and applies exactly the taints gpuenv status calls for;
- the init container verifies the workload container's own image by digest, from the node's status file;
- a manifest with a misspelt field fails validation, which shows the check can fail.
Usage: kubernetes_check.py GPUENV SOURCE_DIR VENV (skips, 77, without kubernetes-validate in VENV)
"""
import os
import shutil
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testlib  # noqa: E402

GPUENV, SOURCE, VENV = (os.path.abspath(a) for a in sys.argv[1:4])
validator = os.path.join(VENV, "bin", "kubernetes-validate")
if not os.access(validator, os.X_OK):
    print(f"SKIP: no kubernetes-validate in {VENV} (scripts/test.sh installs it there)")
    sys.exit(77)
K8S_VERSIONS = ("1.30.0", "1.37.0")  # an old release clouds still run, and the newest the package carries schemas for

work = testlib.scratch("gpuenv-k8s-")
env = testlib.gpuenv_env(work)
failures = []
recipes = os.path.join(SOURCE, "recipes/kubernetes")
daemonset_file = os.path.join(recipes, "gpuenv-daemonset.yaml")
init_file = os.path.join(recipes, "gpuenv-verify-init.yaml")


def validate(path, version=K8S_VERSIONS[-1]):
    return subprocess.run([validator, "--strict", "--no-warn", "-k", version, path], capture_output=True, text=True, timeout=120)


for path in (daemonset_file, init_file):
    for version in K8S_VERSIONS:
        p = validate(path, version)
        if p.returncode != 0:
            failures.append(f"{os.path.basename(path)} does not validate against Kubernetes {version}: {p.stdout[-800:]} {p.stderr[-400:]}")

broken = os.path.join(work, "broken.yaml")
with open(daemonset_file) as f:
    text = f.read()
with open(broken, "w") as f:
    f.write(text.replace("tolerations:", "toleration:", 1))
if validate(broken).returncode == 0:
    failures.append("a DaemonSet with a misspelt field (toleration) validated: the check cannot fail")

docs = {d["kind"]: d for d in yaml.safe_load_all(text)}
ds = docs["DaemonSet"]["spec"]["template"]["spec"]
role = docs["ClusterRole"]
if role["rules"] != [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]:
    failures.append(f"ClusterRole grants more or less than get and patch on nodes: {role['rules']}")
binding = docs["ClusterRoleBinding"]
if binding["roleRef"]["name"] != role["metadata"]["name"] or binding["subjects"][0]["name"] != ds["serviceAccountName"]:
    failures.append("the ClusterRoleBinding does not bind the agent's service account to its role")
for c in ds["initContainers"] + ds["containers"]:
    if "nvidia.com/gpu" in str(c.get("resources", {})):
        failures.append(f"container {c['name']} requests nvidia.com/gpu")
tolerated = {t["key"] for t in ds["tolerations"] if t.get("effect") == "NoSchedule"}


def gpuenv(*args):
    return subprocess.run([GPUENV, *args], capture_output=True, text=True, env=env, timeout=120)


def preflight(replay, rc):
    return testlib.preflight(GPUENV, env, SOURCE, work, replay, rc, failures)


healthy = preflight("h200x1.yaml", 0)
faulty = preflight("faults/ecc_uncorrectable.yaml", 1)
for status in (healthy, faulty):
    for arg in gpuenv("status", "--status-file", status, "--taints").stdout.split():
        if arg.split("=")[0].split(":")[0] not in tolerated:
            failures.append(f"the agent does not tolerate the taint gpuenv status sets: {arg}")

# The agent's loop, once, as the manifest holds it: its paths are the container's, so they are mapped into WORK.
status_container = next(c for c in ds["containers"] if c["name"] == "status")
script = status_container["args"][0]
mounts = {m["mountPath"] for m in status_container["volumeMounts"]}
if "/etc/kubernetes/node-feature-discovery/features.d" not in mounts or "/run/gpuenv" not in mounts:
    failures.append(f"the status container does not mount the status and feature directories: {mounts}")
bin_dir = os.path.join(work, "bin")
os.makedirs(bin_dir)
kubectl_log = os.path.join(work, "kubectl.log")
with open(os.path.join(bin_dir, "kubectl"), "w") as f:
    f.write(f'#!/bin/sh\necho "$@" >> {kubectl_log}\n')
with open(os.path.join(bin_dir, "gpuenv"), "w") as f:
    f.write(f'#!/bin/sh\nexec {GPUENV} "$@"\n')
for name in ("kubectl", "gpuenv"):
    os.chmod(os.path.join(bin_dir, name), 0o755)
features_dir = os.path.join(work, "features.d")
os.makedirs(features_dir)
run_dir = os.path.join(work, "run")
os.makedirs(run_dir)
mapped = script.replace("/etc/kubernetes/node-feature-discovery/features.d", features_dir).replace("/run/gpuenv", run_dir)
container_env = {e["name"]: e["value"] for e in status_container["env"] if "value" in e}
for label, status, want_state, want_taints in (
        ("healthy", healthy, "healthy", ["startup-taint.cluster-autoscaler.kubernetes.io/gpuenv:NoSchedule-", "gpuenv.dev/unhealthy:NoSchedule-"]),
        ("failed", faulty, "failed", ["startup-taint.cluster-autoscaler.kubernetes.io/gpuenv:NoSchedule-", "gpuenv.dev/unhealthy=ecc_errors:NoSchedule"]),
        ("missing", None, "missing", [])):
    if os.path.exists(os.path.join(run_dir, "status.json")):
        os.unlink(os.path.join(run_dir, "status.json"))
    if status:
        shutil.copyfile(status, os.path.join(run_dir, "status.json"))
    if os.path.exists(kubectl_log):
        os.unlink(kubectl_log)
    run_env = dict(env, **container_env, PATH=bin_dir + ":" + os.environ["PATH"], NODE_NAME="gpu-node-7", GPUENV_ONCE="1")
    p = subprocess.run(["/bin/sh", "-c", mapped], capture_output=True, text=True, env=run_env, timeout=60)
    calls = open(kubectl_log).read().splitlines() if os.path.exists(kubectl_log) else []
    want_calls = [f"taint node gpu-node-7 {t} --overwrite" for t in want_taints]
    if p.returncode != 0 or calls != want_calls:
        failures.append(f"agent loop, {label}: exit {p.returncode}, kubectl calls {calls}, expected {want_calls}: {p.stderr[-300:]}")
    try:
        features = open(os.path.join(features_dir, "gpuenv")).read()
    except OSError as e:
        features = str(e)
    if f"gpuenv.dev/status={want_state}\n" not in features or "# +expiry-time=" not in features:
        failures.append(f"agent loop, {label}: the feature file says {features!r}")

# Every gpuenv flag the manifests use exists.
for sub, flags in (("status", ["--status-file", "--max-age", "--node-features", "--feature-ttl", "--taints"]),
                   ("preflight", ["--status-file", "--metrics"]),
                   ("verify", ["--key", "--host-status", "--level", "--max-age"])):
    helptext = gpuenv(sub, "--help").stdout
    for flag in flags:
        if flag not in helptext:
            failures.append(f"gpuenv {sub} has no {flag}, which the manifests use")
preflight_cmd = ds["initContainers"][0]["command"]
if preflight_cmd[:2] != ["gpuenv", "preflight"]:
    failures.append(f"the init container does not run the pre-flight: {preflight_cmd}")

pod = yaml.safe_load(open(init_file))["spec"]
verify_cmd = pod["initContainers"][0]["command"]
workload_image = pod["containers"][0]["image"]
if verify_cmd[:2] != ["gpuenv", "verify"] or verify_cmd[-1] != "docker://" + workload_image or "@sha256:" not in workload_image:
    failures.append(f"the init container does not verify the workload's image by digest: {verify_cmd} vs {workload_image}")
if "nvidia.com/gpu" in str(pod["initContainers"][0].get("resources", {})):
    failures.append("the verify init container requests a GPU")

testlib.finish(failures, f"PASSED: the manifests validate against Kubernetes {' and '.join(K8S_VERSIONS)} (strict) and the agent applies what gpuenv status decides")
