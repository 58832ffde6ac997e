#!/usr/bin/env python3
"""Whether two gpuenv-validation-v1 reports judged the same: every check's outcome per GPU and MIG instance, with its
status, code and figures, in order. Times the run clocks itself (a context's opening, the sustained load's length,
each check's duration) and messages are left out: a replay of a recording (validate --record) must match the run
on everything else. Used by tests/gpu/run.sh on the GPU and by the ctest validate.record_cpu_gpus on the CPU doubles.

    same_judgement.py RUN.json REPLAY.json      exit 0 the same, 1 different (each difference printed), 2 unreadable
"""
import json
import sys

CLOCKED = {"open_ms", "seconds"}


def outcomes(path):
    report = json.load(open(path))
    out = []
    for check in report["checks"]:
        for r in check["results"]:
            mig = (r.get("mig") or {}).get("uuid")
            figures = [(m["name"], m["value"], m["unit"]) for m in r.get("metrics", []) if m["name"] not in CLOCKED]
            out.append((check["key"], r["gpu"], mig, r["status"], r.get("code"), figures))
    return report, out


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    try:
        run, a = outcomes(argv[1])
        replay, b = outcomes(argv[2])
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("same_judgement: cannot read the reports: %s" % e)
        return 2
    differences = [(x, y) for x, y in zip(a, b) if x != y]
    if len(a) != len(b):
        differences.append(("%d outcomes" % len(a), "%d outcomes" % len(b)))
    if run.get("status") != replay.get("status"):
        differences.append(("status " + str(run.get("status")), "status " + str(replay.get("status"))))
    print("recording replayed (%s backend, then %s): %s, %d outcomes"
          % (run.get("backend"), replay.get("backend"), "the same judgement and figures" if not differences else "DIFFERENT", len(a)))
    for x, y in differences:
        print("  run:    %s\n  replay: %s" % (x, y))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
