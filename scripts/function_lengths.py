#!/usr/bin/env python3
"""Lengths of the C++ functions in product folders, for keeping them short (ARCHITECTURE.md, "Rules").

A function is a top-level or namespace-level brace block whose header ends with ')' (optionally followed by
const/noexcept/override, a trailing return type or an initializer list) and that is not a class, struct, enum,
namespace or lambda; its length counts the lines from the header to the closing brace. Comments and string
literals are skipped when matching braces. Usage: function_lengths.py [--over N] [FOLDER...]"""
import os
import re
import sys

PRODUCT = ["base", "resolver", "packages", "images", "validate", "marks", "attest", "app", "cli", "recipes", "tools"]
# Folders with C++ that is not product code. A top-level folder in neither list is an error, so a new product folder
# cannot be left out unseen.
NOT_PRODUCT = ["tests", "bench", "fuzz", "cmake", "docs", "scripts"]
HEADER = re.compile(r"\)\s*(const|noexcept|override|final|mutable|->[^{;]*|\s)*\s*(:[^;{]*)?$", re.S)
NOT_FUNCTION = re.compile(r"^\s*(template\s*<[^>]*>\s*)?(class|struct|union|enum|namespace|extern)\b")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else)\b")


def strip(text):
    """Blanks out comments and string/char literals, keeping newlines and offsets."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j])); i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            if m:
                end = text.find(")" + m.group(1) + '"', i)
                end = n if end < 0 else end + len(m.group(1)) + 2
                out.append("".join(ch if ch == "\n" else " " for ch in text[i:end])); i = end
            else:
                out.append(c); i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + (c if j < n else "")); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def functions(path):
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    found, depth, stack, last_end = [], 0, [], 0
    for i, c in enumerate(text):
        if c == "{":
            header = text[last_end:i]
            head = header.strip().split("\n")
            head_line = " ".join(h.strip() for h in head[-4:])
            is_fn = bool(HEADER.search(header.rstrip())) and not NOT_FUNCTION.match(head_line) and not CONTROL.match(head[-1].strip() if head else "")
            is_fn = is_fn and "=" not in header.rstrip()[-3:] and "[" not in head_line.split("(")[0][-3:]
            in_fn = any(kind == "fn" for kind, _, _ in stack)
            if is_fn and not in_fn:
                start_line = text.count("\n", 0, i - len(header) + len(header) - len(header.lstrip())) + 1
                name = re.findall(r"([~\w:]+)\s*\(", header)
                stack.append(("fn", start_line, name[0] if name else "?"))
            else:
                stack.append(("block", 0, ""))
            last_end = i + 1
        elif c == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "fn":
                    found.append((text.count("\n", 0, i) + 1 - start + 1, start, name))
            last_end = i + 1
        elif c == ";":
            last_end = i + 1
    return found


def main():
    args = sys.argv[1:]
    over = 0
    if args[:1] == ["--over"]:
        over, args = int(args[1]), args[2:]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if not args:
        unknown = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not d.startswith((".", "build"))
                         and d not in PRODUCT + NOT_PRODUCT and any(n.endswith((".cpp", ".hpp", ".cu")) for _, _, ns in os.walk(os.path.join(root, d)) for n in ns))
        if unknown:
            sys.exit(f"function_lengths.py: {', '.join(unknown)} holds C++ and is in neither PRODUCT nor NOT_PRODUCT: add it to one")
    folders = args or PRODUCT
    rows = []
    for folder in folders:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in names:
                if name.endswith((".cpp", ".hpp", ".cu")):
                    p = os.path.join(dirpath, name)
                    for length, line, fn in functions(p):
                        rows.append((length, os.path.relpath(p, root), line, fn))
    rows.sort(reverse=True)
    for length, path, line, fn in rows:
        if length > over:
            print(f"{length:5d}  {path}:{line}  {fn}")
    print(f"{len(rows)} functions; over 60 lines: {sum(r[0] > 60 for r in rows)}; over 100: {sum(r[0] > 100 for r in rows)}; over 120: {sum(r[0] > 120 for r in rows)}")


if __name__ == "__main__":
    main()
