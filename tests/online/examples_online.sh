#!/usr/bin/env bash
# Online check (ctest label `online`, off in CI): every example in recipes/examples/ locks and builds from the
# host's configured Debian mirror and Python index, and its framework imports under `gpuenv run`. An example on
# an Ubuntu base must say that it needs an Ubuntu mirror and have a Debian twin (NAME-debian.yaml), which is
# built instead. An example's "# build-flags:" line is passed to its build. Uses $GPUENV_CACHE_DIR when set (many GB on
# a cold cache). Usage: examples_online.sh GPUENV ROOT
set -euo pipefail
gpuenv=$1
root=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
for spec in "$root"/recipes/examples/*.yaml; do
  name=$(basename "$spec" .yaml)
  base=$(sed -n 's/^base: *//p' "$spec")
  case "$base" in
    ubuntu:*)
      if ! grep -q 'Needs an Ubuntu mirror' "$spec" || [ ! -f "$root/recipes/examples/$name-debian.yaml" ]; then
        echo "FAIL: $name is on $base but does not say it needs an Ubuntu mirror, or has no Debian twin"
        status=1
      else
        echo "skip: $name ($base; its Debian twin $name-debian.yaml is built)"
      fi
      continue ;;
  esac
  if ! "$gpuenv" lock "$spec" -o "$out/$name.lock" >"$out/$name.log" 2>&1; then
    echo "FAIL: $name does not lock"; tail -5 "$out/$name.log"; status=1; continue
  fi
  # An example may name the build's exceptions on one comment line: "# build-flags: --allow-missing-lib NAME ...".
  read -r -a flags <<<"$(sed -n 's/^# build-flags: *//p' "$spec")"
  if ! "$gpuenv" build "$out/$name.lock" -o "$out/$name" "${flags[@]}" >>"$out/$name.log" 2>&1; then
    echo "FAIL: $name does not build"; tail -5 "$out/$name.log"; status=1; continue
  fi
  check=pass
  for fw in torch tensorflow jax vllm sglang; do grep -q "^  $fw:" "$spec" && check="import $fw"; done
  if grep -q '^python:\|^  pip:\|^frameworks:' "$spec" || [ "$check" != pass ]; then
    # HOME on /tmp (a tmpfs in the sandbox): torch 2.14's dynamo, which sglang's import reaches, makes ~/.cache/torch.
    if ! "$gpuenv" run "$out/$name" --no-gpu -- env HOME=/tmp python3 -c "$check" >>"$out/$name.log" 2>&1; then
      echo "FAIL: $name builds, but '$check' fails in it"; tail -5 "$out/$name.log"; status=1; continue
    fi
  fi
  echo "ok: $name ($(du -sh "$out/$name" | cut -f1))"
  rm -rf "${out:?}/$name"
done
exit $status
