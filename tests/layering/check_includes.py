#!/usr/bin/env python3
"""The include rules of gpuenv's folders (ARCHITECTURE.md, "Layers"): each product folder may include only the
folders below it. Prints every breach as FILE:LINE: FOLDER may not include "PATH" and exits 1; exits 0 when the
tree keeps the rules. Usage: check_includes.py [ROOT]"""
import os
import re
import sys

# folder -> the gpuenv folders its files may include (itself always allowed)
ALLOWED = {
    "base": set(),
    "resolver": {"base"},
    "recipes": set(),
    "packages": {"base", "resolver"},
    "images": {"base", "resolver", "packages"},
    "validate": {"base", "resolver"},
    "attest": {"base"},
    "marks": {"base", "resolver", "images", "validate", "attest"},
    "app": {"base", "resolver", "recipes", "packages", "images", "validate", "attest", "marks"},
    "cli": {"base", "resolver", "recipes", "packages", "images", "validate", "attest", "marks", "app"},
    "tools": {"base", "resolver"},
}
# folder -> {allowed folder: the only parts of it the folder may include}: marks/ keeps its records beside images in
# layouts, archives and registries, and needs only images/oci and images/registry (the gpuenv_oci library), never the
# image builder.
ONLY_PARTS = {
    "marks": {"images": {"oci", "registry"}},
}
FOLDERS = set(ALLOWED)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".inc")


def breaches(root):
    out = []
    for folder, allowed in sorted(ALLOWED.items()):
        top = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        parts = m.group(1).split("/")
                        first = parts[0]
                        if first not in FOLDERS or first == folder:
                            continue
                        only = ONLY_PARTS.get(folder, {}).get(first)
                        if first not in allowed or (only is not None and (len(parts) < 3 or parts[1] not in only)):
                            out.append(f'{os.path.relpath(path, root)}:{number}: {folder}/ may not include "{m.group(1)}"')
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    if not os.path.isdir(os.path.join(root, "base")):
        print(f"check_includes: {root} is not a gpuenv source tree (no base/)", file=sys.stderr)
        return 2
    found = breaches(root)
    for b in found:
        print(b)
    if found:
        print(f"{len(found)} include(s) break the layering rules (see ARCHITECTURE.md, Layers)")
        return 1
    print("layering: every include keeps the rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
