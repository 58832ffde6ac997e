#!/usr/bin/python3
"""Records what the `packaging` library answers for wheel tags and wheel filenames.

The C++ implementation in packages/wheels/wheel_tags.cpp is checked against every line by
tests/packages/wheel_tags_test.cpp. Run with the system interpreter, which has Debian's python3-packaging:

    /usr/bin/python3 scripts/gen_wheel_tags_oracle.py [--out tests/data]

Output:

tests/data/wheel_tags_cp<XY>_glibc<M>_<N>_<arch>.txt
    One tag per line, in priority order: list(cpython_tags(...)) + list(compatible_tags(...)), which is what
    sys_tags() yields for that CPython on a glibc Linux. The platform list is the one packaging's
    _manylinux.platform_tags builds, with the glibc version of the target patched in instead of the host's.
tests/data/wheel_filenames.tsv (tab-separated, '#' lines are comments)
    <filename> <canonical name, or ! when packaging rejects it> <str(version)> <build number or -> <build suffix>
    <tags, sorted, joined with ','>
"""

import argparse
import os
import sys
import sysconfig

from packaging import _manylinux, tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion

# (python major, minor, glibc major, minor, arch)
TARGETS = [
    (3, 11, 2, 36, "x86_64"),
    (3, 12, 2, 28, "x86_64"),
    (3, 8, 2, 17, "x86_64"),
    (3, 7, 2, 31, "x86_64"),
    (3, 10, 2, 35, "aarch64"),
]

FILENAMES = [
    "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "torch-2.2.1-cp311-cp311-manylinux1_x86_64.whl",
    "six-1.16.0-py2.py3-none-any.whl",
    "cryptography-42.0.5-cp39-abi3-manylinux_2_28_x86_64.whl",
    "nvidia_cublas_cu12-12.1.3.1-py3-none-manylinux1_x86_64.whl",
    "Pillow-10.2.0-cp312-cp312-musllinux_1_1_x86_64.whl",
    "foo-1.0-1-py3-none-any.whl",
    "foo-1.0-2b-py3-none-any.whl",
    "foo-1.0-007rc-py3-none-any.whl",
    "Foo.Bar_baz-2.0.post1-py3-none-any.whl",
    "zope.interface-6.2-cp310-cp310-manylinux_2_5_x86_64.manylinux1_x86_64.manylinux_2_17_x86_64.whl",
    "pkg-1.0-PY3-NONE-ANY.whl",
    "pkg-1.0_RC1-py3-none-any.whl",
    "pkg-v1.0-py3-none-any.whl",
    "pkg-1!2.0+local.1-py3-none-any.whl",
    "pkg-1.0-py2.py3-cp27mu.none-linux_x86_64.any.whl",
    "triton-2.2.0-0-cp311-cp311-manylinux_2_17_x86_64.whl",
    # rejected
    "pkg-1.0-py3-none-any.tar.gz",
    "pkg-1.0.tar.gz",
    "pkg-1.0-py3-none.whl",
    "pkg-1.0-1-2-py3-none-any.whl",
    "pkg__x-1.0-py3-none-any.whl",
    "pkg+x-1.0-py3-none-any.whl",
    "pkg-not.a.version-py3-none-any.whl",
    "pkg-1.0-build-py3-none-any.whl",
    "pkg-1.0-py3-none-any.WHL",
    "pkg-1.0-x1-py3-none-any.whl",
]


def glibc_platforms(glibc, arch):
    """The platforms packaging lists for a glibc system, with the target's glibc instead of the host's."""
    saved_get, saved_abi = _manylinux._get_glibc_version, _manylinux._have_compatible_abi
    _manylinux._get_glibc_version = lambda: glibc
    _manylinux._have_compatible_abi = lambda executable, a: True
    try:
        linux = "linux_" + arch
        return list(_manylinux.platform_tags(linux, arch)) + [linux]
    finally:
        _manylinux._get_glibc_version, _manylinux._have_compatible_abi = saved_get, saved_abi


def target_tags(py_major, py_minor, glibc_major, glibc_minor, arch):
    platforms = glibc_platforms((glibc_major, glibc_minor), arch)
    version = (py_major, py_minor)
    interpreter = f"cp{py_major}{py_minor}"
    out = list(tags.cpython_tags(version, platforms=platforms))
    out += list(tags.compatible_tags(version, interpreter=interpreter, platforms=platforms))
    return [str(t) for t in out]


def wheel_row(filename):
    try:
        name, version, build, tag_set = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return [filename, "!", "", "", "", ""]
    number, suffix = (str(build[0]), build[1]) if build else ("-", "")
    return [filename, name, str(version), number, suffix, ",".join(sorted(str(t) for t in tag_set))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data"))
    args = parser.parse_args()
    # cpython_tags reads the ABI flags of the running interpreter; the C++ side models a release build.
    if sysconfig.get_config_var("Py_DEBUG") or not sysconfig.get_config_var("WITH_PYMALLOC"):
        sys.exit("run with a release build of CPython that has pymalloc (e.g. /usr/bin/python3)")
    import packaging

    for target in TARGETS:
        py_major, py_minor, glibc_major, glibc_minor, arch = target
        path = os.path.join(
            args.out, f"wheel_tags_cp{py_major}{py_minor}_glibc{glibc_major}_{glibc_minor}_{arch}.txt"
        )
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(target_tags(*target)) + "\n")
    with open(os.path.join(args.out, "wheel_filenames.tsv"), "w", encoding="utf-8") as f:
        f.write(f"# packaging {packaging.__version__}: parse_wheel_filename\n")
        f.write("# filename\tname|!\tversion\tbuild number|-\tbuild suffix\ttags\n")
        for filename in FILENAMES:
            f.write("\t".join(wheel_row(filename)) + "\n")


if __name__ == "__main__":
    main()
