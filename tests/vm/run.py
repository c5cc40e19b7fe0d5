#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""blkpolicy in Debian guests with systemd as PID 1 (tests/vm/README.md).

    tests/vm/run.py                      # bookworm, trixie and trixie-bpo (the 7.x kernel), each its groups
    tests/vm/run.py --suite trixie --only service
    tests/vm/run.py --keep               # keep the run directory (disks, logs)

Exit status: 0 every check passed; 1 a check failed; 77 the guests cannot
run here (not root, no qemu or mmdebstrap, no mirror), with the reason.
"""

import argparse
import concurrent.futures
import os
import shutil
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import images  # noqa: E402
import machine  # noqa: E402
import package  # noqa: E402
import snapshots  # noqa: E402
import test_boot  # noqa: E402
import test_cloudinit  # noqa: E402
import test_devices  # noqa: E402
import test_faults  # noqa: E402
import test_measure  # noqa: E402
import test_multipath  # noqa: E402
import test_peers  # noqa: E402
import test_rules  # noqa: E402
import test_service  # noqa: E402
import test_writers  # noqa: E402
import guest  # noqa: E402
from guest import Guest  # noqa: E402
from harness import Results  # noqa: E402

# In this order. The faults group comes first, on the disks as the boot left
# them (no reboot of its own), and leaves the guest as it found it (the
# packages its install pulled purged, the journal volatile again); the
# service group installs, enables and reboots; devices reboots the guest
# the service group leaves behind.
GROUPS = {"faults": test_faults.run, "service": test_service.run, "devices": test_devices.run,
          "writers": test_writers.run, "rules": test_rules.run, "measure": test_measure.run,
          "peers": test_peers.run, "multipath": test_multipath.run, "boot": test_boot.run,
          "cloudinit": test_cloudinit.run}
# What each guest runs unless --only says otherwise: the package's life
# cycle under systemd on Debian 12 and 13; the devices and the kernel's own
# behaviour on all three kernels. The backports guest installs the same
# trixie package as Debian 13, so its service group would prove nothing new.
# What a value does (measure) on Debian 13's 6.12 and on the newest kernel,
# the ones the field reports' kernels lead to; on Debian 12 only its step
# with CPUs that can be hot-added (6.1 is the kernel here that counts qemu's
# absent CPUs as possible: images.SUITES).
# Faults the host throws at the daemon (the fault matrix): every row on
# Debian 13, the rows the kernel or udev decides on the other two.
# The peers group (blkpolicy beside TuneD, a udev rule and a bare uevent
# listener) is a benchmark: only with --only peers (bench/peers.sh).
DEFAULT_GROUPS = {"bookworm": ["faults", "service", "devices", "measure", "multipath", "boot"],
                  "trixie": ["faults", "service", "devices", "writers", "rules", "measure", "boot", "cloudinit"],
                  "trixie-bpo": ["faults", "devices", "measure", "multipath"]}
# The newest kernel here: every kernel row that holds on it must name it.
STRICT_ROWS = {"trixie-bpo"}
# The devices group's two long checks (about three minutes each), each on
# the kernel where it tells most, within the CI budget (tests/vm/README.md):
# the 64-disk burst on 7.x, where the kernel answers contended writes with
# EBUSY (against a udev rule only with --all-checks: a comparison); udev
# rules against their import across two reboots on Debian 12, whose udev
# is the oldest.
# Every fault row on Debian 13; on the other kernels the rows whose outcome
# the kernel or udev decides (udevd restarted, a disk pulled mid-write).
FAULTS_EVERY_ROW = {"trixie"}
DEVICE_CHECKS = {"bookworm": {"udev-equivalence"}, "trixie": set(), "trixie-bpo": {"burst"}}
# Groups with a machine of their own (a btrfs or LVM root, two NVMe
# controllers sharing a namespace): the boot is theirs to make (the boot
# group's first from a saved guest of its own machine, test_boot.py).
# Every other group starts from the suite's booted guest, saved once
# (snapshots.py): each a job of its own, in seconds, on pristine disks.
OWN_GUEST = {"boot", "multipath"}
# Jobs side by side. The guests are CPU-bound under TCG: three at a time
# kept both CPUs busy (a load average near 10 in the CI run of 7673c03,
# tests/vm/README.md), so more would only share them. The jobs expected to
# take longest start first; the others follow on the free slots.
DEFAULT_JOBS = 3 if (os.cpu_count() or 1) >= 2 else 1
# Seconds each job took, as measured (tests/vm/README.md, "How long it
# takes"): the longest start first, so that none starts last.
EXPECTED_SECONDS = {("trixie", "faults"): 900, ("trixie", "devices"): 800, ("bookworm", "devices"): 800,
                    ("trixie-bpo", "devices"): 700, ("bookworm", "boot"): 1100, ("trixie", "boot"): 1400,
                    ("trixie", "service"): 500, ("bookworm", "service"): 500, ("trixie", "measure"): 440,
                    ("trixie-bpo", "measure"): 440, ("trixie", "writers"): 400, ("trixie", "rules"): 450,
                    ("bookworm", "faults"): 300, ("trixie-bpo", "faults"): 300,
                    ("bookworm", "multipath"): 170, ("trixie-bpo", "multipath"): 150, ("trixie", "cloudinit"): 400}
# Where each run keeps its disks and logs; an earlier run's is removed at
# start (BLKPOLICY_VM_RUNS: another place, for a run beside another).
RUNS = os.environ.get("BLKPOLICY_VM_RUNS", "/var/tmp/blkpolicy-vm-runs")


def preflight():
    """The reason the guests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (mmdebstrap, chroot builds)"
    for tool in ("qemu-system-x86_64", "qemu-img", "mmdebstrap", "dpkg-deb", "mkfs.ext4"):
        if not shutil.which(tool):
            return f"{tool} is not installed (scripts/install-deps.sh --tests installs it)"
    if not images.MIRROR:
        return ("no Debian archive among the host's apt sources (/etc/apt/sources.list, sources.list.d); "
                "set BLKPOLICY_VM_MIRROR to one")
    return None


def suite_snapshot(suite, image):
    """The suite's guest (its disks, controllers and CPUs) booted and saved."""
    spec = images.SUITES[suite]
    return snapshots.booted(image, machine.DISKS, machine.CONTROLLERS, spec.get("smp", 2), spec.get("append", ""))


# The groups that start from the booted guest without the package: the
# install is what they test (by hand, and by cloud-init's user-data). Every
# other group starts from the guest with the package installed
# (snapshots.installed).
FROM_BOOTED = {"service", "cloudinit"}


def suite_installed(suite, image, pkg, base):
    """The suite's saved guest with the package installed."""
    spec = images.SUITES[suite]
    return snapshots.installed(base, image, pkg, machine.DISKS, machine.CONTROLLERS, spec.get("smp", 2),
                               spec.get("append", ""), before=machine.quick_triggers)


def prepare(suites, groups):
    """{suite: (Image, Package, {"booted"|"installed": Snapshot})}, built (or
    taken from the cache) in parallel: the images of every suite, the
    package of each suite whose package the guests install, and the saved
    guests of each suite that runs a group on them (GROUPS)."""
    # Every suite's three at once (the snapshots wait for their images).
    with concurrent.futures.ThreadPoolExecutor(max_workers=3 * len(suites)) as pool:
        image_jobs = {s: pool.submit(images.guest_image, s) for s in suites}
        pkg_suites = sorted({images.SUITES[s]["package"] for s in suites})
        pkg_jobs = {p: pool.submit(package.build_package, p) for p in pkg_suites}
        def snaps(s):
            image = image_jobs[s].result()
            kinds = set(groups[s]) - OWN_GUEST
            out = {"booted": suite_snapshot(s, image)} if kinds else {}
            if kinds - FROM_BOOTED:
                pkg = pkg_jobs[images.SUITES[s]["package"]].result()
                out["installed"] = suite_installed(s, image, pkg, out["booted"])
            if "boot" in groups[s]:
                out["boot"] = test_boot.saved_machine(image)
            return out

        snap_jobs = {s: pool.submit(snaps, s) for s in suites}
        return {s: (image_jobs[s].result(), pkg_jobs[images.SUITES[s]["package"]].result(), snap_jobs[s].result())
                for s in suites}


def run_job(job, built, args, run_dir, results):
    """One group in a guest of its own: from the suite's snapshot, or (the
    groups in OWN_GUEST) one the group boots itself."""
    suite, group = job
    ts = time.monotonic()
    image, pkg, snaps = built
    snap = snaps.get("booted" if group in FROM_BOOTED else "installed")
    # Each job its own share: the package's repository, and what a group
    # copies out of its guest (an initramfs) beside no other job's.
    share = os.path.join(run_dir, suite, f"share-{group}")
    os.makedirs(share)
    shutil.copytree(pkg.repo, os.path.join(share, "repo"))
    upgrade = package.upgraded_copy(pkg, share) if group == "service" else pkg.deb
    guest.forget_current()
    ctx = types.SimpleNamespace(guest=None, suite=suite, results=results, pkg=pkg, share=share,
                                image=image, run_dir=run_dir, upgrade_deb_name=os.path.basename(upgrade),
                                strict_rows=suite in STRICT_ROWS,
                                all_fault_rows=suite in FAULTS_EVERY_ROW,
                                device_checks=set(test_devices.ALL_CHECKS) if args.all_checks
                                else DEVICE_CHECKS[suite])
    if group in OWN_GUEST:
        # (The boot group's first guest starts from its own saved machine:
        # its first boot is no check, the later ones are.)
        ctx.snapshot = snaps.get(group)
        try:
            GROUPS[group](ctx)
        except Exception as e:  # the rest of this group cannot run
            results.group_stopped(suite, group, e)
        g = guest.current_guest()
        results.job_done(suite, group, time.monotonic() - ts, g.cpu_seconds if g else None,
                         g.boot_count if g else 0, g.restore_count if g else 0)
        return
    g = None
    try:
        with Guest(image, os.path.join(run_dir, suite, f"guest-{group}"), disks=machine.DISKS,
                   controllers=machine.CONTROLLERS, share=share, cpus=images.SUITES[suite].get("smp", 2),
                   append=images.SUITES[suite].get("append", ""), snapshot=snap) as g:
            results.figure(suite, f"{group}: guest restored from its snapshot", round(g.restore_seconds, 1), "s")
            machine.quick_triggers(g)
            ctx.guest = g
            try:
                GROUPS[group](ctx)
            except Exception as e:  # the rest of this group cannot run
                results.group_stopped(suite, group, e)
        if g.boot_retries:
            results.figure(suite, f"{group}: boots retried after a kernel death", g.boot_retries)
    except Exception as e:  # the guest did not start: the group is lost
        results.group_stopped(suite, group, e)
    results.job_done(suite, group, time.monotonic() - ts, g.cpu_seconds if g else None,
                     g.boot_count if g else 0, g.restore_count if g else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", action="append", choices=sorted(images.SUITES), help="repeatable; default: all")
    ap.add_argument("--only", action="append", choices=sorted(GROUPS),
                    help="repeatable; default: each suite's own groups (DEFAULT_GROUPS)")
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("BLKPOLICY_VM_JOBS", DEFAULT_JOBS)),
                    help=f"guests run side by side (default {DEFAULT_JOBS}; BLKPOLICY_VM_JOBS)")
    ap.add_argument("--all-checks", action="store_true",
                    help="run the long device checks (burst, udev equivalence) on every suite")
    ap.add_argument("--prepare-only", action="store_true",
                    help="build (or find cached) the images, chroots and packages, boot nothing "
                         "(scripts/test.sh runs this beside the host tests)")
    ap.add_argument("--budget", metavar="RESULTS_JSON",
                    help="print the budget (jobs and costliest checks) of a run's results.json, run nothing")
    args = ap.parse_args()
    suites = args.suite or list(images.SUITES)
    if args.budget:
        print(Results.load(args.budget).budget())
        return 0

    reason = preflight()
    if reason:
        print(f"SKIPPED: guest tests: {reason}")
        return 77

    groups = {s: args.only or DEFAULT_GROUPS[s] for s in suites}
    if args.prepare_only:
        t0 = time.monotonic()
        prepare(suites, groups)
        print(f"images, chroots and packages ready in {time.monotonic() - t0:.0f} s")
        return 0

    os.makedirs(RUNS, exist_ok=True)
    for old in os.listdir(RUNS):  # what an earlier (failed, kept) run left
        if os.path.isdir(os.path.join(RUNS, old)):
            shutil.rmtree(os.path.join(RUNS, old), ignore_errors=True)
    run_dir = tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=RUNS)
    results = Results(run_dir)
    t0 = time.monotonic()
    try:
        # Every image, chroot and package first, side by side: mmdebstrap
        # waits on the mirror much of the time, and nothing boots yet whose
        # timing the builds could disturb.
        built = prepare(suites, groups)
        results.figure("all", "images, chroots, packages and snapshots ready", round(time.monotonic() - t0), "s")
        for s in suites:
            image, pkg, snaps = built[s]
            results.figure(s, "guest kernel", image.kernel_release)
            cc = ""
            if pkg.ccache:
                cc = f", {pkg.ccache[0] + pkg.ccache[1]} of {sum(pkg.ccache)} objects from the compiler cache"
            results.figure(s, "package", f"{os.path.basename(pkg.deb)} built in {pkg.build_seconds:.0f} s{cc}",
                           "(the same source: built once)")
            for kind, snap in snaps.items():
                results.figure(s, f"snapshot ({kind}): made in", round(snap.seconds), "s")
        jobs = [(s, g) for s in suites for g in GROUPS if g in groups[s]]
        jobs.sort(key=lambda j: -EXPECTED_SECONDS.get(j, 0))
        slots = max(1, min(args.jobs, len(jobs)))
        results.figure("all", "guests side by side", slots, f"({os.cpu_count()} CPUs here)")
        with concurrent.futures.ThreadPoolExecutor(max_workers=slots) as pool:
            for job in [pool.submit(run_job, j, built[j[0]], args, run_dir, results) for j in jobs]:
                job.result()
    finally:
        path = results.write()
        print("\n" + results.summary())
        print(f"results: {path}; total {time.monotonic() - t0:.0f} s")
    failed = bool(results.failed())
    # The last run's figures and step times stay beside the runs (the run
    # directory goes when every check passed): where a CI run's time went.
    shutil.copy(path, os.path.join(RUNS, "last-results.json"))
    if not failed and not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    elif failed:
        print(f"run directory kept for a look: {run_dir}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
