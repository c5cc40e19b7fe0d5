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


def booted(image, disks, controllers, cpus, append="", memory_mb=2048):
    """The Snapshot of IMAGE booted on this machine, made if missing."""
    def build(work):
        t0 = time.monotonic()
        share = os.path.join(work, "share")  # the device is part of the machine; nothing is mounted
        os.makedirs(share)
        g = Guest(image, work, disks=[d for d in disks if d.migratable], share=share, memory_mb=memory_mb, cpus=cpus,
                  controllers=controllers, append=append)
        # No share mounted, no tracepoints held: the state is the boot's alone.
        g._after_start = lambda: None
        try:
            g.boot()
            g.run("systemctl is-system-running --wait", check=False, timeout=300)
            g.sh("udevadm settle; sync", timeout=120)
            g.save(os.path.join(work, "state"))
        finally:
            g.poweroff()
        os.rmdir(share)
        for name in os.listdir(work):
            if name.startswith("boot"):
                subprocess.run(["rm", "-rf", os.path.join(work, name)], check=True)
        with open(os.path.join(work, "seconds"), "w") as f:
            f.write(f"{time.monotonic() - t0:.1f}\n")

    saved = [d.spec() for d in disks if d.migratable]
    key = images._key(RECIPE, image.dir, image.kernel, image.initrd, saved, list(controllers), cpus, append,
                      memory_mb, _qemu_version())
    return Snapshot(images.cache_entry("snap", image.suite, key, "a booted guest, saved", build))
