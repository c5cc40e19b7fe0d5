#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `cmake --install` into a scratch DESTDIR puts every file where a distro
# expects it, and the installed binary accepts the installed default policy.
set -euo pipefail
build_dir=$1
dest=$(mktemp -d /tmp/blkpolicy-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT
DESTDIR=$dest cmake --install "$build_dir" >/dev/null
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build_dir/CMakeCache.txt")
prefix=${prefix#/}
unit_dir=$(pkg-config --variable=systemdsystemunitdir systemd)
catalog_dir=$(pkg-config --variable=catalogdir systemd)
for f in "$prefix/sbin/blkpolicy" "${unit_dir#/}/blkpolicy.service" "${catalog_dir#/}/blkpolicy.catalog" \
         etc/blkpolicy/policy.toml "$prefix/share/doc/blkpolicy/examples/cloud-vm.toml" \
         "$prefix/share/doc/blkpolicy/README.md" "$prefix/share/doc/blkpolicy/NEWS.md" "$prefix/share/doc/blkpolicy/prometheus.md" \
         "$prefix/share/blkpolicy/prometheus/blkpolicy-rules.yml" \
         "$prefix/share/blkpolicy/prometheus/blkpolicy-rules.test.yml" \
         "$prefix/share/initramfs-tools/hooks/blkpolicy" "$prefix/share/initramfs-tools/scripts/init-premount/blkpolicy" \
         "$prefix/share/blkpolicy/initramfs/60-blkpolicy-early.rules" \
         "$prefix/lib/dracut/modules.d/90blkpolicy/module-setup.sh" \
         "$prefix/lib/dracut/modules.d/90blkpolicy/blkpolicy-boot.sh" "$prefix/lib/blkpolicy/early-boot"; do
    [[ -e "$dest/$f" ]] || { echo "not installed: /$f"; find "$dest" -type f; exit 1; }
done
grep -q "^ExecStart=/$prefix/sbin/blkpolicy run\$" "$dest/${unit_dir#/}/blkpolicy.service"
# The early-boot scripts are executable, parse as sh (bash for dracut's),
# and the initramfs's udev rule runs the binary where it is installed.
for f in "$prefix/share/initramfs-tools/hooks/blkpolicy" "$prefix/share/initramfs-tools/scripts/init-premount/blkpolicy" \
         "$prefix/lib/dracut/modules.d/90blkpolicy/blkpolicy-boot.sh" "$prefix/lib/blkpolicy/early-boot"; do
    [[ -x "$dest/$f" ]] || { echo "not executable: /$f"; exit 1; }
    sh -n "$dest/$f"
done
bash -n "$dest/$prefix/lib/dracut/modules.d/90blkpolicy/module-setup.sh"
grep -q 'RUN+="/usr/lib/blkpolicy/early-boot disk $kernel"' "$dest/$prefix/share/blkpolicy/initramfs/60-blkpolicy-early.rules"
"$dest/$prefix/sbin/blkpolicy" check --policy "$dest/etc/blkpolicy/policy.toml"
# The installed rules pass their own unit tests where they were installed.
if command -v promtool >/dev/null; then
    (cd "$dest/$prefix/share/blkpolicy/prometheus" && promtool test rules blkpolicy-rules.test.yml >/dev/null)
fi
echo "installed files in place; the installed default policy checks"
