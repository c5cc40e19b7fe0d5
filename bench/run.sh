#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds and runs the benchmarks; prints one table. Root only (loop devices,
# a standalone udevd for the comparison, tmpfs mounts). Not part of CI.
#   bench/run.sh                  full run (about 3 minutes)
#   bench/run.sh --quick          fewer devices, shorter idle window
#   bench/run.sh --only SECTION   reaction|scale|startup|hostile|daemon|metrics|measure
#   bench/run.sh --against REV    also build REV (a commit or tag) in a scratch
#                                 directory and run plan, apply, status and the
#                                 daemon's first pass for both, side by side,
#                                 alternating order: the ratio new/old and its
#                                 range (a regression guard; not a CI gate)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
args=()
against=
while (($# > 0)); do
    case $1 in
        --against) against=${2:?--against wants a commit or tag}; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
BUILD_DIR=build-bench BUILD_TYPE=Release TARGET=blkpolicy-bench scripts/build.sh -DBLKPOLICY_BENCH=ON >/dev/null
scratch=
journald_pid=
cleanup() {
    [[ -n "$journald_pid" ]] && kill "$journald_pid" 2>/dev/null || true
    [[ -n "$scratch" ]] && rm -rf "$scratch"
}
trap cleanup EXIT
if [[ -n "$against" ]]; then
    rev=$(git rev-parse --short "$against^{commit}")
    scratch=$(mktemp -d /var/tmp/blkpolicy-against-build.XXXXXX)
    echo "== building $against ($rev) in $scratch (Release, the blkpolicy binary only)" >&2
    git archive "$rev" | tar -x -C "$scratch"
    cmake -S "$scratch" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$scratch/build" --target blkpolicy -j"$(nproc)" >/dev/null
    args+=(--against "$scratch/build/blkpolicy" "$rev")
fi
if ! systemd-cat -t blkpolicy-bench true 2>/dev/null; then
    /lib/systemd/systemd-journald >/dev/null 2>&1 &
    journald_pid=$!
    for _ in $(seq 50); do systemd-cat -t blkpolicy-bench true 2>/dev/null && break; sleep 0.1; done
fi
echo "blkpolicy bench $(git rev-parse --short HEAD), $(date -u +%Y-%m-%d), kernel $(uname -r), $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB"
build-bench/bench/blkpolicy-bench "${args[@]}"
