#!/usr/bin/env python3
"""Prometheus metrics of `gpuenv validate --metrics` and `gpuenv preflight --metrics` (docs/fleet.md), and the Grafana
dashboard that shows them (recipes/monitoring/), checked by
Prometheus's own `promtool check metrics` (format and naming lint) and against the report they come from: every
figure in base units (GB/s x 1e9 as bytes per second, TFLOPS x 1e12), check outcomes as a state set, the run's time
and exit code. Exits 77 (ctest's skip) without promtool.
Usage: metrics_check.py GPUENV SOURCE_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import testlib  # noqa: E402

GPUENV, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
if not shutil.which("promtool"):
    print("SKIP: promtool (Debian's prometheus package) is not installed")
    sys.exit(77)
work = testlib.scratch("gpuenv-metrics-")
env = testlib.gpuenv_env(work)
failures = []
SAMPLE = re.compile(r'^([a-z_][a-z0-9_]*)(\{[^}]*\})? (\S+)$')


def samples(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            failures.append(f"not a sample line: {line!r}")
            continue
        out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def promtool(path, case):
    p = subprocess.run(["promtool", "check", "metrics"], stdin=open(path), capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        failures.append(f"{case}: promtool check metrics exit {p.returncode}: {p.stdout[:300]} {p.stderr[:300]}")


# validate at long on the recorded 8x H100: every kind of figure.
prom, report = os.path.join(work, "node.prom"), os.path.join(work, "report.json")
p = subprocess.run([GPUENV, "validate", "--backend", "replay:" + os.path.join(SOURCE, "tests/data/validate/h100x8.yaml"), "--level", "long",
                    "--metrics", prom, "--json"], capture_output=True, text=True, env=env, timeout=300)
open(report, "w").write(p.stdout)
promtool(prom, "validate --level long, 8x H100")
s = samples(open(prom).read())
doc = json.loads(p.stdout)
if not [f for f in os.listdir(work) if f.endswith(".prom")] == ["node.prom"] or any(".tmp" in f for f in os.listdir(work)):
    failures.append(f"left behind: {os.listdir(work)}")
for check in doc["checks"]:
    for r in check["results"]:
        gpu = "host" if r["gpu"] is None else str(r["gpu"])
        if s.get(("gpuenv_check_status", f'{{check="{check["key"]}",gpu="{gpu}",status="{r["status"]}"}}')) != 1:
            failures.append(f"no state-set sample for {check['key']} GPU {gpu} {r['status']}")
        for m in r["metrics"]:
            if check["key"] == "hbm_bandwidth" and m["name"] == "median_gbs":
                got = s.get(("gpuenv_hbm_bandwidth_median_bytes_per_second", f'{{gpu="{gpu}"}}'))
                if got is None or abs(got - m["value"] * 1e9) > 1e-6 * got:
                    failures.append(f"hbm median of GPU {gpu}: {got} for {m['value']} GB/s")
            if check["key"] == "gemm_tflops" and m["name"] == "bf16.median_tflops":
                got = s.get(("gpuenv_gemm_tflops_median_flops_per_second", f'{{gpu="{gpu}",dtype="bf16"}}'))
                if got is None or abs(got - m["value"] * 1e12) > 1e-6 * got:
                    failures.append(f"bf16 median of GPU {gpu}: {got} for {m['value']} TFLOPS")
run = '{level="long",backend="replay"}'
if s.get(("gpuenv_validation_exit_code", run)) != doc["exit_code"] or not s.get(("gpuenv_validation_timestamp_seconds", run), 0) > 1.7e9:
    failures.append("the run's exit code or timestamp")
for name in ["gpuenv_temperature_temperature_celsius", "gpuenv_p2p_bandwidth_median_bytes_per_second", "gpuenv_context_create_open_seconds"]:
    if not any(k[0] == name for k in s):
        failures.append(f"no {name}")
if any(k[0].endswith("_total") for k in s):
    failures.append("a gauge named _total")

# preflight on a failing node: the failure is in the metrics too.
prom = os.path.join(work, "preflight.prom")
subprocess.run([GPUENV, "preflight", "--backend", "replay:" + os.path.join(SOURCE, "tests/data/validate/faults/ecc_uncorrectable.yaml"),
                "--status-file", os.path.join(work, "status.json"), "--metrics", prom], capture_output=True, text=True, env=env, timeout=120)
promtool(prom, "preflight, uncorrectable ECC")
s = samples(open(prom).read())
if s.get(("gpuenv_check_status", '{check="ecc_errors",gpu="3",status="fail"}')) != 1 or s.get(("gpuenv_validation_exit_code", '{level="quick",backend="replay"}')) != 1:
    failures.append("preflight: the ECC failure is not in the metrics")

# The Grafana dashboard (recipes/monitoring/) asks only for metrics gpuenv writes, in PromQL that parses: each
# panel's expression becomes a recording rule that `promtool check rules` must accept.
names = {k[0] for k in samples(open(os.path.join(work, "node.prom")).read())}
dashboard = json.load(open(os.path.join(SOURCE, "recipes/monitoring/gpuenv-dashboard.json")))
exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
rules = ["groups:", "  - name: gpuenv-dashboard", "    rules:"]
for i, expr in enumerate(exprs):
    for name in re.findall(r"gpuenv_[a-z0-9_]+", expr):
        if name not in names:
            failures.append(f"the dashboard asks for {name}, which gpuenv does not write")
    if not expr.startswith("label_values("):  # Grafana's own function, not PromQL
        rules += [f"      - record: gpuenv:dashboard_panel_{i}", "        expr: " + json.dumps(expr.replace("$instance", ".*"))]
open(os.path.join(work, "dashboard.rules.yml"), "w").write("\n".join(rules) + "\n")
p = subprocess.run(["promtool", "check", "rules", os.path.join(work, "dashboard.rules.yml")], capture_output=True, text=True, timeout=60)
if p.returncode != 0:
    failures.append(f"promtool check rules on the dashboard's queries: {p.stdout[-400:]} {p.stderr[-400:]}")

testlib.finish(failures, "Prometheus metrics: promtool accepts them, and they say what the report says in base units")
