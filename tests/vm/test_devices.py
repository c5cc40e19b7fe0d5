# SPDX-License-Identifier: MIT
"""The mission's device classes on real kernels: virtio-blk, SCSI (spinning,
solid, QEMU HARDDISK), SATA on AHCI, NVMe, md raid1, LVM, dm-crypt and loop,
in Debian guests.

A job of its own, from the suite's saved guest (tests/vm/snapshots.py):
pristine disks, then the package installed, not enabled.
"""

import json
import re
import time

import machine
from guest import GuestError
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
    with R.step(s, "devices: pristine disks, the package installed (not enabled), stacks built", fatal=True):
        with R.timed(s, "devices setup: the package installed"):
            machine.install_package(g, if_missing=True)
        expect(g.run(f"systemctl is-active -q {UNIT}", check=False)[0] != 0, "the service runs: disks not pristine")
        with R.timed(s, "devices setup: every disk there, its pristine values read"):
            machine.wait_all_disks(g)
            ctx.pristine = _pristine_values(g)
        with R.timed(s, "devices setup: the stacks built"):
            out = g.sh(STACKS_SCRIPT, timeout=180)
            ctx.loop = out.strip().splitlines()[-1].replace("/dev/", "")
            names = disks_by_serial(g)
            names["md"] = g.sh("basename $(readlink -f /dev/md/bpmd)").strip()
            names["lvm"] = g.sh("basename $(readlink -f /dev/mapper/bpvg-bplv)").strip()
            names["crypt"] = g.sh("basename $(readlink -f /dev/mapper/bpcrypt)").strip()
            names["loop"] = ctx.loop
            ctx.names = names
            # The stacked devices as the kernel set them up, before anything wrote them.
            for key in ("md", "lvm", "crypt", "loop"):
                ctx.pristine[names[key]] = read_queue(g, names[key], PRISTINE_ATTRS)
                ctx.pristine[names[key]]["serial"] = key
        R.figure(s, "devices", " ".join(f"{k}={v}" for k, v in sorted(names.items())))
        g.write_file("/root/classes.toml", CLASSES_POLICY)


PRISTINE_ATTRS = ["rotational", "read_ahead_kb", "wbt_lat_usec", "nr_requests", "scheduler", "max_sectors_kb",
                  "async_depth", "nomerges", "rq_affinity", "../bdi/max_ratio", "../bdi/min_ratio",
                  "../bdi/strict_limit"]
# The policy's names of the values read beside the queue's (the device's bdi).
PRISTINE_KEYS = {"../bdi/max_ratio": "bdi.max_ratio", "../bdi/min_ratio": "bdi.min_ratio",
                 "../bdi/strict_limit": "bdi.strict_limit"}


def _pristine_values(g):
    """Every disk's queue values as the kernel set them, before anything
    wrote them (the first thing after the guest started)."""
    out = {}
    for serial, name in disks_by_serial(g).items():
        out[name] = read_queue(g, name, PRISTINE_ATTRS)
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
                # sysfs says naa.5000c500..., udev 0x5000c500...; NVMe ids
                # are the same string in both.
                mine = f["wwid"].lower().removeprefix("naa.")
                theirs = u["ID_WWN"].lower().removeprefix("0x")
                if not f["wwid"] or mine != theirs:
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
    with R.step(s, "explain derives the kernel's own defaults on every disk and stack: read_ahead_kb, wbt_lat_usec, "
                   "rotational, nr_requests, scheduler, async_depth, nomerges, rq_affinity (blk-mq), the bdi's "
                   "max_ratio, min_ratio and strict_limit (6.2+)"):
        bad = []
        compared = 0
        for name, real in sorted(ctx.pristine.items()):
            out = json.loads(g.sh(f"blkpolicy explain --json --no-policy {name}"))
            attrs = {a["attribute"]: a for a in out["devices"][0]["attributes"]}
            bio_based = g.run(f"test -d /sys/block/{name}/mq", check=False)[0] != 0
            for read in ("read_ahead_kb", "wbt_lat_usec", "rotational", "nr_requests", "scheduler", "async_depth",
                         "nomerges", "rq_affinity", *PRISTINE_KEYS):
                attr = PRISTINE_KEYS.get(read, read)
                if not real.get(read):
                    continue  # the device has no such attribute (bio-based; async_depth before 7.0; 6.1's bdi)
                derived = attrs.get(attr, {}).get("kernel_default") or ""
                if attr == "rq_affinity" and bio_based and not derived:
                    continue  # explain claims no default on a bio-based queue (export leaves it out)
                compared += 1
                if derived != real[read]:
                    bad.append(f"{name} ({real['serial']}) {attr}: explain says {derived!r}, the kernel set "
                               f"{real[read]!r}")
        R.figure(s, "explain's kernel defaults compared with the kernel's", compared, "values")
        expect(not bad, "\n".join(bad))

    with R.step(s, "explain --kernel-rules: the rules for this kernel hold here, and each that names it holds on it"):
        release = g.sh("uname -r").strip()
        doc = json.loads(g.sh("blkpolicy explain --kernel-rules --json"))
        expect_eq(doc["kernel"], release, "the release explain answers for")
        holds = {r["id"] for r in doc["rules"] if r["holds"]}
        # A row that says it was observed on this kernel must hold on it.
        version = release.split("-")[0].split("+")[0]
        wrong = [r["id"] for r in doc["rules"] if version in r["observed"] and not r["holds"]]
        expect(not wrong, f"rows observed on {version} that do not hold on it: {wrong}")
        # Nothing past what was observed: every row holds here as itself.
        beyond = [r["id"] for r in doc["rules"] if r["standing"] != ("holds" if r["holds"] else "does not hold")]
        expect(not beyond, f"rows this kernel is past the observations of: {beyond}")
        if ctx.strict_rows:
            # The newest kernel: every row that holds here and was seen
            # anywhere names this kernel among its observations.
            unnamed = [r["id"] for r in doc["rules"] if r["holds"] and r["observed"] and version not in r["observed"]]
            expect(not unnamed, f"rows that hold on {version} but do not name it as observed: {unnamed}")
        # An unbound loop device starts the way the loop-created-rotational row says.
        g.sh("modprobe loop; test -e /dev/loop-control")
        free = g.sh("losetup -f").strip().replace("/dev/", "")
        unbound = _q(g, free, "rotational")
        R.figure(s, f"unbound {free}: queue/rotational", unbound,
                 "(rows: " + ", ".join(sorted(i for i in holds if i.startswith("loop-created"))) + ")")
        expect_eq(f"loop-created-rotational:{unbound}" in holds, True, f"unbound {free} reads rotational {unbound}")




def field_case(ctx):
    """The case operators report from the field: an untouched virtio disk that
    claims to spin, with read_ahead_kb 2 x max_sectors_kb (6.17+) and wbt
    75000; the package's default policy (/etc/blkpolicy/policy.toml, from
    examples/cloud-vm.toml) puts it right."""
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "field case: an untouched virtio disk claims to spin; the packaged default policy fixes it"):
        name = ctx.names["bp-virtio1"]
        real = ctx.pristine[name]
        rules = {r["id"] for r in json.loads(g.sh("blkpolicy explain --kernel-rules --json"))["rules"] if r["holds"]}
        twice = "readahead-default:2x-max-sectors" in rules
        want_ra = str(2 * int(real["max_sectors_kb"])) if twice else "128"
        R.figure(s, f"untouched virtio disk {name}: rotational / wbt_lat_usec / read_ahead_kb (max_sectors_kb)",
                 f"{real['rotational']} / {real['wbt_lat_usec']} / {real['read_ahead_kb']} "
                 f"({real['max_sectors_kb']})")
        expect_eq((real["rotational"], real["wbt_lat_usec"], real["read_ahead_kb"]), ("1", "75000", want_ra),
                  "the untouched virtio disk (2 x max_sectors_kb where the 6.17 rule holds)")
        # The packaged default policy, as installed: no --policy.
        rc, out, err = g.run(f"blkpolicy apply --json --state-dir /run/bp-field {name}", check=False)
        expect(rc == 0, f"apply with the packaged policy: exit {rc}\n{out}{err}")
        expect_eq(read_queue(g, name, ["rotational", "wbt_lat_usec", "read_ahead_kb"]),
                  {"rotational": "0", "wbt_lat_usec": "2000", "read_ahead_kb": "128"},
                  "the virtio disk after the packaged policy")


# --- traps on fresh hot-added disks ---------------------------------------

def _explain_attr(g, name, attr):
    out = json.loads(g.sh(f"blkpolicy explain --json --no-policy {name}"))
    return {a["attribute"]: a for a in out["devices"][0]["attributes"]}[attr]


def _q(g, name, attr):
    return g.sh(f"cat /sys/block/{name}/queue/{attr}").strip()


def _apply(g, name, policy_text, want_rc=0):
    """apply's results by attribute; its exit status must be WANT_RC (1:
    the policy is not met, a value unavailable here)."""
    g.write_file("/root/trap.toml", policy_text)
    rc, out, err = g.run(f"blkpolicy apply --json --policy /root/trap.toml --state-dir /run/bp-trap {name}",
                         check=False)
    expect(rc == want_rc, f"apply on {name}: exit {rc}, not {want_rc}\n{out}{err}")
    return {r["attribute"]: r for r in json.loads(out)["devices"][0]["results"]}


def _status_unavailable(g, d):
    """status of the last _apply's policy: one value this kernel cannot give,
    so the policy is not met (exit 1), and said so."""
    rc, out, _ = g.run(f"blkpolicy status --policy /root/trap.toml --state-dir /run/bp-trap {d}", check=False)
    expect(rc == 1 and " 1 unavailable here" in out, f"status with a value unavailable here: exit {rc}\n{out}")


def traps(ctx):
    """The documented kernel traps on this kernel, each shown to be real (or
    shown to behave the way blkpolicy's kernel model says for this kernel),
    then beaten by `blkpolicy apply`."""
    g, s, R = ctx.guest, ctx.suite, ctx.results
    g.sh("mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug")

    with R.step(s, "a scheduler known by its module's name alone (kyber-iosched.ko): apply loads it on a fresh boot"):
        # First of all that writes a scheduler on this boot: nothing has
        # loaded kyber, and Debian's kyber has no modules.alias line.
        expect(g.run("test -e /sys/module/kyber_iosched", check=False)[0] != 0,
               "kyber is loaded already: this boot cannot show how apply finds it")
        release = g.sh("uname -r").strip()
        aliased = g.run(f"grep -q ' kyber-iosched ' /lib/modules/{release}/modules.alias", check=False)[0] == 0
        module = g.sh(f"grep -o '[^/]*kyber[^/:]*\\.ko[^:]*:' /lib/modules/{release}/modules.dep || true").strip()
        R.figure(s, "kyber in modules.alias / modules.dep", f"{'yes' if aliased else 'no'} / {module or '-'}")
        d = machine.hot_add(g, "bp-trap-kyber", rotation_rate="1")
        policy = "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"kyber\"\nnr_requests = 64\n"
        if g.run(f"test -e /sys/block/{d}/queue/async_depth", check=False)[0] == 0:
            policy += "async_depth = 24\n"  # the policy as a user tried it on 7.3.4
        g.write_file("/root/kyber.toml", policy)
        plan = json.loads(g.sh(f"blkpolicy plan --json --policy /root/kyber.toml {d}"))
        expect("kyber" in (plan.get("loadable_schedulers") or []),
               f"plan's loadable schedulers: {plan.get('loadable_schedulers')}")
        res = _apply(g, d, policy)
        expect_eq((res["scheduler"]["outcome"], read_queue(g, d, ["scheduler"])["scheduler"], _q(g, d, "nr_requests")),
                  ("applied", "kyber", "64"), "scheduler and nr_requests after apply")
        if "async_depth" in res:
            expect_eq((res["async_depth"]["outcome"], _q(g, d, "async_depth")), ("applied", "24"), "async_depth")

    with R.step(s, "the device's writeback limits (bdi): the kernel's defaults, strict_limit from 6.2, a min_ratio "
                   "above the max_ratio refused by the kernel and by the plan; apply sets the USB stick's fix"):
        d = machine.hot_add(g, "bp-trap-bdi")
        bdi = f"/sys/block/{d}/bdi"
        major, minor = (int(x) for x in g.sh("uname -r").split(".")[:2])
        strict = (major, minor) >= (6, 2)
        found = g.sh(f"cat {bdi}/max_ratio {bdi}/min_ratio; cat {bdi}/strict_limit 2>/dev/null || echo none").split()
        expect_eq(found, ["100", "0", "0" if strict else "none"],
                  "max_ratio, min_ratio, strict_limit as the kernel starts them (rows bdi-default, bdi-strict-limit)")
        # The kernel's refusal, both ways round (row bdi-ratios:min-not-above-max).
        # (coreutils' echo: sh's own says "I/O error" for any errno.)
        refused = g.sh(f"echo 5 > {bdi}/max_ratio; /bin/echo 10 2>&1 > {bdi}/min_ratio || true; "
                       f"echo 1 > {bdi}/min_ratio; /bin/echo 0 2>&1 > {bdi}/max_ratio || true; "
                       f"cat {bdi}/min_ratio {bdi}/max_ratio; echo 0 > {bdi}/min_ratio; echo 100 > {bdi}/max_ratio")
        R.figure(s, "bdi ratios written out of order", refused.splitlines())
        expect(refused.count("Invalid argument") == 2 and refused.split()[-2:] == ["1", "5"],
               f"a min above the max and a max below the min, each refused (EINVAL):\n{refused}")
        res = _apply(g, d, "[[rule]]\nname = \"usb\"\n[rule.set]\nbdi.max_ratio = 1\nbdi.strict_limit = 1\n",
                     want_rc=0 if strict else 1)
        expect_eq((res["bdi.max_ratio"]["outcome"], g.sh(f"cat {bdi}/max_ratio").strip()), ("applied", "1"),
                  "bdi.max_ratio after apply")
        if strict:
            expect_eq((res["bdi.strict_limit"]["outcome"], g.sh(f"cat {bdi}/strict_limit").strip()), ("applied", "1"),
                      "bdi.strict_limit after apply")
        else:
            expect_eq(res["bdi.strict_limit"]["outcome"], "unavailable", "bdi.strict_limit on 6.1")
        res = _apply(g, d, "[[rule]]\nname = \"keep\"\n[rule.set]\nbdi.min_ratio = 2\n", want_rc=1)
        expect_eq((res["bdi.min_ratio"]["outcome"], g.sh(f"cat {bdi}/min_ratio").strip()), ("refused", "0"),
                  "a min_ratio above the max_ratio of 1: refused by the plan, nothing written")
        g.sh(f"echo 100 > {bdi}/max_ratio; test ! -e {bdi}/strict_limit || echo 0 > {bdi}/strict_limit")
        g.unplug("bp-trap-bdi")

    with R.step(s, "trap: a queue-limits write and read_ahead_kb, as the kernel model says for this kernel"):
        d = machine.hot_add(g, "bp-trap-ra", rotation_rate="7200")
        explained = _explain_attr(g, d, "read_ahead_kb")
        rule = explained["kernel_rule"]
        computed = int(explained["kernel_default"])  # what a commit computes here (2 x max_sectors_kb on 6.17+)
        rewrite = f"m=$(cat /sys/block/{d}/queue/max_sectors_kb); echo $m > /sys/block/{d}/queue/max_sectors_kb"
        g.sh(f"echo 64 > /sys/block/{d}/queue/read_ahead_kb; {rewrite}")
        small = _q(g, d, "read_ahead_kb")
        g.sh(f"echo 512 > /sys/block/{d}/queue/read_ahead_kb; {rewrite}")
        large = _q(g, d, "read_ahead_kb")
        R.figure(s, "read_ahead_kb 64 / 512 after a max_sectors_kb write", f"{small} / {large}", f"(model: {rule})")
        predicted = {"readahead-on-commit:untouched": ("64", "512"),
                     "readahead-on-commit:raise": (str(max(64, computed)), str(max(512, computed))),
                     "readahead-on-commit:reset": (str(computed), str(computed))}.get(rule)
        expect(predicted is not None, f"no prediction for {rule!r}")
        expect_eq((small, large), predicted, f"read_ahead_kb after limits writes (model {rule})")
        res = _apply(g, d, "[[rule]]\nname = \"t\"\n[rule.set]\nmax_sectors_kb = 256\nread_ahead_kb = 64\n")
        expect_eq((_q(g, d, "max_sectors_kb"), _q(g, d, "read_ahead_kb")), ("256", "64"), "after apply")
        expect_eq(res["read_ahead_kb"]["outcome"] in ("applied", "unchanged"), True, "apply outcome")

    with R.step(s, "trap: a scheduler switch resets nr_requests; apply keeps both"):
        d = machine.hot_add(g, "bp-trap-nr", rotation_rate="7200")
        g.sh(f"echo mq-deadline > /sys/block/{d}/queue/scheduler; echo 32 > /sys/block/{d}/queue/nr_requests; "
             f"echo kyber > /sys/block/{d}/queue/scheduler")
        after = _q(g, d, "nr_requests")
        expect(after != "32", "nr_requests survived the switch: the trap is not there")
        R.figure(s, "nr_requests 32 after mq-deadline -> kyber", after)
        _apply(g, d, "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"bfq\"\nnr_requests = 32\n")
        expect_eq((read_queue(g, d, ["scheduler"])["scheduler"], _q(g, d, "nr_requests")), ("bfq", "32"), "after apply")

    with R.step(s, "trap: bfq turns default wbt off (as the kernel model says sysfs shows it); apply turns it on"):
        d = machine.hot_add(g, "bp-trap-wbt", rotation_rate="7200")
        rule = _explain_attr(g, d, "wbt_lat_usec")["kernel_rule"]
        expect_eq((_q(g, d, "wbt_lat_usec"), wbt_enabled(g, d)), ("75000", "1"), "fresh rotational disk")
        g.sh(f"echo bfq > /sys/block/{d}/queue/scheduler")
        shown, state = _q(g, d, "wbt_lat_usec"), wbt_enabled(g, d)
        R.figure(s, "after the switch to bfq: wbt_lat_usec / debugfs enabled", f"{shown} / {state}", f"(model: {rule})")
        expect_eq(state, "3", "debugfs enabled after bfq (off-default)")
        expect_eq(shown, "0" if rule == "bfq-off-wbt-reads:0" else "75000", f"sysfs after bfq (model {rule})")
        # The retained latency written alone, on a disk of its own: a no-op
        # up to 6.18, wbt on again on 7.3 (the rows say which here).
        d3 = machine.hot_add(g, "bp-trap-wbt3", rotation_rate="7200")
        g.sh(f"echo bfq > /sys/block/{d3}/queue/scheduler; echo 75000 > /sys/block/{d3}/queue/wbt_lat_usec")
        store = [r for r in _rows(g) if r.startswith("wbt-store:")]
        state = wbt_enabled(g, d3)
        R.figure(s, "the retained latency written alone after bfq: debugfs enabled", state, f"(rows: {store})")
        if "wbt-store:retained-value-noop" in store:
            expect_eq(state, "3", "writing the retained latency alone (a silent no-op)")
        elif "wbt-store:off-retained-applies" in store:
            expect_eq(state, "2", "writing the retained latency alone (turns wbt back on on this kernel)")
        # status sees through sysfs: wbt is off, whatever the file shows.
        g.write_file("/root/trap.toml", "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"bfq\"\nwbt_lat_usec = 75000\n")
        rc, out, _ = g.run(f"blkpolicy status --json --policy /root/trap.toml --state-dir /run/bp-trap {d}", check=False)
        states = {a["attribute"]: a["state"] for a in json.loads(out)["devices"][0]["attributes"]}
        expect_eq((rc, states.get("wbt_lat_usec")), (1, "drift"), "status of a wbt bfq turned off")
        _apply(g, d, "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"bfq\"\nwbt_lat_usec = 75000\n")
        expect_eq((_q(g, d, "wbt_lat_usec"), wbt_enabled(g, d)), ("75000", "2"), "after apply")
        # And on a disk blkpolicy switches itself, without debugfs mounted.
        d2 = machine.hot_add(g, "bp-trap-wbt2", rotation_rate="7200")
        g.sh("umount /sys/kernel/debug")
        _apply(g, d2, "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"bfq\"\nwbt_lat_usec = 75000\n")
        expect_eq(wbt_enabled(g, d2), "2", "wbt after apply switched to bfq (debugfs read afterwards)")

    with R.step(s, "trap: read_ahead_kb rounds to whole pages; a switch recreates iosched/ with its defaults"):
        d = machine.hot_add(g, "bp-trap-io", rotation_rate="7200")
        g.sh(f"echo 6 > /sys/block/{d}/queue/read_ahead_kb")
        expect_eq(_q(g, d, "read_ahead_kb"), "4", "read_ahead_kb after writing 6 (4 KiB pages)")
        g.sh(f"echo mq-deadline > /sys/block/{d}/queue/scheduler")
        default = _q(g, d, "iosched/fifo_batch")
        g.sh(f"echo 32 > /sys/block/{d}/queue/iosched/fifo_batch; echo kyber > /sys/block/{d}/queue/scheduler; "
             f"echo mq-deadline > /sys/block/{d}/queue/scheduler")
        expect_eq(_q(g, d, "iosched/fifo_batch"), default, "fifo_batch after kyber and back")
        res = _apply(g, d, "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"kyber\"\n")
        res = _apply(g, d, "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"mq-deadline\"\n"
                           "iosched.fifo_batch = 32\n")
        expect_eq((res["iosched.fifo_batch"]["outcome"], _q(g, d, "iosched/fifo_batch")), ("applied", "32"),
                  "apply writes the tunable after the switch that recreated it")

    async_depth(ctx)

    with R.step(s, "trap: write_cache takes any prefix, rq_affinity takes 3 and ignores it; check refuses both"):
        d = machine.hot_add(g, "bp-trap-wc", rotation_rate="7200")
        rc, _, _ = g.run(f"echo 'write backwards' > /sys/block/{d}/queue/write_cache", check=False)
        wc = _q(g, d, "write_cache")
        R.figure(s, "'write backwards' written to write_cache", f"exit {rc}, reads {wc!r}")
        expect(rc == 0 and wc == "write back", "the prefix trap is not there")
        before = _q(g, d, "rq_affinity")
        rc, _, _ = g.run(f"echo 3 > /sys/block/{d}/queue/rq_affinity", check=False)
        expect(rc == 0 and _q(g, d, "rq_affinity") == before, f"rq_affinity 3: exit {rc}, now {_q(g, d, 'rq_affinity')}")
        for bad in ('write_cache = "write backwards"', "rq_affinity = 3"):
            g.write_file("/root/bad.toml", f"[[rule]]\nname = \"t\"\n[rule.set]\n{bad}\n")
            expect_eq(g.run("blkpolicy check --policy /root/bad.toml", check=False)[0], 3, f"check of {bad}")

    with R.step(s, "io_timeout: kept in ticks, one timer with SCSI's device/timeout, none on virtio; apply and status"):
        io_timeout(ctx)

    for node in ("bp-trap-ra", "bp-trap-nr", "bp-trap-wbt", "bp-trap-wbt2", "bp-trap-wbt3", "bp-trap-io", "bp-trap-ad",
                 "bp-trap-wc", "bp-trap-to"):
        try:
            g.unplug(node)
        except GuestError:
            pass  # a step that failed before adding it



def _io_timeout_readback(ms, hz):
    """What the kernel shows after a write of MS ms (kernel/rows'
    io_timeout_readback): whole ticks, rounded up; from 2^31 ms the
    longest timer (0xFFFFFFFE ticks), shown as ms in 32 bits."""
    ticks = 0xFFFFFFFE if ms >= 1 << 31 else -(-ms * hz // 1000)
    return -(-ticks * 1000 // hz) & 0xFFFFFFFF


def io_timeout(ctx):
    """queue/io_timeout on this kernel, as the kernel rows say: the drivers
    that have it and their defaults, what a write reads back, SCSI's two
    files for one timer; then apply and status on the three kinds of disk."""
    g, s, R = ctx.guest, ctx.suite, ctx.results
    hz = int(g.sh("sed -n 's/^CONFIG_HZ=//p' /boot/config-$(uname -r)").strip())
    names = disks_by_serial(g)
    nvme, virtio = names["bp-nvme1"], names["bp-virtio1"]
    d = machine.hot_add(g, "bp-trap-to", rotation_rate="7200")
    nvme_param = int(g.sh("cat /sys/module/nvme_core/parameters/io_timeout").strip())
    scsi_timeout = g.sh(f"cat /sys/block/{d}/device/timeout").strip()
    R.figure(s, "io_timeout defaults", f"HZ {hz}; SCSI {_q(g, d, 'io_timeout')} ms (device/timeout {scsi_timeout} s); "
             f"NVMe {_q(g, nvme, 'io_timeout')} ms (nvme_core.io_timeout {nvme_param} s); virtio-blk: "
             f"{'none' if g.run(f'test -e /sys/block/{virtio}/queue/io_timeout', check=False)[0] else 'has one'}")
    expect_eq((_q(g, d, "io_timeout"), scsi_timeout), ("30000", "30"), "sd's default timer")
    expect_eq(_q(g, nvme, "io_timeout"), str(nvme_param * 1000), "NVMe's timer, from nvme_core.io_timeout")
    expect(g.run(f"test -e /sys/block/{virtio}/queue/io_timeout", check=False)[0] != 0,
           "virtio-blk has a queue/io_timeout here")
    expect_eq(_explain_attr(g, nvme, "io_timeout")["kernel_default"], str(nvme_param * 1000), "explain's NVMe default")

    # One timer: each file moves the other.
    g.sh(f"echo 60 > /sys/block/{d}/device/timeout")
    expect_eq(_q(g, d, "io_timeout"), "60000", "io_timeout after device/timeout 60")
    g.sh(f"echo 45000 > /sys/block/{d}/queue/io_timeout")
    expect_eq(g.sh(f"cat /sys/block/{d}/device/timeout").strip(), "45", "device/timeout after io_timeout 45000")

    # Ticks, and the longest timer the clouds' rules ask for.
    seen = []
    for ms in (1001, 90000, 2147483647, 2147483648, 4294967295):
        g.sh(f"echo {ms} > /sys/block/{d}/queue/io_timeout")
        got = int(_q(g, d, "io_timeout"))
        seen.append(f"{ms} -> {got}")
        expect_eq(got, _io_timeout_readback(ms, hz), f"io_timeout read back after writing {ms}")
    R.figure(s, "io_timeout written -> read back", "; ".join(seen))
    rc, _, err = g.run(f"echo 0 > /sys/block/{d}/queue/io_timeout", check=False)
    expect(rc != 0, "io_timeout 0 was accepted")

    g.sh(f"echo 30000 > /sys/block/{d}/queue/io_timeout")
    g.write_file("/root/io_timeout.toml", "[[rule]]\nname = \"t\"\n[rule.set]\nio_timeout = 4294967295\n")
    rc, out, err = g.run(f"blkpolicy apply --json --policy /root/io_timeout.toml --state-dir /run/bp-trap "
                         f"{d} {nvme} {virtio}", check=False)
    expect(rc == 0, f"apply of io_timeout: exit {rc}\n{out}{err}")
    results = {dev["device"]: {r["attribute"]: r for r in dev["results"]} for dev in json.loads(out)["devices"]}
    want = str(_io_timeout_readback(4294967295, hz))
    for name in (d, nvme):
        r = results[name]["io_timeout"]
        expect_eq((r["outcome"], r["after"], _q(g, name, "io_timeout")), ("applied", want, want),
                  f"apply of io_timeout 4294967295 on {name}")
    expect_eq(results[virtio]["io_timeout"]["outcome"], "skipped", "io_timeout on virtio-blk")
    rc, out, _ = g.run(f"blkpolicy status --policy /root/io_timeout.toml --state-dir /run/bp-trap {d} {nvme} {virtio}",
                       check=False)
    expect(rc == 0, f"status after apply: exit {rc} (a value the kernel keeps its own way would read as drifted)\n{out}")
    g.sh(f"echo {nvme_param * 1000} > /sys/block/{nvme}/queue/io_timeout")


def _rows(g):
    return {r["id"] for r in json.loads(g.sh("blkpolicy explain --kernel-rules --json"))["rules"] if r["holds"]}


def async_depth(ctx):
    """queue/async_depth where the kernel has it (7.0+), as its rows say;
    mq-deadline's iosched/async_depth where it does not."""
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "async_depth: the kernel's own behaviour as its rows say, and apply right after a switch"):
        d = machine.hot_add(g, "bp-trap-ad", rotation_rate="7200")
        rows = _rows(g)
        q = f"/sys/block/{d}/queue"
        if "async-depth:iosched-tunable" in rows:
            expect(g.run(f"test -e {q}/async_depth", check=False)[0] != 0, "queue/async_depth on a kernel before 7.0")
            g.sh(f"echo mq-deadline > {q}/scheduler; test -e {q}/iosched/async_depth")
            res = _apply(g, d, "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"mq-deadline\"\n"
                               "async_depth = 16\niosched.async_depth = 16\n", want_rc=1)
            expect_eq(res["async_depth"]["outcome"], "unavailable", "async_depth on a kernel without it")
            _status_unavailable(g, d)
            expect("no queue/async_depth" in res["async_depth"]["detail"], res["async_depth"]["detail"])
            expect_eq((res["iosched.async_depth"]["outcome"], _q(g, d, "iosched/async_depth")), ("applied", "16"),
                      "mq-deadline's own async_depth")
            R.figure(s, "async_depth", "iosched/async_depth under mq-deadline; no queue/async_depth")
            return
        expect("async-depth:queue-attribute" in rows, f"no async-depth row holds: {sorted(rows)}")
        vals = lambda: (_q(g, d, "nr_requests"), _q(g, d, "async_depth"))  # noqa: E731
        seen = {"none": vals()}
        expect_eq(seen["none"][1], seen["none"][0], "under none async_depth is nr_requests")
        rc, _, err = g.run(f"/bin/echo 16 > {q}/async_depth", check=False)
        expect(rc != 0 and "Invalid argument" in err, f"a write under none: exit {rc} {err!r}")
        for sched in ("mq-deadline", "kyber", "bfq"):
            g.sh(f"echo {sched} > {q}/scheduler")
            nr, ad = seen[sched] = vals()
            want = int(nr) * 3 // 4 if sched in ("kyber", "bfq") else int(nr)
            expect_eq(int(ad), want, f"async_depth after the switch to {sched} (nr_requests {nr})")
        g.sh(f"echo mq-deadline > {q}/scheduler; echo 64 > {q}/async_depth; echo 128 > {q}/nr_requests")
        nr_before = seen["mq-deadline"][0]
        expect_eq(_q(g, d, "async_depth"), str(64 * 128 // int(nr_before)),
                  f"async_depth 64 of {nr_before} after nr_requests 128 (rescaled)")
        g.sh(f"echo 1000 > {q}/async_depth")
        expect_eq(_q(g, d, "async_depth"), "128", "a value above nr_requests reads back capped")
        expect(g.run(f"test -e {q}/iosched/async_depth", check=False)[0] != 0, "mq-deadline still has its own")
        R.figure(s, "async_depth after switches (nr_requests / async_depth)",
                 "; ".join(f"{k} {v[0]}/{v[1]}" for k, v in seen.items()))
        g.sh(f"echo none > {q}/scheduler")
        # apply: the switch, nr_requests, then async_depth, read back right after.
        res = _apply(g, d, "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"mq-deadline\"\nnr_requests = 64\n"
                           "async_depth = 16\n")
        expect_eq((res["async_depth"]["outcome"], res["async_depth"]["after"], _q(g, d, "async_depth")),
                  ("applied", "16", "16"), "async_depth after apply switched to mq-deadline")
        res = _apply(g, d, "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"kyber\"\nasync_depth = 16\n")
        expect_eq((res["scheduler"]["outcome"], res["async_depth"]["outcome"], _q(g, d, "async_depth")),
                  ("applied", "applied", "16"), "async_depth after apply switched to kyber (the switch reset it)")
        res = _apply(g, d, "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"mq-deadline\"\n"
                           "iosched.async_depth = 16\n", want_rc=1)
        expect_eq(res["iosched.async_depth"]["outcome"], "unavailable", "iosched.async_depth on 7.0+")
        _status_unavailable(g, d)
        expect("moved" in res["iosched.async_depth"]["detail"], res["iosched.async_depth"]["detail"])
        res = _apply(g, d, "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"none\"\nasync_depth = 16\n")
        expect_eq(res["async_depth"]["outcome"], "skipped", "async_depth under none")


# --- another writer on the same SCSI host ----------------------------------

# Switches the scheduler of one disk back and forth until told to stop: a
# writer (a udev rule at hotplug, TuneD, an admin) busy with another disk of
# the same SCSI host, whose queues share one tag set. It pauses 20 ms between
# switches: without a pause (measured on 7.3.4 under TCG) it holds the lock
# nearly all the time, 39 of 40 plain writes are refused, and no bound short
# enough for a daemon's pass gets a write through.
_CONTENDER = r"""
rm -f /run/bp-contend.stop
setsid sh -c 'while [ ! -e /run/bp-contend.stop ]; do echo kyber > {q}/scheduler; sleep 0.02; echo mq-deadline > {q}/scheduler; sleep 0.02; done' >/dev/null 2>&1 </dev/null &
"""

# Plain writes of nr_requests to DISK, counting the EBUSY answers.
_PLAIN_WRITES = r"""
busy=0; i=0
while [ $i -lt 40 ]; do
  if ! /bin/echo 32 > /sys/block/{disk}/queue/nr_requests 2>/tmp/bp-err; then
    grep -q busy /tmp/bp-err && busy=$((busy+1))
  fi
  i=$((i+1))
done
echo $busy
"""

CONTENTION_POLICY = """[daemon]
mode = "enforce"
verify_interval = "5s"

[[rule]]
name = "contended disk"
[rule.match]
serial = "bp-busy-a"
[rule.set]
scheduler = "mq-deadline"
nr_requests = 32
"""


def contention(ctx):
    """Another writer busy with a disk of the same SCSI host: on kernels
    whose rows say so the kernel answers EBUSY; apply and the daemon's
    passes still end with every value applied."""
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "contention: a writer on another disk of the SCSI host; apply and the daemon still apply"):
        a = machine.hot_add(g, "bp-busy-a", rotation_rate="7200")
        b = machine.hot_add(g, "bp-busy-b", rotation_rate="7200")
        rows = _rows(g)
        extra = "async_depth = 16\n" if "async-depth:queue-attribute" in rows else ""
        try:
            g.sh(_CONTENDER.format(q=f"/sys/block/{b}/queue"))
            plain = int(g.sh(_PLAIN_WRITES.format(disk=a)).strip() or 0)
            R.figure(s, "contention: plain nr_requests writes answered EBUSY", f"{plain} of 40",
                     "(rows: " + ", ".join(sorted(r for r in rows if r.startswith("write-contended"))) + ")")
            if "write-contended:ebusy" in rows:
                expect(plain > 0, "no EBUSY beside the writer, though this kernel's row says it answers so")
            elif "write-contended:waits" in rows:
                expect_eq(plain, 0, "EBUSY on a kernel whose contended writes wait")
            retried = 0
            for _ in range(5):
                g.sh(f"until echo none > /sys/block/{a}/queue/scheduler 2>/dev/null; do sleep 0.01; done")
                res = _apply(g, a, "[[rule]]\nname = \"t\"\n[rule.set]\nscheduler = \"mq-deadline\"\n"
                                   "nr_requests = 32\n" + extra)
                bad = {k: v["outcome"] for k, v in res.items() if v["outcome"] not in ("applied", "unchanged")}
                expect(not bad, f"apply beside the writer: {bad}")
                retried += sum(v["busy"] for v in res.values())
                want = {"scheduler": "mq-deadline", "nr_requests": "32"}
                if extra:
                    want["async_depth"] = "16"
                expect_eq(read_queue(g, a, list(want)), want, "after apply beside the writer")
            R.figure(s, "contention: blkpolicy's writes answered EBUSY and made again, in 5 applies", retried)

            # The daemon: a drift while the writer runs is re-applied at a pass.
            g.write_file("/etc/blkpolicy/policy.toml", CONTENTION_POLICY)
            g.sh(f"systemctl start {UNIT}")
            since = machine.cursor(g)
            for _ in range(3):
                g.sh(f"until echo kyber > /sys/block/{a}/queue/scheduler 2>/dev/null; do sleep 0.01; done")
                g.wait_for(machine.queue_is((a, "scheduler", "in", "mq-deadline"), (a, "nr_requests", "=", 32)),
                           timeout=30,
                           what="the daemon to re-apply beside the writer")
            failed = [e.get("MESSAGE") for e in machine.since(g, since, SYSLOG_IDENTIFIER="blkpolicy")
                      if e.get("BLKPOLICY_EVENT") == "failed"]
            expect(not failed, f"failed alerts beside the writer: {failed}")
        finally:
            g.sh(f"touch /run/bp-contend.stop; systemctl stop {UNIT}; sleep 0.5")
            for node in ("bp-busy-a", "bp-busy-b"):
                try:
                    g.unplug(node)
                except GuestError:
                    pass


# --- hotplug under the running service, against an equivalent udev rule ----

HOT_POLICY = """\
[daemon]
mode = "enforce"
verify_interval = "30s"

[[rule]]
name = "hot-added disks"
[rule.match]
serial = "bp-hot*"
[rule.set]
read_ahead_kb = 256
nr_requests = 64
"""
# The same settings as a udev rule, after 60-persistent-storage.rules set
# ID_SERIAL.
HOT_UDEV_RULE = ('ACTION=="add", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", ENV{ID_SERIAL}=="*bp-hot*", '
                 'ATTR{queue/read_ahead_kb}="256", ATTR{queue/nr_requests}="64"\n')
HOT_CLASSES = [("virtio-blk", "virtio-blk-pci", {"bus": "rp1"}), ("SCSI", "scsi-hd", {"bus": "scsi0.0"}),
               ("NVMe", "nvme", {"bus": "rp2"})]


# Watches sysfs for disks that were not there when it started and notes,
# per disk, the first moment both values read as wanted (seconds since
# boot, from /proc/uptime, the clock udevadm monitor's stamps use in a guest
# that never suspends). Builtin reads only, no fork per file: one of the
# guest's two CPUs for as long as it runs, for blkpolicy and the udev rule
# alike. The journal's own timestamps are not used: in a burst journald
# falls behind and stamps entries when it gets to them.
_POLLER = r"""
before=" $(ls /sys/block | tr '\n' ' ') "
seen=" "
while [ ! -e /run/bp-poll.stop ]; do
  for d in /sys/block/*; do
    n=${d##*/}
    case "$before$seen" in *" $n "*) continue ;; esac
    read ra < $d/queue/read_ahead_kb 2>/dev/null || continue
    read nr < $d/queue/nr_requests 2>/dev/null || continue
    if [ "$ra" = 256 ] && [ "$nr" = 64 ]; then
      read up idle < /proc/uptime
      echo "$n $up" >> /run/bp-poll.log
      seen="$seen$n "
    fi
  done
done
"""


def _start_monitor(g):
    g.write_file("/run/bp-poll.sh", _POLLER)
    g.sh("rm -f /run/bp-mon.log /run/bp-poll.log /run/bp-poll.stop; touch /run/bp-poll.log; "
         "setsid udevadm monitor --kernel --udev --subsystem-match=block >/run/bp-mon.log 2>&1 </dev/null & "
         "setsid sh /run/bp-poll.sh >/dev/null 2>&1 </dev/null & sleep 1")


def _stop_monitor(g):
    """The monitor's log, and {disk: seconds} when the poller saw its values."""
    g.sh("touch /run/bp-poll.stop; pkill -x udevadm || true; sleep 0.5")
    log = g.sh("cat /run/bp-mon.log")
    seen = {}
    for line in g.sh("cat /run/bp-poll.log").splitlines():
        name, t = line.split()
        seen.setdefault(name, float(t))
    return log, seen


def _uevent_times(log, action="add"):
    """{(source, device): monotonic seconds} from udevadm monitor output."""
    out = {}
    for m in re.finditer(r"^(KERNEL|UDEV) *\[([0-9.]+)\] (\w+) +(\S+) \(block\)", log, re.M):
        source, t, act, path = m.groups()
        # The disk itself: .../block/sdb, or .../nvme/nvme1/nvme1n1.
        if act == action:
            out.setdefault((source, path.rsplit("/", 1)[-1]), float(t))
    return out


def _applied_times(g, names, since, timeout=20):
    """The monotonic time (s) of blkpolicy's first applied alert per device
    after SINCE (a journal cursor), and the alerts that applied a value
    again (a driver or udev put the kernel's value back after the first).
    Waits up to TIMEOUT s for every device's alert: the values can be on the
    disk before journald has stored the alert the daemon sent after them."""
    deadline = time.monotonic() + timeout
    while True:
        first, again = {}, []
        for e in machine.since(g, since, SYSLOG_IDENTIFIER="blkpolicy", BLKPOLICY_EVENT="applied"):
            if e.get("BLKPOLICY_DEVICE") in names:
                first.setdefault(e["BLKPOLICY_DEVICE"], int(e["__MONOTONIC_TIMESTAMP"]) / 1e6)
                if " again: " in e.get("MESSAGE", ""):
                    again.append(e["MESSAGE"])
        if set(names) <= set(first) or time.monotonic() > deadline:
            return first, again
        time.sleep(1)


def _wait_values(g, names, timeout=120):
    names = list(names)
    check = machine.queue_is(*[c for n in names for c in ((n, "read_ahead_kb", "=", 256), (n, "nr_requests", "=", 64))])
    g.wait_for(check, timeout=timeout, what=f"the hot-added disks' values ({len(names)} disks)")


def _rss_kib(g):
    pid = unit_prop(g, UNIT, "MainPID")
    st = g.sh(f"grep -E '^Vm(RSS|HWM):' /proc/{pid}/status")
    return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in st.splitlines())}


def hotplug(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    g.write_file("/etc/blkpolicy/policy.toml", HOT_POLICY)
    g.sh(f"systemctl start {UNIT}")

    ctx.hot = {}
    with R.step(s, "hotplug under the service: each class gets its values; time from the kernel's add uevent"):
        since = machine.cursor(g)
        _start_monitor(g)
        added = ctx.hot
        try:
            for label, device, props in HOT_CLASSES:
                added[label] = machine.hot_add(g, f"bp-hot-{device.split('-')[0]}", device, **props)
            _wait_values(g, added.values())
        finally:
            log, seen = _stop_monitor(g)
        times = _uevent_times(log)
        applied, again = _applied_times(g, set(added.values()), since)
        R.figure(s, "hotplug: values put back during the device's setup and applied again", len(again),
                 "; ".join(sorted(set(again))[:3]))
        for label, name in added.items():
            k = times.get(("KERNEL", name))
            expect(k is not None and name in applied and name in seen,
                   f"{label} {name}: kernel add {k}, applied alert {applied.get(name)}, seen {seen.get(name)}")
            R.figure(s, f"hotplug {label}: kernel add uevent -> values on the disk (blkpolicy)",
                     round((seen[name] - k) * 1000), "ms")

    with R.step(s, "hot-removed disks are forgotten by the daemon"):
        names = set(ctx.hot.values())
        expect(names, "nothing was hot-added")
        for label, device, _ in HOT_CLASSES:
            g.unplug(f"bp-hot-{device.split('-')[0]}")
        g.wait_for(" && ".join(f"! test -e /sys/block/{n}" for n in names), timeout=30, what="the disks gone")
        # The daemon forgets a disk at udevd's remove event, which comes after
        # the kernel's sysfs entry is gone, and rewrites daemon.json after
        # its next pass: a second was not always enough beside two other
        # guests in CI (both disks still listed), so this waits, and says
        # how long it took.
        t0 = time.monotonic()
        facts = "ls /run/blkpolicy/facts/ | grep -E '^(" + "|".join(names) + r")\.json$' || true"
        while True:
            listed = {d["device"] for d in json.loads(g.sh("cat /run/blkpolicy/daemon.json"))["devices"]} & names
            kept = g.sh(facts).strip()
            if not (listed or kept) or time.monotonic() - t0 > 30:
                break
            time.sleep(0.5)
        R.figure(s, "hot-removed disks: gone from sysfs -> gone from daemon.json and the facts",
                 round(time.monotonic() - t0, 1), "s")
        expect(not listed, f"daemon.json still lists {sorted(listed)} 30 s after the disks went")
        expect(not kept, f"frozen facts of removed disks are kept: {kept.split()}")

    g.sh(f"systemctl stop {UNIT}")
    if "hotplug-udev" in ctx.device_checks:
        hotplug_udev(ctx)
    if "burst" in ctx.device_checks:
        burst(ctx)


BURST = 64


def _burst_add(g, prefix):
    for i in range(BURST):
        g.hotplug(f"{prefix}{i:02d}", "scsi-hd", bus="scsi0.0")


def _burst_names(g, prefix, count):
    """Names of the burst's disks once all COUNT are there."""
    script = f"readlink -f /dev/disk/by-id/scsi-*{prefix}[0-9][0-9] 2>/dev/null; true"
    deadline = time.monotonic() + 300
    while True:
        names = sorted({p.rsplit("/", 1)[1] for p in g.sh(script).split() if p.startswith("/dev/sd")})
        if len(names) == count:
            return names
        if time.monotonic() > deadline:
            raise CheckFailed(f"only {len(names)} of {count} burst disks appeared")
        time.sleep(2)


def _unplug_burst(g, prefix, count=BURST):
    """Removes whatever of a burst qemu has (some may never have been added)."""
    for i in range(count):
        try:
            g.unplug(f"{prefix}{i:02d}")
        except Exception:  # not added, or already gone
            pass


def hotplug_udev(ctx):
    """The same hotplug with an equivalent udev rule: a comparison (figures
    only; bench/peers.sh measures it), run with --all-checks."""
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "the same hotplug with an equivalent udev rule (for comparison)"):
        g.write_file("/etc/udev/rules.d/61-bp-hot.rules", HOT_UDEV_RULE)
        g.sh("udevadm control --reload")
        _start_monitor(g)
        added = {}
        try:
            for label, device, props in HOT_CLASSES:
                added[label] = machine.hot_add(g, f"bp-hotu-{device.split('-')[0]}", device, **props)
            _wait_values(g, added.values())
            log, seen = _stop_monitor(g)
            times = _uevent_times(log)
            for label, name in added.items():
                k = times.get(("KERNEL", name))
                expect(k is not None and name in seen, f"{label} {name}: kernel {k}, seen {seen.get(name)}")
                R.figure(s, f"hotplug {label}: kernel add uevent -> values on the disk (udev rule)",
                         round((seen[name] - k) * 1000), "ms")
        finally:
            _stop_monitor(g)
            for label, device, _ in HOT_CLASSES:
                if label in added:
                    g.unplug(f"bp-hotu-{device.split('-')[0]}")
            g.sh("rm -f /etc/udev/rules.d/61-bp-hot.rules && udevadm control --reload")


def burst(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, f"a burst of {BURST} SCSI disks under the service: every one applied, memory bounded"):
        g.sh(f"systemctl start {UNIT}")
        expect(not g.sh("ls /etc/udev/rules.d/").strip(), "a udev tuning rule is installed: the burst would race it")
        before = _rss_kib(g)
        since = machine.cursor(g)
        _start_monitor(g)
        try:
            _burst_add(g, "bp-hotb")
            names = _burst_names(g, "bp-hotb", BURST)
            _wait_values(g, names, timeout=300)
        finally:
            log, seen = _stop_monitor(g)
        times = _uevent_times(log)
        applied, again = _applied_times(g, set(names), since)
        expect(len(applied) == BURST, f"{len(applied)} of {BURST} disks have an applied alert")
        expect(all(n in seen for n in names), f"the poller saw {len(seen)} of {BURST}")
        R.figure(s, f"burst of {BURST}: values put back during the devices' setup and applied again", len(again),
                 "; ".join(sorted(set(m.split(" again:")[0].split(" of ")[0] for m in again))))
        warn = [e.get("MESSAGE", "") for e in machine.since(g, since, SYSLOG_IDENTIFIER="blkpolicy")
                if int(e.get("PRIORITY", 6)) <= 4]
        expect(not warn, f"{len(warn)} warning(s) in the burst: " + "; ".join(warn[:5]))
        first = min(times[("KERNEL", n)] for n in names)
        R.figure(s, f"burst of {BURST}: first kernel add -> values on the last disk (blkpolicy)",
                 round((max(seen[n] for n in names) - first) * 1000), "ms")
        lat = sorted(seen[n] - times[("KERNEL", n)] for n in names)
        R.figure(s, f"burst of {BURST}: per disk kernel add -> values on the disk (blkpolicy), median / max",
                 f"{round(lat[len(lat) // 2] * 1000)} / {round(lat[-1] * 1000)}", "ms")
        after = _rss_kib(g)
        R.figure(s, f"burst of {BURST}: daemon VmRSS before -> after, VmHWM",
                 f"{before['VmRSS']} -> {after['VmRSS']}, {after['VmHWM']}", "KiB")
        expect(after["VmHWM"] < 64 * 1024, f"VmHWM {after['VmHWM']} KiB")
    _unplug_burst(g, "bp-hotb")
    g.sh(f"systemctl stop {UNIT}")
    if "burst-udev" not in ctx.device_checks:
        return

    with R.step(s, f"the same burst of {BURST} with the udev rule (for comparison)"):
        g.write_file("/etc/udev/rules.d/61-bp-hot.rules", HOT_UDEV_RULE)
        g.sh("udevadm control --reload")
        _start_monitor(g)
        lost = []
        try:
            _burst_add(g, "bp-hotc")
            names = _burst_names(g, "bp-hotc", BURST)
            # udevd makes a disk's by-id link after its rule's writes: every
            # rule has run by now, and once udevd's queue is empty nothing
            # writes these disks any more. What is not set now never will be.
            g.sh("udevadm settle --timeout=120")
            try:
                _wait_values(g, names, timeout=5)
            except GuestError:
                # A udev rule writes once, at add: where the kernel answers
                # EBUSY (7.0+: the other disks of the SCSI host are being set
                # up at the same time) the write is lost and nobody retries.
                # (udevd logs the failed write at debug level only.)
                lost = [n for n in names if read_queue(g, n, ["nr_requests"])["nr_requests"] != "64"]
        finally:
            log, seen = _stop_monitor(g)
            g.sh("rm -f /etc/udev/rules.d/61-bp-hot.rules && udevadm control --reload")
        R.figure(s, f"burst of {BURST}: disks the udev rule left without its nr_requests 64", len(lost),
                 "(the rule ran: read_ahead_kb is set; the serialized write was lost)" if lost else "")
        if lost:
            expect("write-contended:ebusy" in _rows(g),
                   f"the udev rule left {len(lost)} disks unset on a kernel whose contended writes wait")
            ran = [n for n in lost if read_queue(g, n, ["read_ahead_kb"])["read_ahead_kb"] == "256"]
            expect(ran == lost, f"the udev rule did not run at all on {sorted(set(lost) - set(ran))}")
            names = [n for n in names if n not in lost]
        times = _uevent_times(log)
        missing = [n for n in names if n not in seen or ("KERNEL", n) not in times]
        expect(not missing, f"no times for {missing}")
        expect(names, "the udev rule set no disk at all")
        first = min(times[("KERNEL", n)] for n in names)
        R.figure(s, f"burst of {BURST}: first kernel add -> values on the last disk (udev rule)",
                 round((max(seen[n] for n in names) - first) * 1000), "ms")
        lat = sorted(seen[n] - times[("KERNEL", n)] for n in names)
        R.figure(s, f"burst of {BURST}: per disk kernel add -> values on the disk (udev rule), median / max",
                 f"{round(lat[len(lat) // 2] * 1000)} / {round(lat[-1] * 1000)}", "ms")
    _unplug_burst(g, "bp-hotc")



# --- stacks ----------------------------------------------------------------

def _members_policy(with_md):
    text = ('[daemon]\nverify_interval = "5s"\n\n'
            '[[rule]]\nname = "raid members"\n[rule.match]\nserial = ["bp-md-a", "bp-md-b"]\n'
            '[rule.set]\nscheduler = "mq-deadline"\nread_ahead_kb = 64\n')
    if with_md:
        text += '\n[[rule]]\nname = "the raid"\n[rule.match]\nstack = "md"\n[rule.set]\nread_ahead_kb = 1024\n'
    return text


def stacks(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    md, a, b = ctx.names["md"], ctx.names["bp-md-a"], ctx.names["bp-md-b"]

    with R.step(s, "audit on a real md stack: tuning only the members is a finding, tuning the top is not"):
        g.write_file("/root/stack.toml", _members_policy(False))
        out = json.loads(g.run("blkpolicy audit --json --policy /root/stack.toml", check=False)[1])
        lower_only = {f["device"] for f in out["findings"] if f["code"] == "stack-lower-only"}
        expect_eq(lower_only, {a, b}, "stack-lower-only findings")
        tops = {f["evidence"].get("top") for f in out["findings"] if f["code"] == "stack-lower-only"}
        expect_eq(tops, {md}, "the top they name")
        g.write_file("/root/stack.toml", _members_policy(True))
        out = json.loads(g.run("blkpolicy audit --json --policy /root/stack.toml", check=False)[1])
        expect(not [f for f in out["findings"] if f["code"] == "stack-lower-only"], "stack-lower-only with the top tuned")
        blank = [f"{f['device']} {f['code']}: {k} = {v!r}" for f in out["findings"]
                 for k, v in f.get("evidence", {}).items() if v in ("", "-")]
        expect(not blank, "audit evidence without a value: " + "; ".join(blank))
        text = g.run(f"blkpolicy status --policy /root/stack.toml {md}", check=False)[1]
        expect(f"{md} " in text and "stack=md" in text and "md_level=raid1" in text, f"status of the md device:\n{text}")

    with R.step(s, "the daemon tunes the md device and its members each by its own rule; a removed member is noticed"):
        g.write_file("/etc/blkpolicy/policy.toml", _members_policy(True))
        g.sh(f"systemctl restart {UNIT}")
        g.wait_for(machine.queue_is((md, "read_ahead_kb", "=", 1024), (a, "read_ahead_kb", "=", 64),
                                    (b, "read_ahead_kb", "=", 64)), timeout=30, what="the stack's values")
        since = machine.cursor(g)
        g.sh(f"mdadm /dev/md/bpmd --fail /dev/{b} --remove /dev/{b} 2>&1")
        g.wait_for(f"! test -e /sys/block/{md}/slaves/{b}", timeout=30, what="the member to leave")
        plan = _plan_json(g, "/etc/blkpolicy/policy.toml", f"{md} {b}")
        expect_eq(plan[md]["facts"]["slaves"], [a], "md slaves after the removal")
        expect_eq(plan[b]["facts"]["holders"], [], "the removed member's holders")
        lowers = json.loads(g.sh(f"blkpolicy explain --json {md}"))["devices"][0]["stack"]["lowers"]
        expect_eq(lowers, [a], "explain's lowers of the md device")
        time.sleep(6)  # a verify pass
        bad = [e for e in machine.since(g, since, SYSLOG_IDENTIFIER="blkpolicy")
               if int(e.get("PRIORITY", 6)) <= 4 and "BLKPOLICY_EVENT" in e]
        expect(not bad, "alerts after the removal: " + "; ".join(e.get("MESSAGE", "") for e in bad))
        expect_eq(_q(g, md, "read_ahead_kb"), "1024", "md read_ahead_kb after the removal")
        g.sh(f"mdadm /dev/md/bpmd --add /dev/{b} >/dev/null 2>&1 || true; systemctl stop {UNIT}")


# A raid5 and a raid0 on loop devices of the guest's own (the raid1 of the
# stack disks is the third level): what the kernel starts each with, what it
# refuses, and the md units' apply, status, explain and restore on them.
MD_LEVELS_SCRIPT = r"""
set -e
for i in 0 1 2 3 4; do truncate -s 32M /var/tmp/bp-md$i.img; losetup -f /var/tmp/bp-md$i.img; done
l() { losetup -j /var/tmp/bp-md$1.img | cut -d: -f1; }
mdadm --create /dev/md/bp5 --level=5 --raid-devices=3 --metadata=1.2 --assume-clean --run --quiet $(l 0) $(l 1) $(l 2)
mdadm --create /dev/md/bp0 --level=0 --raid-devices=2 --metadata=1.2 --run --quiet $(l 3) $(l 4)
udevadm settle
basename "$(readlink -f /dev/md/bp5)"; basename "$(readlink -f /dev/md/bp0)"
"""
MD_LEVELS_TEARDOWN = ("mdadm --stop /dev/md/bp5 /dev/md/bp0 >/dev/null 2>&1; "
                      "for i in 0 1 2 3 4; do for d in $(losetup -j /var/tmp/bp-md$i.img | cut -d: -f1); do "
                      "losetup -d $d; done; rm -f /var/tmp/bp-md$i.img; done; true")
MD_POLICY = """\
[[rule]]
name = "arrays"
[rule.match]
stack = "md"
[rule.set]
md.stripe_cache_size = 1024
md.sync_speed_min = 50000
md.sync_speed_max = 400000
"""


def md_tunables(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    raid1 = ctx.names["md"]
    with R.step(s, "md arrays' own tunables: the kernel's defaults and refusals per level (rows md-*), then "
                   "apply, status, explain and restore of md.stripe_cache_size and md.sync_speed_min/max"):
        try:
            raid5, raid0 = g.sh(MD_LEVELS_SCRIPT, timeout=180).split()
            md = {n: f"/sys/block/{n}/md" for n in (raid5, raid1, raid0)}
            files = {n: g.sh(f"cd {d} && ls stripe_cache_size sync_speed_min sync_speed_max 2>/dev/null || true").split()
                     for n, d in md.items()}
            R.figure(s, "md files per level", {f"{n} ({lvl})": files[n] for n, lvl in
                                               ((raid5, "raid5"), (raid1, "raid1"), (raid0, "raid0"))})
            expect_eq(files[raid5], ["stripe_cache_size", "sync_speed_max", "sync_speed_min"],
                      "raid5's files (rows md-stripe-cache:raid456, md-sync-speed:arrays-with-redundancy)")
            expect_eq(files[raid1], ["sync_speed_max", "sync_speed_min"], "raid1's files")
            expect_eq(files[raid0], [], "raid0's files (it never resyncs)")
            limits = g.sh("cat /proc/sys/dev/raid/speed_limit_min /proc/sys/dev/raid/speed_limit_max").split()
            start = g.sh(f"cat {md[raid5]}/stripe_cache_size {md[raid5]}/sync_speed_min {md[raid5]}/sync_speed_max")
            R.figure(s, "raid5 as the kernel starts it", start.splitlines())
            expect_eq(start.splitlines(), ["256", f"{limits[0]} (system)", f"{limits[1]} (system)"],
                      "stripe_cache_size and the speeds as the kernel starts them (row md-default)")
            # What the kernel refuses and how the speeds read back (coreutils'
            # echo: sh's own says "I/O error" for any errno).
            probe = g.sh(f"cd {md[raid5]}; for v in 16 32769 17 256; do /bin/echo $v 2>&1 > stripe_cache_size "
                         f"| sed 's/.*: //'; echo \"$v -> $(cat stripe_cache_size)\"; done; "
                         f"/bin/echo 0 2>&1 > sync_speed_min | sed 's/.*: //'; "
                         f"echo 50000 > sync_speed_min; echo \"50000 -> $(cat sync_speed_min)\"; "
                         f"echo system > sync_speed_min; echo \"system -> $(cat sync_speed_min)\"; "
                         f"echo 1000 > sync_speed_max; /bin/echo 5000 2>&1 > sync_speed_min | sed 's/.*: //'; "
                         f"echo \"min 5000 over max 1000 -> $(cat sync_speed_min) / $(cat sync_speed_max)\"; "
                         f"echo system > sync_speed_min; echo system > sync_speed_max")
            R.figure(s, "md writes", probe.splitlines())
            lines = probe.splitlines()
            expect(lines[:2] == ["Invalid argument", "16 -> 256"] and lines[2:4] == ["Invalid argument", "32769 -> 256"]
                   and "17 -> 17" in lines and "256 -> 256" in lines,
                   f"stripe_cache_size: 16 and 32769 refused, 17 taken (row md-stripe-cache):\n{probe}")
            expect("50000 -> 50000 (local)" in lines and f"system -> {limits[0]} (system)" in lines,
                   f"sync_speed_min read back (row md-sync-speed:reads-local-or-system):\n{probe}")
            expect(lines.index("50000 -> 50000 (local)") > 0 and lines[lines.index("50000 -> 50000 (local)") - 1]
                   == "Invalid argument", f"sync_speed_min 0 refused:\n{probe}")
            expect("min 5000 over max 1000 -> 5000 (local) / 1000 (local)" in lines,
                   f"a min above the max taken (row md-sync-speed:min-over-max-taken):\n{probe}")

            g.write_file("/root/md.toml", MD_POLICY)
            rc, out, err = g.run(f"blkpolicy apply --json --policy /root/md.toml --state-dir /run/bp-md "
                                 f"{raid5} {raid1} {raid0}", check=False)
            expect(rc == 0, f"apply on the arrays: exit {rc}\n{out}{err}")
            res = {d["device"]: {r["attribute"]: r["outcome"] for r in d["results"]} for d in json.loads(out)["devices"]}
            R.figure(s, "apply on raid5, raid1, raid0", res)
            expect_eq(res[raid5], {"md.stripe_cache_size": "applied", "md.sync_speed_min": "applied",
                                   "md.sync_speed_max": "applied"}, "apply on raid5")
            expect_eq(res[raid1], {"md.stripe_cache_size": "skipped", "md.sync_speed_min": "applied",
                                   "md.sync_speed_max": "applied"}, "apply on raid1")
            expect_eq(set(res[raid0].values()), {"skipped"}, "apply on raid0")
            now = g.sh(f"cat {md[raid5]}/stripe_cache_size {md[raid5]}/sync_speed_min {md[raid1]}/sync_speed_max")
            expect_eq(now.splitlines(), ["1024", "50000 (local)", "400000 (local)"], "read from sysfs after apply")
            rc, out, _ = g.run(f"blkpolicy status --policy /root/md.toml --state-dir /run/bp-md {raid5} {raid1}",
                               check=False)
            expect(rc == 0, f"status after apply: exit {rc}\n{out}")
            x = {a["attribute"]: a for a in
                 json.loads(g.sh(f"blkpolicy explain --json --no-policy {raid5}"))["devices"][0]["attributes"]}
            expect_eq((x["md.stripe_cache_size"]["kernel_default"], x["md.stripe_cache_size"]["current"],
                       x["md.sync_speed_min"]["kernel_default"]), ("256", "1024", "system"), "explain on raid5")
            rc, out, err = g.run(f"blkpolicy restore --state-dir /run/bp-md {raid5} {raid1}", check=False)
            back = g.sh(f"cat {md[raid5]}/stripe_cache_size {md[raid5]}/sync_speed_min {md[raid1]}/sync_speed_max")
            R.figure(s, "after restore", back.splitlines())
            expect(rc == 0, f"restore: exit {rc}\n{out}{err}")
            expect_eq(back.splitlines(), ["256", f"{limits[0]} (system)", f"{limits[1]} (system)"],
                      "restore puts the stripe cache back and the speeds to the sysctls' (\"system\")")
        finally:
            g.run(MD_LEVELS_TEARDOWN, check=False)


# --- udev rules and their import, on real disks ----------------------------

# Tuning rules in the shapes distributions and fleets ship.
EQUIVALENCE_RULES = r"""# scheduler by rotational
ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="sd[a-z]|vd[a-z]|nvme[0-9]n[0-9]", ATTR{queue/rotational}=="1", ATTR{queue/scheduler}="bfq"
ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="sd[a-z]|nvme[0-9]n[0-9]", ATTR{queue/rotational}=="0", ATTR{queue/scheduler}="none"
# readahead by kernel name
ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="vd[a-z]", ATTR{bdi/read_ahead_kb}="512"
# nr_requests by model
ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="sd[a-z]", ATTRS{model}=="QEMU HARDDISK   ", ATTR{queue/nr_requests}="128"
# SCSI command timeouts by vendor and model
ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="sd[a-z]", ATTRS{vendor}=="SEAGATE ", ATTRS{model}=="ST4000NM0035*", ATTR{device/timeout}="90"
# the SCSI device's own timeout, on its event (VMware's guest rule's shape)
ACTION=="add|change", SUBSYSTEMS=="scsi", ENV{DEVTYPE}=="scsi_device", ATTRS{vendor}=="SAMSUNG*", ATTR{timeout}="180"
"""
COMPARED = ["scheduler", "read_ahead_kb", "nr_requests", "rotational", "wbt_lat_usec", "rq_affinity", "nomerges",
            "max_sectors_kb", "write_cache"]


def _all_values(g):
    machine.wait_all_disks(g)
    time.sleep(2)  # the daemon acts on udev's last events
    names = disks_by_serial(g)
    queues = machine.read_queues(g, {name: COMPARED for name in names.values()})
    timeouts = dict(line.split(" ", 1) for line in g.sh("".join(
        f"t=-; read -r t 2>/dev/null < /sys/block/{n}/device/timeout; echo {n} $t\n" for n in names.values())).splitlines())
    return {serial: dict(queues[name], **{"device/timeout": timeouts[name]}) for serial, name in names.items()}


# What udevd does with every device at boot (systemd-udev-trigger.service),
# then waits for, as systemd-udev-settle would.
COLDPLUG = ("udevadm control --reload && udevadm trigger --type=subsystems --action=add && "
            "udevadm trigger --type=devices --action=add && udevadm settle")


def udev_equivalence(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "udev rules applied by udevd to every device (coldplug, as at boot) and their import applied by "
                   "blkpolicy's daemon, each on pristine disks: the same values"):
        g.restore()  # pristine disks, the package installed, nothing running
        g.write_file("/etc/udev/rules.d/60-bp-tuning.rules", EQUIVALENCE_RULES)
        rc, policy, err = g.run("blkpolicy import /etc/udev/rules.d/60-bp-tuning.rules", check=False)
        expect(rc == 0, f"import left something out (exit {rc}):\n{err}")
        g.sh(COLDPLUG, timeout=300)
        by_udev = _all_values(g)
        g.restore()
        g.write_file("/etc/blkpolicy/policy.toml", policy)
        g.sh(f"blkpolicy check && systemctl start {UNIT}")
        g.wait_for(f"systemctl is-active -q {UNIT}", timeout=60, what="the service")
        by_blkpolicy = _all_values(g)
        bad = [f"{serial} {attr}: udev {v!r}, blkpolicy {by_blkpolicy.get(serial, {}).get(attr)!r}"
               for serial, vals in sorted(by_udev.items()) for attr, v in vals.items()
               if by_blkpolicy.get(serial, {}).get(attr) != v]
        expect(not bad, "\n".join(bad))
        expect(len(by_udev) == len(machine.DISKS) + 1, f"compared {len(by_udev)} disks")
        R.figure(s, "udev equivalence", f"{len(by_udev)} disks x {len(COMPARED) + 1} attributes identical")
        g.sh(f"systemctl disable --now {UNIT} 2>/dev/null")


def _host_policy(version, virt):
    """A rule for this guest's kernel and hypervisor, and two for other hosts."""
    return f"""
[[rule]]
name = "this kernel, this hypervisor"
[rule.match]
host.kernel = "== {version}"
host.virtualization = "{virt}"
driver = "virtio_blk"
[rule.set]
read_ahead_kb = 128

[[rule]]
name = "kernels before 5.0"
[rule.match]
host.kernel = "< 5.0"
[rule.set]
nomerges = 1

[[rule]]
name = "bare metal"
[rule.match]
host.virtualization = "none"
[rule.set]
nomerges = 2
"""


def host_facts(ctx):
    """host.* match keys on a real guest: the facts are what uname and
    systemd-detect-virt --vm say, the rules keyed on them match here, and
    the installed fleet example takes its kernel rule only from 6.17."""
    g, s, R = ctx.guest, ctx.suite, ctx.results
    release = g.sh("uname -r").strip()
    numbers = re.match(r"(\d+)\.(\d+)", release)
    expect(numbers is not None, f"uname -r says {release!r}")
    version = (int(numbers.group(1)), int(numbers.group(2)))
    _, virt_out, _ = g.run("systemd-detect-virt --vm", check=False)
    virt = virt_out.strip()
    with R.step(s, "host facts: the kernel and hypervisor as uname and systemd-detect-virt --vm say; a rule keyed on "
                   "them matches here, rules for another kernel or for bare metal do not"):
        policy = _host_policy(f"{version[0]}.{version[1]}", virt)
        g.sh(f"mkdir -p /tmp/bp-host && cat > /tmp/bp-host/policy.toml <<'EOF'\n{policy}EOF")
        doc = json.loads(g.sh("blkpolicy plan --json --policy /tmp/bp-host/policy.toml"))
        host = doc["host"]
        R.figure(s, "host facts", f"kernel {host['kernel']}, virtualization {host['virtualization']}, "
                                  f"sys_vendor {host['sys_vendor']!r}, product_name {host['product_name']!r}")
        expect_eq(host["kernel"], release, "host.kernel")
        expect_eq(host["virtualization"], virt, "host.virtualization against systemd-detect-virt --vm")
        expect(virt in ("kvm", "qemu"), f"a qemu guest, yet systemd-detect-virt --vm says {virt!r}")
        expect_eq(host["hostname"], g.sh("uname -n").strip(), "host.hostname")
        expect_eq(host["sys_vendor"], g.sh("cat /sys/class/dmi/id/sys_vendor").strip(), "host.sys_vendor")
        left_out = sorted(r["name"] for r in host["rules_not_for_this_host"])
        expect_eq(left_out, ["bare metal", "kernels before 5.0"], "rules not for this host")
        virtio = {d["device"] for d in doc["devices"] if "virtio_blk" in (d["facts"].get("drivers") or [])}
        expect(virtio, "no virtio disk in the plan")
        wrong = {}
        for d in doc["devices"]:
            names = [r["name"] for r in d["matched"]]
            if names != (["this kernel, this hypervisor"] if d["device"] in virtio else []):
                wrong[d["device"]] = names
        expect(not wrong, f"devices whose rules are not as the host facts say: {wrong}")

    with R.step(s, "the installed examples/fleet.toml: its rule for 6.17 and later applies only from 6.17"):
        g.sh("cd /usr/share/doc/blkpolicy/examples && if [ -e fleet.toml.gz ]; then zcat fleet.toml.gz; "
             "else cat fleet.toml; fi > /tmp/bp-host/fleet.toml")
        doc = json.loads(g.sh("blkpolicy plan --json --policy /tmp/bp-host/fleet.toml"))
        rule = "6.17 and later: readahead back to 128 KiB on virtual disks"
        takes = sorted(d["device"] for d in doc["devices"] if rule in [r["name"] for r in d["matched"]])
        left_out = [r["name"] for r in doc["host"]["rules_not_for_this_host"]]
        R.figure(s, "fleet example: devices taking the 6.17 rule", ", ".join(takes) or "none")
        if version >= (6, 17):
            expect(takes, f"kernel {release}: no disk takes the 6.17 rule")
            expect(rule not in left_out, f"kernel {release}: the 6.17 rule is left out")
        else:
            expect(not takes, f"kernel {release}: {takes} take the 6.17 rule")
            expect(rule in left_out, f"kernel {release}: the 6.17 rule is not said to be left out")
        expect("bare-metal hard disks: bfq" in left_out, "the bare-metal rule applies in a guest")


# The checks of this group; run.py says which each guest runs (CHECKS).
# burst-udev and hotplug-udev, the same burst and hotplug against an
# equivalent udev rule, are comparisons (benchmarks: bench/peers.sh):
# --all-checks runs them.
ALL_CHECKS = ("burst", "burst-udev", "udev-equivalence", "hotplug-udev")


def run(ctx):
    setup(ctx)
    explain_defaults(ctx)
    host_facts(ctx)
    field_case(ctx)
    facts_against_udev(ctx)
    traps(ctx)
    contention(ctx)
    hotplug(ctx)
    stacks(ctx)
    md_tunables(ctx)
    if "udev-equivalence" in ctx.device_checks:
        udev_equivalence(ctx)
