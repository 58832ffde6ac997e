#!/usr/bin/env bash
# Records what `apt-get install --no-install-recommends` would install on an EMPTY system, for the oracle test of
# gpuenv's dependency closure (tests/packages/closure_test.cpp).
#
# It reads the host's apt lists as they are (run `apt-get update` first if you want newer ones) through a
# temporary, empty dpkg status file; it changes nothing under /var/lib/apt, /var/lib/dpkg or /var/cache/apt.
# Writes:
#   tests/data/apt_closure_<set>.txt      "# request: <packages>", then the packages apt would install
#                                         ("name version" per line, sorted)
#   tests/data/apt_closure_packages.txt   the Packages stanzas those answers need, trimmed to the fields gpuenv
#                                         reads: every version of each installed package and of every package
#                                         or provider their Pre-Depends/Depends name, in apt's repository order
# Package sets whose packages the lists do not have are skipped. If the fixture grows past 2 MB the largest set
# is dropped. Needs apt-get and python3; runs on Debian 12 amd64 lists as recorded.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/tests/data"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/empty-status"

sets=("python3" "curl ca-certificates" "libgomp1" "perl" "python3-numpy" "build-essential" "default-jre-headless"
      "postgresql" "base-files" "bsd-mailx")

apt_opts=(-o Debug::NoLocking=1 -o Dir::State::status="$tmp/empty-status"
          -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
          -o APT::Install-Recommends=false -o APT::Install-Suggests=false)

# The Packages files apt reads, in apt's order (the order of the sources).
apt-get "${apt_opts[@]}" indextargets --format '$(FILENAME)' 'Created-By: Packages' > "$tmp/targets"
n=0
while read -r f; do
  [ -e "$f" ] || continue
  /usr/lib/apt/apt-helper cat-file "$f" > "$tmp/packages.$n"
  n=$((n + 1))
done < "$tmp/targets"
if [ "$n" -eq 0 ]; then
  echo "no Packages lists found; run apt-get update first" >&2
  exit 1
fi

rm -f "$out"/apt_closure_*.txt
: > "$tmp/sets"
for set in "${sets[@]}"; do
  name="${set// /_}"
  # shellcheck disable=SC2086
  if ! apt-get "${apt_opts[@]}" -s install $set > "$tmp/sim.$name" 2> "$tmp/err.$name"; then
    echo "skipping '$set': apt-get cannot install it here: $(tail -n 1 "$tmp/err.$name")" >&2
    continue
  fi
  {
    echo "# what apt-get install --no-install-recommends installs on an empty system (scripts/gen_apt_closure_oracle.sh)"
    echo "# request: $set"
    sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*/\1 \2/p' "$tmp/sim.$name" | LC_ALL=C sort
  } > "$out/apt_closure_$name.txt"
  echo "$name" >> "$tmp/sets"
  echo "recorded '$set': $(grep -vc '^#' "$out/apt_closure_$name.txt") packages"
done

python3 - "$out" "$tmp" "$n" <<'EOF'
import os
import re
import sys

out, tmp, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
limit = 2_000_000
keep_fields = ["Package", "Source", "Version", "Installed-Size", "Architecture", "Multi-Arch", "Essential",
               "Priority", "Pre-Depends", "Depends", "Provides", "Conflicts", "Breaks", "Replaces", "Filename",
               "Size", "SHA256"]


def stanzas(text):
    for block in re.split(r"\n\s*\n", text):
        fields, last = {}, None
        for line in block.split("\n"):
            if not line.strip() or line.startswith("#"):
                continue
            if line[0] in " \t" and last:
                fields[last] += "\n" + line
                continue
            name, _, value = line.partition(":")
            last = name
            fields[name] = value.strip()
        if "Package" in fields:
            yield fields


def names_in(value):
    for group in value.split(","):
        for alt in group.split("|"):
            alt = alt.strip()
            if alt:
                yield re.split(r"[\s(:\[<]", alt, maxsplit=1)[0]


by_name, providers, order = {}, {}, []
for i in range(count):
    with open(os.path.join(tmp, f"packages.{i}"), encoding="utf-8") as f:
        for s in stanzas(f.read()):
            key = (s["Package"], s.get("Version"), s.get("Architecture"))
            if any(key == k for k, _ in by_name.get(s["Package"], [])):
                continue  # the same version from a later repository: apt merges them
            by_name.setdefault(s["Package"], []).append((key, s))
            order.append(s)
            for v in names_in(s.get("Provides", "")):
                providers.setdefault(v, []).append(s)

sets = [line.strip() for line in open(os.path.join(tmp, "sets")) if line.strip()]


def answer(name):
    with open(os.path.join(out, f"apt_closure_{name}.txt")) as f:
        return [line.split()[0] for line in f if line.strip() and not line.startswith("#")]


def fixture(sets):
    wanted = set()
    for name in sets:
        for pkg in answer(name):
            wanted.add(pkg)
            for _, s in by_name.get(pkg, []):
                for dep in list(names_in(s.get("Pre-Depends", ""))) + list(names_in(s.get("Depends", ""))):
                    wanted.add(dep)
                    for p in providers.get(dep, []):
                        wanted.add(p["Package"])
    text = []
    for s in order:
        if s["Package"] in wanted:
            text.append("".join(f"{k}: {s[k]}\n" for k in keep_fields if k in s))
    return "\n".join(text)


while True:
    text = fixture(sets)
    if len(text.encode()) <= limit or len(sets) <= 1:
        break
    biggest = max(sets, key=lambda n: len(answer(n)))
    print(f"fixture is {len(text.encode())} bytes; dropping the set '{biggest}'", file=sys.stderr)
    os.remove(os.path.join(out, f"apt_closure_{biggest}.txt"))
    sets.remove(biggest)

with open(os.path.join(out, "apt_closure_packages.txt"), "w", encoding="utf-8") as f:
    f.write(text)
print(f"wrote apt_closure_packages.txt: {len(text.encode())} bytes, sets: {' '.join(sets)}")
EOF
