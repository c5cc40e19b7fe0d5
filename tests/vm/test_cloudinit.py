# SPDX-License-Identifier: MIT
"""cloud-init (Debian 13): a guest whose first boot has a NoCloud seed whose
user-data is examples/cloud-init-user-data.yaml (its apt source pointed at
the share's local repository, no archive): cloud-init writes the policy,
installs the package and enables the service; after that boot the values
are in place on every disk the policy names, with no other step, and a
value moved by hand afterwards is alerted (journald, BLKPOLICY_EVENT=drift)
and put back.

From the suite's booted guest without the package: the image's cloud-init
(installed when the image is made, switched off for every other group:
images.py) switched on, told the instance is new (`cloud-init clean
--machine-id`), and the seed put where NoCloud reads it
(/var/lib/cloud/seed/nocloud: user-data and meta-data); the reboot is the
instance's first boot. The boot is the point here.
"""

import json
import os
import re
import time

from harness import expect, expect_eq
from machine import disks_by_serial

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "cloud-init-user-data.yaml")
SEED = "/var/lib/cloud/seed/nocloud"


def user_data():
    """The example's text, its apt source the share's repository."""
    with open(EXAMPLE) as f:
        text = f.read()
    out, n = re.subn(r'source: "deb [^"]*"', 'source: "deb [trusted=yes] file:/mnt/share/repo ./"', text)
    assert n == 1, "the example has no apt source line to point at the local repository"
    return out


def run(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "cloud-init: the image's cloud-init switched on, the instance made new, the NoCloud seed in place",
                fatal=True):
        # The image carries cloud-init switched off (images.py): on, and
        # everything of an earlier instance gone, the machine id too.
        g.sh("test -x /usr/bin/cloud-init && rm -f /etc/cloud/cloud-init.disabled && "
             "cloud-init clean --logs --machine-id")
        expect(g.run("dpkg-query -W -f '${Status}' blkpolicy", check=False)[1].strip() != "install ok installed",
               "blkpolicy is installed before the first boot")
        g.sh(f"mkdir -p {SEED}")
        g.write_file(f"{SEED}/meta-data", "instance-id: blkpolicy-test-1\nlocal-hostname: bp-cloud\n")
        g.write_file(f"{SEED}/user-data", user_data())

    with R.step(s, "cloud-init: at the first boot the user-data's policy, package and service put every virtio "
                   "disk's values in place with no other step; a value moved by hand is alerted and put back"):
        t0 = time.monotonic()
        g.reboot()
        rc, out, _ = g.run("cloud-init status --wait --long", timeout=900, check=False)
        R.figure(s, "first boot to cloud-init done", round(time.monotonic() - t0, 1), "s")
        # Exit 2 is "done, with recoverable errors": warnings of this test
        # image's own (no ip(8), no ssh-keygen), kept as a figure. (--wait
        # prints a dot a second before the status line.)
        warned = [l.strip() for l in out.splitlines() if l.strip().startswith("- ")]
        R.figure(s, "cloud-init's warnings", "; ".join(warned) or "none")
        expect(rc in (0, 2) and re.search(r"^\.*status: done$", out, re.M) and re.search(r"^errors: \[\]", out, re.M),
               f"cloud-init status: exit {rc}\n{out}")
        ds = g.sh("cloud-init query v1.platform 2>/dev/null || true").strip()
        R.figure(s, "cloud-init datasource", ds or "-")
        expect_eq(ds, "nocloud", "the datasource cloud-init found")
        expect_eq(g.run("systemctl is-active blkpolicy.service", check=False)[1].strip(), "active", "the service")
        expect_eq(g.sh("cat /etc/blkpolicy/policy.d/50-cloud-init.toml").count("[[rule]]"), 1,
                  "the policy write_files put in place")
        g.wait_for("test -s /run/blkpolicy/daemon.json", timeout=60, what="the daemon's first report")
        virtio = sorted(name for serial, name in disks_by_serial(g).items()
                        if g.sh(f"basename $(readlink -f /sys/block/{name}/device/driver) 2>/dev/null; true").strip()
                        == "virtio_blk")
        values = {n: g.sh(f"cat /sys/block/{n}/queue/read_ahead_kb /sys/block/{n}/queue/rotational").split()
                  for n in virtio}
        R.figure(s, "virtio disks after the first boot", json.dumps(values))
        expect(virtio, "no virtio disk found")
        wrong = {n: v for n, v in values.items() if v != ["256", "0"]}
        expect(not wrong, f"virtio disks without the user-data policy's values: {wrong}")
        rc, out, _ = g.run("blkpolicy status", check=False)
        expect(rc == 0, f"blkpolicy status after the first boot: exit {rc}\n{out}")

        # Afterwards: moved by hand, alerted and put back (enforce mode).
        disk = virtio[-1]
        g.sh(f"echo 4096 > /sys/block/{disk}/queue/read_ahead_kb")
        g.wait_for(f"test $(cat /sys/block/{disk}/queue/read_ahead_kb) = 256", timeout=90, what="the value put back")
        alerts = [json.loads(l) for l in g.sh(
            f"journalctl -b -o json SYSLOG_IDENTIFIER=blkpolicy BLKPOLICY_DEVICE={disk} "
            "BLKPOLICY_ATTRIBUTE=read_ahead_kb").splitlines() if l.strip()]
        drift = [a for a in alerts if a.get("BLKPOLICY_EVENT") == "drift"]
        R.figure(s, "drift alert", drift[-1].get("MESSAGE") if drift else "-")
        expect(drift and drift[-1].get("BLKPOLICY_ACTUAL") == "4096",
               f"no drift alert with the value moved by hand: {[a.get('MESSAGE') for a in alerts]}")
