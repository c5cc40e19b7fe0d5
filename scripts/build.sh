#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures and builds blkpolicy into BUILD_DIR (default: build/).
# Extra arguments go to cmake's configure step; TARGET=NAME builds one target.
# BUILD_TYPE picks CMake's build type; without it a build directory that is
# configured already keeps its own (scripts/run.sh after scripts/test.sh
# reuses the test build instead of rebuilding everything at another type),
# and a new one is RelWithDebInfo.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
type_arg=()
if [[ -n "${BUILD_TYPE:-}" ]]; then
    type_arg=(-DCMAKE_BUILD_TYPE="$BUILD_TYPE")
elif [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    type_arg=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
fi
cmake -S . -B "$build_dir" "${type_arg[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target "${TARGET:-all}"
