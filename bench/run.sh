#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds and runs the benchmarks; prints one table. Root only (loop devices,
# a standalone udevd for the comparison, tmpfs mounts). Not part of CI.
#   bench/run.sh            full run (about 3 minutes)
#   bench/run.sh --quick    fewer devices, shorter idle window
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD_DIR=build-bench BUILD_TYPE=Release TARGET=blkpolicy-bench scripts/build.sh -DBLKPOLICY_BENCH=ON >/dev/null
journald_pid=
trap '[[ -n "$journald_pid" ]] && kill "$journald_pid" 2>/dev/null || true' EXIT
if ! systemd-cat -t blkpolicy-bench true 2>/dev/null; then
    /lib/systemd/systemd-journald >/dev/null 2>&1 &
    journald_pid=$!
    for _ in $(seq 50); do systemd-cat -t blkpolicy-bench true 2>/dev/null && break; sleep 0.1; done
fi
echo "blkpolicy bench, $(date -u +%Y-%m-%d), kernel $(uname -r), $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB"
build-bench/bench/blkpolicy-bench "$@"
