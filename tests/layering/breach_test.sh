#!/usr/bin/env bash
# The include check must fail on a tree that breaks the rules and name each breach, and pass on one that keeps them.
# Usage: breach_test.sh PYTHON check_includes.py
set -euo pipefail
python=$1 check=$2
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{base,resolver,packages,images/oci,images/registry,validate,marks,app,cli}
printf '#include "base/error.hpp"\n' > "$tree/resolver/ok.cpp"
printf '#include "resolver/spec.hpp"\n#include "base/error.hpp"\n' > "$tree/cli/ok.cpp"
printf '#include "images/oci/layout.hpp"\n#include "images/registry/registry_client.hpp"\n' > "$tree/marks/ok.cpp"
printf '#include "images/registry/registry_client.hpp"\n#include "base/error.hpp"\n' > "$tree/images/oci/ok.cpp"
printf '#include "images/oci/layout.hpp"\n' > "$tree/images/registry/ok.cpp"
printf '#include "images/assemble/assemble_image.hpp"\n' > "$tree/images/ok.cpp"
"$python" "$check" "$tree" >/dev/null || { echo "FAIL: a clean tree was refused"; exit 1; }
printf '#include "cli/context.hpp"\n' > "$tree/base/bad.hpp"
printf '#include <vector>\n  #  include "validate/check.hpp"\n' > "$tree/images/bad.cpp"
printf '#include "app/build.hpp"\n' > "$tree/validate/bad.cpp"
printf '#include "images/oci/layout.hpp"\n#include "images/assemble/assemble_image.hpp"\n' > "$tree/marks/bad.cpp"
printf '#include "images/oci/archive.hpp"\n#include "images/rootfs/ld_cache.hpp"\n' > "$tree/images/oci/bad.cpp"
set +e
out=$("$python" "$check" "$tree")
rc=$?
set -e
[ "$rc" = 1 ] || { echo "FAIL: exit $rc on a tree with breaches"; echo "$out"; exit 1; }
for want in 'base/bad.hpp:1: base/ may not include "cli/context.hpp"' 'images/bad.cpp:2: images/ may not include "validate/check.hpp"' \
            'validate/bad.cpp:1: validate/ may not include "app/build.hpp"' \
            'marks/bad.cpp:2: marks/ may not include "images/assemble/assemble_image.hpp"' \
            'images/oci/bad.cpp:2: images/oci/ may not include "images/rootfs/ld_cache.hpp"'; do
  grep -qF "$want" <<<"$out" || { echo "FAIL: not reported: $want"; echo "$out"; exit 1; }
done
echo "ok: the breaches were named and the check failed"
