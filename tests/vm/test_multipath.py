# SPDX-License-Identifier: MIT
"""NVMe multipath on the real kernel: QEMU's nvme-subsys with two
controllers sharing one namespace, which Debian's kernels (nvme_core
multipath=Y) show as a head nvme0n1 over the hidden paths nvme0c0n1 and
nvme0c1n1. A guest of its own, a job of its own beside the others (run.py's
OWN_GUEST):

1. plan, apply and status by the daemon: one rule keyed on the model tunes
   the head (read_ahead_kb), both paths (scheduler, io_timeout) and the
   subsystem's iopolicy; the head is matched as stack nvme-multipath;
2. an echo to iopolicy is alerted and put back;
3. one controller removed and re-added over QMP: its path comes back with no
   block uevent of its own, and the daemon tunes it again within a verify
   interval.
"""

import json
import os
import time

import machine
from guest import Disk, Guest
from harness import expect, expect_eq
from machine import cursor, since

UNIT = "blkpolicy.service"
VERIFY_SECONDS = 3
SUBSYS = "bp-mpath"
CONTROLLERS = ["pcie-root-port,id=mprp1,chassis=11,slot=11", "pcie-root-port,id=mprp2,chassis=12,slot=12",
               f"nvme-subsys,id={SUBSYS},nqn=bp-mpath-subsys",
               # QEMU 7.2 wants one serial for every controller of a subsystem.
               f"nvme,id=bpc0,serial=bpmp,subsys={SUBSYS},bus=mprp1",
               f"nvme,id=bpc1,serial=bpmp,subsys={SUBSYS},bus=mprp2"]


class SharedNamespace(Disk):
    """A namespace attached to every controller of the subsystem."""

    def device_args(self):
        return ["-device", f"nvme-ns,drive={self.node},bus=bpc0,nsid=1,shared=on"]


POLICY = f"""\
[daemon]
mode = "enforce"
verify_interval = "{VERIFY_SECONDS}s"

[[rule]]
name = "QEMU NVMe, head and paths"
[rule.match]
model = "QEMU NVMe Ctrl"
[rule.set]
scheduler = "mq-deadline"
io_timeout = 60000
device.iopolicy = "round-robin"
read_ahead_kb = 1024

[[rule]]
name = "multipath heads"
[rule.match]
stack = "nvme-multipath"
[rule.set]
max_sectors_kb = 256
"""

# The kernel names the head nvme<S>n<N> and the paths nvme<S>c<C>n<N>,
# where S is the subsystem's instance: on 6.1 the instance of whichever
# controller probed first, so the names are read, never assumed.
_PATHS = "ls /sys/block | grep -E '^nvme[0-9]+c[0-9]+n[0-9]+$'"
_HEADS = "ls /sys/devices/virtual/nvme-subsystem/nvme-subsys*/ 2>/dev/null | grep -E '^nvme[0-9]+n[0-9]+$'"


def _paths(g):
    return sorted(g.sh(_PATHS + " || true").split())


def _q(g, dev, attr):
    return g.sh(f"cat /sys/block/{dev}/queue/{attr}").strip()


def _sched(g, dev):
    line = _q(g, dev, "scheduler")
    return line[line.index("[") + 1:line.index("]")] if "[" in line else line


def _tuned(g, dev):
    return _sched(g, dev) == "mq-deadline" and _q(g, dev, "io_timeout") == "60000"


def run(ctx):
    s, R = ctx.suite, ctx.results
    g = Guest(ctx.image, os.path.join(ctx.run_dir, s, "multipath"), share=ctx.share,
              disks=[SharedNamespace("bp-mpns", "256M", "nvme-ns")], controllers=CONTROLLERS)
    try:
        with R.step(s, "multipath: the head by model and stack, both hidden paths and the subsystem's iopolicy, "
                       "tuned by the daemon; status exits 0", fatal=True):
            g.boot()
            machine.quick_triggers(g)
            g.wait_for(f"test $({_PATHS} | wc -l) = 2 && test $({_HEADS} | wc -l) = 1", timeout=90,
                       what="the multipath head and both paths")
            g.sh("udevadm settle")
            head_name, paths = g.sh(_HEADS + " || true").strip(), _paths(g)
            iopolicy = f"/sys/block/{head_name}/device/iopolicy"
            R.figure(s, "multipath devices", f"head {head_name}, paths {' '.join(paths)}")
            for p in paths:
                expect_eq(g.run(f"test -e /sys/block/{p}/dev", check=False)[0], 1, f"{p} has no dev file")
            machine.install_package(g, timeout=400)
            g.write_file("/etc/blkpolicy/policy.toml", POLICY)  # a guest of its own: the package's policy replaced
            plan = json.loads(g.sh("blkpolicy plan --json"))
            devs = {d["device"]: d for d in plan["devices"]}
            expect(head_name in devs and all(p in devs for p in paths), f"plan's devices: {sorted(devs)}")
            head = devs[head_name]
            expect_eq(head["facts"]["stack"], "nvme-multipath", "the head's stack")
            expect_eq((head["facts"]["model"], head["facts"]["serial"]), ("QEMU NVMe Ctrl", "bpmp"),
                      "the head's model and serial, from its subsystem")
            expect_eq(sorted(head["facts"]["slaves"]), paths, "the head's paths")
            expect_eq([r["name"] for r in head["matched"]], ["QEMU NVMe, head and paths", "multipath heads"],
                      "rules matching the head")
            for p in paths:
                expect_eq((devs[p]["facts"]["hidden"], devs[p]["facts"]["holders"]), (True, [head_name]),
                          f"{p}: hidden, under the head")
                ra = [a for a in devs[p]["actions"] if a["attribute"] == "read_ahead_kb"][0]
                expect_eq(ra["action"], "skip", f"{p}'s read_ahead_kb")
            g.sh(f"systemctl enable --now {UNIT} 2>/dev/null")
            machine.wait_active(g)
            t0 = time.monotonic()
            g.wait_for(machine.queue_is((head_name, "read_ahead_kb", "=", 1024), (head_name, "max_sectors_kb", "=", 256),
                                        *[c for p in paths for c in ((p, "scheduler", "in", "mq-deadline"),
                                                                     (p, "io_timeout", "=", 60000))]) +
                       f" && grep -qx round-robin {iopolicy}",
                       timeout=60, what="the head, both paths and iopolicy tuned")
            R.figure(s, "multipath tuned after the daemon started", round(time.monotonic() - t0, 1), "s")
            for p in paths:
                expect_eq(_q(g, p, "read_ahead_kb"), "128", f"{p}'s read_ahead_kb, left alone")
            rc, out, _ = g.run("blkpolicy status", check=False)
            expect_eq(rc, 0, f"blkpolicy status:\n{out}")

        with R.step(s, "multipath: an echo to the subsystem's iopolicy is alerted and put back"):
            c = cursor(g)
            g.sh(f"echo numa > {iopolicy}")
            g.wait_for(f"grep -qx round-robin {iopolicy}", timeout=30, what="iopolicy put back")
            time.sleep(1)
            entries = [e for e in since(g, c, SYSLOG_IDENTIFIER="blkpolicy")
                       if e.get("BLKPOLICY_ATTRIBUTE") == "device.iopolicy"]
            shown = [(e.get("BLKPOLICY_EVENT"), e.get("BLKPOLICY_DEVICE"), e.get("MESSAGE")) for e in entries]
            R.figure(s, "iopolicy echo, the daemon's entries", shown)
            # numa is also the value the subsystem had before blkpolicy, so
            # the daemon takes the move for a revert (on 6.1 numa and
            # round-robin are all the kernel offers).
            expect(any(e.get("BLKPOLICY_EVENT") in ("drift", "reverted") and e.get("BLKPOLICY_DEVICE") == head_name
                       for e in entries), f"an alert for the head's device.iopolicy: {shown}")

        with R.step(s, "multipath: a controller removed and re-added over QMP: its path is tuned again within a "
                       "verify interval"):
            g.qmp.call("device_del", id="bpc1")
            g.wait_for(f"test $({_PATHS} | wc -l) = 1", timeout=60, what="one path gone")
            (kept,) = _paths(g)
            expect(_tuned(g, kept), f"{kept} kept its values")
            g.qmp.call("device_add", driver="nvme", id="bpc1", serial="bpmp", subsys=SUBSYS, bus="mprp2")
            g.wait_for(f"test $({_PATHS} | wc -l) = 2", timeout=60, what="the path back")
            (back,) = [p for p in _paths(g) if p != kept]
            g.wait_for(f"test -e /sys/block/{back}/queue/scheduler", timeout=30, what=f"{back}'s queue")
            t0 = time.monotonic()
            g.wait_for(machine.queue_is((back, "scheduler", "in", "mq-deadline"), (back, "io_timeout", "=", 60000)),
                       timeout=VERIFY_SECONDS * 10, what=f"{back} tuned again")
            took = time.monotonic() - t0
            R.figure(s, "multipath path tuned again after it came back", round(took, 1),
                     f"s (verify interval {VERIFY_SECONDS} s)")
            expect(took <= VERIFY_SECONDS + 5, f"the path took {took:.1f} s to be tuned again")
            expect_eq(g.sh(f"cat {iopolicy}").strip(), "round-robin", "iopolicy after the controller came back")
            rc, out, _ = g.run("blkpolicy status", check=False)
            expect_eq(rc, 0, f"blkpolicy status after the controller came back:\n{out}")
    finally:
        g.poweroff()
