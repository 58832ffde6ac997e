#!/usr/bin/env python3
"""Runs the gpuenv binary on hostile spec files, and on hostile project files (`resolve --from FILE`: an include loop,
an include outside the project, 100 MB, a hash of the wrong length, a URL requirement to a local file, binary and
deeply nested TOML), as separate processes and checks that each exits 2 within 10 seconds and under 1 GiB of peak
memory (the issue's limits), naming the file, and that nothing crashes."""
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

project_cases = {  # file name -> (bytes, or None for 100 MB sparse; other files of the project)
    "loop/requirements.txt": (b"numpy\n-r more.txt\n", {"loop/more.txt": b"-r requirements.txt\n"}),
    "outside/requirements.txt": (b"-r ../../etc-passwd.txt\n", {}),
    "huge/requirements.txt": (None, {}),
    "hash/requirements.txt": (b"numpy==2.1.3 --hash=sha256:3ad2a3decf9aaba3d29c8f537ac4b243e36bef95751\n", {}),
    "local/requirements.txt": (b"foo @ file:///etc/passwd\n", {}),
    "binary/uv.lock": (bytes(range(256)) * 64, {}),
    "nested/pyproject.toml": (b"[project]\ndependencies = " + b"[" * 5000 + b"]" * 5000 + b"\n", {}),
    "nested/pylock.toml": (b"lock-version = '1.0'\nx = " + b"{a=" * 5000 + b"1" + b"}" * 5000 + b"\n", {}),
    "conda/environment.yml": (b"dependencies:\n  - numpy=1.26\n  - pip:\n    - pyyaml\n", {}),
}
with tempfile.TemporaryDirectory() as d:
    for name, (data, others) in project_cases.items():
        path = os.path.join(d, name)
        for other, text in list(others.items()) + [(name, data)]:
            os.makedirs(os.path.dirname(os.path.join(d, other)), exist_ok=True)
            with open(os.path.join(d, other), "wb") as f:
                if text is None:
                    f.write(b"numpy\n")
                    f.truncate(100 << 20)
                else:
                    f.write(text)
        start = time.monotonic()
        try:
            p = subprocess.run([gpuenv, "resolve", "--from", path, "--gpu", "H100", "--driver", "550.54.15"], capture_output=True, timeout=10,
                               env={"GPUENV_GPUS": "none"})
        except subprocess.TimeoutExpired:
            print(f"FAIL project {name}: no answer within 10 s")
            failed = True
            continue
        elapsed = time.monotonic() - start
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        msg = p.stderr.decode(errors="replace").strip().splitlines()
        ok = p.returncode == 2 and msg and os.path.basename(name) in msg[0] and any("hint:" in m for m in msg) and peak_kib < (1 << 20)
        print(f"{'ok  ' if ok else 'FAIL'} project {name}: exit {p.returncode}, {elapsed*1000:.0f} ms: {msg[0] if msg else ''}")
        failed |= not ok
sys.exit(1 if failed else 0)
