#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the Debian package the way Debian does: dpkg-buildpackage (debhelper,
# debian/) in a clean chroot of the given suite, made with mmdebstrap and
# cached in /var/cache/blkpolicy-vm; lintian must be clean. The .deb (and a
# local apt repository with every package it depends on) lands in build-deb/.
#
#   scripts/build-deb.sh            # for this machine's Debian release
#   scripts/build-deb.sh trixie     # for Debian 13
#
# Without a chroot: `apt-get build-dep ./ && dpkg-buildpackage -us -uc -b`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
suite=${1:-$(. /etc/os-release && echo "$VERSION_CODENAME")}
out=$(/usr/bin/python3 - "$suite" <<'PY'
import sys
sys.path.insert(0, "tests/vm")
import package
p = package.build_package(sys.argv[1])
print(p.dir)
PY
)
rm -rf build-deb && mkdir -p build-deb
cp "$out"/*.deb "$out"/lintian.txt build-deb/
cp -r "$out"/repo build-deb/repo
echo "== $(ls build-deb/blkpolicy_*.deb) (lintian: build-deb/lintian.txt)"
dpkg-deb -f build-deb/blkpolicy_*_amd64.deb Package Version Depends
