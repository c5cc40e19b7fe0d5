#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's main job, as a newcomer runs it: scripts/run.sh shows the plan,
# makes its demo loop device with its own rule and the command to move a
# value on it, runs the daemon, and removes the device and /run/blkpolicy-demo
# again when the daemon is stopped (SIGINT, as Ctrl-C sends). Root only.
set -euo pipefail
src_dir=$1
if [[ $(id -u) -ne 0 ]]; then echo "SKIPPED: the demo's loop device needs root"; exit 77; fi
if [[ -e /run/blkpolicy-demo ]]; then echo "a demo is running on this machine already; not touching it"; exit 1; fi
out=$(mktemp /tmp/blkpolicy-demo-test.XXXXXX)
# scripts/run.sh builds into build/; one configured already (the test suite's
# own, at its build type) must be reused as it is, not reconfigured to
# another type and rebuilt from scratch inside this test.
cache=$src_dir/build/CMakeCache.txt
type_before=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache" 2>/dev/null || true)
trap 'rm -f "$out"' EXIT
# In a session of its own, so that SIGINT goes to its whole process group,
# as a terminal's Ctrl-C would send it.
BLKPOLICY_SKIP_APT=1 setsid "$src_dir/scripts/run.sh" >"$out" 2>&1 </dev/null &
pid=$!
for _ in $(seq 600); do
    grep -q "blkpolicy starting in\|starting in observe mode" "$out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
sleep 1
kill -INT -- "-$pid" 2>/dev/null || true
for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    cat "$out"; echo "the demo did not stop on SIGINT"; exit 1
fi
loop=$(sed -n 's|^== demo: /dev/\(loop[0-9]*\) on .*|\1|p' "$out")
[[ -n "$loop" ]] || { cat "$out"; echo "no demo loop device announced"; exit 1; }
grep -q "echo 4096 > /sys/block/$loop/queue/read_ahead_kb" "$out" || { cat "$out"; echo "no command to move a value"; exit 1; }
grep -q "rule: demo loop device" "$out" || { cat "$out"; echo "the plan does not show the demo rule"; exit 1; }
grep -q "blkpolicy stopped" "$out" || { cat "$out"; echo "the daemon did not stop cleanly"; exit 1; }
grep -q "== removed /dev/$loop" "$out" || { cat "$out"; echo "no cleanup message"; exit 1; }
[[ ! -e /sys/block/$loop ]] || { echo "/dev/$loop was left behind"; exit 1; }
[[ ! -e /run/blkpolicy-demo ]] || { echo "/run/blkpolicy-demo was left behind"; exit 1; }
if [[ -n "$type_before" ]]; then
    type_after=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")
    [[ "$type_after" == "$type_before" ]] ||
        { echo "scripts/run.sh reconfigured build/ from $type_before to $type_after"; exit 1; }
fi
echo "the demo made /dev/$loop, showed how to move a value on it, and removed everything on SIGINT"
