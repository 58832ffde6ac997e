#!/usr/bin/python3
"""Records what the `packaging` library answers for seeded random PEP 440 versions and specifiers.

The C++ implementation in packages/wheels/pep440.cpp is checked against every line by
tests/packages/pep440_test.cpp. Run with the system interpreter, which has Debian's python3-packaging:

    /usr/bin/python3 scripts/gen_pep440_corpus.py [--seed N] [--out tests/data]

Output (tab-separated, one record per line, '#' lines are comments):

tests/data/pep440_versions.tsv
    N <input> <normalized, or ! when packaging rejects it> <public> <base_version> <pre><post><dev> flags (0/1)
    C <a> <b> <-1|0|1>          comparison of Version(a) with Version(b)
tests/data/pep440_specifiers.tsv
    S <specifier set> <str(SpecifierSet), or ! when packaging rejects it>
    M <specifier set> <version> <prereleases: - (None), 0 or 1> <contains: 0/1>
"""

import argparse
import os
import random
import sys

import packaging
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

SEPARATORS = ["", "", "", ".", "-", "_"]
PRE_WORDS = ["a", "b", "c", "rc", "alpha", "beta", "pre", "preview"]
POST_WORDS = ["post", "rev", "r"]


def case(rng, word):
    """Mostly lower case, sometimes upper or mixed, since packaging matches case-insensitively."""
    roll = rng.random()
    if roll < 0.8:
        return word
    if roll < 0.9:
        return word.upper()
    return "".join(c.upper() if rng.random() < 0.5 else c for c in word)


def number(rng, small=True):
    roll = rng.random()
    if roll < 0.015:
        return str(rng.randint(10**19, 10**21))  # beyond 64 bits
    if roll < 0.08:
        return "0" + str(rng.randint(0, 12))  # leading zeros
    if small:
        return str(rng.choice([0, 0, 1, 1, 2, 3, 10]))
    return str(rng.randint(0, 30))


def release(rng, min_parts=1):
    n = rng.randint(min_parts, max(min_parts, 4))
    parts = [number(rng) for _ in range(n)]
    if rng.random() < 0.2:
        parts += ["0"] * rng.randint(1, 2)  # trailing zeros compare equal
    return ".".join(parts)


def pre(rng):
    num = "" if rng.random() < 0.15 else number(rng)
    sep2 = rng.choice(SEPARATORS) if num or rng.random() < 0.1 else ""
    return rng.choice(SEPARATORS) + case(rng, rng.choice(PRE_WORDS)) + sep2 + num


def post(rng):
    if rng.random() < 0.25:
        return "-" + number(rng)
    num = "" if rng.random() < 0.15 else number(rng)
    return rng.choice(SEPARATORS) + case(rng, rng.choice(POST_WORDS)) + rng.choice(SEPARATORS) + num


def dev(rng):
    num = "" if rng.random() < 0.15 else number(rng)
    return rng.choice(SEPARATORS) + case(rng, "dev") + rng.choice(SEPARATORS) + num


def local(rng):
    parts = []
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.4:
            parts.append(number(rng, small=False))
        elif roll < 0.8:
            parts.append(case(rng, rng.choice(["ubuntu", "cpu", "cu121", "abc", "g1234", "x"])))
        else:
            parts.append(rng.choice(["1a", "a1", "0b", "zz9"]))
    out = "+" + parts[0]
    for p in parts[1:]:
        out += rng.choice([".", "-", "_"]) + p
    return out


def version_text(rng, allow_local=True, min_parts=1, prefix=True):
    text = ""
    if prefix and rng.random() < 0.05:
        text += rng.choice(["v", "V"])
    if rng.random() < 0.1:
        text += rng.choice(["0", "1", "2", "01"]) + "!"
    text += release(rng, min_parts)
    if rng.random() < 0.35:
        text += pre(rng)
    if rng.random() < 0.3:
        text += post(rng)
    if rng.random() < 0.3:
        text += dev(rng)
    if allow_local and rng.random() < 0.2:
        text += local(rng)
    if prefix and rng.random() < 0.03:
        text = " " + text + rng.choice(["", " "])
    return text


def mutate(rng, text):
    """Breaks a version in ways that are plausible typos."""
    roll = rng.random()
    pos = rng.randint(0, len(text))
    if roll < 0.3:
        return text[:pos] + rng.choice([".", "..", "-", "+", "!", "*", "x", " "]) + text[pos:]
    if roll < 0.5:
        return text + rng.choice([".", "-", "+", "_", ".*", "a1.", "+a..b"])
    if roll < 0.7:
        return rng.choice(["", "v", ".", "a", "+"]) + text.lstrip("vV0123456789")
    return text[:pos] + text[pos + 1 :] + rng.choice(["", "ä", "é"])


def flag(b):
    return "1" if b else "0"


def cmp(a, b):
    return -1 if a < b else (1 if a > b else 0)


def check_field(text):
    assert "\t" not in text and "\n" not in text, repr(text)


def gen_versions(rng, out):
    lines = []
    pool = []
    seen = set()
    for _ in range(1300):
        text = version_text(rng)
        if rng.random() < 0.15:
            text = mutate(rng, text)
        if "\t" in text or text in seen:
            continue
        seen.add(text)
        try:
            v = Version(text)
        except InvalidVersion:
            lines.append(("N", text, "!", "", "", ""))
            continue
        pool.append((text, v))
        flags = flag(v.is_prerelease) + flag(v.is_postrelease) + flag(v.is_devrelease)
        lines.append(("N", text, str(v), v.public, v.base_version, flags))
    # Comparisons: neighbours in sorted order (the subtle cases) and random pairs.
    ordered = sorted(pool, key=lambda tv: tv[1])
    for (ta, va), (tb, vb) in zip(ordered, ordered[1:]):
        lines.append(("C", ta, tb, str(cmp(va, vb))))
    for _ in range(500):
        (ta, va), (tb, vb) = rng.choice(pool), rng.choice(pool)
        lines.append(("C", ta, tb, str(cmp(va, vb))))
    # Versions sharing one release, so pre/post/dev/local ordering decides.
    family = []
    for _ in range(120):
        text = "1.0" + (pre(rng) if rng.random() < 0.5 else "") + (post(rng) if rng.random() < 0.4 else "")
        text += dev(rng) if rng.random() < 0.4 else ""
        text += local(rng) if rng.random() < 0.3 else ""
        try:
            family.append((text, Version(text)))
        except InvalidVersion:
            pass
    for _ in range(400):
        (ta, va), (tb, vb) = rng.choice(family), rng.choice(family)
        lines.append(("C", ta, tb, str(cmp(va, vb))))
    write(out, lines, "versions")
    return [v for _, v in pool]


def spec_version(rng, op, versions):
    """A version text for `op`, usually derived from a pooled version so that boundaries are hit."""
    allow_local = op in ("==", "!=")
    if rng.random() < 0.6 and versions:
        base = rng.choice(versions)
        text = base.base_version if rng.random() < 0.5 else str(base.public)
        if op == "~=" and len(base.release) < 2:
            text = base.base_version + ".0"
        if allow_local and base.local and rng.random() < 0.5:
            text = str(base)
    else:
        text = version_text(rng, allow_local=allow_local, min_parts=2 if op == "~=" else 1, prefix=False)
    if op in ("==", "!=") and rng.random() < 0.3:
        text = Version(text).base_version if rng.random() < 0.7 else text
        parts = text.split(".")
        cut = rng.randint(1, len(parts))
        text = ".".join(parts[:cut]) + ".*"
    return text


def spec_clause(rng, versions):
    op = rng.choice(["==", "==", "!=", "<=", ">=", "<", "<", ">", ">", "~=", "~=", "==="])
    if op == "===":
        text = str(rng.choice(versions)) if rng.random() < 0.7 else version_text(rng)
        return op + text.strip()
    text = spec_version(rng, op, versions)
    space = rng.choice(["", "", "", " "])
    return op + space + text


def near(rng, spec_set, versions):
    """A version close to one of the clause boundaries: same release with pre/post/dev/local variations."""
    specs = sorted(spec_set, key=str)  # set order follows string hashing, which changes between runs
    if not specs or rng.random() < 0.25:
        return str(rng.choice(versions))
    v = specs[rng.randrange(len(specs))].version.rstrip("*").rstrip(".")
    try:
        base = Version(v).base_version
    except InvalidVersion:
        return str(rng.choice(versions))
    parts = base.split("!")[-1].split(".")
    roll = rng.random()
    if roll < 0.25 and parts:
        parts[-1] = str(int(parts[-1]) + rng.choice([-1, 1, 1]))
        if parts[-1] == "-1":
            parts[-1] = "0"
    elif roll < 0.4:
        parts = parts + ["0"] if rng.random() < 0.5 else parts + [str(rng.randint(1, 3))]
    elif roll < 0.5 and len(parts) > 1:
        parts = parts[:-1]
    text = ("" if "!" not in base else base.split("!")[0] + "!") + ".".join(parts)
    if rng.random() < 0.4:
        text += rng.choice(["a1", "b2", "rc1", "rc0", "a0"])
    if rng.random() < 0.3:
        text += rng.choice([".post1", ".post0", ".post2"])
    if rng.random() < 0.3:
        text += rng.choice([".dev0", ".dev1"])
    if rng.random() < 0.2:
        text += rng.choice(["+local", "+1", "+cu121.7"])
    return text


def gen_specifiers(rng, out, versions):
    lines = []
    good = []
    for _ in range(700):
        clauses = [spec_clause(rng, versions) for _ in range(rng.choice([1, 1, 1, 1, 2, 2, 3]))]
        text = rng.choice([",", ", ", " ,"]).join(clauses)
        if rng.random() < 0.05:
            text = mutate(rng, text)
        if rng.random() < 0.03:
            text = ""
        if "\t" in text or "\n" in text:
            continue
        try:
            s = SpecifierSet(text)
        except InvalidSpecifier:
            lines.append(("S", text, "!"))
            continue
        lines.append(("S", text, str(s)))
        good.append((text, s))
    for _ in range(2600):
        text, s = rng.choice(good)
        vtext = near(rng, s, versions)
        if rng.random() < 0.35:
            # Bias towards versions the set admits, so that "contains" answers are not mostly "no".
            inside = [str(v) for v in rng.sample(versions, 40) if s.contains(v, prereleases=True)]
            if inside:
                vtext = rng.choice(inside)
        try:
            v = Version(vtext)
        except InvalidVersion:
            continue
        pre_choice = rng.choice([None, None, False, True])
        try:
            answer = s.contains(v, prereleases=pre_choice)
        except InvalidVersion:
            # === with text that is no version: packaging raises when it needs the clause's own pre-release flag.
            continue
        pre_field = "-" if pre_choice is None else flag(pre_choice)
        lines.append(("M", text, vtext, pre_field, flag(answer)))
    write(out, lines, "specifiers")


def write(out, lines, what):
    path = os.path.join(out, f"pep440_{what}.tsv")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(f"# generated by scripts/gen_pep440_corpus.py with packaging {packaging.__version__}; do not edit\n")
        for fields in lines:
            for field in fields:
                check_field(field)
            f.write("\t".join(fields) + "\n")
    print(f"{path}: {len(lines)} records, {os.path.getsize(path)} bytes", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=440)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out", default=os.path.normpath(os.path.join(here, "..", "tests", "data")))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    versions = gen_versions(rng, args.out)
    gen_specifiers(rng, args.out, versions)


if __name__ == "__main__":
    main()
