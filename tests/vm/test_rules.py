# SPDX-License-Identifier: MIT
"""The udev rules real images ship, in a Debian 13 guest that has them from
Debian's archive (the image carries amazon-ec2-utils and btrfs-progs):

1. A zoned-btrfs rule behind its GOTO guards (btrfs-progs'
   64-btrfs-zoned.rules) beside a policy that sets every disk's scheduler:
   audit names no udev rule, the daemon raises no conflict alert; a rule of
   the same shape written for the test, whose conditions do select a
   btrfs-formatted disk, is named by file and line, on that disk only.
2. amazon-ec2-utils' 70-ec2-nvme-devices.rules, with a rule of the same
   shape for QEMU's NVMe model (QEMU cannot give an NVMe disk Amazon's), and
   a rule in the shape of Google's 99-gce.rules for a SCSI disk with vendor
   Google and product PersistentDisk: the values udev gives, read from
   sysfs; `blkpolicy import` of the three files converts every tuning rule
   (exit 0); the rules masked the way an admin does, a reboot: the daemon
   gives the same values, status exits 0, and an echo to io_timeout or to
   the scheduler raises a drift alert and is put back.
3. udevd as the judge of import (between the two): each rule file of
   tests/data/udev-corpus installed alone, an add event on every disk
   (SCSI disks with the vendors, models and serials the files key on among
   them), udevd's values read; then, from the same starting values, the
   values the file's import applies. A value that differs must come from a
   line the import named (left out, out of scope). udevd's values per file
   are kept between runs where nothing they depend on changed (ORACLE_RECIPE
   below); the import runs every time.
"""

import hashlib
import json
import os
import re
import shutil
import time

import images
import machine
from guest import GuestError
from harness import expect, expect_eq
from machine import cursor, disks_by_serial, read_queue, since, wait_journal

UNIT = "blkpolicy.service"
VENDOR_EC2 = "/usr/lib/udev/rules.d/70-ec2-nvme-devices.rules"
VENDOR_ZONED = "/usr/lib/udev/rules.d/64-btrfs-zoned.rules"
QEMU_NVME = "/etc/udev/rules.d/70-bp-qemu-nvme.rules"
GCE_SHAPE = "/etc/udev/rules.d/99-bp-spinning-google.rules"
BTRFS_SHAPE = "/etc/udev/rules.d/64-bp-btrfs-any.rules"
IMPORTED = "/etc/blkpolicy/policy.d/50-imported-udev.toml"

# The shape of amazon-ec2-utils' io_timeout lines, for the model QEMU's
# NVMe controller reports.
QEMU_NVME_RULES = """\
# blkpolicy's guest test: amazon-ec2-utils' shape, for QEMU's NVMe model
ACTION=="remove", GOTO="bp_qemu_nvme_end"
KERNEL=="nvme[0-9]*n[0-9]*", ENV{DEVTYPE}=="disk", ATTRS{model}=="QEMU NVMe Ctrl", ATTR{queue/io_timeout}="4294967295"
LABEL="bp_qemu_nvme_end"
"""

# The shape of Google's 99-gce.rules: disks of that vendor that claim to spin get no scheduler.
GCE_SHAPE_RULES = """\
SUBSYSTEM=="block", ENV{DEVTYPE}!="partition", ACTION=="add|change", ENV{ID_VENDOR}=="*Google*", \
ATTR{queue/rotational}=="1", ATTR{queue/scheduler}="none"
"""

# btrfs-progs' guards, and a tuning line whose condition a plain disk meets.
BTRFS_SHAPE_RULES = """\
SUBSYSTEM!="block", GOTO="bp_btrfs_end"
ACTION!="add|change", GOTO="bp_btrfs_end"
ENV{ID_FS_TYPE}!="btrfs", GOTO="bp_btrfs_end"
ATTR{queue/zoned}=="none", ATTR{queue/scheduler}="kyber"
LABEL="bp_btrfs_end"
"""

EVERY_SCHEDULER = """\
# blkpolicy's guest test: every disk's scheduler
[daemon]
mode = "enforce"
verify_interval = "2s"

[[rule]]
name = "every disk on mq-deadline"
[rule.set]
scheduler = "mq-deadline"
"""


def _findings(g, code):
    rc, out, err = g.run("blkpolicy audit --json", check=False)
    expect(rc in (0, 1), f"audit: exit {rc}\n{err}")
    doc = json.loads(out)
    return rc, [f for f in doc["findings"] if f["code"] == code], doc


def _trigger(g):
    g.sh("udevadm trigger --action=change --subsystem-match=block && udevadm settle", timeout=120)


def zoned_btrfs(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "rules: btrfs-progs' zoned rule names no disk its conditions exclude; one of its shape that "
                   "selects a btrfs disk is named there only", fatal=True):
        machine.install_package(g, timeout=300, if_missing=True)
        g.sh(f"systemctl disable --now {UNIT} 2>/dev/null; rm -f /etc/blkpolicy/policy.d/*.toml")
        g.sh(f"test -e {VENDOR_ZONED}")
        machine.wait_all_disks(g)
        g.write_file("/etc/blkpolicy/policy.toml", EVERY_SCHEDULER)
        rc, conflicts, doc = _findings(g, "udev-rule-conflict")
        expect(not conflicts, f"audit names a udev rule: {json.dumps(conflicts, indent=1)}")
        serious = [f for f in doc["findings"] if f["severity"] != "info"]
        expect_eq(rc, 1 if serious else 0, f"audit's exit status, with findings {[f['code'] for f in serious]}")
        R.figure(s, "audit with every scheduler set", f"exit {rc}, no udev-rule-conflict "
                 f"({len(doc['findings'])} findings: {sorted({f['code'] for f in doc['findings']})})")

        c = cursor(g)
        g.sh(f"systemctl enable --now {UNIT} 2>/dev/null")
        machine.wait_active(g)
        names = disks_by_serial(g)
        g.wait_for(f"grep -q '\\[mq-deadline\\]' /sys/block/{names['bp-virtio1']}/queue/scheduler", timeout=60,
                   what="the policy's scheduler")
        _trigger(g)  # udevd runs every rule again; the daemon verifies after it
        time.sleep(6)
        alerts = [e.get("MESSAGE") for e in since(g, c, SYSLOG_IDENTIFIER="blkpolicy", BLKPOLICY_EVENT="conflict")]
        expect(not alerts, f"conflict alerts: {alerts}")

        # A btrfs disk (a loop device on a file of the root: a disk qemu backs
        # with nothing would lose what mkfs writes) and a rule of the same
        # shape that selects it.
        d = g.sh("truncate -s 256M /root/bp-btrfs.img && losetup --find --show /root/bp-btrfs.img").strip()
        d = d.rsplit("/", 1)[1]
        g.sh(f"mkfs.btrfs -q -f /dev/{d} && udevadm trigger --action=change /sys/block/{d} && udevadm settle",
             timeout=120)
        expect_eq(g.sh(f"udevadm info -q property -n {d} | sed -n 's/^ID_FS_TYPE=//p'").strip(), "btrfs",
                  "the disk's filesystem, as udev has it")
        g.write_file(BTRFS_SHAPE, BTRFS_SHAPE_RULES)
        g.sh(f"udevadm control --reload && systemctl reload {UNIT}")  # the daemon reads writers at a reload
        rc, conflicts, _ = _findings(g, "udev-rule-conflict")
        expect_eq([(f["device"], f["evidence"].get("udev rule")) for f in conflicts], [(d, f"{BTRFS_SHAPE}:4")],
                  "the udev rules audit names, and where")
        c = cursor(g)
        _trigger(g)
        found = wait_journal(g, c, 60, "a conflict alert", SYSLOG_IDENTIFIER="blkpolicy", BLKPOLICY_EVENT="conflict")
        expect_eq({(e.get("BLKPOLICY_DEVICE"), e.get("BLKPOLICY_WRITER")) for e in found}, {(d, f"{BTRFS_SHAPE}:4")},
                  "the conflict alerts' devices and writers")
        R.figure(s, "conflict alert", found[0].get("MESSAGE"))
        g.sh(f"systemctl disable --now {UNIT} 2>/dev/null; rm -f {BTRFS_SHAPE}; udevadm control --reload; "
             f"losetup -d /dev/{d}; rm -f /root/bp-btrfs.img")


def clouds(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "rules: amazon-ec2-utils' rule, one of its shape for QEMU's NVMe, Google's shape for a SCSI disk: "
                   "udev's values, and their import converts every tuning rule", fatal=True):
        g.sh(f"test -e {VENDOR_EC2}")
        g.write_file(QEMU_NVME, QEMU_NVME_RULES)
        g.write_file(GCE_SHAPE, GCE_SHAPE_RULES)
        g.write_file("/etc/blkpolicy/policy.toml", '[daemon]\nmode = "enforce"\nverify_interval = "2s"\n')
        g.sh("udevadm control --reload")
        gce = machine.hot_add(g, "bp-gce-pd", vendor="Google", product="PersistentDisk")  # claims to spin
        names = disks_by_serial(g)
        nvme = names["bp-nvme1"]
        ctx.rules_disks = {"nvme": nvme, "gce": gce}
        # udev's turn: the scheduler moved away first, so that the rule shows.
        g.sh(f"echo mq-deadline > /sys/block/{gce}/queue/scheduler; echo 30000 > /sys/block/{nvme}/queue/io_timeout")
        _trigger(g)
        by_udev = {"nvme": read_queue(g, nvme, ["io_timeout"]), "gce": read_queue(g, gce, ["scheduler", "rotational"])}
        R.figure(s, "values udev gave", json.dumps(by_udev))
        expect_eq(by_udev["gce"]["scheduler"], "none", "the Google disk's scheduler from the rule")
        expect(by_udev["nvme"]["io_timeout"] != "30000", f"udev did not set io_timeout: {by_udev}")
        ctx.by_udev = by_udev

        rc, toml, err = g.run(f"blkpolicy import {VENDOR_EC2} {QEMU_NVME} {GCE_SHAPE}", check=False)
        expect(rc == 0, f"import: exit {rc}\n{err}")
        expect("blkpolicy: 4 of 4 tuning rule(s) converted" in err, f"import's summary:\n{err}")
        g.sh("mkdir -p /etc/blkpolicy/policy.d")
        g.write_file(IMPORTED, toml)
        g.sh("blkpolicy check")
        plan = json.loads(g.sh(f"blkpolicy plan --json {nvme} {gce}"))
        planned = {d["device"]: sorted(a["attribute"] for a in d["actions"]) for d in plan["devices"]}
        expect_eq(planned, {nvme: ["io_timeout"], gce: ["scheduler"]}, "what the imported policy sets where")

    with R.step(s, "rules: the vendor's rule masked in /etc, ours removed, a reboot: the daemon gives udev's values; "
                   "status 0; an echo to io_timeout and to the scheduler is put back"):
        nvme, gce = ctx.rules_disks["nvme"], ctx.rules_disks["gce"]
        g.sh(f"ln -sf /dev/null /etc/udev/rules.d/{VENDOR_EC2.rsplit('/', 1)[1]}; rm -f {QEMU_NVME} {GCE_SHAPE}")
        g.sh(f"systemctl enable {UNIT} 2>/dev/null")
        g.reboot()
        machine.wait_active(g, timeout=90)
        machine.wait_all_disks(g)
        # A reboot here is a new qemu: the hot-added disk comes again, as a
        # cloud's disk attached after the boot would, with no udev rule for it now.
        gce = machine.hot_add(g, "bp-gce-pd", vendor="Google", product="PersistentDisk")
        nvme = disks_by_serial(g)["bp-nvme1"]
        want = {"nvme": ctx.by_udev["nvme"], "gce": {"scheduler": "none"}}
        deadline = time.monotonic() + 60
        while True:
            have = {"nvme": read_queue(g, nvme, ["io_timeout"]), "gce": read_queue(g, gce, ["scheduler"])}
            if have == want or time.monotonic() > deadline:
                break
            time.sleep(1)
        expect_eq(have, want, "the values after the reboot, from the imported policy (udev's rules masked)")
        rc, out, _ = g.run(f"blkpolicy status {nvme} {gce}", check=False)
        expect(rc == 0, f"status: exit {rc}\n{out}")
        rc, conflicts, _ = _findings(g, "udev-rule-conflict")
        expect(not conflicts, f"audit names a masked udev rule: {conflicts}")

        for dev, attr, value in ((nvme, "io_timeout", "45000"), (gce, "scheduler", "mq-deadline")):
            c = cursor(g)
            g.sh(f"echo {value} > /sys/block/{dev}/queue/{attr}")
            alerts = wait_journal(g, c, 30, f"a drift alert for {attr}", SYSLOG_IDENTIFIER="blkpolicy",
                                  BLKPOLICY_EVENT="drift", BLKPOLICY_ATTRIBUTE=attr)
            expect(alerts[0].get("BLKPOLICY_DEVICE") == dev, f"the alert's device: {alerts[0]}")
            put_back = (f"test \"$(cat /sys/block/{dev}/queue/io_timeout)\" != 45000" if attr == "io_timeout" else
                        f"grep -q '\\[none\\]' /sys/block/{dev}/queue/scheduler")
            g.wait_for(put_back, timeout=30, what=f"{attr} put back")
            R.figure(s, f"drift of {attr}", alerts[0].get("MESSAGE"))
        expect_eq(read_queue(g, nvme, ["io_timeout"]), ctx.by_udev["nvme"], "io_timeout put back")
        g.sh(f"systemctl disable --now {UNIT} 2>/dev/null; rm -f {IMPORTED} /etc/udev/rules.d/70-ec2-nvme-devices.rules")
        g.unplug("bp-gce-pd")


# udevd as the judge of an import (issue 51): the values each corpus file
# makes udevd set on this guest's disks, against the values the file's
# import sets from the same starting point. Read and put back by one shell
# script in the guest (sh's own read: no process per file).
ORACLE_ATTRS = ("queue/scheduler queue/rotational queue/read_ahead_kb queue/nr_requests queue/rq_affinity "
                "queue/add_random queue/nomerges queue/max_sectors_kb queue/wbt_lat_usec queue/io_timeout "
                "queue/iosched/read_lat_nsec queue/iosched/back_seek_penalty queue/iosched/low_latency "
                "bdi/read_ahead_kb bdi/strict_limit device/timeout events_poll_msecs "
                "md/stripe_cache_size md/sync_speed_min md/sync_speed_max md/group_thread_cnt")
ORACLE_SCRIPT = """#!/bin/sh
# blkpolicy's guest test: read (or put back, from a file of "disk attr value"
# lines) the values a rule file may set, on every whole disk.
ATTRS="__ATTRS__"
tab=$(printf '\\t')
disks() {
    for d in /sys/block/sd* /sys/block/vd* /sys/block/nvme*n*; do [ -e "$d/device" ] && echo "${d##*/}"; done
    # The stacks: bound loop devices, dm and md (no device link of their own).
    for d in /sys/block/loop* /sys/block/dm-* /sys/block/md*; do
        { [ -e "$d/loop/backing_file" ] || [ -e "$d/dm" ] || [ -e "$d/md" ]; } && [ -e "$d/queue" ] && echo "${d##*/}"
    done
}
case $1 in
ids)
    # What each name is, as far as a later run must find the same devices
    # under the same names: the backing file, dm name, md level, or the
    # device path (which ends in the name).
    for n in $(disks); do
        d=/sys/block/$n
        if [ -e "$d/loop/backing_file" ]; then read -r id <"$d/loop/backing_file"; id="loop:$id"
        elif [ -e "$d/dm/name" ]; then read -r id <"$d/dm/name"; id="dm:$id"
        elif [ -e "$d/md/level" ]; then read -r id <"$d/md/level"; id="md:$id"
        else id=$(readlink -f "$d"); fi
        printf '%s\t%s\n' "$n" "$id"
    done ;;
read)
    for n in $(disks); do
        for a in $ATTRS; do
            f=/sys/block/$n/$a
            [ -e "$f" ] || continue
            v=
            read -r v <"$f" 2>/dev/null
            case $a in queue/scheduler) v=${v#*\\[}; v=${v%%\\]*} ;; esac
            printf '%s\\t%s\\t%s\\n' "$n" "$a" "$v"
        done
    done ;;
reset)
    # The scheduler first (a switch resets nr_requests and makes iosched/
    # anew), the readaheads last (a rotational or max_sectors_kb write
    # moves them on newer kernels).
    for pass in scheduler rest readahead; do
        while IFS="$tab" read -r n a v; do
            case $pass:$a in
            scheduler:queue/scheduler | readahead:*read_ahead_kb) ;;
            rest:queue/scheduler | rest:*read_ahead_kb | rest:queue/iosched/* | scheduler:* | readahead:*) continue ;;
            esac
            f=/sys/block/$n/$a
            cur=
            read -r cur <"$f" 2>/dev/null
            case $a in queue/scheduler) cur=${cur#*\\[}; cur=${cur%%\\]*} ;; esac
            w=$v
            # md's speeds read "N (local)" or "N (system)"; "system"
            # makes the array follow the sysctl again.
            case $a:$v in md/sync_speed_*:*"(system)") w=system ;; md/sync_speed_*:*) w=${v%% *} ;; esac
            [ "$cur" = "$v" ] || echo "$w" >"$f" 2>/dev/null
        done <"$2"
    done ;;
esac
""".replace("__ATTRS__", ORACLE_ATTRS)
# Disks with the vendors, models and serials the corpus keys on (as QEMU
# can give them): Pure's array, VMware's virtual disk, IBM's SAN Volume
# Controller, HPE Nimble's serial.
ORACLE_DISKS = (("bp-o-pure", {"vendor": "PURE", "product": "FlashArray"}),
                ("bp-o-vmware", {"vendor": "VMware", "product": "Virtual disk"}),
                ("bp-o-ibm", {"vendor": "IBM", "product": "2145"}),
                ("bp-o-6c9ce9", {}))
# Besides them, what the corpus's rules select by kernel name, bus or stack
# (KERNEL=="loop*|dm-*|md*", ENV{ID_BUS}=="usb", ATTR{removable}): a USB
# flash drive (QEMU's usb-storage, removable, on an xHCI controller
# hot-added on a free root port), a loop device, a dm-linear volume and an
# md raid1, the last three on loop devices over files of the root (built in
# the guest; their members are loop devices the oracle reads too).
ORACLE_USB = "bp-o-usb"
ORACLE_STACKS = """set -e
for f in a b c d e f g h; do truncate -s 64M /root/bp-o-$f.img; done
la=$(losetup --find --show /root/bp-o-a.img)
lb=$(losetup --find --show /root/bp-o-b.img)
lc=$(losetup --find --show /root/bp-o-c.img)
ld=$(losetup --find --show /root/bp-o-d.img)
dmsetup create bp-o-linear --table "0 $(blockdev --getsz $lb) linear $lb 0"
mdadm --create /dev/md/bp-o --level=1 --raid-devices=2 --metadata=1.2 --assume-clean --run --quiet $lc $ld
mdadm --create /dev/md/bp-o5 --level=5 --raid-devices=3 --metadata=1.2 --assume-clean --run --quiet \
    $(losetup --find --show /root/bp-o-e.img) $(losetup --find --show /root/bp-o-f.img) \
    $(losetup --find --show /root/bp-o-g.img)
# One MBR partition from sector 2048 to the end (type 83), ext4 on it.
printf '\\000\\000\\000\\000\\203\\000\\000\\000\\000\\010\\000\\000\\000\\370\\001\\000' |
    dd of=/root/bp-o-h.img bs=1 seek=446 conv=notrunc status=none
printf '\\125\\252' | dd of=/root/bp-o-h.img bs=1 seek=510 conv=notrunc status=none
lh=$(losetup -P --find --show /root/bp-o-h.img)
udevadm settle
mkfs.ext4 -q ${lh}p1
udevadm trigger --settle --action=change ${lh}p1
"""
ORACLE_STACKS_DOWN = ("mdadm --stop /dev/md/bp-o >/dev/null 2>&1; mdadm --stop /dev/md/bp-o5 >/dev/null 2>&1; "
                      "dmsetup remove bp-o-linear 2>/dev/null; "
                      "for f in a b c d e f g h; do for l in $(losetup -j /root/bp-o-$f.img -O NAME -n 2>/dev/null); "
                      "do losetup -d $l; done; rm -f /root/bp-o-$f.img; done; udevadm settle; true")
# The partition the oracle's add events reach beside the whole devices.
ORACLE_PARTITION = ("for p in /sys/block/loop*/loop*p1; do [ -e \"$p\" ] && echo ${p##*/}; done | head -n 1")


def _usb_flash(g):
    """Hot-adds the USB flash drive; returns its kernel name."""
    g.qmp.call("device_add", driver="qemu-xhci", id="bp-o-xhci", bus="rp1")
    g.qmp.call("blockdev-add", driver="null-co", **{"node-name": ORACLE_USB, "size": 256 << 20, "read-zeroes": True})
    g.qmp.call("device_add", driver="usb-storage", id="dev-" + ORACLE_USB, drive=ORACLE_USB, bus="bp-o-xhci.0",
               serial=ORACLE_USB, removable=True)
    find = "for d in /sys/block/sd*; do readlink -f $d | grep -q /usb && echo ${d##*/}; done | head -n 1 | grep ."
    name = g.wait_for(find, timeout=60, what="the USB flash drive").strip()
    g.sh("udevadm settle")
    return name


def _usb_flash_gone(g):
    """Takes the drive and its controller away (what of them was added)."""
    for undo in (lambda: g.unplug(ORACLE_USB), lambda: g.qmp.call("device_del", id="bp-o-xhci")):
        try:
            undo()
        except GuestError:
            pass
    g.wait_for("! ls -d /sys/bus/pci/drivers/xhci_hcd/0000:* >/dev/null 2>&1", timeout=60, what="the xHCI gone")


def _oracle_values(g):
    return {(n, a): v for n, a, v in (l.split("\t", 2) for l in g.sh("sh /tmp/bp-oracle.sh read", retries=2).splitlines()
                                      if l.count("\t") == 2)}


def _named_texts(toml):
    """The text of each rule and assignment the import left out or called
    out of scope: the comment lines of its output."""
    texts, lines = [], toml.splitlines()
    for i, l in enumerate(lines):
        if not l.startswith("# from "):
            continue
        if "(left out" in l or "(out of blkpolicy's scope" in l:
            texts.append(lines[i + 1] if i + 1 < len(lines) else l)
        elif ": left out " in l:
            texts.append(l)
    return texts


# udevd's half of the oracle is kept between runs (_oracle_cache): what
# udevd sets with a corpus file depends on the image (its udev, rules and
# kernel), the machine and the oracle's devices (this file, machine.py),
# the values they start from and the file, never on blkpolicy (the package
# installs no rule udevd runs; the service is stopped). A file's entry is
# used only when this run's devices have the same names and identities
# and the same starting values; any other run asks udevd again, and
# BLKPOLICY_VM_ORACLE_FRESH=1 always does. The import's half runs every
# time: it is what is under test.
ORACLE_RECIPE = "2026-12-07 one add event per file on every device, the start restored between"


def _oracle_cache(ctx):
    key = images._key(ORACLE_RECIPE, ORACLE_SCRIPT, ORACLE_DISKS, ORACLE_USB, ORACLE_STACKS, ORACLE_PARTITION,
                      ctx.image.dir, [d.spec() for d in machine.DISKS], list(machine.CONTROLLERS))
    # An empty entry the runs fill a file at a time (older keys pruned).
    return images.cache_entry("oracle", ctx.suite, key, "udevd's values per corpus file", lambda work: None)


def _tsv(values):
    return sorted(f"{n}\t{a}\t{v}" for (n, a), v in values.items())


def udevd_oracle(ctx):
    """Each file of tests/data/udev-corpus, installed on its own: udevd's
    values on every disk after an add event, then, from the same starting
    values, the values its import applies. A value that differs must come
    from a line the import named (left out, out of scope); anything else is
    a disagreement."""
    g, s, R = ctx.guest, ctx.suite, ctx.results
    corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "udev-corpus")
    files = sorted(f for f in os.listdir(corpus) if f.endswith(".rules"))
    with R.step(s, f"rules: udevd as the judge of import: {len(files)} rule files of real hosts' shapes, each "
                   "installed alone, udevd's values on every disk against its import's from the same start; every "
                   "difference comes from a line the import named"):
        g.sh(f"systemctl disable --now {UNIT} 2>/dev/null; mkdir -p /mnt/share/corpus")
        shutil.copytree(corpus, os.path.join(ctx.share, "corpus"), dirs_exist_ok=True)
        g.write_file("/tmp/bp-oracle.sh", ORACLE_SCRIPT)
        for node, props in ORACLE_DISKS:
            machine.hot_add(g, node, **props)
        usb = None
        try:
            usb = ""  # (the controller and drive added: taken away again however this ends)
            usb = _usb_flash(g)
            g.write_file("/tmp/bp-oracle-stacks.sh", ORACLE_STACKS)
            g.sh("sh /tmp/bp-oracle-stacks.sh", timeout=120)
            # What the guest's own rules give at an add event is the start.
            disks = sorted({n for n, _ in _oracle_values(g)})
            part = g.sh(ORACLE_PARTITION).strip()
            kinds = g.sh("for n in " + " ".join(disks) + "; do echo $n $(readlink -f /sys/block/$n | "
                         "grep -o '/usb\\|/virtual/block\\|/virtio\\|/nvme\\|/host' | head -n 1); done")
            R.figure(s, "the oracle's devices", " ".join(l.replace(" ", ":") for l in kinds.splitlines()) +
                     f"; the partition {part} (ext4)")
            for want, rx in (("USB", r"^%s:/usb" % usb), ("loop", r"^loop\d+:"), ("dm", r"^dm-\d+:"),
                             ("md", r"^md\d+:")):
                expect(any(re.search(rx, l.replace(" ", ":")) for l in kinds.splitlines()),
                       f"the oracle reads no {want} device: {kinds}")
            fs_type = g.sh(f"udevadm info -q property -n {part} | sed -n 's/^ID_FS_TYPE=//p'").strip() if part else ""
            expect(part and fs_type == "ext4", f"the oracle's partition: {part!r}, filesystem {fs_type!r}")
            levels = g.sh("cat /sys/block/md*/md/level 2>/dev/null").split()
            expect(sorted(levels) == ["raid1", "raid5"], f"the oracle's md arrays: {levels}")
            paths = " ".join([f"/sys/block/{n}" for n in disks] + ([f"/sys/class/block/{part}"] if part else []))
            g.sh(f"udevadm trigger --settle --action=add {paths}", timeout=180)
            start = _oracle_values(g)
            g.write_file("/tmp/bp-oracle.start", "".join(line + "\n" for line in _tsv(start)))
            ids = sorted(g.sh("sh /tmp/bp-oracle.sh ids").splitlines())
            cache = _oracle_cache(ctx)
            fresh = os.environ.get("BLKPOLICY_VM_ORACLE_FRESH") == "1"
            rows, disagreements, from_cache = [], [], []
            spent = {"udevd": 0.0, "the import": 0.0}  # guest CPU: where the step's time goes
            for i, f in enumerate(files):
                c0 = g.total_cpu_seconds()
                with open(os.path.join(corpus, f), "rb") as fh:
                    entry = os.path.join(cache, f"{f}-{hashlib.sha256(fh.read()).hexdigest()[:16]}.json")
                kept = None
                if not fresh and os.path.exists(entry):
                    with open(entry) as fh:
                        kept = json.load(fh)
                    if kept.get("ids") != ids or kept.get("start") != _tsv(start):
                        kept = None
                if kept:
                    by_udev = {(n, a): v for n, a, v in (l.split("\t", 2) for l in kept["by_udev"])}
                    from_cache.append(f)
                else:
                    g.sh(f"sh /tmp/bp-oracle.sh reset /tmp/bp-oracle.start; cp /mnt/share/corpus/{f} "
                         f"/etc/udev/rules.d/{f} && udevadm control --reload && udevadm trigger --settle --action=add "
                         f"{paths}; rm -f /etc/udev/rules.d/{f}; udevadm control --reload", timeout=180)
                    by_udev = _oracle_values(g)
                    with open(entry + ".tmp", "w") as fh:
                        json.dump({"ids": ids, "start": _tsv(start), "by_udev": _tsv(by_udev)}, fh)
                    os.replace(entry + ".tmp", entry)
                c1 = g.total_cpu_seconds()
                rc, toml, err = g.run(f"sh /tmp/bp-oracle.sh reset /tmp/bp-oracle.start; "
                                      f"blkpolicy import /mnt/share/corpus/{f} > /tmp/bp-oracle.toml 2>/tmp/bp-oracle.err; "
                                      f"blkpolicy apply --policy /tmp/bp-oracle.toml --state-dir /tmp/bp-oracle-state{i} "
                                      f">/dev/null 2>&1; cat /tmp/bp-oracle.toml", check=False)
                by_bp = _oracle_values(g)
                spent["udevd"] += c1 - c0
                spent["the import"] += g.total_cpu_seconds() - c1
                named = _named_texts(toml)
                set_udev = {k for k, v in by_udev.items() if start.get(k) != v}
                set_bp = {k for k, v in by_bp.items() if start.get(k) != v}
                differ = sorted(k for k in set(by_udev) | set(by_bp) if by_udev.get(k) != by_bp.get(k))
                explained = {k for k in differ if any(k[1] in t or k[1].rsplit("/", 1)[-1] in t for t in named)}
                # What the kernel derives from a named write goes with it:
                # a scheduler switch makes iosched/ anew, resets
                # nr_requests and (to bfq) turns wbt off; io_timeout and a
                # SCSI disk's device/timeout are one timer.
                for n, a in list(explained):
                    if a == "queue/scheduler":
                        explained |= {k for k in differ if k[0] == n and (
                            k[1].startswith("queue/iosched/") or k[1] in ("queue/nr_requests", "queue/wbt_lat_usec"))}
                    if a in ("device/timeout", "queue/io_timeout"):
                        explained |= {k for k in differ if k[0] == n and k[1] in ("device/timeout", "queue/io_timeout")}
                wrong = [k for k in differ if k not in explained]
                rows.append(f"{f}: udevd set {len(set_udev)}, the import {len(set_bp)}, alike "
                            f"{len(set_udev & set_bp) - len([k for k in differ if k in set_udev & set_bp])}, "
                            f"differ {len(differ)} (named {len(explained)}, not {len(wrong)})")
                disagreements += [f"{f}: {n} {a}: udevd {by_udev.get((n, a))!r}, the import {by_bp.get((n, a))!r} "
                                  f"(from {start.get((n, a))!r})" for n, a in wrong]
            R.figure(s, "udevd against the import, per file", rows)
            R.figure(s, "the oracle's qemu CPU, its two halves",
                     ", ".join(f"{k} {v:.0f} s" for k, v in spent.items()), f"({len(files)} files)")
            R.figure(s, "udevd's values kept from an earlier run (the same image, machine, devices, start and file)",
                     f"{len(from_cache)} of {len(files)}", "(BLKPOLICY_VM_ORACLE_FRESH=1 asks udevd for every file)")
            expect(not disagreements, "values udevd set that the import did not, or the other way, with no line "
                                      "named:\n" + "\n".join(disagreements))
        finally:
            g.sh("sh /tmp/bp-oracle.sh reset /tmp/bp-oracle.start 2>/dev/null; true")
            g.sh(ORACLE_STACKS_DOWN, timeout=120)
            for node, _ in ORACLE_DISKS:
                g.unplug(node)
            if usb is not None:
                _usb_flash_gone(g)


def run(ctx):
    zoned_btrfs(ctx)
    udevd_oracle(ctx)
    clouds(ctx)
