#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The runner of blkpolicy in the initramfs (packaging/early-boot/early-boot),
# on this host: in a mount namespace of the test's own, /usr/sbin holds a
# stand-in for blkpolicy that exits, fails, crashes or hangs as the test
# says, /run is empty, and /proc/cmdline and /dev/kmsg are files of the
# test's. What is proven: the run never outlasts the boot's budget (a hung
# blkpolicy is killed, not waited for), each outcome is one line in
# /run/blkpolicy/boot-bound and one in the kernel log, the budget is the
# runs' own time (ended runs' and running ones'), a run after it is spent
# starts nothing, and it comes from the kernel command line within 0..10 s. (A process the kernel holds in state D, and
# both initramfs systems around the script: tests/vm/test_boot.py.)
#   check_early_boot.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
if [[ $(id -u) -ne 0 ]]; then echo "SKIPPED: a mount namespace of the test's own needs root"; exit 77; fi
if ! unshare -m true 2>/dev/null; then echo "SKIPPED: unshare -m is refused here (no mount namespaces)"; exit 77; fi
work=$(mktemp -d /tmp/blkpolicy-early-boot.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The stand-in: records its arguments and pid, then does what $work/mode says.
cat >"$work/blkpolicy" <<EOF
#!/bin/sh
echo "\$*" >>$work/args
echo \$\$ >$work/pid
case \$(cat $work/mode) in
ok) exit 0 ;;
policy) exit 3 ;;
odd) exit 9 ;;
segv) kill -SEGV \$\$ ;;
hang) exec sleep 60 ;;
esac
EOF
chmod +x "$work/blkpolicy"

# CASE MODE CMDLINE ARGS...: one run of the script in a fresh namespace;
# leaves $work/run (its /run), $work/kmsg and $work/took (milliseconds).
run_case() {
    local mode=$1 cmdline=$2
    shift 2
    echo "$mode" >"$work/mode"
    echo "$cmdline" >"$work/cmdline"
    : >"$work/kmsg"
    rm -rf "$work/run" "$work/args" "$work/pid"
    mkdir -p "$work/run"
    unshare -m --propagation private bash -euc '
        work=$1 src=$2
        shift 2
        mount -t tmpfs none /usr/sbin
        [[ $(cat "$work/mode") == missing ]] || cp "$work/blkpolicy" /usr/sbin/blkpolicy
        mount --bind "$work/run" /run
        mount --bind "$work/cmdline" /proc/cmdline
        mount --bind "$work/kmsg" /dev/kmsg
        # earlier runs of this boot, where the case has them (their cost noted as the runner notes it)
        if [[ -f $work/spent ]]; then mkdir -p /run/blkpolicy/boot-spent; cp "$work/spent" /run/blkpolicy/boot-spent/vda.1; fi
        ulimit -c 0  # the crash case: no core dump
        t0=$(date +%s%N)
        sh "$src/packaging/early-boot/early-boot" "$@"
        echo $((($(date +%s%N) - t0) / 1000000)) >"$work/took"
    ' sh "$work" "$src" "$@"
}
bound() { cat "$work/run/blkpolicy/boot-bound" 2>/dev/null || true; }
fail() {
    echo "FAIL: $*"
    echo "boot-bound:"; bound
    echo "kmsg:"; cat "$work/kmsg"
    exit 1
}
expect_line() { # OUTCOME-REGEX: the one line of boot-bound and of the kernel log
    local n
    n=$(bound | wc -l)
    [[ $n -eq 1 ]] || fail "$n lines in boot-bound, one expected"
    bound | grep -qE "$1" || fail "boot-bound does not say /$1/"
    grep -qE "^<4>blkpolicy: initramfs: " "$work/kmsg" || fail "no line in the kernel log"
}

# 1. A run that succeeds: nothing recorded; what it cost is noted
#    ("D" and its duration in hundredths of a second).
run_case ok "quiet" disk vdb
[[ -z $(bound) ]] || fail "a run that succeeded was recorded"
[[ $(cat "$work/args") == "apply vdb" ]] || fail "the disk's run asked for: $(cat "$work/args")"
cost=$(cat "$work/run/blkpolicy/boot-spent/vdb."*)
[[ $cost =~ ^D\ [0-9]+$ ]] || fail "the run's cost: $cost"
run_case ok "quiet" pass
[[ $(cat "$work/args") == "apply --boot" ]] || fail "the pass asked for: $(cat "$work/args")"

# 2. Exits non-zero, and crashes: said, with what the status means.
run_case policy "blkpolicy.boot_budget=2" pass
expect_line $'^pass\tfailed\texit status 3: the policy is invalid or cannot be read\t[0-9]+\\.[0-9]{2}$'
run_case odd "" disk sdc
expect_line $'^sdc\tfailed\texit status 9\t'
run_case segv "" disk sdc
expect_line $'^sdc\tcrashed\tkilled by signal 11\t'

# 3. Hangs: stopped when the budget runs out (1 s here), killed, and the
#    run returns then, not when the stand-in would have ended (60 s).
run_case hang "ro blkpolicy.boot_budget=1 quiet" pass
expect_line $'^pass\tstopped\tstill running when the boot\'s budget of 1 s ran out, state S: killed, not waited for\t'
hung=$(cat "$work/took")
((hung < 10000)) || fail "the run took $hung ms against a budget of 1 s (the stand-in hangs 60 s)"
pid=$(cat "$work/pid")
for _ in $(seq 50); do [[ -d /proc/$pid ]] || break; sleep 0.1; done
[[ ! -d /proc/$pid ]] || fail "the hung stand-in (pid $pid) is still there"

# 4. The budget spent by earlier runs (5.2 s of the 5): nothing started.
echo "D 520" >"$work/spent"
run_case ok "" disk vdc
expect_line $'^vdc\tskipped\tthe boot\'s budget of 5 s was spent\t'
[[ ! -e $work/args ]] || fail "a run after the budget was spent started blkpolicy"
# A run still going counts its time so far: one that started 6 s before.
up=$(cut -d' ' -f1 /proc/uptime | tr -d .)
echo "S $((up - 600))" >"$work/spent"
run_case ok "" disk vdc
expect_line $'^vdc\tskipped\tthe boot\'s budget of 5 s was spent\t'
# 4.9 s spent: this run has 0.1 s, and a hang is stopped then.
echo "D 490" >"$work/spent"
run_case hang "" pass
# (in whatever state 0.1 s finds the stand-in: still starting, or asleep)
expect_line $'^pass\tstopped\tstill running when the boot\'s budget of 5 s ran out, state [A-Z]: killed'
took=$(cat "$work/took")
((took < 5000)) || fail "the run took $took ms with 0.1 s of the budget left"
rm -f "$work/spent"

# 5. No binary in the initramfs.
run_case missing "" pass
expect_line $'^pass\tmissing\t/usr/sbin/blkpolicy is not in the initramfs\t'

# 6. blkpolicy.boot_budget=0: nothing runs; the pass says why, a disk nothing.
run_case ok "blkpolicy.boot_budget=0" disk vdb
[[ -z $(bound) && ! -e $work/args ]] || fail "a disk's run with a budget of 0"
run_case ok "blkpolicy.boot_budget=00" pass
expect_line $'^pass\tskipped\tblkpolicy.boot_budget=0 on the kernel command line\t'
[[ ! -e $work/args ]] || fail "the pass ran with a budget of 0"

# 7. Over 10 s is 10 s; a value that is not a number leaves the default.
echo "D 900" >"$work/spent"
run_case ok "blkpolicy.boot_budget=600" pass
[[ -z $(bound) && -e $work/args ]] || fail "blkpolicy.boot_budget=600 is not 10 s: $(bound)"
run_case ok "blkpolicy.boot_budget=8" pass
expect_line $'^pass\tskipped\tthe boot\'s budget of 8 s was spent\t'
echo "D 450" >"$work/spent"
run_case ok "blkpolicy.boot_budget=3s" pass
[[ -z $(bound) && -e $work/args ]] || fail "blkpolicy.boot_budget=3s is not the default 5 s: $(bound)"
rm -f "$work/spent"

# 8. Usage: a wrong call says so and still returns 0 (it runs at boot).
sh "$src/packaging/early-boot/early-boot" bogus 2>"$work/err" || fail "a bad call returned non-zero"
grep -q "usage: early-boot pass" "$work/err" || fail "a bad call says: $(cat "$work/err")"
echo "early-boot: each outcome recorded once; a hung run stopped within its budget ($hung ms for 1 s)"
