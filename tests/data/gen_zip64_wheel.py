#!/usr/bin/env python3
"""Generates tests/data/zip64_demo-1.0-py3-none-any.whl: a small wheel in ZIP64 form, written by Python's zipfile.

zipfile writes ZIP64 structures only past 4 GiB (or 65535 members), so its thresholds are lowered while the
archive is written: every member then gets a ZIP64 local header (force_zip64), every central directory entry a
ZIP64 extended information extra field (0x0001) with its sizes and, past the first member, its local header
offset, and the archive a ZIP64 end of central directory record and locator. zipfile still writes the true
(small) values in the classic end record; tests/images/wheel_resolver_test.cpp patches them to 0xFFFF/0xFFFFFFFF
to get the form a writer of a >4 GiB archive produces. The archive is read back with zipfile before it is
written, and is deterministic (fixed timestamps and attributes) for a given zlib.

Usage: tests/data/gen_zip64_wheel.py [--out tests/data/zip64_demo-1.0-py3-none-any.whl]
"""
import argparse
import io
import os
import zipfile

METADATA = (
    b"Metadata-Version: 2.1\n"
    b"Name: zip64-demo\n"
    b"Version: 1.0\n"
    b"Summary: A wheel in ZIP64 form for gpuenv's range-request reader\n"
    b"Requires-Dist: core (>=1.0)\n"
    b"\n"
    + b"A long description that deflates well. " * 40
    + b"\n"
)

MEMBERS = [
    ("zip64_demo/__init__.py", b"print('zip64')\n", zipfile.ZIP_DEFLATED),
    ("zip64_demo-1.0.dist-info/METADATA", METADATA, zipfile.ZIP_DEFLATED),
    ("zip64_demo-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nGenerator: gen_zip64_wheel\nRoot-Is-Purelib: true\n"
     b"Tag: py3-none-any\n", zipfile.ZIP_STORED),
    ("zip64_demo-1.0.dist-info/RECORD", b"", zipfile.ZIP_STORED),
]


def build():
    saved = (zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT)
    zipfile.ZIP64_LIMIT = 0
    zipfile.ZIP_FILECOUNT_LIMIT = 0
    try:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", allowZip64=True) as z:
            for name, data, method in MEMBERS:
                info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
                info.compress_type = method
                info.external_attr = 0o100644 << 16
                info.create_system = 3
                with z.open(info, "w", force_zip64=True) as f:
                    f.write(data)
        return out.getvalue()
    finally:
        zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = saved


def check(data):
    assert b"PK\x06\x06" in data and b"PK\x06\x07" in data, "no ZIP64 end records"
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert z.testzip() is None
        for name, content, _ in MEMBERS:
            assert z.read(name) == content, name


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(here, "zip64_demo-1.0-py3-none-any.whl"))
    args = parser.parse_args()
    data = build()
    check(data)
    with open(args.out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
