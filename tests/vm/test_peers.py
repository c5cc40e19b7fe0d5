# SPDX-License-Identifier: MIT
"""blkpolicy beside the tools its users come from, in the same guest, on the
same kinds of disks, setting the same values: TuneD (a profile), a udev rule,
and the floor (bench/uevent_floor.c: a bare uevent listener that writes the
values once at the kernel's add and does nothing else). Not part of the test
command: `bench/peers.sh` runs it, bench/README.md holds its table.

Each tool runs alone (the others stopped or removed), and for each:
1. hotplug: one virtio-blk, one SCSI and one NVMe disk added; the time from
   the kernel's add uevent (udevadm monitor) to the values on the disk
   (a poller reading sysfs, builtin reads only);
2. a burst of 64 SCSI disks added at once: per disk median and max, the
   disks left without the values, the kernel's own share (the floor
   times each of its writes), and where the guest's CPU time went (the
   tool's unit, udevd, journald, the whole guest);
3. drift: read_ahead_kb moved behind the tool's back on a hot-added disk:
   the time until it is back, if it comes back;
4. idle: wake-ups (context switches of every thread) and CPU time per hour
   with no events, and RSS;
5. boot: the tool enabled and the guest rebooted: when each disk had its
   values (seconds since the kernel started, from a poller started before
   sysinit), and when the tool's unit was ready.
6. the root disk (row "root"): when vda had non-rotational and
   read_ahead_kb 256 after the kernel started, against when its root was
   mounted, for blkpolicy with its initramfs hook (blkpolicy(8) EARLY
   BOOT), blkpolicy without it (the daemon after the root mount), and a
   udev rule in /etc/udev/rules.d (initramfs-tools copies it into the
   initramfs). TuneD has no part in early boot and no row here.

The values are those all four can express at a disk's add: a scheduler
switch, nr_requests after it, wbt_lat_usec, rq_affinity, read_ahead_kb.
TuneD's disk plugin sets only the elevator and readahead on a hot-added
disk; the other three it can set only through its sysfs plugin, once, when
the profile is applied (boot). So every time is taken twice: until the
scheduler and read_ahead_kb are right ("2 values"), and until all five are
("5 values"); TuneD's hot-added disks are measured on the first.
"""

import fnmatch
import json
import os
import re
import statistics
import subprocess
import time

import machine
import test_devices
import test_writers
from harness import expect
from machine import read_queue

UNIT = "blkpolicy.service"
SCHEDULER = "kyber"  # no disk's default here, so every tool's write is a switch (the queue frozen)
VALUES = [("scheduler", SCHEDULER), ("nr_requests", "64"), ("wbt_lat_usec", "3000"), ("rq_affinity", "2"),
          ("read_ahead_kb", "256")]
TWO = {"scheduler", "read_ahead_kb"}
BURST = int(os.environ.get("BLKPOLICY_PEERS_BURST", test_devices.BURST))
IDLE_SECONDS = int(os.environ.get("BLKPOLICY_PEERS_IDLE_SECONDS", 60))
TOOLS = ["blkpolicy", "tuned", "udev", "floor"]
# A shorter run for one question: BLKPOLICY_PEERS_TOOLS="blkpolicy floor"
# BLKPOLICY_PEERS_ROWS="burst" (rows: hotplug burst idle boot root).
RUN_TOOLS = [t for t in TOOLS if t in os.environ.get("BLKPOLICY_PEERS_TOOLS", " ".join(TOOLS)).replace(",", " ").split()]
# Boots of each root-disk kind (BLKPOLICY_PEERS_ROOT_BOOTS): the figure is
# their median, and each boot's mount time is kept beside it.
ROOT_BOOTS = int(os.environ.get("BLKPOLICY_PEERS_ROOT_BOOTS", 5))
ROWS = set(os.environ.get("BLKPOLICY_PEERS_ROWS", "hotplug burst idle boot root").replace(",", " ").split())
# Every disk but the root (vda): the patterns each tool is given.
KERNEL_GLOBS = ["sd*", "vd[b-z]", "nvme*n*"]
FLOOR_PREFIXES = "sd,vd,nvme"
FLOOR = "/mnt/share/uevent_floor"
POLL_LOG = "/run/bp-peers-poll.log"
BOOT_LOG = "/run/bp-peers-boot.log"

POLICY = f"""\
# blkpolicy beside its peers (tests/vm/test_peers.py): every disk but the root
[daemon]
mode = "enforce"
{{daemon_extra}}
[[rule]]
name = "peers"
[rule.match]
kernel = {json.dumps(KERNEL_GLOBS)}
[rule.set]
""" + "".join(f"{k} = {json.dumps(v) if not v.isdigit() else v}\n" for k, v in VALUES)

UDEV_RULE = ('ACTION=="add", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", KERNEL=="' + "|".join(KERNEL_GLOBS) + '", '
             + ", ".join(f'ATTR{{queue/{k}}}="{v}"' for k, v in VALUES) + "\n")
UDEV_RULE_PATH = "/etc/udev/rules.d/61-bp-peers.rules"
PROFILE = "bp-peers"
# The disk plugin first: its elevator switch resets nr_requests, which the
# sysfs plugin writes after it (TuneD applies the plugins in profile order).
TUNED_PROFILE = f"""\
[main]
summary=blkpolicy beside its peers: every disk but the root

[disk]
devices={",".join(KERNEL_GLOBS)},!vda
elevator={SCHEDULER}
readahead=256

[sysfs]
""" + "".join(f"/sys/block/{g}/queue/{k}={v}\n" for g in KERNEL_GLOBS for k, v in VALUES if k not in TWO)

# Reads sysfs with builtins only (no fork per file) and notes, per disk not
# there when it started, the first moment (seconds since boot) its
# scheduler and read_ahead_kb were right ("2"), and all five ("5").
_POLLER = r"""
before=" $(ls /sys/block | tr '\n' ' ') "
log=$1
seen2=" "
seen5=" "
while [ ! -e $log.stop ]; do
  for d in /sys/block/*; do
    n=${d##*/}
    case "$before$seen5" in *" $n "*) continue ;; esac
    read s < $d/queue/scheduler 2>/dev/null || continue
    case "$s" in *"[__SCHED__]"*) ;; *) continue ;; esac
    read ra < $d/queue/read_ahead_kb 2>/dev/null || continue
    [ "$ra" = __RA__ ] || continue
    case "$seen2" in *" $n "*) ;; *) read up idle < /proc/uptime; echo "2 $n $up" >> $log; seen2="$seen2$n " ;; esac
    read nr < $d/queue/nr_requests 2>/dev/null || continue
    read w < $d/queue/wbt_lat_usec 2>/dev/null || continue
    read a < $d/queue/rq_affinity 2>/dev/null || continue
    if [ "$nr" = __NR__ ] && [ "$w" = __WBT__ ] && [ "$a" = __RQ__ ]; then
      read up idle < /proc/uptime; echo "5 $n $up" >> $log; seen5="$seen5$n "
    fi
  done
done
"""
V = dict(VALUES)
POLLER = (_POLLER.replace("__SCHED__", V["scheduler"]).replace("__RA__", V["read_ahead_kb"])
          .replace("__NR__", V["nr_requests"]).replace("__WBT__", V["wbt_lat_usec"]).replace("__RQ__", V["rq_affinity"]))
# The same at boot, started before sysinit.target: every disk it finds
# (first seen, 2 values, 5 values), for three minutes.
BOOT_POLLER = POLLER.replace('before=" $(ls /sys/block | tr \'\\n\' \' \') "', 'before=" vda "').replace(
    "while [ ! -e $log.stop ]; do", 'end=$(( $(cut -d. -f1 /proc/uptime) + 180 ))\nfirst=" "\n'
    "while [ ! -e $log.stop ] && [ $(cut -d. -f1 /proc/uptime) -lt $end ]; do").replace(
    '    read s < $d/queue/scheduler', '    case "$first" in *" $n "*) ;; *) read up idle < /proc/uptime; '
    'echo "0 $n $up" >> $log; first="$first$n " ;; esac\n    read s < $d/queue/scheduler')
BOOT_UNIT = f"""\
[Unit]
Description=blkpolicy guest test: when each disk had its values at boot
DefaultDependencies=no
Before=sysinit.target systemd-udev-trigger.service

[Service]
Type=simple
ExecStart=/bin/sh /usr/local/sbin/bp-peers-boot-poll.sh {BOOT_LOG}

[Install]
WantedBy=sysinit.target
"""


def _ms(seconds):
    return round(seconds * 1000)


def _median_max(values):
    values = sorted(values)
    return f"{_ms(statistics.median(values))} / {_ms(values[-1])}" if values else "-"


# --- the tools ---------------------------------------------------------------

# The unit each tool runs as (the udev rule's: udevd's; the floor is run as
# a transient unit, so that its CPU time is counted as the others' are).
FLOOR_UNIT = "bp-floor.service"
UNITS = {"blkpolicy": UNIT, "tuned": "tuned.service", "udev": "systemd-udevd.service", "floor": FLOOR_UNIT}


def _start(g, tool, daemon_extra=""):
    if tool == "blkpolicy":
        g.write_file("/etc/blkpolicy/policy.toml", POLICY.replace("{daemon_extra}", daemon_extra))
        g.sh(f"systemctl restart {UNIT}")
        machine.wait_active(g)
    elif tool == "tuned":
        g.sh(f"systemctl start tuned && tuned-adm profile {PROFILE}", timeout=120)
        g.wait_for(f"tuned-adm active | grep -q {PROFILE}", timeout=60, what="TuneD's profile active")
    elif tool == "udev":
        g.write_file(UDEV_RULE_PATH, UDEV_RULE)
        g.sh("udevadm control --reload")
    elif tool == "floor":
        args = " ".join(f"{k}={v}" for k, v in VALUES)
        g.sh(f"systemctl stop {FLOOR_UNIT} 2>/dev/null; systemctl reset-failed {FLOOR_UNIT} 2>/dev/null; "
             f"rm -f /run/bp-floor.log; systemd-run -q --unit={FLOOR_UNIT} -p StandardOutput=file:/run/bp-floor.log "
             f"-p StandardError=file:/run/bp-floor.log {FLOOR} {FLOOR_PREFIXES} {args}")
        g.wait_for("grep -q ready /run/bp-floor.log", timeout=10, what="the floor listening")


def _stop(g, tool, disable=False):
    """Stops TOOL; DISABLE also takes its unit out of the boot."""
    if tool in ("blkpolicy", "tuned"):
        g.sh(f"systemctl disable --now {UNITS[tool]} 2>/dev/null" if disable else f"systemctl stop {UNITS[tool]}")
    elif tool == "udev":
        g.sh(f"rm -f {UDEV_RULE_PATH} && udevadm control --reload")
    elif tool == "floor":
        g.sh(f"systemctl stop {FLOOR_UNIT} 2>/dev/null || true")


def _floor_writes(g):
    """{disk: (µs inside write(2), failed writes)} from the floor's log."""
    out = {}
    for line in g.sh("cat /run/bp-floor.log").splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1].isdigit():
            out[parts[0]] = (int(parts[1]), int(parts[2]), " ".join(parts[3:]))
    return out


# --- the poller and the kernel's add times -----------------------------------

def _watch(g):
    g.write_file("/run/bp-peers-poll.sh", POLLER)
    g.sh(f"rm -f {POLL_LOG} {POLL_LOG}.stop /run/bp-peers-mon.log; touch {POLL_LOG}; "
         "setsid udevadm monitor --kernel --subsystem-match=block >/run/bp-peers-mon.log 2>&1 </dev/null & "
         f"setsid sh /run/bp-peers-poll.sh {POLL_LOG} >/dev/null 2>&1 </dev/null & sleep 1")


def _unwatch(g):
    """({disk: kernel add time}, {disk: time 2 values right}, {disk: time 5 values right})."""
    g.sh(f"touch {POLL_LOG}.stop; pkill -x udevadm || true; sleep 0.5")
    adds = {name: t for (src, name), t in test_devices._uevent_times(g.sh("cat /run/bp-peers-mon.log")).items()
            if src == "KERNEL"}
    two, five = {}, {}
    for line in g.sh(f"cat {POLL_LOG}").splitlines():
        n, name, t = line.split()
        (two if n == "2" else five).setdefault(name, float(t))
    return adds, two, five


def _wait_set(g, names, which, timeout, stall=None):
    """Until every disk in NAMES has WHICH (2 or 5) values per the poller,
    TIMEOUT passed, or (STALL) no disk got them for that many seconds;
    returns the names still without them."""
    start = last = time.monotonic()
    count = -1
    while True:
        done = {line.split()[1] for line in g.sh(f"cat {POLL_LOG}").splitlines() if line.split()[0] == str(which)}
        left = [n for n in names if n not in done]
        now = time.monotonic()
        if len(done) != count:
            count, last = len(done), now
        if not left or now - start > timeout or (stall and now - last > stall):
            return left
        time.sleep(1)


def _promise(tool):
    """How many of the values TOOL sets on a hot-added disk."""
    return 2 if tool == "tuned" else 5


# --- where the CPU went --------------------------------------------------------

# Under TCG the guest's two vCPUs are busy through a burst (the SCSI scan,
# udevd's workers, the tool, journald), so CPU time one of them takes is
# time the others wait: each unit's cgroup (its processes and their
# children, usage_usec of cpu.stat) and the whole guest (/proc/stat).
CPU_UNITS = ["systemd-udevd.service", "systemd-journald.service"]


def _cpu_sample(g, tool):
    units = [UNITS[tool]] + [u for u in CPU_UNITS if u != UNITS[tool]]
    out = g.sh("for u in " + " ".join(units) + "; do printf '%s ' $u; "
               "sed -n 's/^usage_usec //p' /sys/fs/cgroup/system.slice/$u/cpu.stat 2>/dev/null | grep . || echo 0; "
               "done; head -n1 /proc/stat; cat /proc/uptime; nproc; date +%s.%N")
    lines = out.splitlines()
    usec = {}
    for line in lines[:len(units)]:
        unit, _, value = line.partition(" ")
        usec[unit] = int(value or 0)
    ticks = [int(x) for x in lines[len(units)].split()[1:]]
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]  # user..steal, less idle and iowait (guest time is in user)
    sample = {"units": usec, "busy_ticks": busy, "uptime": float(lines[len(units) + 1].split()[0]),
              "cpus": int(lines[len(units) + 2]), "epoch": float(lines[len(units) + 3])}
    # The tool's own split: user and system CPU of its unit, and the read
    # and write system calls of its main process (the udev rule has none:
    # udevd's workers come and go).
    if tool in ("blkpolicy", "floor"):
        unit = UNITS[tool]
        split = g.sh(f"sed -n 's/^\\(user\\|system\\)_usec //p' /sys/fs/cgroup/system.slice/{unit}/cpu.stat; "
                     f"sed -n 's/^sysc\\(r\\|w\\): //p' /proc/$(systemctl show -p MainPID --value {unit})/io")
        sample["split"] = [int(x) for x in split.split()]  # user_usec, system_usec, syscr, syscw
    return sample


def _cpu_figures(ctx, tool, before, after, disks):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    hz = int(g.sh("getconf CLK_TCK"))
    used = {u: (after["units"][u] - before["units"][u]) / 1e6 for u in after["units"]}
    wall = after["uptime"] - before["uptime"]
    guest = (after["busy_ticks"] - before["busy_ticks"]) / hz
    mine = used[UNITS[tool]]
    names = [u.split(".")[0].replace("systemd-", "") for u in CPU_UNITS]  # the udev rule's unit is udevd
    others = " / ".join(f"{used[u]:.1f}" for u in CPU_UNITS)
    R.figure(s, f"peers burst of {BURST}: CPU s in the burst: the tool's unit / {' / '.join(names)} / "
             f"the whole guest, of vCPUs x wall time ({tool})",
             f"{mine:.1f} / {others} / {guest:.1f} of {after['cpus'] * wall:.0f}")
    R.figure(s, f"peers burst of {BURST}: the tool's CPU per disk ({tool})", round(mine * 1000 / disks), "ms")
    if "split" in after and "split" in before and len(after["split"]) == len(before["split"]) == 4:
        d = [a - b for a, b in zip(after["split"], before["split"])]
        R.figure(s, f"peers burst of {BURST}: the tool's user / system CPU per disk, ms; read / write system calls "
                 f"per disk ({tool})",
                 f"{d[0] / 1000 / disks:.0f} / {d[1] / 1000 / disks:.0f}; {d[2] / disks:.0f} / {d[3] / disks:.0f}")
    if tool == "blkpolicy":
        entries = g.sh(f"journalctl -q -u {UNIT} -o cat --since @{before['epoch']:.0f} | wc -l").strip()
        R.figure(s, f"peers burst of {BURST}: journal lines the tool wrote ({tool})", int(entries))


# --- the rows ----------------------------------------------------------------

HOT = [("virtio-blk", "virtio-blk-pci", {"bus": "rp1"}), ("SCSI", "scsi-hd", {"bus": "scsi0.0"}),
       ("NVMe", "nvme", {"bus": "rp2"})]


def hotplug_and_drift(ctx, tool):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    nodes = {label: f"bp-p{tool[0]}{device.split('-')[0][:4]}" for label, device, _ in HOT}
    added = {}
    with R.step(s, f"peers {tool}: hotplug of a virtio-blk, a SCSI and an NVMe disk"):
        _watch(g)
        try:
            for label, device, props in HOT:
                added[label] = machine.hot_add(g, nodes[label], device, settle=False, **props)
            left = _wait_set(g, list(added.values()), _promise(tool), timeout=60)
        finally:
            adds, two, five = _unwatch(g)
        expect(not left, f"{tool} left {left} without its values")
        for label, name in added.items():
            expect(name in adds, f"no kernel add uevent seen for {name}")
            R.figure(s, f"peers hotplug {label}: add -> 2 values / 5 values ({tool})",
                     f"{_ms(two[name] - adds[name])} / "
                     f"{_ms(five[name] - adds[name]) if name in five else 'never'}", "ms")
        if tool == "floor":
            w = _floor_writes(g)
            R.figure(s, "peers hotplug: the kernel's share, µs inside the writes per disk (floor)",
                     ", ".join(f"{label} {w[n][0]}" for label, n in added.items() if n in w))

    # Drift: read_ahead_kb moved on the hot SCSI disk behind the tool's
    # back (the floor acts at a disk's add only, by design: no row).
    if tool != "floor":
        with R.step(s, f"peers {tool}: read_ahead_kb moved behind its back: put back, or not"):
            name = added.get("SCSI")
            expect(name, "no SCSI disk from the hotplug step")
            bound = 45  # blkpolicy's default verify interval is 30 s
            g.sh(f"echo 512 > /sys/block/{name}/queue/read_ahead_kb")
            t0 = time.monotonic()
            back = None
            while time.monotonic() - t0 < bound:
                if read_queue(g, name, ["read_ahead_kb"])["read_ahead_kb"] == "256":
                    back = time.monotonic() - t0
                    break
                time.sleep(0.5)
            R.figure(s, f"peers drift: read_ahead_kb put back after ({tool})",
                     f"{back:.1f} s" if back is not None else f"not within {bound} s")
            if tool == "blkpolicy":
                expect(back is not None, "blkpolicy did not restore the drifted value within its verify interval")
    for label, _, _ in HOT:
        if label in added:
            g.unplug(nodes[label])


def burst(ctx, tool):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    prefix = f"bp-{tool[0]}b"
    with R.step(s, f"peers {tool}: a burst of {BURST} SCSI disks"):
        _watch(g)
        before = _cpu_sample(g, tool)
        try:
            for i in range(BURST):
                g.hotplug(f"{prefix}{i:02d}", "scsi-hd", bus="scsi0.0")
            names = test_devices._burst_names(g, prefix, BURST)
            # Each tool gets the same time: until every disk has its values,
            # or 30 s without another disk getting them once udevd's queue
            # is empty (TuneD hears of a disk from udevd, after its rules).
            g.sh("udevadm settle --timeout=180", timeout=200)
            left = _wait_set(g, names, _promise(tool), timeout=300, stall=30)
            after = _cpu_sample(g, tool)
        finally:
            adds, two, five = _unwatch(g)
        _cpu_figures(ctx, tool, before, after, BURST)
        got = two if _promise(tool) == 2 else five
        lat = [got[n] - adds[n] for n in names if n in got and n in adds]
        R.figure(s, f"peers burst of {BURST}: add -> {_promise(tool)} values per disk, median / max ({tool})",
                 _median_max(lat), "ms")
        R.figure(s, f"peers burst of {BURST}: disks left without {_promise(tool)} values ({tool})",
                 f"{len(left)} ({' '.join(sorted(left)[:8])})" if left else 0)
        if left:
            partly = [n for n in left if n in two]
            R.figure(s, f"peers burst of {BURST}: of those, with the scheduler and read_ahead_kb right ({tool})",
                     len(partly))
        if adds and got:
            first = min(adds[n] for n in names if n in adds)
            R.figure(s, f"peers burst of {BURST}: first add -> last disk's values ({tool})",
                     _ms(max(got[n] for n in names if n in got) - first), "ms")
        if tool == "floor":
            w = _floor_writes(g)
            inside = [w[n][0] / 1e6 for n in names if n in w]
            failed = {n: w[n][2] for n in names if n in w and w[n][1]}
            R.figure(s, f"peers burst of {BURST}: the kernel's share, time inside the writes per disk, "
                     "median / max (floor)", _median_max(inside), "ms")
            R.figure(s, f"peers burst of {BURST}: failed writes (floor)",
                     f"{len(failed)} ({'; '.join(f'{n}:{e}' for n, e in sorted(failed.items())[:5])})" if failed
                     else 0)
        if tool == "blkpolicy":
            expect(not left, f"blkpolicy left {len(left)} disks without their values")
    test_devices._unplug_burst(g, prefix, BURST)


def _idle_sample(g, pids):
    """(context switches of every thread, CPU ticks) of PIDS."""
    script = " ".join(str(p) for p in pids)
    out = g.sh(f"for p in {script}; do for t in /proc/$p/task/*; do "
               "grep -E '^(voluntary|nonvoluntary)_ctxt_switches' $t/status | awk '{s+=$2} END {print s}'; done; "
               "awk '{print \"cpu\", $14+$15}' /proc/$p/stat; done")
    switches = sum(int(x) for x in re.findall(r"^(\d+)$", out, re.M))
    ticks = sum(int(x) for x in re.findall(r"^cpu (\d+)$", out, re.M))
    return switches, ticks


def idle(ctx, tool, label=None):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    label = label or tool
    with R.step(s, f"peers {label}: idle for {IDLE_SECONDS} s, no events"):
        time.sleep(5)  # what starting did, done
        pids = [machine.main_pid(g, UNITS[tool])]
        expect(pids[0] > 0, f"no process of {tool}")
        hz = int(g.sh("getconf CLK_TCK"))
        s0, c0 = _idle_sample(g, pids)
        time.sleep(IDLE_SECONDS)
        s1, c1 = _idle_sample(g, pids)
        rss = sum(int(g.sh(f"awk '/^VmRSS/ {{print $2}}' /proc/{p}/status") or 0) for p in pids)
        per_hour = 3600 / IDLE_SECONDS
        R.figure(s, f"peers idle: wake-ups per hour / CPU s per hour / RSS KiB ({label})",
                 f"{round((s1 - s0) * per_hour)} / {(c1 - c0) / hz * per_hour:.2f} / {rss}")


def boot(ctx, tool):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, f"peers {tool}: enabled, the guest rebooted: each disk's values after the kernel started"):
        _start(g, tool)
        if tool != "udev":  # the rule file is what the boot reads
            g.sh(f"systemctl enable {UNITS[tool]} 2>/dev/null")
        try:
            g.reboot()
            machine.wait_all_disks(g)
            unit = {"blkpolicy": UNIT, "tuned": "tuned.service", "udev": "systemd-udev-trigger.service"}[tool]
            g.wait_for(f"systemctl is-active -q {unit}", timeout=120, what=f"{unit} active")
            disks = [n for n in g.sh("ls /sys/block").split() if any(fnmatch.fnmatch(n, p) for p in KERNEL_GLOBS)]
            deadline = time.monotonic() + 120
            while True:
                log = g.sh(f"cat {BOOT_LOG} 2>/dev/null || true")
                times = {}
                for line in log.splitlines():
                    n, name, t = line.split()
                    times.setdefault((n, name), float(t))
                if all(("5", d) in times for d in disks) or time.monotonic() > deadline:
                    break
                time.sleep(2)
            ready = int(machine.unit_prop(g, unit, "ActiveEnterTimestampMonotonic")) / 1e6
            R.figure(s, f"peers boot: its unit ready, s after the kernel started ({tool})", f"{ready:.1f} ({unit})")
            five = [times[("5", d)] for d in disks if ("5", d) in times]
            two = [times[("2", d)] for d in disks if ("2", d) in times]
            R.figure(s, f"peers boot: the last of the disks with 2 values / 5 values, s after the kernel started "
                     f"({tool})", f"{max(two):.1f} / {max(five):.1f}" if len(five) == len(disks) else
                     f"{max(two):.1f} / {len(five)} of {len(disks)} disks" if two else "none")
            seen = [times[("5", d)] - times[("0", d)] for d in disks if ("0", d) in times and ("5", d) in times]
            R.figure(s, f"peers boot: first seen by the poller -> values, per disk, median / max ({tool})",
                     _median_max(seen), "ms")
            if five:
                last = max((d for d in disks if ("5", d) in times), key=lambda d: times[("5", d)])
                R.figure(s, f"peers boot: the last disk, first seen / 5 values, s after the kernel started ({tool})",
                         f"{last} {times.get(('0', last), float('nan')):.1f} / {times[('5', last)]:.1f}")
            expect(two, f"no disk got {tool}'s values at boot")
        finally:
            _stop(g, tool, disable=True)


# --- the root disk -------------------------------------------------------------

# The values a root disk's rule is there for: the rotational claim (btrfs's
# ssd mode, a dm or md device over it) and readahead (every read of the boot).
ROOT_VALUES = [("rotational", "0"), ("read_ahead_kb", "256")]
ROOT_POLICY = """\
# blkpolicy beside its peers (tests/vm/test_peers.py): the root disk
[[rule]]
name = "the root disk"
[rule.match]
kernel = "vda"
[rule.set]
""" + "".join(f"{k} = {v}\n" for k, v in ROOT_VALUES)
ROOT_POLICY_PATH = "/etc/blkpolicy/policy.d/60-bp-root.toml"
ROOT_ROW_POLICY_TOML = "# blkpolicy beside its peers (tests/vm/test_peers.py): the root row's rule is a drop-in\n"
# The rule says in the kernel log when its assignments are done (RUN runs
# after them): an upper bound of when the values were in place.
ROOT_RULE = ('ACTION=="add", SUBSYSTEM=="block", KERNEL=="vda", '
             + ", ".join(f'ATTR{{queue/{k}}}="{v}"' for k, v in ROOT_VALUES)
             + ', RUN+="/bin/sh -c \'echo bp-root-rule-done > /dev/kmsg\'"\n')
ROOT_RULE_PATH = "/etc/udev/rules.d/61-bp-root.rules"
# From before sysinit: the first moment vda has the values ("values T"), or
# that it had them when the poller first looked ("already T").
ROOT_POLLER = r"""
log=$1
seen=already
while :; do
  read r < /sys/block/vda/queue/rotational; read ra < /sys/block/vda/queue/read_ahead_kb
  read up idle < /proc/uptime
  if [ "$r" = __ROT__ ] && [ "$ra" = __RA__ ]; then echo "$seen $up" > $log; exit 0; fi
  seen=values
  [ ${up%.*} -lt 300 ] || exit 0
  sleep 0.05
done
""".replace("__ROT__", dict(ROOT_VALUES)["rotational"]).replace("__RA__", dict(ROOT_VALUES)["read_ahead_kb"])
ROOT_LOG = "/run/bp-peers-root.log"
ROOT_UNIT = BOOT_UNIT.replace("bp-peers-boot-poll.sh", "bp-peers-root-poll.sh").replace(BOOT_LOG, ROOT_LOG).replace(
    "each disk had its values", "the root disk had its values")
HOOK = "/usr/share/initramfs-tools/hooks/blkpolicy"


def _kmsg_seconds(g, needle):
    """The kernel's time stamp (s since it started) of the first line of
    its log holding NEEDLE, or None."""
    for line in g.sh("dmesg").splitlines():
        m = re.match(r"\[\s*(\d+\.\d+)\]\s*(.*)", line)
        if m and needle in m.group(2):
            return float(m.group(1))
    return None


def _median_pair(values_at, mounts_at):
    """'V / M': the medians of the boots' values and root-mount times."""
    def med(xs):
        xs = [x for x in xs if x is not None]
        return f"{statistics.median(xs):.1f}" if xs else "-"
    return f"{med(values_at)} / {med(mounts_at)}"


def root_disk(ctx):
    """vda's values after the kernel started, against its root mount: with
    blkpolicy's initramfs hook, without it, and with a udev rule; each kind
    booted ROOT_BOOTS times, the medians and each boot's mount time kept."""
    g, s, R = ctx.guest, ctx.suite, ctx.results
    g.write_file("/usr/local/sbin/bp-peers-root-poll.sh", ROOT_POLLER)
    g.write_file("/etc/systemd/system/bp-peers-root-poll.service", ROOT_UNIT)
    g.sh("systemctl daemon-reload && systemctl enable bp-peers-root-poll.service 2>/dev/null")
    machine.initramfs_updates(g, True)  # the run turned it off (run.py)
    release = g.sh("uname -r").strip()
    saved = g.initrd
    # blkpolicy sets what the udev rule sets and nothing else: the other
    # rows' policy (kyber on every other disk) aside for this row, so that
    # the hook's cost is its runs' (one per disk at its add event, and the
    # pass), not five scheduler switches and a module load the rule never
    # makes (the series of 2026-12-06 and the first of 2026-12-07 carried it).
    other_policy = g.sh("cat /etc/blkpolicy/policy.toml 2>/dev/null || true")
    g.write_file("/etc/blkpolicy/policy.toml", ROOT_ROW_POLICY_TOML)
    kinds = {"blkpolicy": "the package's unit, the image's initramfs (no hook)",
             "blkpolicy, initramfs hook": "the package's unit and the initramfs the guest made with the hook",
             "udev": f"{ROOT_RULE_PATH}, in the initramfs the guest made (the package's hook off)"}
    # BLKPOLICY_PEERS_ROOT_KINDS="unit hook udev" (some of them): the kinds run.
    words = {"unit": "blkpolicy", "hook": "blkpolicy, initramfs hook", "udev": "udev"}
    only = os.environ.get("BLKPOLICY_PEERS_ROOT_KINDS", " ".join(words)).replace(",", " ").split()
    kinds = {k: v for k, v in kinds.items() if k in [words.get(w) for w in only]}
    try:
        for kind, how in kinds.items():
            with R.step(s, f"peers root disk ({kind}): {how}: vda's values after the kernel started"):
                if kind.startswith("blkpolicy"):
                    g.write_file(ROOT_POLICY_PATH, ROOT_POLICY)
                    g.sh(f"rm -f {ROOT_RULE_PATH}; chmod +x {HOOK}; systemctl enable {UNIT} 2>/dev/null")
                else:
                    g.write_file(ROOT_RULE_PATH, ROOT_RULE)
                    g.sh(f"rm -f {ROOT_POLICY_PATH}; chmod -x {HOOK}; systemctl disable {UNIT} 2>/dev/null")
                g.initrd = saved
                if kind != "blkpolicy":
                    g.sh(f"update-initramfs -u -k {release} >/dev/null 2>&1", timeout=900)
                    g.sh(f"cp /boot/initrd.img-{release} /mnt/share/initrd-peers-root.img")
                    g.initrd = os.path.join(ctx.share, "initrd-peers-root.img")
                values_at, mounts_at, early, runs = [], [], 0, []
                for _ in range(ROOT_BOOTS):
                    g.reboot()
                    g.wait_for(f"test -s {ROOT_LOG}", timeout=180, what="vda's values")
                    how_seen, t = g.sh(f"cat {ROOT_LOG}").split()
                    marker = {"blkpolicy, initramfs hook": "blkpolicy: initramfs pass",
                              "udev": "bp-root-rule-done"}.get(kind)
                    if marker:
                        # Set in the initramfs, before the poller ran: the writer's own line says when.
                        t = _kmsg_seconds(g, marker)
                        expect(how_seen == "already", f"{kind}: the values were not in place at the poller's "
                                                      f"start ({how_seen})")
                        if kind != "udev":
                            # Where the hook's time went: every run's own time
                            # (a disk's at its add event, the pass), and what
                            # the runner said of those that did not finish.
                            spent = [int(l.split()[1]) / 100 for l in g.sh(
                                "cat /run/blkpolicy/boot-spent/* 2>/dev/null || true").splitlines()
                                if l.startswith("D ")]
                            runs.append(f"{len(spent)} runs {sum(spent):.2f} s (max {max(spent, default=0):.2f})")
                            bound = g.sh("cut -f1,2 /run/blkpolicy/boot-bound 2>/dev/null | tr '\\t\\n' ': ' || true")
                            if bound.strip():
                                runs[-1] += f", {bound.strip()}"
                        if t is None:
                            early += 1  # the pass did not run (the budget spent by the disks' runs): no line
                    elif how_seen == "values":
                        t = float(t)
                    else:
                        # The daemon came before the poller's first look (it
                        # can, both start before sysinit.target): when is not
                        # known, the root's mount time still is.
                        t = None
                        early += 1
                    mounted = _kmsg_seconds(g, "EXT4-fs (vda")
                    values_at.append(t)
                    mounts_at.append(mounted)
                R.figure(s, f"peers root disk: values / root mounted, s after the kernel started ({kind})",
                         _median_pair(values_at, mounts_at))
                R.figure(s, f"peers root disk: root mounted, s after the kernel started, each boot ({kind})",
                         " ".join("-" if m is None else f"{m:.1f}" for m in mounts_at))
                if early:
                    R.figure(s, f"peers root disk: boots with no time for vda's values (the daemon before the "
                                f"poller's look; the pass not run) ({kind})", early)
                if runs:
                    R.figure(s, f"peers root disk: blkpolicy's runs in the initramfs, each boot ({kind})",
                             "; ".join(runs))
    finally:
        g.initrd = saved
        g.write_file("/etc/blkpolicy/policy.toml", other_policy)
        machine.initramfs_updates(g, False)
        g.sh(f"rm -f {ROOT_POLICY_PATH} {ROOT_RULE_PATH} /mnt/share/initrd-peers-root.img; chmod +x {HOOK}; "
             f"systemctl disable {UNIT} bp-peers-root-poll.service 2>/dev/null || true")
        g.reboot()


def run(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    with R.step(s, "peers: the package, TuneD and the floor in place, the boot poller installed", fatal=True):
        floor = os.path.join(ctx.share, "uevent_floor")
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "uevent_floor.c")
        subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-static", "-o", floor, src], check=True)
        machine.install_package(g, timeout=300, if_missing=True)
        g.sh(f"systemctl disable --now {UNIT} tuned 2>/dev/null; rm -f /etc/blkpolicy/policy.d/*.toml")
        g.sh(f"command -v tuned-adm && test -x {FLOOR}")
        pdir = test_writers._profile_dir(g).replace(test_writers.PROFILE, PROFILE)
        g.sh(f"mkdir -p {pdir}")
        g.write_file(f"{pdir}/tuned.conf", TUNED_PROFILE)
        # The scheduler's module loaded once, before any tool: no tool pays
        # for the first load.
        g.sh(f"modprobe {SCHEDULER}-iosched")
        g.write_file("/usr/local/sbin/bp-peers-boot-poll.sh", BOOT_POLLER)
        g.write_file("/etc/systemd/system/bp-peers-boot-poll.service", BOOT_UNIT)
        g.sh("systemctl daemon-reload && systemctl enable bp-peers-boot-poll.service 2>/dev/null")
        machine.wait_all_disks(g)
        R.figure(s, "peers: TuneD", g.sh("dpkg-query -W -f '${Version}' tuned"))
        R.figure(s, "peers: udev", g.sh("dpkg-query -W -f '${Version}' udev"))
    for tool in RUN_TOOLS:
        _start(g, tool)
        try:
            if "hotplug" in ROWS:
                hotplug_and_drift(ctx, tool)
            if "burst" in ROWS:
                burst(ctx, tool)
            if tool != "floor" and "idle" in ROWS:
                idle(ctx, tool)
        finally:
            _stop(g, tool)
    if "idle" in ROWS and "blkpolicy" in RUN_TOOLS:
        idle_measuring(ctx)
    for tool in ("blkpolicy", "tuned", "udev"):
        if "boot" in ROWS and tool in RUN_TOOLS:
            boot(ctx, tool)
    if "root" in ROWS:
        root_disk(ctx)


def idle_measuring(ctx):
    """blkpolicy with a metrics file and measuring on, idle."""
    g = ctx.guest
    g.sh("mkdir -p /etc/systemd/system/blkpolicy.service.d")
    g.write_file("/etc/systemd/system/blkpolicy.service.d/peers.conf",
                 "[Service]\nExecStart=\nExecStart=/usr/sbin/blkpolicy run --metrics-file /run/blkpolicy/metrics.prom\n")
    g.sh("systemctl daemon-reload")
    _start(g, "blkpolicy", daemon_extra="measure = true\n")
    try:
        idle(ctx, "blkpolicy", "blkpolicy, metrics file, measure on")
    finally:
        _stop(g, "blkpolicy")
        g.sh("rm -f /etc/systemd/system/blkpolicy.service.d/peers.conf && systemctl daemon-reload")
