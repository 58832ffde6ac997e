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
# folder or sub-folder -> {allowed folder: the only parts of it the files under it may include}: marks/ keeps its
# records beside images in layouts, archives and registries, and needs only images/oci and images/registry (the
# gpuenv_oci library), never the image builder; and that library itself stays apart from the rest of images/ (its
# own folder included: a rule keyed by a sub-folder applies to includes of the folder it lies in).
GPUENV_OCI = {"images": {"oci", "registry"}}
ONLY_PARTS = {
    "marks": GPUENV_OCI,
    "images/oci": GPUENV_OCI,
    "images/registry": GPUENV_OCI,
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
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                keys = [k for k in ONLY_PARTS if rel.startswith(k + "/")]
                key = max(keys, key=len) if keys else folder  # the innermost rule names the breach
                rules = ONLY_PARTS.get(key, {})
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        parts = m.group(1).split("/")
                        first = parts[0]
                        only = rules.get(first)
                        if first not in FOLDERS or (first == folder and only is None):
                            continue
                        if (first != folder and first not in allowed) or (only is not None and (len(parts) < 3 or parts[1] not in only)):
                            out.append(f'{rel}:{number}: {key}/ may not include "{m.group(1)}"')
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
