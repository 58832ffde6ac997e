#!/usr/bin/env python3
"""Runs the gpuenv binary on hostile spec files as separate processes and checks that each exits 2
within 10 seconds and under 1 GiB of peak memory (the issue's limits), and that nothing crashes."""
import os, resource, subprocess, sys, tempfile, time

gpuenv = sys.argv[1]
cases = {
    "empty": b"",
    "binary": bytes(range(256)) * 64,
    "not_utf8": b"name: x\ncuda: \"12\xff\"\n",
    "nested_flow": b"name: " + b"[" * 10000 + b"]" * 10000 + b"\n",
    "nested_block": b"- " * 10000 + b"x\n",
    "alias_bomb": b"a0: &a0 [x,x,x,x,x,x,x,x,x,x]\n" + b"".join(
        b"a%d: &a%d [" % (i, i) + b",".join(b"*a%d" % (i - 1) for _ in range(10)) + b"]\n" for i in range(1, 30)),
    "duplicate_keys": b"name: a\nname: b\n",
    "huge": None,  # 100 MB, written sparse below
}
failed = False
with tempfile.TemporaryDirectory() as d:
    for name, data in cases.items():
        path = os.path.join(d, name + ".yaml")
        with open(path, "wb") as f:
            if data is None:
                f.write(b"name: x\n")
                f.truncate(100 << 20)
            else:
                f.write(data)
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.monotonic()
        try:
            p = subprocess.run([gpuenv, "resolve", path], capture_output=True, timeout=10, env={"GPUENV_DRIVER": "550.54.15", "GPUENV_GPUS": "none"})
        except subprocess.TimeoutExpired:
            print(f"FAIL {name}: no answer within 10 s")
            failed = True
            continue
        elapsed = time.monotonic() - start
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        msg = p.stderr.decode(errors="replace").strip().splitlines()
        ok = p.returncode == 2 and msg and path in msg[0] and peak_kib < (1 << 20)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode}, {elapsed*1000:.0f} ms, peak RSS so far {peak_kib} KiB: {msg[0] if msg else ''}")
        failed |= not ok
sys.exit(1 if failed else 0)
