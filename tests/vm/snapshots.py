# SPDX-License-Identifier: MIT
"""A booted guest, saved once and started from in seconds.

Booting a Debian guest under TCG costs a minute or more of both CPUs, and
most groups need a guest that is up, not the boot itself. So each suite's
guest is booted once with its machine (disks, controllers, CPUs), left to
reach its default target and settle, and saved: the machine's state as a
migration stream (`migrate exec:cat > state`) beside its disks as they were
at that moment (qcow2 overlays over the image). A job's guest starts from it
with fresh overlays over those disks and `-incoming` (guest.Guest.restore),
and goes back to it the same way whenever a group needs pristine disks.
Where the boot is the point (the service at boot, the initramfs, a root
disk), the groups still boot.

Cached beside the images (images.cache_entry), keyed by the image, the
machine, this recipe and the qemu binary: a saved machine loads only into
the qemu that saved it, with the same devices.
"""

import os
import shutil
import subprocess
import time

import images
from guest import Guest

# What is done before the state is saved. The guest must have no 9p share
# mounted (QEMU refuses to save one), and nothing of the tests yet.
RECIPE = "2026-12-06 default target reached, udev settled, synced"


class Snapshot:
    def __init__(self, directory):
        self.dir = directory
        self.root = os.path.join(directory, "root.qcow2")
        self.state = os.path.join(directory, "state")
        with open(os.path.join(directory, "seconds")) as f:
            self.seconds = float(f.read())

    def disk(self, node):
        return os.path.join(self.dir, f"{node}.qcow2")


def _qemu_version():
    return subprocess.run(["qemu-system-x86_64", "--version"], check=True, capture_output=True,
                          text=True).stdout.splitlines()[0]


def _saved(kind, what, image, disks, controllers, cpus, append, memory_mb, key_parts, setup, base=None,
           repo=None, smbios=None):
    """A cache entry KIND-SUITE-KEY holding a guest saved after SETUP(guest)
    ran in it: booted, or (BASE) restored from another snapshot, with REPO
    (a package's local repository) in its share."""
    def build(work):
        t0 = time.monotonic()
        share = os.path.join(work, "share")  # the device is part of the machine
        os.makedirs(share)
        if repo:
            shutil.copytree(repo, os.path.join(share, "repo"))
        # Booted: without the disks QEMU cannot save. Restored: with them
        # (hot-added), taken away again before the save.
        g = Guest(image, work, disks=disks if base else [d for d in disks if d.migratable], share=share,
                  memory_mb=memory_mb, cpus=cpus, controllers=controllers, append=append, snapshot=base,
                  smbios=smbios)
        if not base:
            g._after_start = lambda: None  # no share mounted, no tracepoints held
        try:
            g.start()
            setup(g)
            g.save(os.path.join(work, "state"))
        finally:
            g.poweroff()
        shutil.rmtree(share)
        for name in os.listdir(work):
            path = os.path.join(work, name)
            if name.startswith("boot") or (name.endswith(".qcow2") and name != "root.qcow2" and
                                           not any(d.migratable and name == f"{d.node}.qcow2" for d in disks)):
                subprocess.run(["rm", "-rf", path], check=True)
        with open(os.path.join(work, "seconds"), "w") as f:
            f.write(f"{time.monotonic() - t0:.1f}\n")

    saved = [d.spec() for d in disks if d.migratable]
    key = images._key(RECIPE, kind, image.dir, image.kernel, image.initrd, saved, list(controllers), cpus, append,
                      memory_mb, _qemu_version(), *([sorted(smbios.items())] if smbios else []), *key_parts)
    return Snapshot(images.cache_entry(kind, image.suite, key, what, build))


def _settled(g):
    """The default target reached, udev done, the disks written out."""
    g.run("systemctl is-system-running --wait", check=False, timeout=300)
    g.sh("udevadm settle; sync", timeout=120)


def booted(image, disks, controllers, cpus, append="", memory_mb=2048, smbios=None, what="a booted guest, saved",
           kind="snap"):
    """The Snapshot of IMAGE booted on this machine (SMBIOS: its DMI, which
    a loaded guest keeps from the boot that saved it), made if missing.
    KIND names the cache entry (KIND-SUITE-KEY): a machine of another kind
    than the suite's needs its own, or making one would prune the other
    (images._prune keeps one entry per kind and suite)."""
    return _saved(kind, what, image, disks, controllers, cpus, append, memory_mb, [], _settled, smbios=smbios)


def installed(base, image, pkg, disks, controllers, cpus, append="", memory_mb=2048, before=None):
    """BASE (a booted guest's Snapshot) with PKG installed from its local
    repository, nothing enabled: the start of every group that does not
    test the install itself (the service group does, from BASE). BEFORE(g)
    runs first (the harness's own settings). Keyed by the package: a commit
    that changed the product makes it again (one install, where every
    group made its own)."""
    def setup(g):
        if before:
            before(g)
        machine_install(g)
        # What the save needs: the share unmounted (QEMU saves no guest
        # with a 9p export mounted), the disks it cannot save taken away.
        g.sh("umount /mnt/share")
        for d in disks:
            if not d.migratable:
                g.unplug(d.node)
        g.wait_for("udevadm settle && sync", timeout=120, what="udev and the disks, settled")

    from machine import install_package as machine_install
    return _saved("inst", "the package installed in a booted guest, saved", image, disks, controllers, cpus, append,
                  memory_mb, [base.dir, pkg.dir, INSTALLED_RECIPE], setup, base=base, repo=pkg.repo)


# What installed() does, for its key.
INSTALLED_RECIPE = "2026-12-06 quick triggers, apt install from the share's repository, share unmounted, nvme unplugged"
