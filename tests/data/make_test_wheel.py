#!/usr/bin/env python3
"""Writes a small, valid wheel for tests: make_test_wheel.py OUTDIR NAME VERSION [REQUIRES-DIST ...].

The wheel holds NAME/__init__.py, a console script `NAME-cli`, and a correct RECORD; it prints the file name.
Options before OUTDIR: `--file PATH=SOURCE` adds a file (mode 0755 for shared libraries), `--plat TAG`
makes it a platform wheel (py3-none-TAG), `--extra NAME` declares Provides-Extra.
"""
import base64
import hashlib
import sys
import zipfile


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main() -> None:
    args = sys.argv[1:]
    extra_files, plat, extras = {}, None, []
    while args and args[0].startswith("--"):
        opt, value = args[0], args[1]
        args = args[2:]
        if opt == "--file":
            path, source = value.split("=", 1)
            with open(source, "rb") as f:
                extra_files[path] = f.read()
        elif opt == "--plat":
            plat = value
        elif opt == "--extra":
            extras.append(value)
    out, name, version, *requires = args
    module = name.replace("-", "_")
    dist = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f'__version__ = "{version}"\n\ndef main():\n    print("{name} {version}")\n'.encode(),
        f"{dist}/METADATA": ("Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
                             + "".join(f"Provides-Extra: {e}\n" for e in extras)
                             + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
        f"{dist}/WHEEL": ("Wheel-Version: 1.0\nGenerator: gpuenv-tests\nRoot-Is-Purelib: " + ("false" if plat else "true")
                          + "\nTag: py3-none-" + (plat or "any") + "\n").encode(),
        f"{dist}/entry_points.txt": f"[console_scripts]\n{name}-cli = {module}:main\n".encode(),
    }
    files.update(extra_files)
    record = "".join(f"{path},{record_hash(data)},{len(data)}\n" for path, data in files.items()) + f"{dist}/RECORD,,\n"
    filename = f"{module}-{version}-py3-none-{plat or 'any'}.whl"
    with zipfile.ZipFile(f"{out}/{filename}", "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if ".so" in path else 0o644) << 16
            z.writestr(info, data)
        z.writestr(zipfile.ZipInfo(f"{dist}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), record)
    print(filename)


if __name__ == "__main__":
    main()
