#!/usr/bin/env python3
"""Writes a small, valid wheel for tests: make_test_wheel.py OUTDIR NAME VERSION [REQUIRES-DIST ...].

The wheel holds NAME/__init__.py, a console script `NAME-cli`, and a correct RECORD; it prints the file name.
"""
import base64
import hashlib
import sys
import zipfile


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main() -> None:
    out, name, version, *requires = sys.argv[1:]
    module = name.replace("-", "_")
    dist = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f'__version__ = "{version}"\n\ndef main():\n    print("{name} {version}")\n'.encode(),
        f"{dist}/METADATA": ("Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
                             + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: gpuenv-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/entry_points.txt": f"[console_scripts]\n{name}-cli = {module}:main\n".encode(),
    }
    record = "".join(f"{path},{record_hash(data)},{len(data)}\n" for path, data in files.items()) + f"{dist}/RECORD,,\n"
    filename = f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(f"{out}/{filename}", "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
        z.writestr(zipfile.ZipInfo(f"{dist}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), record)
    print(filename)


if __name__ == "__main__":
    main()
