#!/bin/sh
# SPDX-License-Identifier: MIT
# blkpolicy's pass in a dracut initramfs (pre-mount hook): as the
# initramfs-tools script does, bounded, recorded in /run/blkpolicy/boot.json,
# one line in the kernel log; the boot goes on whatever it returns.
if [ -x /usr/sbin/blkpolicy ] || command -v blkpolicy >/dev/null 2>&1; then
    if command -v timeout >/dev/null 2>&1; then
        timeout 20 blkpolicy apply --boot >/dev/null 2>&1
    else
        blkpolicy apply --boot >/dev/null 2>&1
    fi
fi
true
