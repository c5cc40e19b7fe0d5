#!/usr/bin/env bash
# The main job on a fresh Debian machine: install what is needed, build,
# show the plan for this machine's devices under the bundled default policy
# (examples/cloud-vm.toml), then run the daemon in the foreground in OBSERVE
# mode: live alerts on the terminal, nothing on the host is changed.
# Stop it with Ctrl-C.
#
#   scripts/run.sh                 # plan, then the daemon in observe mode
#   scripts/run.sh enforce         # the daemon in enforce mode: it writes (root)
#   scripts/run.sh apply           # any other blkpolicy command, e.g. one-shot apply
#   scripts/run.sh status --json
#
# BLKPOLICY_POLICY=PATH picks another policy file or directory.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
TARGET=blkpolicy scripts/build.sh >/dev/null
bin=build/blkpolicy
policy=${BLKPOLICY_POLICY:-examples/cloud-vm.toml}
state=build/demo-state   # not /run/blkpolicy: leave an installed service's state alone
if [[ $(id -u) -eq 0 && -z "${BLKPOLICY_POLICY:-}" ]]; then
    # As root blkpolicy reads only policies that nobody else can write (a
    # checkout owned by a user is not one): run the demo from a root-owned copy.
    demo=/run/blkpolicy-demo
    install -d -m 0755 "$demo"
    install -m 0644 examples/cloud-vm.toml "$demo/policy.toml"
    policy=$demo/policy.toml
    state=$demo/state
fi

mode=observe
if [[ "${1:-}" == enforce ]]; then
    mode=enforce
    shift
fi
if (($# > 0)); then
    exec "$bin" "$1" --policy "$policy" --state-dir "$state" "${@:2}"
fi

echo "== blkpolicy check --policy $policy"
"$bin" check --policy "$policy"
echo
echo "== blkpolicy plan --policy $policy   (writes nothing)"
"$bin" plan --policy "$policy" --state-dir "$state"
echo
echo "== blkpolicy run --mode $mode   (Ctrl-C stops it)"
exec "$bin" run --policy "$policy" --state-dir "$state" --mode "$mode" --log-target console
