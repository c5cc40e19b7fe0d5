#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install what blkpolicy needs to build and run, from Debian's packages;
# with --tests also what its test suite needs (fuzzers, the formatter, qemu
# and mmdebstrap for the guest tests). Idempotent; needs root (apt-get). Set
# BLKPOLICY_SKIP_APT=1 to skip (for example in a container image that
# already has the packages).
set -euo pipefail

if [[ "${BLKPOLICY_SKIP_APT:-0}" == 1 ]]; then
    exit 0
fi

# What building and running blkpolicy needs (scripts/run.sh installs only these).
packages=(
    # build
    build-essential cmake pkg-config git dpkg-dev
    # libraries
    libudev-dev libsystemd-dev libtomlplusplus-dev libspdlog-dev doctest-dev nlohmann-json3-dev
    # man pages, generated at build time
    scdoc
    # run time: losetup, udevadm, systemd-udevd, systemd-journald, journalctl
    util-linux udev systemd
)
# What the test suite needs on top (scripts/test.sh, scripts/build-deb.sh: --tests).
test_packages=(
    # fuzzing (scripts/fuzz.sh): clang with libFuzzer and the sanitizer runtimes
    clang libclang-rt-14-dev
    # the compiler cache of scripts/build.sh: a fresh clone compiles what changed
    ccache
    # the format check of the test suite (.clang-format)
    clang-format-14
    # tests: the daemon's system calls, checked against the unit's SystemCallFilter
    strace
    # the package (scripts/build-deb.sh) and the guest tests (tests/vm/):
    # suite chroots and guest images, Debian guests under qemu, the harness
    mmdebstrap qemu-system-x86 qemu-utils python3 e2fsprogs
    # the initramfs images the guests make, read on the host (tests/vm/initrd.py)
    zstd xz-utils lz4 bzip2
    # the fleet test (tests/fleet/): real engines on 127.0.0.1, and promtool
    # for the shipped rules
    prometheus prometheus-alertmanager prometheus-node-exporter systemd-journal-remote
    # the Ansible module and role (ansible/), run against localhost on loop devices
    ansible-core
    # packages that ship udev rules writing queue attributes (64-btrfs-zoned.rules,
    # 71-nvmf-iopolicy-netapp.rules): installed so that every run proves the
    # suite never reads this machine's rules
    btrfs-progs nvme-cli
)
if [[ "${1:-}" == --tests ]]; then
    packages+=("${test_packages[@]}")
fi

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [[ $status != "install ok installed" ]]; then
        missing+=("$p")
    fi
done

if ((${#missing[@]} == 0)); then
    exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: run as root (apt-get) or install them yourself" >&2
    exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
