#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a
# bounded time from the seed corpora in fuzz/corpus. Fails on any crash,
# hang (a single input over 1 s, under the sanitizers), leak or sanitizer
# report.
#   FUZZ_SECONDS=60 scripts/fuzz.sh    (FUZZ_JOBS=1: one target at a time)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
# FUZZ_BUILD_DIR: a build that has the fuzz targets already (clang, the
# sanitizers, -DBLKPOLICY_FUZZ=ON: scripts/test.sh's sanitizer build); without
# it they are built here, in build-fuzz.
build=${FUZZ_BUILD_DIR:-}
if [[ -z "$build" ]]; then
    build=build-fuzz
    # stderr kept: a warning of CMake's about the options given fails the run
    # (it says once, on the first configure, what the project ignores).
    build_err=$(CC=clang CXX=clang++ BUILD_DIR=$build BUILD_TYPE=RelWithDebInfo scripts/build.sh \
        -DCMAKE_CXX_COMPILER=clang++ -DBLKPOLICY_TESTS=OFF -DBLKPOLICY_FUZZ=ON \
        -DBLKPOLICY_SANITIZE=address,undefined 2>&1 >/dev/null) || { echo "$build_err"; exit 1; }
    if grep -q "were not used by the project" <<<"$build_err"; then
        echo "$build_err"
        echo "the fuzz build passes options the project does not use"
        exit 1
    fi
fi
targets=(policy udev values writers trace)
for target in "${targets[@]}"; do
    [[ -x "$build/fuzz/fuzz_$target" ]] || { echo "$build/fuzz/fuzz_$target is not built"; exit 1; }
done
# The targets run side by side, FUZZ_JOBS at a time (default: one per CPU):
# each is one libFuzzer process on one CPU, so two CPUs halve the wall time
# and leave each target its full FUZZ_SECONDS of one CPU.
jobs=${FUZZ_JOBS:-$(nproc)}
work=$(mktemp -d /tmp/blkpolicy-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT   # also when interrupted
fuzz_one() {   # target: runs it from a copy of its corpus, its output in $work/target.log
    local target=$1
    mkdir -p "$work/$target"
    cp -r "fuzz/corpus/$target/." "$work/$target/"
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
        "$build/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=1 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 "$work/$target" >"$work/$target.log" 2>&1
}
failed=()
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
    batch=("${targets[@]:i:jobs}")
    pids=()
    echo "== ${batch[*]/#/fuzz_} for ${seconds}s$( ((${#batch[@]} > 1)) && echo ", side by side")"
    for target in "${batch[@]}"; do
        fuzz_one "$target" &
        pids+=($!)
    done
    for k in "${!batch[@]}"; do
        rc=0
        wait "${pids[$k]}" || rc=$?
        echo "-- fuzz_${batch[$k]} (exit $rc):"
        tail -n 4 "$work/${batch[$k]}.log"
        if [[ $rc -ne 0 ]]; then
            # The report (the crash, leak or sanitizer finding) is above the last lines.
            grep -E -m 20 "ERROR|SUMMARY|runtime error|Test unit written" "$work/${batch[$k]}.log" || true
            failed+=("fuzz_${batch[$k]} (exit $rc)")
        fi
    done
done
if [[ ${#failed[@]} -ne 0 ]]; then echo "failed: ${failed[*]}"; exit 1; fi
echo "fuzzing: no crash, hang, leak or sanitizer report"
