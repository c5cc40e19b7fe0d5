# SPDX-License-Identifier: MIT
"""What a value does, measured in a Debian guest with fio as the load: the
field reports' findings, each reproduced by `blkpolicy measure` (and the
daemon's measuring) with the counter that proves it.

1. wbt at 75000 on a virtio disk under buffered writers and a random
   reader: wbt steps write depth down (wbt_step > 0), and at 0 it never does.
2. Flushes: synchronous writes flush on a SCSI disk whose own cache is write
   back; after "write through" the writes go on and the flushes stop: the
   critical finding; the same after "temporary write through" written to
   cache_type, which changes the kernel's view alone (the drive's caching
   page, read by measure, still says WCE=1); the daemon's at-risk alert (its tracing instance under
   the hardened unit), and resolved when write back returns. The same on a
   dm-linear device over that disk (bio-based): "write through" on the dm
   device drops every flush before the disk sees one (its stat field 16
   stays 0) and the finding names the dm device.
3. Readahead: fio's mmap random reads with --fadvise_hint=0 on ext4 read
   many times what they ask at read_ahead_kb 8192, far more than at 128, and
   about 1x with fio's MADV_RANDOM hint; measure's own count of what fio
   asked (mm_filemap_map_pages/fault) and its amplification agree with the
   test's; a buffered sequential read is about 1x, although nearly all of it
   came by the readahead path.
4. Completions: rq_affinity 0, 1 and 2 with the reader pinned to one vCPU of
   two, mq-deadline attached and 16 reads in flight: on a single-queue disk
   2 completes on the submitting CPU (block_getrq's), 0 and 1 on the
   interrupt's; a multi-queue disk completes on the submitting CPU at every
   level. The CPU that issued a request is reported beside it.
5. A tiny buffer nobody reads during a burst: lossy, said as undercounted.
6. CPUs that can be hot-added (Debian 12's guest, the one whose kernel
   counts qemu's absent CPUs as possible: -smp 2,maxcpus=4, as cloud VMs
   that allow CPU hot-add run): tracefs has a buffer for each of the four
   possible CPUs, and the two not online answer poll with an error at once.
   Only this step runs there; 1-5 run on 6.12 and the newest kernel. A 5 s window costs well under a second of
   CPU on a quiet host (0.42 s measured), for the command and for the
   daemon; the check asks under half the window, which a spinning poll (the
   whole window) cannot meet and a busy CI host (1.68 s once) does; a CPU
   that was offline when the window began (so the instance has no buffer
   for it, as for a CPU hot-added later) and comes online during it is
   followed (its reads are traced, it counts).

Needs nothing another group left (installs the package if missing, makes
its own dm device): a job of its own from the suite's saved guest with the
package installed; writes only the disks of the guest. Figures go to results.json (tests/vm/README.md keeps a run).
"""

import json

import images
import machine
from harness import CheckFailed, expect, expect_eq
from machine import cursor, disks_by_serial, wait_journal

UNIT = "blkpolicy.service"


def _measured(g, script, devices, args="", timeout=300):
    """Runs `blkpolicy measure --json DEVICES` in the background of one guest
    shell, SCRIPT (the load) once its tracing instance records, then ends
    the window with SIGINT; returns the JSON document."""
    # Its instance: blkpolicy-NS-PID-N (NS its PID namespace), recording
    # once measure turned its tracing_on to 1 (the last step of its set-up,
    # after the stat baselines). Up to 60 s: under CI's contention ten did
    # not always do, and the load then ran partly before the window (21 of
    # 200 writes counted once).
    wait_instance = ('for i in $(seq 600); do for d in /sys/kernel/tracing/instances/blkpolicy-*-$M-*; do '
                     'grep -qx 1 $d/tracing_on 2>/dev/null && break 2; done; sleep 0.1; done; sleep 0.3')
    # A buffer that holds a window's events even when the reader gets no
    # CPU for a while: the default 256 KiB per CPU overflowed in CI beside
    # two other guests (the wbt step once, the completions step once), and
    # the counts these steps assert must be whole. A step that wants a
    # lossy window passes its own.
    if "--trace-buffer-kb" not in args:
        args += " --trace-buffer-kb 4096"
    cmd = (f"blkpolicy measure --for 10m --json {args} {devices} > /root/measure.json 2>/root/measure.err & M=$!\n"
           f"{wait_instance}\n{script}\nkill -INT $M; wait $M; echo rc=$?")
    rc, out, err = g.run(cmd, timeout=timeout, check=False)
    text = g.sh("cat /root/measure.json")
    expect(text.strip(), f"measure printed nothing: {g.sh('cat /root/measure.err')}\n{out}{err}")
    doc = json.loads(text)
    expect(doc["interrupted"], "the window was not ended by SIGINT")
    return doc


def _device(doc, name):
    for d in doc["devices"]:
        if d["device"] == name:
            return d
    raise AssertionError(f"no {name} in the report")


def _writes_issued(doc, name):
    """Writes that reached NAME in the window: completed requests and those
    merged into them (stat fields 5 and 6). Under "write through" the block
    layer may merge two of dd's O_DSYNC writes into one request (187
    requests and 13 merges for 200 writes, once in a busy run)."""
    stat = _device(doc, name)["stat"]
    return stat["writes"] + stat["writes_merged"]


def wbt(ctx, names):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    v = names["bp-virtio1"]
    # Four buffered writers (their writeback is what wbt throttles) and one
    # O_DIRECT random reader, on the virtio disk as it comes (scheduler none).
    load = (f"fio --name=w --filename=/dev/{v} --rw=write --bs=1M --offset=0 --size=120M --numjobs=4 "
            f"--ioengine=psync --direct=0 --time_based --runtime=15 "
            f"--name=r --filename=/dev/{v} --rw=randread --bs=4k --offset=128M --size=120M --direct=1 "
            f"--ioengine=psync --time_based --runtime=15 >/dev/null")
    with R.step(s, "measure: wbt at 75000 on a virtio disk steps write depth down under buffered writers and a reader"):
        g.sh(f"echo none > /sys/block/{v}/queue/scheduler; echo 75000 > /sys/block/{v}/queue/wbt_lat_usec")
        d = _device(_measured(g, load, v), v)
        w = d["wbt"]
        R.figure(s, "wbt 75000 under load (15 s)",
                 f"{w['step_down']} step-downs, {w['step_up']} step-ups, {w['violations']} violations, windows "
                 f"ok/exceeded/unknown {w['windows']['ok']}/{w['windows']['exceeded']}/"
                 f"{w['windows']['unknown'] + w['windows']['unknown_writes']}, deepest step {w['deepest_step']}; "
                 f"beside {d['stat']['writes']} writes, {d['stat']['reads']} reads (stat)")
        expect(w["state"] == "on" and w["traced"], f"wbt state {w['state']}, traced {w['traced']}")
        expect(w["step_down"] > 0, f"no step-down under load: {w['sentence']}")
        expect(d["stat"]["writes"] > 0 and d["stat"]["reads"] > 0, f"the load did not run: {d['stat']}")
        expect(not d["undercounted"], "events were lost")
    with R.step(s, "measure: at wbt_lat_usec 0 the same load never throttles, and the zero says why"):
        g.sh(f"echo 0 > /sys/block/{v}/queue/wbt_lat_usec")
        d = _device(_measured(g, load, v), v)
        w = d["wbt"]
        expect_eq(w["step_down"] + w["step_up"] + w["violations"], 0, "wbt activity with wbt off")
        expect(w["zero_reason"] == "wbt is off", f"zero explained as {w['zero_reason']!r}")
        expect(d["stat"]["writes"] > 0, "the load did not run")
        R.figure(s, "wbt 0 under the same load", f"0 steps; beside {d['stat']['writes']} writes (stat)")


def flushes(ctx, names):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    d = names["bp-scsi-ssd"]
    writes = f"dd if=/dev/zero of=/dev/{d} bs=4k count=200 oflag=dsync status=none"
    with R.step(s, "measure: synchronous writes flush on a SCSI disk with a write-back cache; under write through "
                   "they do not: data at risk, exit 1"):
        cache_type = g.sh(f"cat /sys/block/{d}/device/scsi_disk/*/cache_type").strip()
        expect_eq(cache_type, "write back", "the SCSI disk's cache_type")
        g.sh(f"echo 'write back' > /sys/block/{d}/queue/write_cache")
        before = _device(_measured(g, writes, d), d)["flushes"]
        expect(before["flushes"] >= 200, f"flushes with write back: {before['sentence']}")
        g.sh(f"echo 'write through' > /sys/block/{d}/queue/write_cache")
        doc = _measured(g, writes, d)
        after = _device(doc, d)["flushes"]
        expect_eq(after["flushes"], 0, "flushes under write through")
        expect(_writes_issued(doc, d) >= 200 and after["at_risk"], after["sentence"])
        expect([f["code"] for f in doc["findings"]] == ["flushes-dropped"], f"findings: {doc['findings']}")
        R.figure(s, "200 O_DSYNC writes on the SCSI disk",
                 f"write back: {before['flushes']} flushes beside {before['writes']} writes; write through: "
                 f"{after['flushes']} flushes beside {after['writes']} writes")
        # "temporary write through": the kernel's view alone (cache_type and
        # the queue say write through, sd sends no flush), the drive's cache
        # still on (qemu's caching page keeps WCE): at risk all the same,
        # known from the drive's own page.
        # (A loop: sh expands no pattern in a redirection's target.)
        cache_type = f"for f in /sys/block/{d}/device/scsi_disk/*/cache_type; do echo '%s' > $f; done"
        g.sh(f"echo 'write back' > /sys/block/{d}/queue/write_cache; " + cache_type % "temporary write through")
        try:
            kernel_view = (g.sh(f"cat /sys/block/{d}/device/scsi_disk/*/cache_type").strip(),
                           g.sh(f"cat /sys/block/{d}/queue/write_cache").strip())
            doc = _measured(g, writes, d)
        finally:  # the drive's mode back for the steps after, whatever happened
            g.sh(cache_type % "write back")
        temp = _device(doc, d)["flushes"]
        R.figure(s, "200 O_DSYNC writes after 'temporary write through'",
                 f"cache_type / queue: {' / '.join(kernel_view)}; {temp['flushes']} flushes beside "
                 f"{temp['writes']} writes; device cache: {temp['device_cache']} ({temp['device_cache_source']})")
        expect_eq(kernel_view, ("write through", "write through"), "the kernel's view after the temporary mode")
        expect(temp["flushes"] == 0 and _writes_issued(doc, d) >= 200 and temp["at_risk"], temp["sentence"])
        expect_eq([(f["code"], f["severity"]) for f in doc["findings"]], [("flushes-dropped", "critical")],
                  "the findings under temporary write through")
        expect(temp["device_cache_source"].startswith("the drive's caching mode page: WCE=1"),
               temp["device_cache_source"])
        expect_eq(g.sh(f"cat /sys/block/{d}/queue/write_cache").strip(), "write back", "the queue after write back")

    with R.step(s, "measure: the daemon (daemon.measure, hardened unit) raises at-risk once, and resolved"):
        g.write_file("/etc/blkpolicy/policy.toml", """\
[daemon]
mode = "observe"
verify_interval = "5s"
measure = true
measure_window = "5s"

[[rule]]
name = "the SCSI SSD"
[rule.match]
serial = "bp-scsi-ssd"
[rule.set]
nomerges = 0
""")
        g.sh(f"echo 'write through' > /sys/block/{d}/queue/write_cache")
        try:
            c = cursor(g)
            g.sh(f"systemctl enable {UNIT} 2>/dev/null; systemctl restart {UNIT}")
            g.wait_for(f"systemctl is-active -q {UNIT}", timeout=60, what="the service")
            lines = [e.get("MESSAGE", "") for e in machine.since(g, c, SYSLOG_IDENTIFIER="blkpolicy")]
            measuring = [ln for ln in lines if ln.startswith("measuring in windows of 5 s")]
            expect(measuring and "a tracing instance" in measuring[0], f"the daemon's start: {lines}")
            # Writes go on (fsync believes them durable) until the daemon's window sees them.
            g.sh(f"for i in $(seq 12); do {writes}; sleep 1; done", timeout=300)
            e = wait_journal(g, c, 30, "the at-risk alert", SYSLOG_IDENTIFIER="blkpolicy", BLKPOLICY_EVENT="at-risk",
                             BLKPOLICY_DEVICE=d)[0]
            for k, want in {"PRIORITY": "2", "MESSAGE_ID": "7c0ba1f3a4d94f0e9b6c2d8e51a0f307",
                            "BLKPOLICY_FINDING": "flushes-dropped", "BLKPOLICY_FLUSHES": "0",
                            "BLKPOLICY_ACTUAL": "write through", "BLKPOLICY_EXPECTED": "write back",
                            # The drive's page, read by the daemon under its hardened unit.
                            "BLKPOLICY_DEVICE_CACHE": 'the drive\'s caching mode page: WCE=1, cache_type "write back"'
                            }.items():
                expect_eq(e.get(k), want, f"at-risk {k}")
            R.figure(s, "the daemon's at-risk alert", e.get("MESSAGE"))
            rc, text, _ = g.run(f"blkpolicy status {d}", check=False)
            expect("measured by the daemon in its window of 5 s" in text and "flushes:" in text,
                   f"status does not show the window:\n{text}")
            c2 = cursor(g)
            g.sh(f"echo 'write back' > /sys/block/{d}/queue/write_cache")
            g.sh(f"for i in $(seq 12); do {writes}; sleep 1; done", timeout=300)
            # A window or two after the writes; on a loaded host (three
            # guests, the clang build) 30 s was not always enough (the
            # warm run of 6a12231, 2026-12-07).
            wait_journal(g, c2, 90, "the resolved alert", SYSLOG_IDENTIFIER="blkpolicy", BLKPOLICY_EVENT="resolved",
                         BLKPOLICY_DEVICE=d)
            at_risk = machine.since(g, c, SYSLOG_IDENTIFIER="blkpolicy", BLKPOLICY_EVENT="at-risk")
            expect_eq(len(at_risk), 1, "at-risk alerts (one per change of state)")
        finally:  # the unit stopped (and its tracing instance gone) whatever happened
            g.sh(f"systemctl disable --now {UNIT} 2>/dev/null")
        expect(not g.sh("ls /sys/kernel/tracing/instances | grep blkpolicy || true").strip(),
               "a tracing instance outlived the daemon")


def dm_write_through(ctx, names):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    d = names["bp-scsi-ssd"]
    with R.step(s, "measure: write through on a dm-linear device over a write-back disk: no flush reaches the disk, "
                   "the finding names the dm device"):
        g.sh(f"echo 'write back' > /sys/block/{d}/queue/write_cache")
        g.sh(f"dmsetup create bp-wt --table \"0 $(blockdev --getsz /dev/{d}) linear /dev/{d} 0\"")
        try:
            dm = g.sh("basename $(readlink -f /dev/mapper/bp-wt)").strip()
            # Buffered with O_DSYNC: each write is followed by a flush (with
            # O_DIRECT the block device sends FUA writes instead, no flush).
            writes = "dd if=/dev/zero of=/dev/mapper/bp-wt bs=4k count=200 oflag=dsync status=none"
            flushes_of = f"awk '{{print $16}}' /sys/block/{d}/stat"  # field 16: flushes completed
            seen = {}
            for mode in ("write back", "write through"):
                g.sh(f"echo '{mode}' > /sys/block/{dm}/queue/write_cache")
                before = int(g.sh(flushes_of))
                doc = _measured(g, writes, f"{dm} {d}")
                after = int(g.sh(flushes_of))
                found = [(f["device"], f["code"], f["severity"]) for f in doc["findings"]]
                seen[mode] = {"disk flushes": after - before, "dm writes": _writes_issued(doc, dm),
                              "findings": found, "dm note": _device(doc, dm)["flushes"]["note"]}
            R.figure(s, "200 O_DSYNC writes through dm-linear", json.dumps(seen))
            back, through = seen["write back"], seen["write through"]
            expect(back["disk flushes"] >= 200 and not back["findings"], f"with write back on the dm device: {back}")
            expect_eq(through["disk flushes"], 0, "flushes reaching the disk under write through on the dm device")
            expect(through["dm writes"] >= 200, f"the writes did not run: {through}")
            expect_eq(through["findings"], [(dm, "flushes-dropped", "critical")], "the findings")
        finally:
            g.sh("dmsetup remove bp-wt", timeout=60)


def readahead(ctx, names):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    n = names["bp-nvme1"]
    ios = 200
    with R.step(s, "measure: readahead against what fio asked (its page faults and reads, traced): mmap random "
                   "reads amplify with read_ahead_kb 8192 against 128 and not with MADV_RANDOM; a buffered "
                   "sequential read is about 1x"):
        g.sh(f"umount /mnt/ra 2>/dev/null; mkfs.ext4 -q -F /dev/{n} && mkdir -p /mnt/ra && mount /dev/{n} /mnt/ra && "
             "fio --name=mk --filename=/mnt/ra/f --size=200M --rw=write --bs=1M --ioengine=psync --end_fsync=1 "
             ">/dev/null", timeout=300)
        results = {}
        for ra, hint in ((128, "0"), (8192, "0"), (8192, None)):
            g.sh(f"echo {ra} > /sys/block/{n}/queue/read_ahead_kb")
            load = ("sync; echo 3 > /proc/sys/vm/drop_caches; fio --name=ra --filename=/mnt/ra/f --size=200M "
                    f"--rw=randread --ioengine=mmap --bs=4k --number_ios={ios} "
                    f"{'--fadvise_hint=' + hint if hint is not None else ''} >/dev/null")
            d = _device(_measured(g, load, n), n)
            r = d["readahead"]
            # The test knows what fio asked (200 pages); measure counts it
            # from the kernel (mm_filemap_map_pages/fault) on its own.
            amp = d["stat"]["sectors_read"] / (ios * 8)
            share = r["readahead_share"]
            results[(ra, hint)] = (amp, share, d)
            R.figure(s, f"mmap random reads, read_ahead_kb {ra}, {'no hint' if hint else 'MADV_RANDOM (fio default)'}",
                     f"{amp:.1f}x ({d['stat']['sectors_read']} sectors read for {ios} x 4 KiB, stat); measure: "
                     f"{r['amplification'] if r['amplification'] is None else round(r['amplification'], 1)}x, "
                     f"{r['asked_pages']} pages asked ({r['faults']} by faults); readahead share "
                     f"{share if share is None else round(share, 3)} "
                     f"({d['readahead']['readahead_requests']} of {d['readahead']['read_requests']} read requests)")
            # A touch of a page fault-around already mapped into fio makes no
            # fault and is not seen (5 of 200 on 7.3.4 at 128).
            expect(ios * 0.9 <= r["asked_pages"] <= ios * 1.2 and r["faults"] == r["asked_pages"],
                   f"read_ahead_kb {ra}: {r['asked_pages']} pages asked ({r['faults']} by faults) for {ios}: "
                   f"{r['sentence']}")
            expect(r["amplification"] is not None and abs(r["amplification"] - amp) <= 0.25 * amp,
                   f"read_ahead_kb {ra}: measure says {r['amplification']}x, fio's count {amp:.1f}x")
        a128, a8192, arandom = (results[k][0] for k in ((128, "0"), (8192, "0"), (8192, None)))
        expect(a128 > 4, f"read_ahead_kb 128 amplified only {a128:.1f}x")
        expect(a8192 > 3 * a128, f"8192 amplified {a8192:.1f}x, 128 {a128:.1f}x")
        expect(arandom < 2.0, f"with MADV_RANDOM {arandom:.1f}x")
        expect(results[(8192, "0")][1] is not None and results[(8192, "0")][1] > 0.5,
               f"readahead share at 8192: {results[(8192, '0')][1]}")
        share_random = results[(8192, None)][1]
        expect(share_random is None or share_random < 0.1, f"readahead share with MADV_RANDOM: {share_random}")

        # A buffered sequential read, where readahead is what makes it fast:
        # nearly every sector came by the readahead path (the old figure's
        # 100%), and it read what was asked, about 1x.
        load = "sync; echo 3 > /proc/sys/vm/drop_caches; dd if=/mnt/ra/f of=/dev/null bs=1M status=none"
        d = _device(_measured(g, load, n), n)
        r = d["readahead"]
        R.figure(s, "buffered sequential read of 200 MiB, read_ahead_kb 8192",
                 f"measure: {r['amplification'] if r['amplification'] is None else round(r['amplification'], 2)}x, "
                 f"{r['asked_pages']} pages asked; readahead share "
                 f"{r['readahead_share'] if r['readahead_share'] is None else round(r['readahead_share'], 3)}")
        expect(r["asked_pages"] >= 51200, f"{r['asked_pages']} pages asked for 200 MiB: {r['sentence']}")
        expect(r["amplification"] is not None and 0.9 <= r["amplification"] <= 1.3,
               f"a sequential read amplified {r['amplification']}x: {r['sentence']}")
        expect(r["readahead_share"] is not None and r["readahead_share"] > 0.9,
               f"readahead share of a sequential read: {r['readahead_share']}")
        g.sh(f"echo 128 > /sys/block/{n}/queue/read_ahead_kb; umount /mnt/ra")


def _irq_cpu(g, name):
    """The CPU that takes a single-queue virtio disk's request interrupt."""
    virtio = g.sh(f"basename $(readlink -f /sys/block/{name}/device)").strip()
    irq = g.sh(f"grep -E ' {virtio}-req\\.0$' /proc/interrupts | cut -d: -f1").strip()
    return int(g.sh(f"cat /proc/irq/{irq}/effective_affinity_list").strip().split(",")[0].split("-")[0])


def completions(ctx, names):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    cpus = int(g.sh("nproc").strip())
    with R.step(s, "measure: with mq-deadline and 16 reads in flight, a single-queue virtio disk completes on the "
                   "interrupt's CPU at rq_affinity 0 and 1 and on the submitting one at 2; a multi-queue one on "
                   "the submitting CPU at every level"):
        expect(cpus >= 2, f"{cpus} CPU(s): nothing to move completions between")
        # The field reports' disk: virtio-blk with one queue (the machine's
        # own virtio disks have one per vCPU, which complete locally anyway),
        # and a virtqueue of 4 entries, so that 16 reads in flight wait in the
        # scheduler and some are issued from the completion path.
        node = "bp-measure-1q"
        g.hotplug(node, "virtio-blk-pci", bus="rp1", **{"num-queues": 1, "queue-size": 4})
        try:
            one = g.wait_for(f"test -e /dev/disk/by-id/virtio-{node} && "
                             f"basename $(readlink -f /dev/disk/by-id/virtio-{node})",
                             timeout=60, what="the single-queue disk").strip()
            g.sh("udevadm settle")
            irq_cpu = _irq_cpu(g, one)
            reader = (irq_cpu + 1) % cpus
            # audit says rq_affinity 1 is inert where every CPU shares one last-level cache.
            audit = json.loads(g.run("blkpolicy audit --json --no-policy", check=False)[1])
            inert = any(f["code"] == "rq-affinity-inert" for f in audit["findings"])
            multi = names["bp-virtio1"]
            shares, off_reader = {}, {}
            for v in (one, multi):
                # A scheduler, and a queue deep enough that requests wait in
                # it: some are then dispatched by a kblockd worker or by the
                # completion path, on a CPU that did not submit them.
                g.sh(f"echo mq-deadline > /sys/block/{v}/queue/scheduler")
                for level in ("0", "1", "2"):
                    g.sh(f"echo {level} > /sys/block/{v}/queue/rq_affinity")
                    load = (f"taskset -c {reader} fio --name=c --filename=/dev/{v} --rw=randread --bs=4k --direct=1 "
                            "--ioengine=libaio --iodepth=16 --number_ios=3000 --size=200M >/dev/null")
                    d = _device(_measured(g, load, v), v)
                    c = d["completions"]
                    # A completion whose issue the matcher does not see within
                    # its horizon (2 s), or whose slot another request took,
                    # stays unmatched: counted, never misattributed. Under TCG
                    # a few do (2 of 3000 once on 7.3.4); the shares stand on the rest.
                    expect(c["matched"] >= 2970, f"{v} rq_affinity {level}: {c['sentence']}")
                    # block_getrq is seen for (nearly) every request: the
                    # submitting CPU is known, not guessed from the issue.
                    expect(c["submitted"] >= 0.98 * c["matched"], f"{v} rq_affinity {level}: {c['sentence']}")
                    on_reader = c["submitted_on"].get(str(reader), 0)
                    expect(on_reader >= 0.99 * c["submitted"],
                           f"{v}: {on_reader} of {c['submitted']} submitted on the reader's CPU {reader}")
                    shares[(v, level)] = c["same_cpu_share"]
                    if v == one:
                        off_reader[level] = sum(n for cpu, n in c["issued_on"].items() if cpu != str(reader))
                    R.figure(s, f"{v} ({c['hw_queues']} hardware queue(s), mq-deadline), rq_affinity {level}, "
                                f"reader on CPU {reader}" + (f", interrupt on CPU {irq_cpu}" if v == one else ""),
                             f"{c['same_cpu_share']} completed on the submitting CPU, "
                             f"{c['issuing_cpu_share']} on the issuing one; completed on {c['completed_on']}, "
                             f"issued on {c['issued_on']}; beside {d['stat']['reads']} reads (stat)")
                expect_eq(c["hw_queues"] == 1, v == one, f"{v}: one hardware queue")
            expect(shares[(one, "0")] <= 0.1, f"rq_affinity 0 completed {shares[(one, '0')]:.3f} on the submitting CPU")
            expect(shares[(one, "2")] >= 0.9, f"rq_affinity 2 completed {shares[(one, '2')]:.3f} on the submitting CPU")
            if inert:
                expect(shares[(one, "1")] <= 0.1, f"audit said rq-affinity-inert, yet 1 moved {shares[(one, '1')]:.3f}")
            # The 4-entry virtqueue keeps requests waiting for a driver tag:
            # at 0 and 1 the completion path on the interrupt's CPU issues
            # some of them (7% and 16% on 7.3.4), which the issuing CPU's
            # share counts as "same CPU" though none completed where it was
            # submitted.
            R.figure(s, f"{one}: requests issued off the submitting CPU at rq_affinity 0 / 1 / 2",
                     " / ".join(str(off_reader[level]) for level in ("0", "1", "2")))
            expect(off_reader["0"] + off_reader["1"] >= 30,
                   f"no request was issued off the submitting CPU: {off_reader}")
            for level in ("0", "1", "2"):
                expect(shares[(multi, level)] >= 0.9,
                       f"{multi} rq_affinity {level}: {shares[(multi, level)]:.3f} on the submitting CPU")
            R.figure(s, "rq_affinity 1 against audit's rq-affinity-inert",
                     f"{'inert' if inert else 'not inert'} by audit; measured {shares[(one, '1')]:.3f} moved")
        finally:
            g.unplug(node)
            g.run(f"echo 1 > /sys/block/{names['bp-virtio1']}/queue/rq_affinity; "
                  f"echo none > /sys/block/{names['bp-virtio1']}/queue/scheduler", check=False)


def tiny_buffer(ctx, names):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    v = names["bp-virtio1"]
    with R.step(s, "measure: a 4 KiB buffer its reader cannot drain during a burst: lossy, said as undercounted"):
        load = ("kill -STOP $M; "
                f"fio --name=t --filename=/dev/{v} --rw=randread --bs=4k --direct=1 --ioengine=psync "
                "--number_ios=3000 --size=200M >/dev/null; kill -CONT $M")
        doc = _measured(g, load, v, args="--trace-buffer-kb 4")
        d = _device(doc, v)
        expect(doc["tracing"]["lossy"] and doc["tracing"]["lost_events"] > 0, f"tracing: {doc['tracing']}")
        expect(d["undercounted"], "the device's figures are not marked undercounted")
        expect_eq(d["stat"]["reads"], 3000, "reads in stat (the counters lose nothing)")
        expect(d["readahead"]["read_requests"] < 3000, f"traced {d['readahead']['read_requests']} of 3000")
        expect("at least: events were lost" in d["completions"]["sentence"], d["completions"]["sentence"])
        R.figure(s, "a 4 KiB buffer, reader stopped during 3000 reads",
                 f"{doc['tracing']['lost_events']} events lost; {d['readahead']['read_requests']} reads traced of "
                 f"{d['stat']['reads']} in stat")


def _cpu_seconds(g, cmd):
    """CMD run in a shell of its own; the CPU time it and its children took."""
    out = g.sh(f"bash -c '{cmd}; times' | tail -n 1")
    total = 0.0
    for part in out.split():  # "0m0.012s 0m0.008s": the children's user and system time
        m, sec = part.rstrip("s").split("m")
        total += int(m) * 60 + float(sec)
    return total


def hotplug_cpus(ctx, names):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    v = names["bp-virtio1"]
    with R.step(s, "measure: with CPUs that can be hot-added, a 5 s window costs under half its length in CPU "
                   "(command and daemon); a CPU brought online during a window is followed"):
        possible, online = (g.sh(f"cat /sys/devices/system/cpu/{f}").strip() for f in ("possible", "online"))
        expect_eq((possible, online), ("0-3", "0-1"), "possible and online CPUs (-smp 2,maxcpus=4)")
        took = _cpu_seconds(g, f"blkpolicy measure --for 5s --json {v} >/root/cpus.json")
        doc = json.loads(g.sh("cat /root/cpus.json"))
        R.figure(s, "measure --for 5s, 2 of 4 possible CPUs online",
                 f"{took:.2f} s of CPU; cpus {doc['tracing']['cpus']}")
        # A poll that spins on the offline CPUs' buffers costs the whole
        # window (5 s of a CPU); a quiet guest measured 0.42 s, and the same
        # window beside two other guests in CI 1.68 s (TCG stretches a
        # preempted vCPU's work in guest time). Half the window tells the
        # two apart on a busy host.
        expect(took < 2.5, f"a 5 s window took {took:.2f} s of CPU")
        expect_eq(doc["tracing"]["cpus"], 2, "the CPUs measure polled")

        g.write_file("/etc/blkpolicy/policy.toml",
                     '[daemon]\nmode = "observe"\nmeasure = true\nmeasure_window = "5s"\nmeasure_sample = 100\n')
        g.sh(f"systemctl restart {UNIT}")
        g.wait_for(f"systemctl is-active -q {UNIT}", timeout=60, what="the service")
        g.sh("sleep 3")
        usage = f"sed -n 's/^usage_usec //p' /sys/fs/cgroup/system.slice/{UNIT}/cpu.stat"
        u0 = int(g.sh(usage))
        g.sh("sleep 10")
        u1 = int(g.sh(usage))
        g.sh(f"systemctl stop {UNIT}")
        daemon = (u1 - u0) / 1e6
        R.figure(s, "the daemon measuring, 10 s, 2 of 4 possible CPUs online", f"{daemon:.2f} s of CPU")
        expect(daemon < 5.0, f"the daemon took {daemon:.2f} s of CPU in 10 s (a spinning poll takes all 10)")

        # A CPU that comes online during a window, and reads issued on it.
        # The CPU is one the guest booted with, taken offline before the
        # window: the instance measure makes then has no buffer for it,
        # as for a CPU hot-added later, and the kernel gives it one
        # (trace_rb_cpu_prepare) when it comes online, the same path. A
        # vCPU hot-added through QMP is not used: under this qemu's TCG
        # its first online took 35 to 65 s beside a loaded host, once
        # over 300 s in CI (the online write never returned), a second
        # hot-add reset the machine and device_del crashed qemu (double
        # free), all measured in this guest (tests/vm/README.md).
        cpu = "/sys/devices/system/cpu/cpu1/online"
        g.sh(f"echo 0 > {cpu}; rm -f /root/online.rc")
        # The write runs in the background, waited for up to 120 s: one that
        # never returns must not hold the window (and the guest agent) open.
        load = (f"(echo 1 > {cpu}; echo $? > /root/online.rc) </dev/null >/dev/null 2>&1 &\n"
                "for i in $(seq 1200); do test -s /root/online.rc && break; sleep 0.1; done\n"
                "if grep -qx 0 /root/online.rc 2>/dev/null; then\n"
                "  sleep 2\n"  # measure looks at the online list once a second
                f"  taskset -c 1 dd if=/dev/{v} of=/dev/null bs=4k count=100 iflag=direct status=none\n"
                "fi")
        try:
            doc = _measured(g, load, v)
        finally:
            # Both CPUs again for the groups after this one, unless the
            # write is still pending (a second would hang behind it).
            g.run(f"test -e /root/online.rc && (grep -qx 1 {cpu} || echo 1 > {cpu})", check=False)
        rc = g.sh("cat /root/online.rc 2>/dev/null || true").strip()
        if rc != "0":
            raise CheckFailed(f"1 written to {cpu}: {'no return in 120 s' if not rc else 'exit status ' + rc}; "
                              "the kernel's last lines:\n" + g.sh("dmesg | tail -n 20"))
        d = _device(doc, v)
        R.figure(s, "a CPU brought online during a window (offline when it began)",
                 f"cpus {doc['tracing']['cpus']}; {d['readahead']['read_requests']} reads traced of "
                 f"{d['stat']['reads']} in stat; completed on {d['completions'].get('completed_on')}")
        expect_eq(doc["tracing"]["cpus"], 2, "the CPUs measure polled at the window's end")
        # Every read the disk completed in the window is traced (6.1 counted
        # 100 for dd's 100 O_DIRECT reads of 4 KiB on the CPU brought
        # online, in its stat and the trace alike; 52 on a hot-added vCPU).
        traced, counted = d["readahead"]["read_requests"], d["stat"]["reads"]
        expect(counted > 0 and traced == counted, f"reads on the new CPU: {traced} traced of {counted} in stat")


def run(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    spec = images.SUITES[s]
    full = spec.get("measure")  # the image with fio: steps 1-5
    with R.step(s, "measure: the package in place, tracefs mounted" + (", fio" if full else ""), fatal=True):
        machine.install_package(g, timeout=300, if_missing=True)
        g.sh("command -v blkpolicy >/dev/null" + (" && command -v fio" if full else ""))
        g.sh("mountpoint -q /sys/kernel/tracing")
        machine.wait_all_disks(g)
        names = disks_by_serial(g)
        R.figure(s, "measured disks", " ".join(f"{k}={names[k]}" for k in ("bp-virtio1", "bp-scsi-ssd", "bp-nvme1")))
    if full:
        wbt(ctx, names)
        flushes(ctx, names)
        dm_write_through(ctx, names)
        readahead(ctx, names)
        completions(ctx, names)
        tiny_buffer(ctx, names)
    if "maxcpus" in str(spec.get("smp", "")):
        hotplug_cpus(ctx, names)
    with R.step(s, "measure: no tracing instance left behind"):
        left = g.sh("ls /sys/kernel/tracing/instances").split()
        expect(not [x for x in left if x.startswith("blkpolicy-")], f"instances: {left}")
