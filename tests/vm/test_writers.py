# SPDX-License-Identifier: MIT
"""The other writers of queue attributes, real ones, beside blkpolicy in a
Debian guest: TuneD running a profile, sysfsutils' service with a sysfs.d
line, and a tmpfiles.d w line applied by systemd-tmpfiles (the image has
tuned and sysfsutils, both disabled until this group switches them on).

1. Each writer writes its values; they are read back (the writers work).
2. blkpolicy with a policy that wants other values: audit names each writer
   with file and line, and when the writers write again the daemon's
   conflict alert names them (BLKPOLICY_WRITER, BLKPOLICY_WRITER_KIND).
3. `blkpolicy import` of each writer, the writers switched off, the daemon
   reloaded: the same values on the same disks; and after a reboot, again,
   with no conflict alert and no writer-conflict finding.

The disks are those whose kernel names do not move between boots (the root
virtio disk, the second virtio disk, the NVMe namespace), since all three
writers name devices by kernel name.
"""

import json
import time

import machine
from harness import expect, expect_eq
from machine import cursor, disks_by_serial, read_queue, since

UNIT = "blkpolicy.service"
PROFILE = "bp-writers"
SYSFS_CONF = "/etc/sysfs.d/60-bp-writers.conf"
TMPFILES_CONF = "/etc/tmpfiles.d/60-bp-writers.conf"


def _policy_fighting(names):
    return f"""\
# blkpolicy's guest tests: values the writers do not want
[daemon]
mode = "enforce"
verify_interval = "2s"

[[rule]]
name = "fight the writers"
[rule.match]
kernel = ["{names['tuned']}", "{names['sysfsutils']}", "{names['tmpfiles']}"]
[rule.set]
read_ahead_kb = 256

[[rule]]
name = "fight TuneD's elevator"
[rule.match]
kernel = "{names['tuned']}"
[rule.set]
scheduler = "none"
"""


def _profile_dir(g):
    """Where this TuneD looks for an admin's profile: /etc/tuned/profiles/NAME
    since 2.23, /etc/tuned/NAME before."""
    rc, _, _ = g.run("test -d /usr/lib/tuned/profiles", check=False)
    return f"/etc/tuned/profiles/{PROFILE}" if rc == 0 else f"/etc/tuned/{PROFILE}"


def _values(g, names):
    return {
        "tuned": read_queue(g, names["tuned"], ["scheduler", "read_ahead_kb"]),
        "sysfsutils": read_queue(g, names["sysfsutils"], ["scheduler", "read_ahead_kb"]),
        "tmpfiles": read_queue(g, names["tmpfiles"], ["read_ahead_kb"]),
    }


WANTED = {
    "tuned": {"scheduler": "mq-deadline", "read_ahead_kb": "4096"},
    "sysfsutils": {"scheduler": "mq-deadline", "read_ahead_kb": "1024"},
    "tmpfiles": {"read_ahead_kb": "2048"},
}


def _wait_values(g, names, want, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        have = _values(g, names)
        if have == want:
            return have
        if time.monotonic() > deadline:
            expect_eq(have, want, what)
        time.sleep(1)


def run(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "writers: TuneD, sysfsutils and tmpfiles.d write their values (blkpolicy stopped)", fatal=True):
        machine.install_package(g, timeout=300, if_missing=True)
        g.sh(f"systemctl disable --now {UNIT} 2>/dev/null; rm -f /etc/blkpolicy/policy.d/*.toml")
        machine.wait_all_disks(g)
        by_serial = disks_by_serial(g)
        names = {"tuned": by_serial["bp-nvme1"], "sysfsutils": by_serial["bp-virtio1"],
                 "tmpfiles": by_serial["bproot"]}
        ctx.writer_names = names
        R.figure(s, "writers' disks", " ".join(f"{k}={v}" for k, v in sorted(names.items())))
        pdir = _profile_dir(g)
        tuned_conf = f"{pdir}/tuned.conf"
        g.sh(f"mkdir -p {pdir}")
        g.write_file(tuned_conf, f"""\
[main]
summary=blkpolicy guest test: one NVMe namespace

[disk]
devices={names['tuned']}
elevator=mq-deadline
readahead=4096
""")
        g.write_file(SYSFS_CONF, f"""\
# blkpolicy guest test
block/{names['sysfsutils']}/queue/scheduler = mq-deadline
block/{names['sysfsutils']}/queue/read_ahead_kb = 1024
""")
        g.write_file(TMPFILES_CONF, f"""\
# blkpolicy guest test
w /sys/block/{names['tmpfiles']}/queue/read_ahead_kb - - - - 2048
""")
        t0 = time.monotonic()
        # The profile chosen before TuneD first starts, as an admin's
        # tuned-adm would leave it: TuneD never applies its recommended one.
        g.write_file("/etc/tuned/active_profile", PROFILE + "\n")
        g.write_file("/etc/tuned/profile_mode", "manual\n")
        g.sh("systemctl enable --now tuned.service 2>/dev/null", timeout=180)
        g.wait_for(f"tuned-adm active | grep -q {PROFILE}", timeout=120, what="TuneD's profile to be active")
        g.sh("systemctl enable sysfsutils.service 2>/dev/null; systemctl restart sysfsutils.service")
        g.sh(f"systemd-tmpfiles --create {TMPFILES_CONF}")
        R.figure(s, "writers started and applied", round(time.monotonic() - t0, 1), "s")
        ctx.by_writers = _wait_values(g, names, WANTED, 60, "the writers' values")
        ctx.tuned_conf = tuned_conf

    with R.step(s, "writers: audit and the daemon's conflict alerts name each writer with file and line"):
        g.write_file("/etc/blkpolicy/policy.toml", _policy_fighting(names))
        rc, out, err = g.run("blkpolicy audit", check=False)
        expect(rc == 1, f"audit exit {rc}, wanted 1 (warnings):\n{out}{err}")
        want_lines = {
            "tuned": f"TuneD profile {ctx.tuned_conf}:6 (profile {PROFILE}, unit [disk]) writes scheduler=mq-deadline "
                     f"on {names['tuned']}",
            "sysfsutils": f"sysfsutils {SYSFS_CONF}:3 writes read_ahead_kb=1024 on {names['sysfsutils']}",
            "tmpfiles": f"tmpfiles.d {TMPFILES_CONF}:2 writes read_ahead_kb=2048 on {names['tmpfiles']}",
        }
        for kind, line in want_lines.items():
            expect(line in out, f"audit does not name the {kind} writer ({line!r}):\n{out}")
        tuned_ra = f"TuneD profile {ctx.tuned_conf}:7 (profile {PROFILE}, unit [disk]) writes read_ahead_kb=4096"
        expect(tuned_ra in out, f"audit does not name TuneD's readahead line:\n{out}")

        c = cursor(g)
        g.sh(f"systemctl enable --now {UNIT} 2>/dev/null")
        g.wait_for(f"systemctl is-active -q {UNIT}", timeout=60, what="the service")
        # blkpolicy's values first, then the writers write again.
        _wait_values(g, names, {"tuned": {"scheduler": "none", "read_ahead_kb": "256"},
                                "sysfsutils": {"scheduler": "mq-deadline", "read_ahead_kb": "256"},
                                "tmpfiles": {"read_ahead_kb": "256"}}, 60, "the fighting policy's values")
        g.sh("systemctl restart tuned.service", timeout=180)
        g.sh("systemctl restart sysfsutils.service")
        g.sh(f"systemd-tmpfiles --create {TMPFILES_CONF}")
        want = {
            (names["tuned"], "scheduler"): ("tuned", f"{ctx.tuned_conf}:6"),
            (names["tuned"], "read_ahead_kb"): ("tuned", f"{ctx.tuned_conf}:7"),
            (names["sysfsutils"], "read_ahead_kb"): ("sysfsutils", f"{SYSFS_CONF}:3"),
            (names["tmpfiles"], "read_ahead_kb"): ("tmpfiles", f"{TMPFILES_CONF}:2"),
        }
        deadline = time.monotonic() + 60
        found = {}
        while time.monotonic() < deadline and len(found) < len(want):
            for e in since(g, c, SYSLOG_IDENTIFIER="blkpolicy", BLKPOLICY_EVENT="conflict"):
                found[(e.get("BLKPOLICY_DEVICE"), e.get("BLKPOLICY_ATTRIBUTE"))] = e
            time.sleep(2)
        bad = []
        for key, (kind, where) in want.items():
            e = found.get(key)
            if not e:
                bad.append(f"no conflict alert for {key}")
                continue
            if e.get("BLKPOLICY_WRITER") != where or e.get("BLKPOLICY_WRITER_KIND") != kind:
                bad.append(f"{key}: writer {e.get('BLKPOLICY_WRITER')!r} ({e.get('BLKPOLICY_WRITER_KIND')!r}), "
                           f"wanted {where!r} ({kind!r}): {e.get('MESSAGE')}")
        expect(not bad, "\n".join(bad) + "\nalerts: " +
               json.dumps({f"{k[0]} {k[1]}": v.get("MESSAGE") for k, v in found.items()}, indent=1))
        R.figure(s, "conflict alerts naming the writer", len(found))

    with R.step(s, "writers: their import, the writers off, a reboot: the same values on the same disks"):
        imports = {"40-tuned.toml": f"blkpolicy import --from tuned {PROFILE}",
                   "41-sysfsutils.toml": f"blkpolicy import {SYSFS_CONF}",
                   "42-tmpfiles.toml": f"blkpolicy import {TMPFILES_CONF}"}
        g.sh("mkdir -p /etc/blkpolicy/policy.d")
        for file, cmd in imports.items():
            rc, toml, err = g.run(cmd, check=False)
            expect(rc == 0, f"{cmd}: exit {rc}\n{err}")
            g.write_file(f"/etc/blkpolicy/policy.d/{file}", toml)
        g.write_file("/etc/blkpolicy/policy.toml", '[daemon]\nmode = "enforce"\nverify_interval = "2s"\n')
        g.sh("blkpolicy check")
        g.sh("systemctl disable --now tuned.service 2>/dev/null; systemctl disable sysfsutils.service 2>/dev/null; "
             f"rm {SYSFS_CONF} {TMPFILES_CONF}", timeout=180)
        g.sh(f"systemctl reload {UNIT}")
        _wait_values(g, names, ctx.by_writers, 60, "the imported policy's values, the writers off")
        g.reboot()
        g.wait_for(f"systemctl is-active -q {UNIT}", timeout=90, what="the service after the reboot")
        machine.wait_all_disks(g)
        after = disks_by_serial(g)
        moved = {k: (v, after.get(serial)) for k, v, serial in
                 (("tuned", names["tuned"], "bp-nvme1"), ("sysfsutils", names["sysfsutils"], "bp-virtio1"),
                  ("tmpfiles", names["tmpfiles"], "bproot")) if after.get(serial) != v}
        expect(not moved, f"kernel names moved across the reboot: {moved}")
        _wait_values(g, names, ctx.by_writers, 30, "the imported policy's values after the reboot")
        conflicts = [e.get("MESSAGE") for e in since(g, "", SYSLOG_IDENTIFIER="blkpolicy", BLKPOLICY_EVENT="conflict")]
        expect(not conflicts, f"conflict alerts in this boot: {conflicts}")
        rc, out, _ = g.run("blkpolicy audit", check=False)
        expect("writer-conflict" not in out, f"audit still finds a writer:\n{out}")
        g.sh(f"systemctl disable --now {UNIT} 2>/dev/null")
