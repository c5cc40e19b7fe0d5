#!/bin/bash
# SPDX-License-Identifier: MIT
# dracut module of blkpolicy: the binary, the policy and the early udev rule
# into the initramfs, and its pass before the root is mounted (the same as
# the initramfs-tools hook does; blkpolicy(8) EARLY BOOT).

check() {
    require_binaries blkpolicy || return 1
    return 0
}

depends() {
    echo udev-rules
    return 0
}

install() {
    inst_multiple blkpolicy
    # The pass's bound (blkpolicy-boot.sh runs it without one where there is none).
    inst_multiple -o timeout
    local f
    for f in /etc/blkpolicy/policy.toml /etc/blkpolicy/policy.d/*.toml /usr/lib/blkpolicy/policy.d/*.toml; do
        [[ -f $f ]] && inst_simple "$f"
    done
    inst_rules /usr/share/blkpolicy/initramfs/60-blkpolicy-early.rules
    # Before the root is mounted: dracut's pre-mount hooks run once the
    # initqueue (udev settled, LVM and md assembled) is done.
    inst_hook pre-mount 10 "$moddir/blkpolicy-boot.sh"
    local digest
    digest=$(blkpolicy check --json 2>/dev/null | sed -n 's/^ *"digest": "\([0-9a-f]*\)",*$/\1/p')
    [[ -n $digest ]] || digest=invalid
    mkdir -p /var/lib/blkpolicy && echo "$digest" > /var/lib/blkpolicy/initramfs-policy.digest
}
