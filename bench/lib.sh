# Sourced by the build benchmarks (build_speed.sh, shared_cache.sh); needs $work.
# Seconds COMMAND takes (its output in $work/last.out, its errors in $work/last.err); a failure stops the benchmark
# naming the command and its exit status (a crash leaves stderr empty, and this runs inside $(...), where an exit
# alone would pass unnoticed).
seconds() {
  local s rc=0; s=$(date +%s.%N)
  "$@" >"$work/last.out" 2>"$work/last.err" || rc=$?
  if [ "$rc" != 0 ]; then echo "bench: '$*' failed with exit status $rc" >&2; cat "$work/last.err" "$work/last.out" >&2; exit 1; fi
  echo "$(date +%s.%N) - $s" | bc
}

# Writes SPEC with PACKAGE added to its packages.pip list to OUT.
with_pip_package() {
  python3 - "$1" "$2" "$3" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
b = re.sub(r'(\n\s*pip:\s*\[)', r'\g<1>"' + sys.argv[3] + '", ', text, count=1)
if b == text:
    sys.exit("the spec has no packages.pip list to add to")
open(sys.argv[2], "w").write(b)
PY
}
