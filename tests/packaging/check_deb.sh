#!/usr/bin/env bash
# Builds the Debian package with CPack (a build configured for /usr), checks
# its dependencies, installs it with dpkg, runs the installed binary's check
# on the installed default policy, and purges it again, even on failure.
# Needs root; exits 77 (skipped) without it.
set -euo pipefail
src_dir=$1
build_dir=$2/deb-build
if [[ $(id -u) -ne 0 ]]; then
    echo "SKIPPED: installing a package needs root"
    exit 77
fi
status=$(dpkg-query -W -f='${Status}' blkpolicy 2>/dev/null || true)
if [[ $status == "install ok installed" ]]; then
    echo "a blkpolicy package is installed on this machine already; not touching it"
    exit 1
fi

cmake -S "$src_dir" -B "$build_dir" -DCMAKE_INSTALL_PREFIX=/usr -DBLKPOLICY_TESTS=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j"$(nproc)" >/dev/null
rm -f "$build_dir"/blkpolicy_*.deb
(cd "$build_dir" && cpack -G DEB >/dev/null)
deb=$(ls "$build_dir"/blkpolicy_*.deb)
echo "built $(basename "$deb")"

depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for lib in libc6 libstdc++6 libsystemd0 libudev1 libspdlog libtomlplusplus systemd; do
    grep -q "$lib" <<<"$depends" || { echo "Depends lacks $lib"; exit 1; }
done
contents=$(dpkg-deb -c "$deb")
grep -q './etc/blkpolicy/policy.toml' <<<"$contents" || { echo "the package lacks /etc/blkpolicy/policy.toml"; exit 1; }
conffiles=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)
grep -qx /etc/blkpolicy/policy.toml <<<"$conffiles" || { echo "policy.toml is not a conffile"; exit 1; }

trap 'dpkg --purge blkpolicy >/dev/null 2>&1 || true' EXIT
dpkg -i "$deb" >/dev/null
/usr/sbin/blkpolicy --version
/usr/sbin/blkpolicy check                  # the installed default policy, from its default place
unit_dir=$(pkg-config --variable=systemdsystemunitdir systemd)
grep -qx 'ExecStart=/usr/sbin/blkpolicy run' "$unit_dir/blkpolicy.service"
test -f /usr/share/man/man8/blkpolicy.8
test -f /usr/share/man/man5/blkpolicy.toml.5
test -f "$(pkg-config --variable=catalogdir systemd)/blkpolicy.catalog"
test -f /usr/share/bash-completion/completions/blkpolicy

dpkg --purge blkpolicy >/dev/null
trap - EXIT
test ! -e /usr/sbin/blkpolicy
test ! -e /etc/blkpolicy/policy.toml
echo "installed, checked and purged"
