# SPDX-License-Identifier: MIT
"""Debian guest images and build chroots, made with mmdebstrap and cached.

Everything here is keyed by what it is built from (suite, package list, the
recipe below): a cache entry whose key matches is used as it is; a missing one
is built, into a temporary name first, so an interrupted build never leaves a
half image under a valid key.

Cache: $BLKPOLICY_VM_CACHE (default /var/cache/blkpolicy-vm), outside the
checkout so that a fresh clone on the same machine reuses it.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

CACHE = os.environ.get("BLKPOLICY_VM_CACHE", "/var/cache/blkpolicy-vm")
# Debian's own suite names: an apt source that serves one of them is a Debian
# archive (the host's may be a local mirror); third-party sources are not.
DEBIAN_CODENAMES = ("buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
                    "oldoldstable", "oldstable", "stable", "testing", "unstable")


def _apt_source_entries(etc_apt="/etc/apt"):
    """(uri, [suite...]) of every enabled `deb` source of the host, from the
    one-line format (sources.list, sources.list.d/*.list) and deb822
    (sources.list.d/*.sources), in the order apt reads them."""
    entries = []
    files = [os.path.join(etc_apt, "sources.list")]
    d = os.path.join(etc_apt, "sources.list.d")
    if os.path.isdir(d):
        files += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith((".list", ".sources"))]
    for path in files:
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        if path.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    m = re.match(r"([A-Za-z-]+):\s*(.*)", line)
                    if m and not line.startswith("#"):
                        fields[m.group(1).lower()] = m.group(2).split()
                if ("deb" in fields.get("types", []) and fields.get("enabled", ["yes"])[0] != "no"
                        and fields.get("uris")):
                    for uri in fields["uris"]:
                        entries.append((uri, fields.get("suites", [])))
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
                if len(words) >= 3 and words[0] == "deb":
                    entries.append((words[1], [words[2]]))
    return entries


def host_mirror(etc_apt="/etc/apt"):
    """The Debian archive the host's apt already uses (BLKPOLICY_VM_MIRROR
    overrides it), or None: the first `deb` source whose suites name a
    Debian release other than its security archive."""
    if os.environ.get("BLKPOLICY_VM_MIRROR"):
        return os.environ["BLKPOLICY_VM_MIRROR"]
    for uri, suites in _apt_source_entries(etc_apt):
        for suite in suites:
            base = suite.split("-", 1)[0].split("/", 1)[0]
            if base in DEBIAN_CODENAMES and not suite.endswith("-security") and "/updates" not in suite:
                return uri.rstrip("/")
    return None


MIRROR = host_mirror()
ROOT_LABEL = "bproot"

# What each suite is, as the harness knows it.
# A guest is a Debian suite, and for trixie-bpo the same suite with the newest
# kernel from trixie-backports (7.x). "package" names the suite whose package
# it installs: the backports guest runs trixie's.
SUITES = {
    "bookworm": {"release": "Debian 12", "kernel_series": "6.1", "package": "bookworm", "dist": "bookworm",
                 "early_boot": True,
                 # CPUs that can be hot-added, as cloud VMs allow (the measure
                 # group's hotplug step). qemu lists the two absent CPUs in
                 # the MADT as disabled entries: 6.1 counts them as hotplug
                 # CPUs (possible 0-3), 6.12 and 7.3.4 count none ("plus 0
                 # hotplug CPUs", possible 0-1, with or without sockets=4 or
                 # possible_cpus=4: measured), so only this guest has them.
                 "smp": "2,maxcpus=4"},
    "trixie": {"release": "Debian 13", "kernel_series": "6.12", "package": "trixie", "dist": "trixie",
               "writers": True, "early_boot": True, "measure": True, "cloud_init": True},
    "trixie-bpo": {"release": "Debian 13 with the trixie-backports kernel", "kernel_series": "7.x",
                   "package": "trixie", "dist": "trixie", "backports_kernel": True, "measure": True,
                   "writers": True},
}

# The guest: systemd as PID 1 with udev and dbus (logind needs it for the
# power button), a distribution kernel, the stacking tools, the guest agent
# the harness drives it through, and node_exporter + promtool for the
# metrics check. blkpolicy itself is NOT in the image: the tests install it.
GUEST_PACKAGES = [
    "systemd-sysv", "udev", "dbus", "kmod", "linux-image-amd64", "initramfs-tools",
    "qemu-guest-agent", "mdadm", "lvm2", "dmsetup", "cryptsetup-bin", "e2fsprogs",
    "util-linux", "procps", "curl", "prometheus-node-exporter", "prometheus",
    # systemd-analyze verify runs man(1) on the unit's Documentation= pages.
    "man-db",
]

# The other writers the writers group runs beside blkpolicy (tests/vm/
# test_writers.py), in the guests that run that group or measure TuneD
# beside blkpolicy (the peers group, bench/peers.sh); switched off in the
# image so that no other group meets them. amazon-ec2-utils and btrfs-progs
# bring udev rules real images ship (70-ec2-nvme-devices.rules, for models
# only Amazon's disks have; 64-btrfs-zoned.rules, for zoned disks holding
# btrfs): the writers group imports the one and proves the other is named
# for no disk its conditions exclude.
WRITER_PACKAGES = ["tuned", "sysfsutils", "amazon-ec2-utils", "btrfs-progs"]
WRITERS_OFF = 'chroot "$1" systemctl disable tuned.service sysfsutils.service 2>/dev/null || true'

# The early-boot group (tests/vm/test_boot.py) boots the same root tree as
# btrfs, where the mount decides ssd from the disk's rotational flag: the
# image carries btrfs-progs, and its build makes a second initrd with btrfs
# in it (made here, where mmdebstrap has /proc and /dev mounted; the ext4
# image's initramfs configuration stays as it was). And zstd, the
# compressor initramfs-tools is configured with (COMPRESS=zstd; without the
# tool it falls back to gzip -9, about 15 s of each initramfs the group's
# guests make under TCG) and dracut prefers; a Debian host installed with
# recommends has it.
EARLY_BOOT_PACKAGES = ["btrfs-progs", "zstd"]
EARLY_BOOT_INITRD = r"""
set -e
root="$1"
release=$(ls "$root/lib/modules" | sort -V | tail -n 1)
cp "$root/etc/initramfs-tools/modules" "$root/etc/initramfs-tools/modules.ext4"
echo btrfs >> "$root/etc/initramfs-tools/modules"
chroot "$root" mkinitramfs -o /boot/initrd-btrfs.img "$release" >/dev/null
mv "$root/etc/initramfs-tools/modules.ext4" "$root/etc/initramfs-tools/modules"
"""

# The cloudinit group (tests/vm/test_cloudinit.py): Debian 13's image
# carries cloud-init, as a cloud's image does, switched off
# (cloud-init.disabled: its generator then starts nothing) so that no other
# group meets it; the group switches it on for a first boot. Installed here,
# where it costs seconds: in a TCG guest its install took 220 s (273 s of
# qemu CPU, its Python modules compiled one by one).
CLOUD_INIT_PACKAGES = ["cloud-init"]
CLOUD_INIT_OFF = 'touch "$1/etc/cloud/cloud-init.disabled"'

# The load the measure group (tests/vm/test_measure.py) puts on the disks,
# in the guest that runs that group.
MEASURE_PACKAGES = ["fio"]

# Runs in the finished root tree ($1). Slim initrd (the root disk is
# virtio-blk with ext4; every other driver loads from the root through udev),
# root by label, no services that only cost boot time in a test guest.
GUEST_CUSTOMIZE = r"""
set -e
root="$1"
echo bp-guest > "$root/etc/hostname"
echo "LABEL=__LABEL__ / ext4 defaults,errors=remount-ro 0 1" > "$root/etc/fstab"
sed -i 's/^MODULES=.*/MODULES=list/' "$root/etc/initramfs-tools/initramfs.conf"
printf 'virtio_pci\nvirtio_blk\next4\n' >> "$root/etc/initramfs-tools/modules"
# The initramfs, once per kernel, now that everything is installed (the
# installs ran without it: NO_INITRAMFS_DURING_INSTALL).
rm -f "$root/usr/sbin/update-initramfs"
chroot "$root" dpkg-divert --quiet --local --rename --remove /usr/sbin/update-initramfs
chroot "$root" update-initramfs -c -k all >/dev/null
# The Prometheus server is here for promtool only.
chroot "$root" systemctl mask prometheus.service apt-daily.timer apt-daily-upgrade.timer \
    e2scrub_all.timer e2scrub_reap.service mdmonitor-oneshot.timer fstrim.timer 2>/dev/null || true
chroot "$root" systemctl mask mdcheck_start.timer mdcheck_continue.timer 2>/dev/null || true
# No getty on a console nobody reads.
chroot "$root" systemctl mask serial-getty@ttyS0.service getty@tty1.service 2>/dev/null || true
# apt in the guest reads only a local repository the tests provide.
rm -f "$root/etc/apt/sources.list" "$root"/etc/apt/sources.list.d/*
"""

# Every install in the image (the kernel's, and the hooks of udev, mdadm,
# lvm2, cryptsetup and btrfs-progs each) would make the whole initramfs
# again, with every module (MODULES=most until the customize hook says
# list): update-initramfs is a no-op until the customize hook puts it back
# and makes each kernel's initramfs once. (Diverted before initramfs-tools
# is unpacked, so dpkg puts the real one aside.)
NO_INITRAMFS_DURING_INSTALL = ('--essential-hook=chroot "$1" dpkg-divert --quiet --local --rename '
                               '--add /usr/sbin/update-initramfs && ln -s /bin/true "$1/usr/sbin/update-initramfs"')

# The backports guest: the newest linux-image-amd64 of DIST-backports,
# installed before the common customize hook builds the initramfs; the
# suite's own kernel stays beside it, and the newest one boots.
BACKPORTS_KERNEL_HOOK = ('--customize-hook=chroot "$1" sh -c "apt-get -q update >/dev/null && '
                         'DEBIAN_FRONTEND=noninteractive apt-get install -y -q -t __DIST__-backports '
                         'linux-image-amd64 >/dev/null"')

RECIPE_VERSION = "1"


def _release_key(release):
    """6.12.117+deb13-amd64 -> (6, 12, 117): kernels compared by number, not
    as text (as text 6.9 sorts after 6.12)."""
    nums = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", release)
    return tuple(int(n or 0) for n in nums.groups()) if nums else (0, 0, 0)


def log(msg):
    print(f"[vm] {msg}", file=sys.stderr, flush=True)


def _key(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def cache_entry(kind, suite, key, what, build):
    """CACHE/KIND-SUITE-KEY, made by BUILD(work_dir) in a temporary directory
    first and renamed into place only when BUILD returned, so an interrupted
    build never leaves a half entry under a valid key. Older entries of the
    same kind and suite are removed (keys change with the recipe, and images
    are large)."""
    final = os.path.join(CACHE, f"{kind}-{suite}-{key}")
    if os.path.exists(os.path.join(final, "done")):
        return final
    os.makedirs(CACHE, exist_ok=True)
    t0 = time.monotonic()
    work = tempfile.mkdtemp(prefix=f"{kind}-{suite}-", dir=CACHE)
    try:
        log(f"{suite}: building {what} (cached afterwards)")
        build(work)
        open(os.path.join(work, "done"), "w").close()
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(work, final)
        log(f"{suite}: {what} ready in {time.monotonic() - t0:.0f} s")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    _prune(f"{kind}-{suite}-", keep=final)
    return final


class Image:
    """A cached guest image: root.raw (ext4, labelled) and the kernel and
    initrd copied out of its /boot; with `btrfs`, the same tree as a btrfs
    root-btrfs.raw and the initrd made for it (suites with early_boot)."""

    def __init__(self, suite, directory, btrfs=False):
        self.suite = suite
        self.dir = directory
        self.root = os.path.join(directory, "root-btrfs.raw" if btrfs else "root.raw")
        self.kernel = os.path.join(directory, "vmlinuz")
        self.initrd = os.path.join(directory, "initrd-btrfs.img" if btrfs else "initrd.img")
        self.btrfs = btrfs
        with open(os.path.join(directory, "kernel-release")) as f:
            self.kernel_release = f.read().strip()

    def as_btrfs(self):
        return Image(self.suite, self.dir, btrfs=True)


def guest_image(suite):
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite}; known: {', '.join(SUITES)}")
    spec = SUITES[suite]
    dist = spec["dist"]

    def build(work):
        rootfs = os.path.join(work, "rootfs")
        hook = os.path.join(work, "customize.sh")
        with open(hook, "w") as f:
            f.write(GUEST_CUSTOMIZE.replace("__LABEL__", ROOT_LABEL))
        os.chmod(hook, 0o755)
        extra = (WRITER_PACKAGES if spec.get("writers") else []) + (MEASURE_PACKAGES if spec.get("measure") else [])
        extra += [p for p in EARLY_BOOT_PACKAGES if spec.get("early_boot") and p not in extra]
        extra += CLOUD_INIT_PACKAGES if spec.get("cloud_init") else []
        cmd = ["mmdebstrap", "--quiet", "--variant=minbase", "--components=main",
               "--include=" + ",".join(GUEST_PACKAGES + extra), NO_INITRAMFS_DURING_INSTALL]
        if spec.get("backports_kernel"):
            # The suite's own kernel stays beside it; the newest one boots.
            cmd += [BACKPORTS_KERNEL_HOOK.replace("__DIST__", dist)]
        if spec.get("writers"):
            cmd += ["--customize-hook=" + WRITERS_OFF]
        if spec.get("cloud_init"):
            cmd += ["--customize-hook=" + CLOUD_INIT_OFF]
        cmd += ["--customize-hook=" + hook]
        if spec.get("early_boot"):
            btrfs_hook = os.path.join(work, "btrfs-initrd.sh")
            with open(btrfs_hook, "w") as f:
                f.write(EARLY_BOOT_INITRD)
            os.chmod(btrfs_hook, 0o755)
            cmd += ["--customize-hook=" + btrfs_hook]
        cmd += [dist, rootfs, f"deb {MIRROR} {dist} main"]
        if spec.get("backports_kernel"):
            cmd += [f"deb {MIRROR} {dist}-backports main"]
        _run(cmd)
        boot = os.path.join(rootfs, "boot")
        vmlinuz = max((f for f in os.listdir(boot) if f.startswith("vmlinuz-")),
                      key=lambda f: _release_key(f[len("vmlinuz-"):]))
        release = vmlinuz[len("vmlinuz-"):]
        shutil.copy(os.path.join(boot, vmlinuz), os.path.join(work, "vmlinuz"))
        shutil.copy(os.path.join(boot, "initrd.img-" + release), os.path.join(work, "initrd.img"))
        with open(os.path.join(work, "kernel-release"), "w") as f:
            f.write(release + "\n")
        if spec.get("early_boot"):
            shutil.move(os.path.join(boot, "initrd-btrfs.img"), os.path.join(work, "initrd-btrfs.img"))
        # ext4 straight from the directory: no loop device, no mount.
        _run(["mkfs.ext4", "-q", "-F", "-L", ROOT_LABEL, "-d", rootfs, os.path.join(work, "root.raw"), "3G"])
        if spec.get("early_boot"):
            # The same tree as btrfs, mounted by label, btrfs in its initramfs.
            with open(os.path.join(rootfs, "etc/fstab"), "w") as f:
                f.write(f"LABEL={ROOT_LABEL} / btrfs defaults 0 0\n")
            with open(os.path.join(rootfs, "etc/initramfs-tools/modules"), "a") as f:
                f.write("btrfs\n")
            btrfs_raw = os.path.join(work, "root-btrfs.raw")
            with open(btrfs_raw, "wb") as f:
                f.truncate(3 << 30)
            _run(["mkfs.btrfs", "-q", "-f", "-L", ROOT_LABEL, "--rootdir", rootfs, btrfs_raw])
        shutil.rmtree(rootfs)

    parts = [RECIPE_VERSION, suite, MIRROR, GUEST_PACKAGES, GUEST_CUSTOMIZE, NO_INITRAMFS_DURING_INSTALL,
             BACKPORTS_KERNEL_HOOK if spec.get("backports_kernel") else ""]
    if spec.get("writers"):  # only here, so that the other suites' images keep their keys
        parts.append([WRITER_PACKAGES, WRITERS_OFF])
    if spec.get("measure"):
        parts.append(MEASURE_PACKAGES)
    if spec.get("early_boot"):
        parts.append([EARLY_BOOT_PACKAGES, EARLY_BOOT_INITRD, "btrfs root 1"])
    if spec.get("cloud_init"):
        parts.append([CLOUD_INIT_PACKAGES, CLOUD_INIT_OFF])
    key = _key(*parts)
    return Image(suite, cache_entry("image", suite, key, f"the guest image (mmdebstrap from {MIRROR})", build))


def _prune(prefix, keep):
    """Removes older cache entries of the same kind: keys change when the
    recipe does, and images are large. Only PREFIX followed by a key
    counts: image-trixie- must not take image-trixie-bpo-KEY with it."""
    for name in os.listdir(CACHE):
        path = os.path.join(CACHE, name)
        if (name.startswith(prefix) and re.fullmatch(r"[0-9a-f]{16}", name[len(prefix):]) and path != keep
                and os.path.exists(os.path.join(path, "done"))):
            shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    for s in sys.argv[1:]:
        img = guest_image(s)
        print(s, img.dir, img.kernel_release)
