# SPDX-License-Identifier: MIT
"""The package and the service in a Debian guest with systemd as PID 1.

Two boots per suite: the first installs the package from a local apt
repository (its dependencies resolved by apt, offline), checks that nothing
is enabled, installs the test policy and enables the unit; the second is the
boot a user gets, and everything after it (reload, restart, kill -9, the
watchdog, drift alerts, metrics, upgrade, remove, purge) runs in it.
"""

import os
import re
import time

import machine
from harness import expect, expect_eq
from machine import cursor, journal, since as entries_since, unit_prop, wait_journal

UNIT = "blkpolicy.service"
POLICY_PATH = "/etc/blkpolicy/policy.toml"
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
# Every entry of the catalog the package installs (one per alert kind).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "systemd", "blkpolicy.catalog")) as _f:
    CATALOG_ENTRIES = sum(1 for _line in _f if _line.startswith("-- "))

# The catalog's first words for each alert kind (systemd/blkpolicy.catalog).
DRIFT_ID = "7c0ba1f3a4d94f0e9b6c2d8e51a0f302"
RESTORED_ID = "7c0ba1f3a4d94f0e9b6c2d8e51a0f308"
REMOVAL_DROPIN = "/etc/blkpolicy/policy.d/90-bp-removed-later.toml"

BROKEN_POLICY = machine.POLICY.replace('read_ahead_kb = 256\n', 'read_ahead_kb = "lots"\n', 1)
CHANGED_POLICY = machine.POLICY.replace('read_ahead_kb = 256\n', 'read_ahead_kb = 384\n', 1)
CHANGED_EXPECTED = {k: dict(v, read_ahead_kb="384") if k in ("bproot", "bp-virtio1") else v
                    for k, v in machine.EXPECTED.items()}


def _short(entries):
    return [f"{e.get('BLKPOLICY_EVENT')} {e.get('BLKPOLICY_DEVICE')} {e.get('BLKPOLICY_ATTRIBUTE')}: {e.get('MESSAGE')}"
            for e in entries]


def install_and_enable(ctx):
    """Boot 1: install from the local repository, nothing enabled, then
    the test policy and `systemctl enable`."""
    g, s, R, pkg = ctx.guest, ctx.suite, ctx.results, ctx.pkg

    with R.step(s, "package installs with apt, dependencies pulled from the suite", fatal=True):
        g.write_file("/etc/apt/sources.list.d/blkpolicy-test.list", "deb [trusted=yes] file:/mnt/share/repo ./\n")
        g.sh("apt-get update -q", timeout=120)
        before = machine.installed_packages(g)
        out = g.sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends blkpolicy 2>&1",
                   timeout=300)
        after = machine.installed_packages(g)
        pulled = sorted(after - before - {"blkpolicy"})
        R.figure(s, "packages apt pulled in with blkpolicy", len(pulled), "(" + " ".join(pulled) + ")")
        expect_eq(g.sh("dpkg-query -W -f '${Version}' blkpolicy"), pkg.version, "installed version")
        missing = g.sh("ldd /usr/sbin/blkpolicy | grep 'not found' || true")
        expect(not missing.strip(), f"libraries missing after install:\n{missing}\n{out}")
        expect(g.sh("/usr/sbin/blkpolicy --version").startswith("blkpolicy "), "blkpolicy --version")

    with R.step(s, "installing enables and starts nothing"):
        expect_eq(g.run(f"systemctl is-enabled {UNIT}", check=False)[1].strip(), "disabled", "is-enabled")
        expect_eq(g.run(f"systemctl is-active {UNIT}", check=False)[1].strip(), "inactive", "is-active")
        links = g.sh("find /etc/systemd/system -name blkpolicy.service")
        expect(not links.strip(), f"enablement links after install: {links}")

    with R.step(s, "installed files: unit, binary, policy conffile, catalog, man pages, completion"):
        frag = unit_prop(g, UNIT, "FragmentPath")
        expect(frag in ("/lib/systemd/system/blkpolicy.service", "/usr/lib/systemd/system/blkpolicy.service"),
               f"unit at {frag}")
        expect("path=/usr/sbin/blkpolicy" in unit_prop(g, UNIT, "ExecStart"), "ExecStart is /usr/sbin/blkpolicy")
        conffiles = g.sh("dpkg-query -W -f '${Conffiles}' blkpolicy")
        expect(POLICY_PATH in conffiles, f"{POLICY_PATH} is not a conffile: {conffiles}")
        g.sh("test -f /usr/share/man/man8/blkpolicy.8.gz && test -f /usr/share/man/man5/blkpolicy.toml.5.gz && "
             "test -f /usr/share/bash-completion/completions/blkpolicy")
        listed = g.sh("journalctl --list-catalog | grep -c ' blkpolicy: ' || true").strip()
        expect_eq(listed, str(CATALOG_ENTRIES), "catalog entries known to journalctl (dpkg trigger)")
        g.sh("blkpolicy check")  # the shipped default policy

    with R.step(s, "systemd-analyze verify and security on the installed unit"):
        rc, out, err = g.run(f"systemd-analyze verify {UNIT}", check=False)
        expect(rc == 0 and not (out + err).strip(), f"systemd-analyze verify: exit {rc}\n{out}{err}")
        out = g.sh(f"systemd-analyze security --no-pager {UNIT}")
        m = re.search(r"Overall exposure level for blkpolicy.service: ([0-9.]+) (\w+)", out)
        expect(m, f"no exposure line in:\n{out[-500:]}")
        R.figure(s, "systemd-analyze security exposure", float(m.group(1)), m.group(2))
        ctx.exposure = out

    with R.step(s, "test policy installed and the unit enabled", fatal=True):
        g.write_file(POLICY_PATH, machine.POLICY)
        g.sh("blkpolicy check")
        g.sh(f"systemctl enable {UNIT} 2>&1")
        expect_eq(g.sh(f"systemctl is-enabled {UNIT}").strip(), "enabled", "is-enabled")


def boot_checks(ctx):
    """Boot 2, the one a user gets: the service comes up before the local
    filesystems, every value is on every disk, the journal is clean."""
    g, s, R = ctx.guest, ctx.suite, ctx.results

    with R.step(s, "service active after boot: READY=1 and STATUS=", fatal=True):
        g.run("systemctl is-system-running --wait", check=False, timeout=180)
        machine.wait_active(g)
        status = unit_prop(g, UNIT, "StatusText")
        expect(re.match(r"\d+ device\(s\) managed, 0 drifted, 0 failed \(enforce\)", status), f"StatusText {status!r}")
        R.figure(s, "StatusText", status)

    with R.step(s, "boot journal: no ordering cycle, no failed unit, no hardening denial"):
        cycles = g.sh("journalctl -b _PID=1 --no-pager -o cat | grep -i -E 'ordering cycle|deleted to break' || true")
        expect(not cycles.strip(), f"ordering cycle at boot:\n{cycles}")
        failed = g.sh("systemctl --failed --plain --no-legend").strip()
        expect(not failed, f"failed units: {failed}")
        state = g.run("systemctl is-system-running", check=False)[1].strip()
        expect_eq(state, "running", "is-system-running")
        # What the sandbox refuses shows as EPERM/EACCES/EROFS in the
        # daemon's own messages (a refused write is a failed alert).
        denied = g.sh(f"journalctl -b -u {UNIT} --no-pager -o cat | "
                      "grep -i -E 'permission denied|operation not permitted|read-only file system|226/NAMESPACE' "
                      "|| true")
        expect(not denied.strip(), f"the unit's sandbox refused something:\n{denied}")

    with R.step(s, "every policy value is on every disk (read from sysfs, not from blkpolicy)"):
        machine.wait_all_disks(g)
        time.sleep(2)  # the daemon acts on udev's last events
        bad = machine.mismatches(g)
        expect(not bad, "\n".join(bad))
        rc, out, err = g.run("blkpolicy status", check=False)
        expect(rc == 0, f"blkpolicy status exit {rc}\n{out}{err}")

    with R.step(s, "bfq, a module not loaded at boot, was loaded by the write under the unit's hardening"):
        names = machine.disks_by_serial(g)
        sched = g.sh(f"cat /sys/block/{names['bp-scsi-hdd']}/queue/scheduler")
        expect("[bfq]" in sched, f"scheduler of the archive disk: {sched}")
        expect("bfq" in g.sh("cat /proc/modules | cut -d' ' -f1"), "bfq module loaded")

    with R.step(s, "applied before local-fs.target; when each disk got its values"):
        usec = lambda unit, prop: int(unit_prop(g, unit, prop) or 0)
        ready = usec(UNIT, "ActiveEnterTimestampMonotonic")
        started = usec(UNIT, "ExecMainStartTimestampMonotonic")
        localfs = usec("local-fs.target", "ActiveEnterTimestampMonotonic")
        R.figure(s, "blkpolicy started at", round(started / 1e6, 2), "s after kernel start")
        R.figure(s, "blkpolicy READY=1 at", round(ready / 1e6, 2), "s")
        R.figure(s, "local-fs.target at", round(localfs / 1e6, 2), "s")
        expect(0 < ready < localfs, f"READY=1 at {ready} us is not before local-fs.target at {localfs} us")
        applied = [e for e in journal(g, "-b -t blkpolicy BLKPOLICY_EVENT=applied")]
        first = {}
        for e in applied:
            first.setdefault(e["BLKPOLICY_DEVICE"], int(e["__MONOTONIC_TIMESTAMP"]))
        names = machine.disks_by_serial(g)
        late = []
        for serial in machine.EXPECTED:
            dev = names[serial]
            t = first.get(dev)
            expect(t is not None, f"no applied alert for {dev} ({serial})")
            # When udev had finished with the disk (its .device unit).
            unit = g.sh(f"systemd-escape --path --suffix=device /dev/{dev}").strip()
            seen = usec(unit, "ActiveEnterTimestampMonotonic")
            R.figure(s, f"{serial} ({dev}) values applied at", round(t / 1e6, 2),
                     f"s; its .device unit active at {seen / 1e6:.2f} s")
            if t <= ready:
                expect(t < localfs, f"{dev} applied at {t} after local-fs.target {localfs}")
            else:
                late.append(dev)
        ctx.late_disks = late
        R.figure(s, "disks that appeared after blkpolicy was ready", len(late), " ".join(late))

    with R.step(s, "clean boot: no alert at warning level or above"):
        warn = journal(g, "-b -t blkpolicy -p warning")
        expect(not warn, "warning-level entries at boot:\n" + "\n".join(e.get("MESSAGE", "") for e in warn))

    with R.step(s, "journal entries carry no build-machine path in CODE_FILE"):
        files = {e.get("CODE_FILE", "") for e in journal(g, "-b -t blkpolicy")}
        bad = [f for f in files if f.startswith("/") or "build" in f]
        expect(not bad, f"CODE_FILE values: {sorted(files)}")


def reload_restart_watchdog(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    names = machine.disks_by_serial(g)
    vdb = names["bp-virtio1"]

    with R.step(s, "systemctl reload with a broken policy fails visibly and keeps the old one"):
        pid = machine.main_pid(g)
        since = cursor(g)
        g.write_file(POLICY_PATH, BROKEN_POLICY)
        rc, out, err = g.run(f"systemctl reload {UNIT}", check=False)
        expect(rc != 0, "systemctl reload exited 0 with a broken policy")
        logged = "\n".join(e.get("MESSAGE", "") for e in entries_since(g, since, _SYSTEMD_UNIT=UNIT))
        expect(re.search(r"/etc/blkpolicy/policy.toml:\d+:\d+: ", logged), f"no file:line:col in:\n{logged}")
        expect_eq(machine.main_pid(g), pid, "MainPID after a failed reload")
        expect_eq(g.sh(f"systemctl is-active {UNIT}").strip(), "active", "state after a failed reload")
        # The old policy is still enforced.
        g.sh(f"echo 4096 > /sys/block/{vdb}/queue/read_ahead_kb")
        g.wait_for(f"test $(cat /sys/block/{vdb}/queue/read_ahead_kb) = 256", timeout=30,
                   what="the old policy to restore read_ahead_kb")

    with R.step(s, "systemctl reload with a fixed policy applies it"):
        g.write_file(POLICY_PATH, CHANGED_POLICY)
        g.sh(f"systemctl reload {UNIT}")
        expect_eq(g.sh(f"cat /sys/block/{vdb}/queue/read_ahead_kb").strip(), "384",
                  "read_ahead_kb right after the reload returned")

    with R.step(s, "a rule removed and systemctl reload: its values go back, one restored entry each"):
        before = {a: g.sh(f"cat /sys/block/{vdb}/queue/{a}").strip() for a in ("nomerges", "rq_affinity")}
        set_to = {"nomerges": "2" if before["nomerges"] != "2" else "1",
                  "rq_affinity": "2" if before["rq_affinity"] != "2" else "0"}
        g.sh("mkdir /etc/blkpolicy/policy.d")  # removed again below: purge must find nothing of the test's
        g.write_file(REMOVAL_DROPIN, "[[rule]]\nname = \"removed later\"\n[rule.match]\nkernel = \"" + vdb +
                     "\"\n[rule.set]\n" + "".join(f"{a} = {v}\n" for a, v in set_to.items()))
        g.sh(f"systemctl reload {UNIT}")
        for a, v in set_to.items():
            expect_eq(g.sh(f"cat /sys/block/{vdb}/queue/{a}").strip(), v, f"{a} after the rule was added")
        since = cursor(g)
        g.sh(f"rm {REMOVAL_DROPIN} && rmdir /etc/blkpolicy/policy.d && systemctl reload {UNIT}")
        after = {a: g.sh(f"cat /sys/block/{vdb}/queue/{a}").strip() for a in before}
        expect_eq(after, before, "the values right after the reload returned")
        restored = [e for e in machine.blkpolicy_alerts(g, since) if e.get("BLKPOLICY_EVENT") == "restored"]
        R.figure(s, "restored entries at the reload", len(restored), "; ".join(e.get("MESSAGE", "") for e in restored))
        expect_eq(sorted((e.get("BLKPOLICY_DEVICE"), e.get("BLKPOLICY_ATTRIBUTE"), e.get("BLKPOLICY_RESTORE"))
                         for e in restored),
                  [(vdb, "nomerges", "restored"), (vdb, "rq_affinity", "restored")], "restored entries")
        expect(all(e.get("MESSAGE_ID") == RESTORED_ID for e in restored), "MESSAGE_ID of the restored entries")
        out = g.sh(f"journalctl --no-pager -x -q -b MESSAGE_ID={RESTORED_ID}")
        expect("the value the device had before blkpolicy first wrote it" in out,
               f"no catalog text for the restored entry:\n{out}")

    with R.step(s, "systemctl restart"):
        pid = machine.main_pid(g)
        since = cursor(g)
        g.sh(f"systemctl restart {UNIT}")
        expect(machine.main_pid(g) not in (0, pid), "MainPID unchanged after restart")
        expect_eq(unit_prop(g, UNIT, "StatusText").split(",")[1].strip(), "0 drifted", "StatusText after restart")
        time.sleep(6)  # a verify pass of the restarted daemon
        restored = [e for e in machine.blkpolicy_alerts(g, since) if e.get("BLKPOLICY_EVENT") == "restored"]
        expect(not restored, "a restart put values back:\n" + "\n".join(_short(restored)))

    with R.step(s, "kill -9: systemd restarts it, frozen facts intact, no alert storm"):
        pid = machine.main_pid(g)
        restarts = int(unit_prop(g, UNIT, "NRestarts"))
        facts = machine.facts_digest(g)
        since = cursor(g)
        g.sh(f"kill -9 {pid}")
        machine.wait_restarted(g, pid, "systemd to restart the killed daemon")
        expect_eq(int(unit_prop(g, UNIT, "NRestarts")), restarts + 1, "NRestarts")
        expect_eq(machine.facts_digest(g), facts, "frozen facts after the restart")
        alerts = machine.blkpolicy_alerts(g, since)
        expect(not alerts, "alerts after a restart onto an unchanged system:\n" + "\n".join(_short(alerts)))
        bad = machine.mismatches(g, CHANGED_EXPECTED)
        expect(not bad, "values after the restart:\n" + "\n".join(bad))

    with R.step(s, "broken policy at start: the unit fails once, no restart loop"):
        since = cursor(g)
        g.write_file(POLICY_PATH, BROKEN_POLICY)
        rc, _, _ = g.run(f"systemctl restart {UNIT}", check=False)
        expect(rc != 0, "systemctl restart succeeded with a broken policy")
        time.sleep(12)  # two RestartSec= periods
        state = unit_prop(g, UNIT, "ActiveState")
        expect_eq(state, "failed", "ActiveState 12 s later")
        expect_eq(unit_prop(g, UNIT, "ExecMainStatus"), "3", "exit status")
        said = machine.unit_messages(g, since)
        expect("Scheduled restart job" not in said, f"systemd restarted it:\n{said}")
        expect(re.search(r"/etc/blkpolicy/policy.toml:\d+:\d+: ", said), f"no file:line:col in:\n{said}")
        g.write_file(POLICY_PATH, CHANGED_POLICY)
        g.sh(f"systemctl reset-failed {UNIT}; systemctl start {UNIT}")
        machine.wait_active(g)

    with R.step(s, "watchdog: pinged while the loop runs, and a stopped daemon is killed and restarted"):
        expect_eq(unit_prop(g, UNIT, "WatchdogUSec"), "2min", "WatchdogUSec as shipped")
        g.write_file("/run/systemd/system/blkpolicy.service.d/watchdog.conf", "[Service]\nWatchdogSec=6s\n")
        try:
            g.sh(f"systemctl daemon-reload && systemctl restart {UNIT}")
            pid = machine.main_pid(g)
            t1 = unit_prop(g, UNIT, "WatchdogTimestampMonotonic")
            time.sleep(10)
            t2 = unit_prop(g, UNIT, "WatchdogTimestampMonotonic")
            expect(t2 != t1, f"no watchdog ping in 10 s (WatchdogTimestampMonotonic {t1} -> {t2})")
            expect_eq(machine.main_pid(g), pid, "MainPID while pinging")
            since = cursor(g)
            g.sh(f"kill -STOP {pid}")
            machine.wait_restarted(g, pid, "the watchdog to restart a stopped daemon")
            said = machine.unit_messages(g, since)
            expect("Failed with result 'watchdog'" in said, f"no watchdog timeout in the unit's journal:\n{said}")
        finally:
            g.sh(f"rm -rf /run/systemd/system/blkpolicy.service.d && systemctl daemon-reload && "
                 f"systemctl restart {UNIT}")


def alerts_and_metrics(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    names = machine.disks_by_serial(g)
    vdb = names["bp-virtio1"]

    with R.step(s, "drift alert in the journal with every field, catalog text, value restored"):
        since = cursor(g)
        g.sh(f"echo 4096 > /sys/block/{vdb}/queue/read_ahead_kb")
        e = wait_journal(g, since, 30, "the drift alert", BLKPOLICY_EVENT="drift", BLKPOLICY_DEVICE=vdb)[0]
        expect_eq(e.get("SYSLOG_IDENTIFIER"), "blkpolicy", "SYSLOG_IDENTIFIER")
        expect_eq(e.get("MESSAGE_ID"), DRIFT_ID, "MESSAGE_ID")
        expect_eq(e.get("BLKPOLICY_ATTRIBUTE"), "read_ahead_kb", "BLKPOLICY_ATTRIBUTE")
        expect_eq(e.get("BLKPOLICY_EXPECTED"), "384", "BLKPOLICY_EXPECTED")
        expect_eq(e.get("BLKPOLICY_ACTUAL"), "4096", "BLKPOLICY_ACTUAL")
        expect(re.match(r"virtio disks do not spin \(/etc/blkpolicy/policy.toml:\d+\)", e.get("BLKPOLICY_RULE", "")),
               f"BLKPOLICY_RULE {e.get('BLKPOLICY_RULE')!r}")
        expect_eq(e.get("PRIORITY"), "4", "PRIORITY")
        expect(e.get("_SYSTEMD_UNIT") == UNIT, f"_SYSTEMD_UNIT {e.get('_SYSTEMD_UNIT')!r}")
        g.wait_for(f"test $(cat /sys/block/{vdb}/queue/read_ahead_kb) = 384", timeout=15, what="the value back")
        text = g.sh(f"journalctl --no-pager -x -q -b MESSAGE_ID={DRIFT_ID}")
        expect("Something outside blkpolicy wrote it" in text, f"no catalog text in journalctl -x:\n{text}")

    with R.step(s, "metrics file read by node_exporter's textfile collector and accepted by promtool"):
        dropin = ("[Service]\nExecStart=\nExecStart=/usr/sbin/blkpolicy run --metrics-file "
                  f"{TEXTFILE_DIR}/blkpolicy.prom\nReadWritePaths={TEXTFILE_DIR}\n")
        g.write_file("/etc/systemd/system/blkpolicy.service.d/metrics.conf", dropin)
        try:
            g.sh(f"systemctl daemon-reload && systemctl restart {UNIT}")
            g.wait_for(f"test -s {TEXTFILE_DIR}/blkpolicy.prom", timeout=20, what="the metrics file")
            rc, out, err = g.run(f"promtool check metrics < {TEXTFILE_DIR}/blkpolicy.prom", check=False)
            expect(rc == 0, f"promtool check metrics: exit {rc}\n{out}{err}")
            g.wait_for("systemctl is-active -q prometheus-node-exporter", timeout=30, what="node_exporter")
            scraped = g.wait_for("curl -sf http://127.0.0.1:9100/metrics | grep -E '^(blkpolicy_|node_textfile_scrape_error)'",
                                 timeout=30, what="node_exporter to serve blkpolicy's metrics")
            expect("node_textfile_scrape_error 0" in scraped, f"textfile scrape error:\n{scraped}")
            managed = re.search(r"^blkpolicy_devices_managed (\d+)", scraped, re.M)
            expect(managed and int(managed.group(1)) >= len(machine.EXPECTED), f"scraped:\n{scraped}")
            R.figure(s, "blkpolicy series scraped by node_exporter", scraped.count("\nblkpolicy_") + 1)
        finally:
            g.sh(f"rm -rf /etc/systemd/system/blkpolicy.service.d && systemctl daemon-reload && "
                 f"systemctl restart {UNIT}")


def package_life(ctx):
    g, s, R = ctx.guest, ctx.suite, ctx.results
    upgrade_deb = "/mnt/share/" + ctx.upgrade_deb_name

    with R.step(s, "upgrade restarts the daemon, keeps state and the edited conffile"):
        pid = machine.main_pid(g)
        facts = machine.facts_digest(g)
        since = cursor(g)
        out = g.sh(f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q {upgrade_deb} 2>&1", timeout=300)
        expect(g.sh("dpkg-query -W -f '${Version}' blkpolicy").endswith("+vmtest1"), f"not upgraded:\n{out}")
        machine.wait_active(g)
        expect(machine.main_pid(g) != pid, "the daemon was not restarted by the upgrade")
        expect_eq(machine.facts_digest(g), facts, "frozen facts after the upgrade")
        expect_eq(g.read_file(POLICY_PATH), CHANGED_POLICY, "the admin's policy after the upgrade")
        alerts = machine.blkpolicy_alerts(g, since)
        expect(not alerts, "alerts after the upgrade:\n" + "\n".join(_short(alerts)))
        expect_eq(g.sh(f"systemctl is-enabled {UNIT}").strip(), "enabled", "still enabled")

    with R.step(s, "remove stops the service and keeps the conffile"):
        g.sh("DEBIAN_FRONTEND=noninteractive apt-get remove -y -q blkpolicy 2>&1", timeout=300)
        expect(g.run(f"systemctl is-active -q {UNIT}", check=False)[0] != 0, "still active after remove")
        expect(g.run("pgrep -x blkpolicy", check=False)[0] != 0, "a blkpolicy process survived remove")
        expect_eq(g.sh("dpkg-query -W -f '${db:Status-Abbrev}' blkpolicy").strip(), "rc", "package state")
        expect_eq(g.read_file(POLICY_PATH), CHANGED_POLICY, "policy kept on remove")

    with R.step(s, "purge leaves no unit enabled, no conffile, no state"):
        g.sh("DEBIAN_FRONTEND=noninteractive apt-get purge -y -q blkpolicy 2>&1", timeout=300)
        left = g.sh("find /etc/systemd /run/systemd/system -name 'blkpolicy*' 2>/dev/null; "
                    "ls -d /etc/blkpolicy /run/blkpolicy /var/lib/systemd/deb-systemd-helper-enabled/*blkpolicy* "
                    "2>/dev/null || true")
        expect(not left.strip(), f"left after purge:\n{left}")
        expect(g.run("dpkg-query -W blkpolicy", check=False)[0] != 0 or
               g.sh("dpkg-query -W -f '${db:Status-Abbrev}' blkpolicy").strip() in ("", "un"), "still known to dpkg")

    with R.step(s, "installing again after purge enables nothing"):
        g.sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -q blkpolicy 2>&1", timeout=300)
        expect_eq(g.run(f"systemctl is-enabled {UNIT}", check=False)[1].strip(), "disabled", "is-enabled")
        expect_eq(g.run(f"systemctl is-active {UNIT}", check=False)[1].strip(), "inactive", "is-active")
        g.sh("DEBIAN_FRONTEND=noninteractive apt-get purge -y -q blkpolicy 2>&1", timeout=300)


def run(ctx):
    install_and_enable(ctx)
    ctx.guest.reboot()
    boot_checks(ctx)
    reload_restart_watchdog(ctx)
    alerts_and_metrics(ctx)
    package_life(ctx)
