# SPDX-License-Identifier: MIT
"""Early boot: the root disk's values before the root filesystem is mounted
(the package's initramfs-tools hook, blkpolicy(8) EARLY BOOT), in a guest of
its own whose root is btrfs on a virtio disk (the suite's image as btrfs,
made with it: images.py).

1. Without the package, the policy in place: the virtio root claims to spin
   and btrfs mounts / without ssd.
2. The package installed (its dpkg trigger makes the initramfs again, with
   the hook), the guest booted with the initramfs it made: the kernel log's
   line from the initramfs pass comes before the root mount, / is mounted
   with ssd, the record is in /run/blkpolicy/boot.json and status shows it;
   the daemon's first pass finds every value in place (no alert) and goes on
   from the facts the initramfs recorded (rotational as the kernel said it).
3. (Debian 12) The same tree copied onto an LVM volume on a second virtio
   disk, booted from it: with an initramfs made without the hook, the
   volume's dm device is rotational (its member claims to spin when LVM
   assembles it); with the hook, the member's value is in place before LVM
   assembles the volume, so the dm device is non-rotational although
   blkpolicy never writes it (no rule matches it), and the pass's line
   comes before the root mount.
4. (Debian 13) dracut in place of initramfs-tools (Debian's package, from
   the local repository): the initramfs its trigger makes holds the module,
   the binary, the policy and the early rule (lsinitrd), the policy's digest
   is recorded, and booted with it / mounts with ssd, the pass's line before
   the root mount.
5. (Debian 12, before 3) A broken policy in the initramfs (laid over the
   hook's on the host: tests/vm/initrd.py): the guest boots all the same,
   and one line in the kernel log says why.

A job of its own beside the suites' shared guests (run.py's OWN_GUEST).
"""

import json
import os
import re
import shutil

import initrd
import machine
from guest import Disk, Guest
from harness import expect, expect_eq

UNIT = "blkpolicy.service"
# The shipped default policy makes virtio disks non-rotational
# (examples/cloud-vm.toml); the test's own says so plainly.
POLICY = """\
# blkpolicy's guest test: early boot
[[rule]]
name = "virtio disks do not spin"
[rule.match]
driver = "virtio_blk"
rotational = true
[rule.set]
rotational = 0
read_ahead_kb = 256
"""


def _root_options(g):
    return g.sh("findmnt -no OPTIONS /").strip().split(",")


def _kmsg_order(g):
    """(index of the initramfs pass's line, index of the root mount's line)
    in the kernel log, -1 when absent."""
    lines = g.sh("dmesg").splitlines()
    ours = next((i for i, l in enumerate(lines) if "blkpolicy: initramfs pass" in l), -1)
    # The mount's own lines ("BTRFS info (device vda): ..."), not udev's scan of the device before it.
    mount = next((i for i, l in enumerate(lines) if "BTRFS info (device vda" in l), -1)
    return ours, mount, [l for l in lines if "blkpolicy" in l]


def _initrd_out(g, share, name):
    """The initramfs the guest made for itself, copied out through the share."""
    g.sh(f"cp /boot/initrd.img-$(uname -r) /mnt/share/{name}")
    return os.path.join(share, name)


def lvm_root(ctx, g):
    """The guest's tree on an LVM volume (made in the guest: the host has no
    business with device-mapper), booted without and with the hook."""
    s, R = ctx.suite, ctx.results
    with R.step(s, "early boot: an LVM root's dm device is non-rotational with the hook (not without), "
                   "blkpolicy never writing it; the pass precedes the root mount"):
        disk = g.sh("for d in /sys/block/vd*; do grep -qx bp-lvmroot $d/serial 2>/dev/null && basename $d; done")
        disk = disk.strip()
        g.sh(f"pvcreate -q /dev/{disk} && vgcreate -q bpvg /dev/{disk} && lvcreate -q -y -n root -l 100%FREE bpvg && "
             "mkfs.ext4 -q -L bplvm /dev/bpvg/root && mkdir -p /mnt/lv && mount /dev/bpvg/root /mnt/lv", timeout=120)
        # "/.", the root's contents: Debian 12's cp (coreutils 9.1) fails on
        # `cp -ax / /mnt/lv` ("cannot create directory '/mnt/lv/'").
        g.sh("cp -ax /. /mnt/lv/ && echo 'LABEL=bplvm / ext4 defaults 0 1' > /mnt/lv/etc/fstab", timeout=600)
        g.sh("umount /mnt/lv && vgchange -q -an bpvg", timeout=60)
        # The two initramfs images the btrfs root booted with serve the
        # LVM root as they are (the same tree and configuration, lvm2's hook
        # in both; the root found by its device, not by fstab): the image's
        # own, made without blkpolicy, and the one the package's trigger made
        # with its hook (the step before).
        initrds = {"plain": g.image.initrd, "hook": os.path.join(ctx.share, "initrd-hook.img")}
        saved = (g.initrd, g.root_arg)
        seen = {}
        try:
            g.root_arg = "/dev/mapper/bpvg-root"
            for kind in ("plain", "hook"):
                g.initrd = initrds[kind]
                g.reboot()
                expect_eq(g.sh("findmnt -no SOURCE /").strip(), "/dev/mapper/bpvg-root", "the root")
                dm = g.sh("basename $(readlink -f /dev/mapper/bpvg-root)").strip()
                lines = g.sh("dmesg").splitlines()
                ours = next((i for i, l in enumerate(lines) if "blkpolicy: initramfs pass" in l), -1)
                mount = next((i for i, l in enumerate(lines) if f"EXT4-fs ({dm}): mounted" in l), -1)
                seen[kind] = {"dm": dm, "dm rotational": g.sh(f"cat /sys/block/{dm}/queue/rotational").strip(),
                              "member rotational": g.sh(f"cat /sys/block/{disk}/queue/rotational").strip(),
                              "pass line": ours, "root mount line": mount}
                if kind == "hook":
                    plan = json.loads(g.sh(f"blkpolicy plan --json {dm}"))
                    seen[kind]["actions on dm"] = sum(len(d["actions"]) for d in plan["devices"])
                    facts = json.loads(g.sh(f"cat /run/blkpolicy/facts/{dm}.json"))
                    seen[kind]["dm facts rotational"] = facts.get("rotational")
        finally:
            g.initrd, g.root_arg = saved
        R.figure(s, "LVM root", json.dumps(seen))
        expect_eq((seen["plain"]["dm rotational"], seen["plain"]["pass line"]), ("1", -1),
                  "without the hook: the dm device as LVM made it, no pass")
        hook = seen["hook"]
        expect_eq((hook["member rotational"], hook["dm rotational"], hook["actions on dm"], hook["dm facts rotational"]),
                  ("0", "0", 0, False), "with the hook: the member's value before LVM assembled the dm device")
        expect(0 <= hook["pass line"] < hook["root mount line"], f"the pass's line after the root mount: {hook}")


BROKEN_POLICY = '[[rule]]\nname = "x"\n[rule.set]\nread_ahead = 1\n'


def broken_policy(ctx, g):
    """A broken policy in the initramfs the package's hook made: the same
    image with the file laid over it on the host (tests/vm/initrd.py),
    where update-initramfs under TCG costs a minute or more. The hook
    step proved what update-initramfs packs; this is about the boot."""
    s, R = ctx.suite, ctx.results
    with R.step(s, "early boot: a broken policy in the initramfs: the guest boots, one line says why"):
        good = g.read_file("/etc/blkpolicy/policy.toml")
        g.write_file("/etc/blkpolicy/policy.toml", BROKEN_POLICY)
        # After an admin's edit, audit says the initramfs is stale, until it is made again.
        rc, out, _ = g.run("blkpolicy audit --json --policy /etc/blkpolicy/policy.d", check=False)
        stale = [f["code"] for f in json.loads(out)["findings"] if f["code"] == "initramfs-policy-stale"]
        expect_eq(stale, ["initramfs-policy-stale"], "audit after a policy edit, before update-initramfs")
        g.initrd = initrd.overlaid(os.path.join(ctx.share, "initrd-hook.img"),
                                   os.path.join(ctx.share, "initrd-broken.img"),
                                   {"etc/blkpolicy/policy.toml": (0o644, BROKEN_POLICY)})
        g.sh(f"systemctl disable {UNIT} 2>/dev/null")
        g.reboot()
        lines = [l for l in g.sh("dmesg").splitlines() if "blkpolicy" in l]
        R.figure(s, "broken policy in the initramfs", lines)
        expect(any("initramfs pass: nothing set: the policy is invalid: /etc/blkpolicy/policy.toml:4:1: "
                   "unknown attribute \"read_ahead\"" in l for l in lines), f"the kernel log's line: {lines}")
        expect_eq(g.sh("cat /sys/block/vda/queue/rotational").strip(), "1", "vda's rotational, nothing set")
        expect("ssd" not in _root_options(g), "ssd without a working policy")
        # As the hook step left it, for the LVM root after this.
        g.write_file("/etc/blkpolicy/policy.toml", good)
        g.sh(f"systemctl enable {UNIT} 2>/dev/null")


def dracut_root(ctx, g):
    """The btrfs root again, its initramfs made by dracut (Debian's package,
    which replaces initramfs-tools) with the package's module."""
    s, R = ctx.suite, ctx.results
    with R.step(s, "early boot: dracut's initramfs holds the module, binary, policy and rule (lsinitrd); "
                   "/ mounts with ssd, the pass precedes the root mount"):
        # hostonly, as Fedora and RHEL configure it: the modules this guest
        # needs, a smaller image made sooner.
        g.sh("mkdir -p /etc/dracut.conf.d && echo 'hostonly=\"yes\"' > /etc/dracut.conf.d/50-bp-test.conf")
        # Installing it removes initramfs-tools; its own trigger makes the initramfs.
        g.sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends dracut >/dev/null 2>&1",
             timeout=900)
        expect(g.run("dpkg-query -W -f '${Status}' initramfs-tools 2>/dev/null | grep -q ' installed'",
                     check=False)[0] != 0, "initramfs-tools is still installed beside dracut")
        listing = g.sh("lsinitrd /boot/initrd.img-$(uname -r)", timeout=300)
        wanted = {"the module": r"^blkpolicy$", "the binary": r"usr/sbin/blkpolicy$",
                  "the policy": r"etc/blkpolicy/policy\.d/50-early-boot\.toml$",
                  "the pre-mount hook": r"dracut/hooks/pre-mount/10-blkpolicy-boot\.sh$",
                  "the early rule": r"rules\.d/60-blkpolicy-early\.rules$"}
        missing = [k for k, rx in wanted.items() if not any(re.search(rx, l.strip()) for l in listing.splitlines())]
        R.figure(s, "dracut initramfs", "; ".join(l.strip() for l in listing.splitlines()
                                                   if "blkpolicy" in l or l.startswith("Version:")))
        expect(not missing, f"not in dracut's initramfs: {missing}")
        digest = json.loads(g.sh("blkpolicy check --json"))["digest"]
        expect_eq(g.sh("cat /var/lib/blkpolicy/initramfs-policy.digest").strip(), digest,
                  "the digest the module recorded")
        g.initrd = _initrd_out(g, ctx.share, "initrd-dracut.img")
        g.reboot()
        opts = _root_options(g)
        ours, mount, lines = _kmsg_order(g)
        R.figure(s, "btrfs root, dracut's initramfs", f"/ mounted {','.join(opts)}; kernel log: {lines}")
        expect("ssd" in opts, f"/ mounted without ssd: {opts}")
        expect(0 <= ours and (mount < 0 or ours < mount), f"the pass's line ({ours}) vs the root mount's ({mount})")
        record = json.loads(g.sh("cat /run/blkpolicy/boot.json"))
        expect_eq((record["ok"], record["policy"]["digest"]), (True, digest), "the pass's record")


def run(ctx):
    s, R = ctx.suite, ctx.results
    image = ctx.image.as_btrfs()
    run_dir = os.path.join(ctx.run_dir, s, "boot")
    with R.step(s, "early boot: a btrfs root on a virtio disk mounts without ssd before the package", fatal=True):
        # One vCPU: nothing here depends on a second, each of the group's
        # boots costs a fifth less CPU time under TCG (40 against 50 s to
        # the default target, measured), and a kernel patching its own code
        # at boot cannot race a second vCPU (an "Oops: int3" in
        # sched_clock_cpu 4 s into a boot here, on 6.12, 2026-12-06).
        g = Guest(image, os.path.join(run_dir, "guest"), share=ctx.share, cpus=1,
                  disks=[Disk("bp-lvmroot", "2G", "virtio-blk-pci")])
        ctx.boot_guest = g
        g.boot()
        # The test's policy as a drop-in (beside the package's policy.toml,
        # which a file there before the install would stop at a conffile
        # question): the initramfs the package's trigger makes carries it.
        g.sh("mkdir -p /etc/blkpolicy/policy.d")
        g.write_file("/etc/blkpolicy/policy.d/50-early-boot.toml", POLICY)
        rot = g.sh("cat /sys/block/vda/queue/rotational").strip()
        opts = _root_options(g)
        R.figure(s, "btrfs root without the hook", f"vda rotational {rot}; / mounted {','.join(opts)}")
        expect_eq(rot, "1", "the virtio root's rotational claim")
        expect("ssd" not in opts, f"/ mounted with ssd already: {opts}")

    try:
        with R.step(s, "early boot: with the package's hook, / mounts with ssd; the pass precedes the root mount; "
                       "the daemon goes on from its facts with no alert", fatal=True):
            machine.install_package(g, timeout=900)  # the trigger makes the initramfs
            g.sh(f"systemctl enable {UNIT} 2>/dev/null")
            expect(g.run("lsinitramfs /boot/initrd.img-$(uname -r) | grep -q 'usr/sbin/blkpolicy$'",
                         check=False)[0] == 0, "the initramfs has no blkpolicy")
            digest = g.sh("cat /var/lib/blkpolicy/initramfs-policy.digest").strip()
            g.initrd = _initrd_out(g, ctx.share, "initrd-hook.img")
            g.reboot()
            opts = _root_options(g)
            ours, mount, lines = _kmsg_order(g)
            R.figure(s, "btrfs root with the hook", f"/ mounted {','.join(opts)}; kernel log: {lines}")
            expect("ssd" in opts, f"/ mounted without ssd: {opts}")
            expect(ours >= 0, f"no initramfs pass in the kernel log: {lines}")
            expect(mount < 0 or ours < mount, f"the pass's line ({ours}) comes after the root mount's ({mount})")
            record = json.loads(g.sh("cat /run/blkpolicy/boot.json"))
            expect_eq((record["ok"], record["exit"], record["policy"]["digest"]), (True, 0, digest),
                      "the initramfs pass's record")
            expect(g.sh("cat /sys/block/vda/queue/rotational").strip() == "0", "vda is rotational after boot")
            facts_text = g.sh("cat /run/blkpolicy/facts/vda.json")
            if json.loads(facts_text).get("rotational") is not True:
                # What wrote it, and when: the record, the files' times, the daemon's lines.
                R.figure(s, "facts of vda, not as the kernel said", facts_text + g.sh(
                    "stat -c '%n %y' /run/blkpolicy/boot.json /run/blkpolicy/facts/vda.json; "
                    "systemctl show -p ExecMainStartTimestamp blkpolicy.service; "
                    "journalctl -b -o short-monotonic --no-pager | grep -i blkpolicy | head -n 40", check=False))
            expect_eq(json.loads(facts_text).get("rotational"), True,
                      "the facts the initramfs recorded (as the kernel said)")
            g.wait_for(f"systemctl is-active -q {UNIT}", timeout=90, what="the service")
            g.wait_for("test -s /run/blkpolicy/daemon.json", timeout=60, what="the daemon's first report")
            alerts = [json.loads(l) for l in g.sh("journalctl -b -o json SYSLOG_IDENTIFIER=blkpolicy").splitlines()
                      if l.strip()]
            events = [(e.get("BLKPOLICY_EVENT"), e.get("BLKPOLICY_ATTRIBUTE"), e.get("MESSAGE")) for e in alerts
                      if e.get("BLKPOLICY_EVENT")]
            expect(not events, f"the daemon alerted at its first pass: {events}")
            took = [e.get("MESSAGE") for e in alerts if "initramfs pass" in e.get("MESSAGE", "")]
            expect(took, "the daemon does not say this boot's initramfs pass")
            daemon = json.loads(g.sh("cat /run/blkpolicy/daemon.json"))
            expect_eq(daemon.get("initramfs", {}).get("ok"), True, "daemon.json's initramfs")
            rc, out, _ = g.run("blkpolicy status", check=False)
            expect(rc == 0 and "this boot's initramfs pass: " in out, f"status: exit {rc}\n{out}")
            rc, out, _ = g.run("blkpolicy audit --json", check=False)
            stale = [f for f in json.loads(out)["findings"] if f["code"] == "initramfs-policy-stale"]
            expect(not stale, f"audit says the initramfs is stale: {stale}")

        # dracut on Debian 13, the LVM root and the broken policy on Debian
        # 12 (each suite's share of the group's time, about ten minutes
        # under TCG): the script and the initramfs-tools hook are the same.
        if ctx.suite == "trixie":
            dracut_root(ctx, g)
            return
        broken_policy(ctx, g)
        lvm_root(ctx, g)
    finally:
        g.poweroff()
        for f in ("initrd-hook.img", "initrd-broken.img", "initrd-dracut.img"):
            try:
                os.remove(os.path.join(ctx.share, f))
            except OSError:
                pass
        shutil.rmtree(os.path.join(run_dir, "guest"), ignore_errors=True)
