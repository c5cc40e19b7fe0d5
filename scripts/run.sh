#!/usr/bin/env bash
# The main job on a fresh Debian machine: install what is needed, build, and
# show this machine's devices under the bundled default policy
# (examples/cloud-vm.toml): the plan, then the status. Nothing is written.
#
#   scripts/run.sh                 # plan + status, writes nothing
#   scripts/run.sh apply           # apply the default policy (as root)
#   scripts/run.sh plan --json     # any blkpolicy command and options
#
# BLKPOLICY_POLICY=PATH picks another policy file or directory.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DBLKPOLICY_TESTS=OFF >/dev/null
bin=build/blkpolicy
policy=${BLKPOLICY_POLICY:-examples/cloud-vm.toml}

if (($# > 0)); then
    exec "$bin" "$1" --policy "$policy" "${@:2}"
fi

echo "== blkpolicy check --policy $policy"
"$bin" check --policy "$policy"
echo
echo "== blkpolicy plan --policy $policy   (writes nothing)"
"$bin" plan --policy "$policy"
echo
echo "== blkpolicy status --policy $policy"
rc=0
"$bin" status --policy "$policy" || rc=$?
# status exits 1 when values differ from the policy: expected before an apply.
if ((rc > 1)); then exit "$rc"; fi
echo
echo "Nothing was written. To apply: scripts/run.sh apply"
