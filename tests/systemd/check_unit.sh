#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The installed unit and catalog as systemd itself reads them:
# - systemd-analyze verify on the generated unit (ExecStart pointed at the
#   binary just built, since nothing is installed yet) must print nothing;
# - the catalog compiles with journalctl --update-catalog and lists one entry
#   for every MESSAGE_ID the binary uses (taken from the source, not copied).
set -euo pipefail
build_dir=$1
src_dir=$2
work=$(mktemp -d /tmp/blkpolicy-unit.XXXXXX)
trap 'rm -rf "$work"' EXIT

sed -e "s|^ExecStart=[^ ]*/blkpolicy |ExecStart=$build_dir/blkpolicy |" \
    -e "s|^ExecReload=[^ ]*/blkpolicy |ExecReload=$build_dir/blkpolicy |" \
    "$build_dir/blkpolicy.service" > "$work/blkpolicy.service"
# --man=no: the man pages are not installed here; the guest tests
# (tests/vm/) verify the installed unit, man pages included.
out=$(systemd-analyze verify --man=no "$work/blkpolicy.service" 2>&1) || { echo "$out"; exit 1; }
if [[ -n "$out" ]]; then echo "systemd-analyze verify is not clean:"; echo "$out"; exit 1; fi
grep -q '^Type=notify$' "$work/blkpolicy.service"
grep -q '^ExecReload=.*/blkpolicy reload --pid \$MAINPID$' "$work/blkpolicy.service"
# Exit 2 (usage) and 3 (invalid policy) are not retried: no restart loop.
grep -q '^RestartPreventExitStatus=2 3$' "$work/blkpolicy.service"
# No sandboxing option that orders the unit after local-fs.target (it runs
# before local-fs-pre.target: systemd would break the cycle at boot).
if grep -E '^(PrivateTmp|JoinsNamespaceOf)=' "$work/blkpolicy.service"; then
    echo "an option that needs the local filesystems; the unit starts before them"; exit 1
fi
# Every hardening directive has its own comment on the line above.
awk '/^# --- Hardening ---/ {h = 1}
     /^\[Install\]/ {h = 0}
     h && /^[A-Za-z]/ && prev !~ /^#/ {print "hardening line without a comment: " $0; bad = 1}
     {prev = $0}
     END {exit bad}' "$work/blkpolicy.service"

# The exposure score recorded in systemd/SECURITY.md must not get worse.
systemd-analyze security --offline=true --threshold=18 "$work/blkpolicy.service" >/dev/null || {
    systemd-analyze security --offline=true "$work/blkpolicy.service" | tail -20
    echo "exposure above 1.8, the score recorded in systemd/SECURITY.md"
    exit 1
}

mkdir -p "$work/root/usr/lib/systemd/catalog"
cp "$src_dir/systemd/blkpolicy.catalog" "$work/root/usr/lib/systemd/catalog/"
journalctl --root="$work/root" --update-catalog
listed=$(journalctl --root="$work/root" --list-catalog)
ids=$(grep -o '"[0-9a-f]\{32\}"' "$src_dir/systemd/alerts.cpp" | tr -d '"')
[[ $(echo "$ids" | wc -l) -eq 8 ]] || { echo "expected 8 MESSAGE_IDs (one per AlertKind) in systemd/alerts.cpp"; exit 1; }
for id in $ids; do
    grep -q "^$id blkpolicy: " <<<"$listed" || { echo "MESSAGE_ID $id has no catalog entry"; exit 1; }
done
echo "unit verifies clean; catalog has all $(echo "$ids" | wc -l) MESSAGE_IDs"
