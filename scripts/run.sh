#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job on a fresh Debian machine: install what is needed, build,
# show the plan for this machine's devices under the bundled default policy
# (examples/cloud-vm.toml), then run the daemon in the foreground in OBSERVE
# mode: live alerts on the terminal, nothing on the host's disks is changed.
# Stop it with Ctrl-C.
#
# As root, the demo also makes a loop device (a free index from 240 up, on a
# sparse file) with a demo rule of its own, sets it to that rule once, and
# prints the command that moves a value on it, so that a drift alert can be
# seen without touching a real disk. Everything it makes lives in
# /run/blkpolicy-demo and is removed again when the daemon stops.
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
echo "== building blkpolicy (build/)"
TARGET=blkpolicy scripts/build.sh
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

policies=(--policy "$policy")
loop=
cleanup() {
    if [[ -n "$loop" ]]; then
        losetup -d "/dev/$loop" 2>/dev/null || true
        # LOOP_CTL_REMOVE: the device was made for the demo; take it away again.
        /usr/bin/python3 -c 'import fcntl, os, sys; fcntl.ioctl(os.open("/dev/loop-control", os.O_RDWR), 0x4C81, int(sys.argv[1]))' \
            "${loop#loop}" 2>/dev/null || true
        echo "== removed /dev/$loop and $demo"
    fi
    if [[ -n "${demo:-}" ]]; then rm -rf "$demo"; fi
}
if [[ -n "${demo:-}" ]]; then
    trap cleanup EXIT
    for i in $(seq 240 255); do
        if [[ ! -e /sys/block/loop$i ]]; then loop=loop$i; break; fi
    done
fi
if [[ -n "$loop" ]]; then
    truncate -s 64M "$demo/demo.img"
    losetup "/dev/$loop" "$demo/demo.img"
    printf '%s\n' "# The demo's own rule: a loop device made for it, nothing else." "[[rule]]" \
        'name = "demo loop device"' "[rule.match]" "kernel = \"$loop\"" "[rule.set]" \
        "read_ahead_kb = 128" "nr_requests = 64" > "$demo/demo.toml"
    chmod 0644 "$demo/demo.toml"
    policies+=(--policy "$demo/demo.toml")
    echo "== demo: /dev/$loop on $demo/demo.img, with the rule in $demo/demo.toml"
    echo "   (outside the checkout it writes only $demo and /dev/$loop, and removes both on exit)"
    "$bin" apply "${policies[@]}" --state-dir "$state" "$loop" >/dev/null
fi

echo "== blkpolicy check ${policies[*]}"
"$bin" check "${policies[@]}"
echo
echo "== blkpolicy plan ${policies[*]}   (writes nothing)"
"$bin" plan "${policies[@]}" --state-dir "$state"
echo
if [[ -n "$loop" ]]; then
    echo "== to see an alert, move a value in another terminal:"
    echo "     echo 4096 > /sys/block/$loop/queue/read_ahead_kb"
    echo "   the daemon notices it at its next verify pass (every 30 s)"
    echo
fi
echo "== blkpolicy run --mode $mode   (Ctrl-C stops it)"
"$bin" run "${policies[@]}" --state-dir "$state" --mode "$mode" --log-target console
