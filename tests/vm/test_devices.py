"""The mission's device classes on real kernels: virtio-blk, SCSI (spinning,
solid, QEMU HARDDISK), SATA on AHCI, NVMe, md raid1, LVM, dm-crypt and loop,
in Debian guests.

Runs after the service group, in the same guest: a reboot first gives
pristine disks (the package was purged, so nothing touches them at boot),
then the package is installed again, not enabled.
"""

import json
import re
import shlex
import time

import machine
from harness import CheckFailed, expect, expect_eq
from machine import disks_by_serial, read_queue, unit_prop, wbt_enabled

UNIT = "blkpolicy.service"

# Builds the stacks on the stack disks: an md raid1, an LVM logical volume,
# a plain dm-crypt mapping (a random key: nothing is kept), a bound loop.
STACKS_SCRIPT = r"""
set -e
dev() { basename "$(readlink -f /dev/disk/by-id/$1)"; }
a=$(dev virtio-bp-md-a); b=$(dev virtio-bp-md-b); c=$(dev virtio-bp-crypt)
l=$(ls /dev/disk/by-id/ | grep -m1 'scsi-.*bp-lvm$'); l=$(basename "$(readlink -f /dev/disk/by-id/$l)")
mdadm --create /dev/md/bpmd --level=1 --raid-devices=2 --metadata=1.2 --assume-clean --run --quiet /dev/$a /dev/$b
pvcreate -q /dev/$l >/dev/null
vgcreate -q bpvg /dev/$l >/dev/null
lvcreate -q -y -n bplv -L 64M bpvg >/dev/null
cryptsetup open -q --type plain --cipher aes-xts-plain64 --key-size 256 --key-file /dev/urandom /dev/$c bpcrypt
truncate -s 64M /var/tmp/bp-loop.img
losetup --show -f /var/tmp/bp-loop.img
udevadm settle
"""

# One rule per device class, each keyed on what the class is; the device
# tests check that each matches exactly the disks it should.
CLASSES_POLICY = """\
[[rule]]
name = "virtio"
[rule.match]
driver = "virtio_blk"
stack = "none"
[rule.set]
nomerges = 0

[[rule]]
name = "spinning on virtio-scsi"
[rule.match]
driver = "virtio_scsi"
rotational = true
[rule.set]
nomerges = 0

[[rule]]
name = "solid SCSI"
[rule.match]
driver = "sd"
rotational = false
[rule.set]
nomerges = 0

[[rule]]
name = "SATA"
[rule.match]
driver = "ahci"
[rule.set]
nomerges = 0

[[rule]]
name = "NVMe"
[rule.match]
driver = "nvme"
[rule.set]
nomerges = 0

[[rule]]
name = "a Seagate by vendor, model and wwid"
[rule.match]
vendor = "SEAGATE"
model = "ST4000*"
wwid = "naa.5000c500*"
[rule.set]
nomerges = 0

[[rule]]
name = "by serial"
[rule.match]
serial = ["bp-nvme1", "bp-sata1"]
[rule.set]
nomerges = 0

[[rule]]
name = "md raid1"
[rule.match]
stack = "md"
md_level = "raid1"
[rule.set]
read_ahead_kb = 128

[[rule]]
name = "LVM"
[rule.match]
stack = "dm"
dm_uuid = "LVM-*"
[rule.set]
read_ahead_kb = 128

[[rule]]
name = "dm-crypt"
[rule.match]
stack = "dm"
dm_uuid = "CRYPT-*"
dm_name = "bpcrypt"
[rule.set]
read_ahead_kb = 128

[[rule]]
name = "bound loop"
[rule.match]
stack = "loop"
[rule.set]
read_ahead_kb = 128
"""


def _plan_json(g, policy_path, devices=""):
    rc, out, err = g.run(f"blkpolicy plan --json --policy {policy_path} {devices}", check=False)
    expect(rc == 0, f"blkpolicy plan: exit {rc}\n{err}")
    return {d["device"]: d for d in json.loads(out)["devices"]}


def _udev(g, name):
    out = g.sh(f"udevadm info -q property -n {name}")
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def _udev_drivers(g, name):
    """DRIVERS== of the device and its parents, nearest first, as udevadm
    info -a walks them (empty ones left out)."""
    out = g.sh(f"udevadm info -a -n {name}")
    return [d for d in re.findall(r'DRIVERS?=="([^"]*)"', out) if d]


def _unenc(s):
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), s).strip()


def setup(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "devices: a pristine boot, the package installed (not enabled), stacks built", fatal=True):
        g.reboot()
        g.write_file("/etc/apt/sources.list.d/blkpolicy-test.list", "deb [trusted=yes] file:/mnt/share/repo ./\n")
        g.sh("apt-get update -q >/dev/null && "
             "DEBIAN_FRONTEND=noninteractive apt-get install -y -q blkpolicy >/dev/null 2>&1", timeout=300)
        expect(g.run(f"systemctl is-active -q {UNIT}", check=False)[0] != 0, "the service runs: disks not pristine")
        ctx.pristine = _pristine_values(g)
        out = g.sh(STACKS_SCRIPT, timeout=180)
        ctx.loop = out.strip().splitlines()[-1].replace("/dev/", "")
        names = disks_by_serial(g)
        names["md"] = g.sh("basename $(readlink -f /dev/md/bpmd)").strip()
        names["lvm"] = g.sh("basename $(readlink -f /dev/mapper/bpvg-bplv)").strip()
        names["crypt"] = g.sh("basename $(readlink -f /dev/mapper/bpcrypt)").strip()
        names["loop"] = ctx.loop
        ctx.names = names
        R.figure(s, "devices", " ".join(f"{k}={v}" for k, v in sorted(names.items())))
        g.write_file("/root/classes.toml", CLASSES_POLICY)


def _pristine_values(g):
    """Every disk's queue values as the kernel set them, before anything
    wrote them (the first thing after the reboot)."""
    attrs = ["rotational", "read_ahead_kb", "wbt_lat_usec", "nr_requests", "scheduler", "max_sectors_kb"]
    out = {}
    for serial, name in disks_by_serial(g).items():
        out[name] = read_queue(g, name, attrs)
        out[name]["serial"] = serial
    return out


def facts_against_udev(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    names = ctx.names
    plan = _plan_json(g, "/root/classes.toml")
    ctx.plan = plan

    with R.step(s, "facts agree with udev: driver chain, model, vendor, serial, wwid"):
        bad = []
        for key, name in sorted(names.items()):
            f = plan[name]["facts"]
            u = _udev(g, name)
            drivers = _udev_drivers(g, name)
            if f["drivers"] != drivers:
                bad.append(f"{name}: drivers {f['drivers']} vs udev {drivers}")
            if "ID_MODEL_ENC" in u and f["model"] != _unenc(u["ID_MODEL_ENC"]):
                bad.append(f"{name}: model {f['model']!r} vs udev ID_MODEL_ENC {_unenc(u['ID_MODEL_ENC'])!r}")
            if "ID_VENDOR_ENC" in u and u.get("ID_BUS") == "scsi" and f["vendor"] != _unenc(u["ID_VENDOR_ENC"]):
                bad.append(f"{name}: vendor {f['vendor']!r} vs udev {_unenc(u['ID_VENDOR_ENC'])!r}")
            # SCSI: the unit serial is ID_SCSI_SERIAL (ID_SERIAL_SHORT is the
            # WWN where there is one); virtio has only ID_SERIAL.
            serial = (u.get("ID_SCSI_SERIAL") or u.get("ID_SERIAL_SHORT") or
                      (u.get("ID_SERIAL") if u.get("ID_BUS") is None else None))
            if serial and f["serial"] != serial:
                bad.append(f"{name}: serial {f['serial']!r} vs udev {serial!r}")
            if "ID_WWN" in u:
                mine = f["wwid"].split(".", 1)[-1].lower()
                theirs = u["ID_WWN"].lower().removeprefix("0x")
                if not f["wwid"] or not (mine == theirs or theirs in mine):
                    bad.append(f"{name}: wwid {f['wwid']!r} vs udev ID_WWN {u['ID_WWN']!r}")
        expect(not bad, "\n".join(bad))

    with R.step(s, "stacking facts agree with udev and sysfs: md level, dm name and uuid, holders, slaves, loop"):
        bad = []
        md, lvm, crypt, loop = names["md"], names["lvm"], names["crypt"], names["loop"]
        checks = [(md, "stack", "md"), (lvm, "stack", "dm"), (crypt, "stack", "dm"), (loop, "stack", "loop"),
                  (md, "md_level", _udev(g, md).get("MD_LEVEL")),
                  (lvm, "dm_uuid", _udev(g, lvm).get("DM_UUID")), (lvm, "dm_name", _udev(g, lvm).get("DM_NAME")),
                  (crypt, "dm_uuid", _udev(g, crypt).get("DM_UUID")),
                  (crypt, "dm_name", _udev(g, crypt).get("DM_NAME")),
                  (loop, "loop_backing_file", "/var/tmp/bp-loop.img")]
        for name, key, want in checks:
            if plan[name]["facts"][key] != want:
                bad.append(f"{name}: {key} {plan[name]['facts'][key]!r}, udev/sysfs say {want!r}")
        for key in ("md", "lvm", "crypt", "bp-md-a", "bp-lvm"):
            name = names[key]
            for link in ("slaves", "holders"):
                real = sorted(g.sh(f"ls /sys/block/{name}/{link}").split())
                if sorted(plan[name]["facts"][link]) != real:
                    bad.append(f"{name}: {link} {plan[name]['facts'][link]} vs sysfs {real}")
        expect(not bad, "\n".join(bad))

    with R.step(s, "a policy per device class matches exactly the disks it should"):
        want = {
            "virtio": {"bproot", "bp-virtio1", "bp-md-a", "bp-md-b", "bp-crypt"},
            "spinning on virtio-scsi": {"bp-scsi-hdd", "bp-scsi-qemu", "bp-lvm"},
            "solid SCSI": {"bp-scsi-ssd"},
            "SATA": {"bp-sata1"},
            "NVMe": {"bp-nvme1"},
            "a Seagate by vendor, model and wwid": {"bp-scsi-hdd"},
            "by serial": {"bp-nvme1", "bp-sata1"},
            "md raid1": {"md"}, "LVM": {"lvm"}, "dm-crypt": {"crypt"}, "bound loop": {"loop"},
        }
        by_name = {v: k for k, v in names.items()}
        got = {}
        for name, d in plan.items():
            for m in d["matched"]:
                got.setdefault(m["name"], set()).add(by_name.get(name, name))
        # Unbound loop devices are loops too: only the bound one is named.
        got["bound loop"] = {x for x in got.get("bound loop", set()) if x in names}
        bad = [f"{rule}: matched {sorted(got.get(rule, set()))}, should match {sorted(w)}"
               for rule, w in want.items() if got.get(rule, set()) != w]
        expect(not bad, "\n".join(bad))


def explain_defaults(ctx):
    """explain's kernel default for each attribute equals what the real
    kernel set on each pristine disk."""
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "explain derives the kernel's own defaults: read_ahead_kb, wbt_lat_usec, rotational, nr_requests"):
        bad = []
        for name, real in sorted(ctx.pristine.items()):
            out = json.loads(g.sh(f"blkpolicy explain --json --no-policy {name}"))
            attrs = {a["attribute"]: a for a in out["devices"][0]["attributes"]}
            for attr in ("read_ahead_kb", "wbt_lat_usec", "rotational", "nr_requests"):
                if not real.get(attr):
                    continue  # the device has no such attribute (bio-based)
                derived = attrs.get(attr, {}).get("kernel_default", "")
                if derived != real[attr]:
                    bad.append(f"{name} ({real['serial']}) {attr}: explain says {derived!r}, the kernel set "
                               f"{real[attr]!r}")
        expect(not bad, "\n".join(bad))


def run(ctx):
    setup(ctx)
    explain_defaults(ctx)
    facts_against_udev(ctx)
