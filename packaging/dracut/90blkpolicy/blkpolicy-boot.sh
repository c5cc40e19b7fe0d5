#!/bin/sh
# SPDX-License-Identifier: MIT
# blkpolicy's pass in a dracut initramfs (pre-mount hook, sourced by
# dracut's own script: no exit here): as the initramfs-tools script does,
# within the boot's budget for blkpolicy (/usr/lib/blkpolicy/early-boot),
# recorded in /run/blkpolicy/boot.json, one line in the kernel log; the
# boot goes on whatever it returns.
if [ -x /usr/lib/blkpolicy/early-boot ]; then
    /usr/lib/blkpolicy/early-boot pass
fi
true
