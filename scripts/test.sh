#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole test suite on a fresh Debian machine: install what is needed,
# build with warnings as errors, run every test (unit, fake-sysfs goldens,
# the real binary, real-kernel loop-device tests), then build again with
# clang, AddressSanitizer and UndefinedBehaviorSanitizer and run everything
# again.
# Real-kernel tests need root; without it they report themselves skipped.
#
# Then each libFuzzer target runs for FUZZ_SECONDS (default 30) from the
# seed corpora; any crash, hang, leak or sanitizer report fails the run.
#
# And the guest tests (tests/vm/run.py): the Debian package built for
# Debian 12 and 13 in clean chroots, installed and run in guests under qemu
# with systemd as PID 1, on three kernels (Debian 12's, Debian 13's, and
# Debian 13's trixie-backports 7.x). Images and chroots are cached in
# /var/cache/blkpolicy-vm, and made in the background while the host tests
# run. Where guests cannot run (not root, no qemu) they say why and count as
# skipped, never as passed.
#
# The order, for the time it takes on two CPUs: the gcc build and its tests
# beside the guests' images and packages; then the guests, with the clang
# build made beside them at the lowest priority (from the CPU time they
# leave idle); then, on a quiet machine, the tests under the sanitizers and
# the fuzzing. Each step prints when it started.
#
# Both builds compile through ccache where it is installed (scripts/build.sh;
# install-deps.sh --tests installs it), and so does the package build in the
# guests' chroots (tests/vm/package.py): a clone of a commit that changed a
# few files compiles those.
#
# SANITIZE=0 skips the sanitizer pass; FUZZ_SECONDS=0 skips fuzzing; VM=0
# skips the guest tests; VM_SUITES="trixie-bpo" runs one suite only.
#
# A test that cannot run here says SKIPPED and why, and the run names it at
# the end. In CI (CI=true) as root nothing may be skipped for want of what
# root has: a test ctest skipped (the real-kernel tier, the demo, the
# initramfs runner) or a guest tier that could not run fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

# The budget: every step's start and length, printed at the end of every
# run (also a failed one), with the guests' own per job (tests/vm/run.py)
# and the time each cache entry took to make (build/vm-prepare.log). The
# targets: 45 minutes from cold caches (no guest image yet: a new machine),
# 30 with them warm (tests/vm/README.md records both).
step() { echo "== $* (at ${SECONDS} s)"; }
budget=()
timed() { # LABEL CMD...: runs CMD, keeps its time in the budget
    local label=$1 t0=$SECONDS rc=0
    shift
    "$@" || rc=$?
    budget+=("$(printf '%6d %6d  %s' "$t0" $((SECONDS - t0)) "$label")")
    return $rc
}
cache_state=warm
if [[ -z "$(ls -d "${BLKPOLICY_VM_CACHE:-/var/cache/blkpolicy-vm}"/image-* 2>/dev/null)" ]]; then
    cache_state=cold
fi
# The failed assertions of the host tests, last of all: CI keeps only a
# part of a long output, and ctest's full text of a failed test can be
# thousands of lines before it.
failure_digest() {
    local log
    for log in build/Testing/Temporary/LastTest.log build-sanitize/Testing/Temporary/LastTest.log; do
        [[ -f $log ]] && grep -qE ': (FATAL )?ERROR: ' "$log" || continue
        echo "== failed assertions in $log (the first 60 lines):"
        awk '/^TEST CASE: /{tc=$0; shown=0} / (FATAL )?ERROR: /{if (!shown) print "  " tc; shown=1; print "    " $0; n=2; next}
             n > 0 {if ($0 != "") print "      " $0; n--}' "$log" | head -n 60
    done
}
print_budget() {
    local target=30
    [[ $cache_state == warm ]] || target=45
    echo "== budget ($cache_state caches; target $target min): start s, seconds, step"
    printf '  %s\n' "${budget[@]}"
    if [[ -f build/vm-prepare.log ]]; then
        grep -h " ready in " build/vm-prepare.log | sed 's/^\[vm\] /  made in the background: /' || true
    fi
    local results=${BLKPOLICY_VM_RUNS:-/var/tmp/blkpolicy-vm-runs}/last-results.json
    if [[ -f $results && -n "${guests_started:-}" ]]; then
        /usr/bin/python3 tests/vm/run.py --budget "$results" || true
    fi
    printf '  %6s %6d  the whole run (%d:%02d)\n' "" "$SECONDS" $((SECONDS / 60)) $((SECONDS % 60))
    failure_digest
    if ((SECONDS > target * 60)); then
        echo "== OVER BUDGET: $((SECONDS / 60)) minutes with $cache_state caches, against a target of $target"
    fi
}

timed "install what the tests need (apt)" scripts/install-deps.sh --tests

# The daemon tests read what blkpolicy sends to journald. Where no journald
# runs (a container, a machine without systemd as PID 1), start one for the
# run and stop that one, by its pid, afterwards.
journald_pid=
prepare_pid=
sanbuild_pid=
cleanup() {
    print_budget
    if [[ -n "$journald_pid" ]]; then kill "$journald_pid" 2>/dev/null || true; fi
    # The background jobs, each a session of its own with its children
    # (mmdebstrap, dpkg, make, the compilers).
    for pid in "$prepare_pid" "$sanbuild_pid"; do
        if [[ -n "$pid" ]]; then kill -- "-$pid" 2>/dev/null || true; fi
    done
}
trap cleanup EXIT
if [[ $(id -u) -eq 0 ]] && ! systemd-cat -t blkpolicy-test true 2>/dev/null; then
    /lib/systemd/systemd-journald >/dev/null 2>&1 &
    journald_pid=$!
    for _ in $(seq 50); do systemd-cat -t blkpolicy-test true 2>/dev/null && break; sleep 0.1; done
    echo "== started systemd-journald (pid $journald_pid) for the daemon tests"
fi

# "$@" in the background as a session of its own (stopped as a whole with
# kill -- -PID) at the lowest CPU priority. The kernel's autogroup
# scheduling shares the CPUs between sessions whatever their processes'
# nice values, and each guest's qemu is a session of its own: so the
# session's own nice is raised too, where the kernel has one (measured here
# on 2 CPUs beside two busy sessions: a loop at nice 19 in its own session
# took a third of the CPU time, with its session at nice 19 as well 1%).
background_lowest() {
    setsid sh -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 ionice -c 3 "$@"' sh "$@" &
}

guests=0
if [[ "${VM:-1}" != 0 ]]; then guests=1; fi
suites=()
for s in ${VM_SUITES:-}; do suites+=(--suite "$s"); done

# The guests' images, build chroots and packages take minutes to make and
# wait on the archive much of that time: they are made in the background
# while the gcc build and its tests run, in a session of their own with an
# equal share of the CPUs (the guests need both, so neither goes first).
# The guest run takes them from the cache (and makes whatever this did not).
if [[ $guests == 1 && $(id -u) -eq 0 ]]; then
    mkdir -p build
    step "guest images, chroots and packages: made in the background beside the host tests (build/vm-prepare.log)"
    setsid ionice -c 3 /usr/bin/python3 tests/vm/run.py --prepare-only "${suites[@]}" \
        >build/vm-prepare.log 2>&1 </dev/null &
    prepare_pid=$!
    prepare_start=$SECONDS
fi

# -O2 as Debian builds the package, without debug information: it is a
# quarter of gcc's compile time here, and a failing check names its file
# and line without it.
step "build (warnings are errors)"
timed "gcc build" env BUILD_DIR=build BUILD_TYPE=Release scripts/build.sh "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
    -DBLKPOLICY_WERROR=ON -DBLKPOLICY_TESTS=ON
# One per CPU: the real-kernel tests (loop devices, a daemon, journald)
# are RUN_SERIAL and run alone.
step "tests"
strict=0
if [[ "${CI:-}" == true && $(id -u) -eq 0 ]]; then strict=1; fi
timed "host tests (gcc build)" bash -o pipefail -c 'ctest --test-dir build --output-on-failure -j"$1" | tee build/ctest.log' \
    sh "$(nproc)"
# A real-kernel check this host's kernel cannot run says why in its output
# (a kernel built without bfq, say); named here so a pass never hides it.
grep -h "SKIPPED: " build/Testing/Temporary/LastTest.log | sort -u | sed 's/^/  host tests: /' || true
# Whole tests ctest did not run (they exited 77: no root, no loop driver,
# no mount namespaces).
not_run=$(sed -n '/The following tests did not run:/,/^$/p' build/ctest.log | grep -F '(Skipped)' || true)
skipped=()
if [[ -n $not_run ]]; then
    skipped+=("$(grep -c . <<<"$not_run") host test(s)")
    echo "== host tests SKIPPED (each says why above):"
    echo "$not_run"
    if ((strict)); then
        echo "== FAILED: CI=true as root, and tests were skipped"
        exit 1
    fi
fi

# The second build is clang's (the first is gcc's, so both compilers'
# warnings are errors), with ASan + UBSan, assertions on, -O1 (the
# sanitizers' own advice), line tables only for debug information (all a
# sanitizer's stack trace needs), and the libFuzzer targets: one build serves the
# tests under the sanitizers and the fuzzing. Where guests run, it is made
# beside them at the lowest priority (a guest under TCG leaves part of its
# CPU idle, and the last guest runs alone); elsewhere here and now.
sanbuild_cmd=(env CC=clang CXX=clang++ BUILD_DIR=build-sanitize BUILD_TYPE=Debug scripts/build.sh
    -DCMAKE_CXX_COMPILER=clang++ "-DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only -O1" -DBLKPOLICY_WERROR=ON
    -DBLKPOLICY_TESTS=ON -DBLKPOLICY_FUZZ=ON -DBLKPOLICY_SANITIZE=address,undefined)
if [[ "${SANITIZE:-1}" == 1 || "${FUZZ_SECONDS:-30}" != 0 ]]; then
    if [[ $guests == 1 ]]; then
        step "build with clang, ASan + UBSan, and the fuzz targets: in the background beside the guests, lowest priority (build/sanitize-build.log)"
        background_lowest "${sanbuild_cmd[@]}" >build/sanitize-build.log 2>&1 </dev/null
        sanbuild_pid=$!
        sanbuild_start=$SECONDS
    else
        step "build with clang, ASan + UBSan, and the fuzz targets"
        timed "clang build (ASan + UBSan, fuzz targets)" "${sanbuild_cmd[@]}"
    fi
fi

guests_rc=0
if [[ $guests == 1 ]]; then
    if [[ -n "$prepare_pid" ]]; then
        prc=0
        timed "waiting for the guests' images, chroots, packages and snapshots" wait "$prepare_pid" || prc=$?
        budget+=("$(printf '%6d %6d  %s' "$prepare_start" $((SECONDS - prepare_start)) \
            "the guests' images, chroots, packages and snapshots, in the background")")
        prepare_pid=
        step "the background preparation ended (exit $prc; the guest run makes anything missing):"
        tail -n 5 build/vm-prepare.log
    fi
    step "guest tests: Debian 12, 13 and 13 with the 7.x kernel under qemu, systemd as PID 1 (tests/vm/run.py)"
    guests_started=1
    timed "guest tests" /usr/bin/python3 tests/vm/run.py "${suites[@]}" || guests_rc=$?
    if [[ $guests_rc -eq 77 ]]; then
        echo "guest tests SKIPPED (the reason is above)"
        skipped+=("the guest tier")
        guests_rc=0
        if ((strict)); then
            echo "== FAILED: CI=true as root, and the guest tier was skipped"
            guests_rc=1
        fi
    fi
fi

if [[ -n "$sanbuild_pid" ]]; then
    brc=0
    wait "$sanbuild_pid" || brc=$?
    sanbuild_pid=
    step "the clang build ended (exit $brc; $((SECONDS - sanbuild_start)) s after it started)"
    budget+=("$(printf '%6d %6d  %s' "$sanbuild_start" $((SECONDS - sanbuild_start)) \
        "clang build (ASan + UBSan, fuzz targets), in the background at the lowest priority")")
    if [[ $brc -ne 0 ]]; then
        tail -n 60 build/sanitize-build.log
        exit "$brc"
    fi
fi
if [[ "${SANITIZE:-1}" == 1 ]]; then
    step "tests under ASan + UBSan"
    # (The fleet and Ansible tests run once, with the plain build: their
    # engines are the point; so do the checks labelled "source", whose
    # answer no compiler changes: tests/CMakeLists.txt.)
    timed "host tests under ASan + UBSan" env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --test-dir build-sanitize --output-on-failure -j"$(nproc)" \
        -LE "fleet|source|ansible"
fi

if [[ "${FUZZ_SECONDS:-30}" != 0 ]]; then
    step "fuzzing (libFuzzer, ASan + UBSan), ${FUZZ_SECONDS:-30}s per target, one per CPU"
    timed "fuzzing" env FUZZ_BUILD_DIR=build-sanitize FUZZ_SECONDS="${FUZZ_SECONDS:-30}" scripts/fuzz.sh
fi

if [[ $guests_rc -ne 0 ]]; then
    echo "guest tests FAILED (exit $guests_rc; their summary is above)"
    exit "$guests_rc"
fi
if ((${#skipped[@]})); then
    printf -v joined '%s, ' "${skipped[@]}"
    step "every test that ran passed; SKIPPED: ${joined%, } (why: above)"
else
    step "every test passed"
fi
