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

# The schedulers that are modules (bfq, kyber), as on the root: writing the
# name loads the module there (packaging/initramfs-tools/hook says why).
installkernel() {
    hostonly='' instmods bfq kyber-iosched
}

install() {
    inst_multiple blkpolicy sleep
    # What runs blkpolicy there, within the boot's budget.
    inst_script /usr/lib/blkpolicy/early-boot
    local f
    for f in /etc/blkpolicy/policy.toml /etc/blkpolicy/policy.d/*.toml /usr/lib/blkpolicy/policy.d/*.toml; do
        [[ -f $f ]] && inst_simple "$f"
    done
    inst_rules /usr/share/blkpolicy/initramfs/60-blkpolicy-early.rules
    # Before the root is mounted: dracut's pre-mount hooks run once the
    # initqueue (udev settled, LVM and md assembled) is done.
    inst_hook pre-mount 10 "$moddir/blkpolicy-boot.sh"
    # What was packed: the policy's digest, then each file's ("DIGEST PATH").
    local checked digest
    checked=$(blkpolicy check --json 2>/dev/null)
    digest=$(sed -n 's/^  "digest": "\([0-9a-f]*\)",*$/\1/p' <<<"$checked")
    [[ -n $digest ]] || digest=invalid
    mkdir -p /var/lib/blkpolicy && {
        echo "$digest"
        sed -n 's/^    "\(\/[^"]*\)": "\([0-9a-f]\{16\}\)",*$/\2 \1/p' <<<"$checked"
    } > /var/lib/blkpolicy/initramfs-policy.digest
}
