#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures and builds blkpolicy into BUILD_DIR (default: build/).
# Extra arguments go to cmake's configure step; TARGET=NAME builds one target.
# BUILD_TYPE picks CMake's build type; without it a build directory that is
# configured already keeps its own (scripts/run.sh after scripts/test.sh
# reuses the test build instead of rebuilding everything at another type),
# and a new one is RelWithDebInfo.
#
# Where ccache is installed (scripts/install-deps.sh --tests installs it) the
# compilers run through it, unless BLKPOLICY_CCACHE=0: a fresh clone of a
# commit that changed a few files compiles those files and takes the rest
# from the cache (keyed by each file's preprocessed text, the compiler and
# its flags, so nothing stale is ever reused, and a file that fails to
# compile, or whose warnings are errors, is never cached). The clone's own
# path is left out of the key (base_dir, no hash of the working directory),
# so clones at other paths share it.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
type_arg=()
if [[ -n "${BUILD_TYPE:-}" ]]; then
    type_arg=(-DCMAKE_BUILD_TYPE="$BUILD_TYPE")
elif [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    type_arg=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
fi
launcher=()
if [[ "${BLKPOLICY_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
    CCACHE_BASEDIR=$(pwd)
    export CCACHE_BASEDIR CCACHE_NOHASHDIR=1
else
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_C_COMPILER_LAUNCHER=)
fi
cmake -S . -B "$build_dir" "${type_arg[@]}" "${launcher[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target "${TARGET:-all}"
