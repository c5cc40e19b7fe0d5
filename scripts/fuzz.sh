#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a
# bounded time from the seed corpora in fuzz/corpus. Fails on any crash,
# hang (a single input over 1 s, under the sanitizers), leak or sanitizer
# report.
#   FUZZ_SECONDS=60 scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
# stderr kept: a warning of CMake's about the options given fails the run
# (it says once, on the first configure, what the project ignores).
build_err=$(CC=clang CXX=clang++ BUILD_DIR=build-fuzz BUILD_TYPE=RelWithDebInfo scripts/build.sh \
    -DCMAKE_CXX_COMPILER=clang++ -DBLKPOLICY_TESTS=OFF -DBLKPOLICY_FUZZ=ON \
    -DBLKPOLICY_SANITIZE=address,undefined 2>&1 >/dev/null) || { echo "$build_err"; exit 1; }
if grep -q "were not used by the project" <<<"$build_err"; then
    echo "$build_err"
    echo "the fuzz build passes options the project does not use"
    exit 1
fi
work=
trap '[[ -n "$work" ]] && rm -rf "$work"' EXIT   # also when interrupted
for target in policy udev values writers trace; do
    work=$(mktemp -d /tmp/blkpolicy-fuzz.XXXXXX)
    cp -r "fuzz/corpus/$target/." "$work/"
    echo "== fuzz_$target for ${seconds}s"
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
        "build-fuzz/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=1 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 "$work" 2>&1 | tail -4
    rc=${PIPESTATUS[0]}
    rm -rf "$work"
    if [[ $rc -ne 0 ]]; then echo "fuzz_$target failed (exit $rc)"; exit 1; fi
done
echo "fuzzing: no crash, hang, leak or sanitizer report"
