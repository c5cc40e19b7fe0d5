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
"""

import json
import time

import machine
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


def run(ctx):
    zoned_btrfs(ctx)
    clouds(ctx)
