# SPDX-License-Identifier: MIT
"""The blkpolicy Debian package, built the way Debian builds packages.

dpkg-buildpackage runs in a clean chroot of the guest's own suite (a fresh
copy of a cached mmdebstrap tarball holding that suite's build dependencies,
installed by `apt-get build-dep` from debian/control), so a bookworm guest
gets a package linked against bookworm's libraries and a trixie guest one
for trixie. lintian checks the result; any error or warning fails the build.

Beside the package, a local apt repository holds every package it depends
on (the closure of its Depends, downloaded from the suite), so that
installing it in a guest with no network resolves its dependencies the way
apt would from a mirror; and REPO_EXTRA, what the tests install beside it
(with its own closure).
"""

import glob
import re
import hashlib
import os
import shutil
import subprocess
import tempfile
import time

import images
from images import MIRROR, log

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


# Not part of what the package build reads (it configures with
# BLKPOLICY_TESTS=OFF and builds neither benchmarks nor fuzzers): left out of
# the copy and the cache key, so that editing a test does not rebuild it.
NOT_BUILT = ("tests/", "bench/", "fuzz/")


def _source_files():
    out = subprocess.run(["git", "-C", SOURCE_DIR, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         check=True, capture_output=True).stdout.decode()
    return sorted(f for f in out.split("\0")
                  if f and not f.startswith(NOT_BUILT) and os.path.isfile(os.path.join(SOURCE_DIR, f)))


def _source_key(files):
    h = hashlib.sha256()
    for f in files:
        h.update(f.encode() + b"\0")
        with open(os.path.join(SOURCE_DIR, f), "rb") as fh:
            h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()[:16]


# Installed in the build chroot beside the build dependencies: lintian for
# the package's check, apt-utils and dpkg-dev for the local repository, and
# ccache (below).
CHROOT_EXTRA = ["lintian", "apt-utils", "dpkg-dev", "ccache"]


def _ccache_dir(suite):
    """The package build's compiler cache, one per suite (each suite's
    compiler): a commit that changed a few files compiles those in the
    package build, as scripts/build.sh does on the host. Kept beside the
    cache entries, never pruned with them; ccache bounds its size."""
    path = os.path.join(images.CACHE, f"ccache-{suite}")
    os.makedirs(path, exist_ok=True)
    return path


def _build_chroot(suite):
    """Cached tarball of SUITE's buildd chroot with blkpolicy's build
    dependencies (from debian/control) and CHROOT_EXTRA."""
    control = open(os.path.join(SOURCE_DIR, "debian", "control")).read()

    def build(work):
        ctl = os.path.join(work, "control-src")
        os.makedirs(os.path.join(ctl, "debian"))
        for f in ("control", "changelog"):
            shutil.copy(os.path.join(SOURCE_DIR, "debian", f), os.path.join(ctl, "debian", f))
        # apt lists are kept: the repository for the guests is downloaded
        # from inside a copy of this chroot.
        subprocess.run(["mmdebstrap", "--quiet", "--variant=buildd", "--components=main",
                        "--include=" + ",".join(CHROOT_EXTRA),
                        "--skip=cleanup/apt/lists",
                        '--customize-hook=mkdir -p "$1/tmp/control-src"',
                        f"--customize-hook=copy-in {ctl}/debian /tmp/control-src",
                        '--customize-hook=chroot "$1" sh -c "cd /tmp/control-src && apt-get -y -q build-dep ./"',
                        '--customize-hook=rm -rf "$1/tmp/control-src"',
                        suite, os.path.join(work, "chroot.tar"), MIRROR], check=True)
        shutil.rmtree(ctl)

    key = images._key(images.RECIPE_VERSION, suite, MIRROR, control, CHROOT_EXTRA)
    entry = images.cache_entry("chroot", suite, key, "the build chroot (mmdebstrap --variant=buildd + build-dep)",
                               build)
    return os.path.join(entry, "chroot.tar")


class Chroot:
    """A fresh copy of a chroot tarball with /proc mounted, and BINDS
    ({path in the chroot: host directory}) bound; removed again (mounts
    first) on exit."""

    def __init__(self, tarball, binds=None):
        self.tarball = tarball
        self.binds = binds or {}
        self.bound = []

    def __enter__(self):
        self.work = tempfile.mkdtemp(prefix="blkpolicy-chroot-", dir="/var/tmp")
        self.root = os.path.join(self.work, "root")
        os.makedirs(self.root)
        subprocess.run(["tar", "-C", self.root, "-xf", self.tarball], check=True)
        subprocess.run(["mount", "-t", "proc", "proc", os.path.join(self.root, "proc")], check=True)
        self.mounted = True
        for inside, host in self.binds.items():
            target = os.path.join(self.root, inside.lstrip("/"))
            os.makedirs(target, exist_ok=True)
            subprocess.run(["mount", "--bind", host, target], check=True)
            self.bound.append(target)
        shutil.copy("/etc/resolv.conf", os.path.join(self.root, "etc", "resolv.conf"))
        return self

    def run(self, cmd, env=None, **kw):
        base = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8", "HOME": "/root",
                "DEBIAN_FRONTEND": "noninteractive"}
        return subprocess.run(["chroot", self.root, "sh", "-c", cmd], env={**base, **(env or {})}, **kw)

    def __exit__(self, *exc):
        # The binds first: removing the tree must never reach into them.
        for target in reversed(self.bound):
            subprocess.run(["umount", target], check=False)
        if self.mounted:
            subprocess.run(["umount", "-l", os.path.join(self.root, "proc")], check=False)
        if any(os.path.ismount(t) for t in self.bound):
            raise RuntimeError(f"{self.work}: a bind mount is still in place; the tree is left as it is")
        shutil.rmtree(self.work, ignore_errors=True)


class Package:
    def __init__(self, suite, directory):
        self.suite = suite
        self.dir = directory
        self.deb = sorted(glob.glob(os.path.join(directory, "blkpolicy_*.deb")))[0]
        self.repo = os.path.join(directory, "repo")
        self.version = subprocess.run(["dpkg-deb", "-f", self.deb, "Version"], check=True,
                                      capture_output=True, text=True).stdout.strip()
        self.depends = subprocess.run(["dpkg-deb", "-f", self.deb, "Depends"], check=True,
                                      capture_output=True, text=True).stdout.strip()
        with open(os.path.join(directory, "lintian.txt")) as f:
            self.lintian = f.read()
        with open(os.path.join(directory, "build-seconds")) as f:
            self.build_seconds = float(f.read())
        # (direct hits, preprocessed hits, misses) of the build's compiler
        # cache; None for an entry made before it had one.
        self.ccache = None
        try:
            with open(os.path.join(directory, "ccache")) as f:
                self.ccache = tuple(int(x) for x in f.read().split())
        except (OSError, ValueError):
            pass


# dracut, for the boot group's dracut-built initramfs (tests/vm/test_boot.py):
# installed in place of initramfs-tools, without its Recommends.
REPO_EXTRA = ["dracut"]


def _closure_script(deb_in_chroot):
    # apt's own resolver, against the suite's lists, with an empty dpkg
    # status: as if nothing were installed, it downloads every package the
    # .deb needs, recursively, virtual names (libspdlog1.10-fmt9) resolved
    # to the packages that provide them.
    return f"""set -e
mkdir -p /repo/partial /tmp/apt-empty
: > /tmp/apt-empty/status
apt-get -q -y -o Dir::State::status=/tmp/apt-empty/status -o Dir::Cache::archives=/repo \\
    --download-only install {deb_in_chroot} >/dev/null
apt-get -q -y -o Dir::State::status=/tmp/apt-empty/status -o Dir::Cache::archives=/repo \\
    --download-only --no-install-recommends install {" ".join(REPO_EXTRA)} >/dev/null
rm -rf /repo/partial /repo/lock
cp {deb_in_chroot} /repo/
cd /repo && dpkg-scanpackages --multiversion . > Packages 2>/dev/null
"""


def build_package(suite):
    """Builds (or takes from the cache) the package for SUITE; returns a
    Package with its lintian report and a local repository."""
    files = _source_files()
    tarball = _build_chroot(suite)

    def build(work):
        t0 = time.monotonic()
        with Chroot(tarball, binds={"/ccache": _ccache_dir(suite)}) as ch:
            src = os.path.join(ch.root, "build", "blkpolicy")
            for f in files:
                dst = os.path.join(src, f)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(os.path.join(SOURCE_DIR, f), dst)
            log(f"{suite}: dpkg-buildpackage in a clean {suite} chroot")
            # Through ccache (CMake takes the launcher from the environment
            # at its first configure); the build path is the same every
            # time, so its objects are found again.
            cc_env = {"CCACHE_DIR": "/ccache", "CCACHE_MAXSIZE": "2G", "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
                      "CMAKE_C_COMPILER_LAUNCHER": "ccache"}
            ch.run("ccache -z >/dev/null", env=cc_env)
            with open(os.path.join(work, "build.log"), "w") as blog:
                r = ch.run("cd /build/blkpolicy && dpkg-buildpackage -us -uc -b -j2", env=cc_env, stdout=blog,
                           stderr=subprocess.STDOUT)
            stats = ch.run("ccache --print-stats", env=cc_env, capture_output=True, text=True).stdout
            counts = dict(ln.split("\t", 1) for ln in stats.splitlines() if "\t" in ln)
            with open(os.path.join(work, "ccache"), "w") as f:
                f.write(f"{counts.get('direct_cache_hit', '0').strip()} {counts.get('preprocessed_cache_hit', '0').strip()} "
                        f"{counts.get('cache_miss', '0').strip()}\n")
            if r.returncode != 0:
                with open(os.path.join(work, "build.log")) as f:
                    lines = f.readlines()
                errors = [ln for ln in lines if re.search(r"error|Error at", ln)]
                tail = "".join(errors[:20]) + "--- last lines:\n" + "".join(lines[-25:])
                raise RuntimeError(f"{suite}: dpkg-buildpackage failed (exit {r.returncode}):\n{tail}")
            debs = glob.glob(os.path.join(ch.root, "build", "blkpolicy_*.deb"))
            changes = glob.glob(os.path.join(ch.root, "build", "blkpolicy_*.changes"))
            # lintian on the .changes: the binary package and its build. Errors
            # and warnings fail; info tags are kept in lintian.txt. (Debian
            # 12's lintian says, as info, that the unit has no init.d script;
            # Debian 13's no longer knows that tag, so no override is
            # shipped for it.)
            # As nobody: lintian warns when it runs as root.
            lint = ch.run("cd /build && setpriv --reuid=nobody --regid=nogroup --clear-groups lintian --fail-on error,warning --display-info --pedantic "
                          f"{os.path.basename(changes[0])}", capture_output=True, text=True)
            with open(os.path.join(work, "lintian.txt"), "w") as f:
                f.write(lint.stdout + lint.stderr)
            if lint.returncode != 0:
                raise RuntimeError(f"{suite}: lintian is not clean:\n{lint.stdout}{lint.stderr}")
            for d in debs:
                shutil.copy(d, work)
            deb = os.path.basename(sorted(d for d in debs if "dbgsym" not in d)[0])
            r = ch.run(_closure_script("/build/" + deb), capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"{suite}: downloading the dependency closure failed:\n{r.stdout}{r.stderr}")
            shutil.copytree(os.path.join(ch.root, "repo"), os.path.join(work, "repo"))
        with open(os.path.join(work, "build-seconds"), "w") as f:
            f.write(f"{time.monotonic() - t0:.1f}\n")

    entry = images.cache_entry("deb", suite, images._key(_source_key(files), REPO_EXTRA), "the package (dpkg-buildpackage in a clean chroot)",
                               build)
    return Package(suite, entry)


def upgraded_copy(pkg, out_dir, suffix="+vmtest1"):
    """The same package with a higher version, for the upgrade test: the
    maintainer scripts, conffile and unit handling are what an upgrade
    exercises, and they are identical in a rebuild."""
    unpacked = tempfile.mkdtemp(prefix="deb-upgrade-", dir="/var/tmp")
    try:
        subprocess.run(["dpkg-deb", "-R", pkg.deb, unpacked], check=True)
        control = os.path.join(unpacked, "DEBIAN", "control")
        text = open(control).read().replace(f"Version: {pkg.version}\n", f"Version: {pkg.version}{suffix}\n")
        open(control, "w").write(text)
        out = os.path.join(out_dir, f"blkpolicy_{pkg.version}{suffix}_amd64.deb")
        subprocess.run(["dpkg-deb", "--root-owner-group", "-b", unpacked, out], check=True, capture_output=True)
        return out
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)


if __name__ == "__main__":
    import sys
    for s in sys.argv[1:]:
        p = build_package(s)
        print(s, p.deb, p.version, p.depends, p.build_seconds)
        print(p.lintian)
