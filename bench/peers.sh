#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# blkpolicy beside TuneD, a udev rule and the bare uevent listener
# (bench/uevent_floor.c), in Debian guests under qemu, same boot, same kinds
# of disks, same values (tests/vm/test_peers.py says what each row is).
# Root; not part of the test command. Prints one table per guest kernel and
# keeps the figures in build/peers-results.json.
#
#   bench/peers.sh                       # Debian 13 (6.12) and Debian 13 with the 7.x kernel
#   bench/peers.sh --suite bookworm      # another guest
# BLKPOLICY_PEERS_BURST (default 64) and BLKPOLICY_PEERS_IDLE_SECONDS
# (default 60) make a shorter run for trying it out; BLKPOLICY_PEERS_TOOLS
# (blkpolicy tuned udev floor) and BLKPOLICY_PEERS_ROWS (hotplug burst idle
# boot root) run some of it; BLKPOLICY_PEERS_ROOT_BOOTS (default 5) boots
# each root-disk kind that many times (the figure is their median), and
# BLKPOLICY_PEERS_ROOT_KINDS (unit hook udev: the package's unit alone, its
# initramfs hook, a udev rule) runs some of them:
#   BLKPOLICY_PEERS_TOOLS="blkpolicy floor" BLKPOLICY_PEERS_ROWS=burst bench/peers.sh
#   BLKPOLICY_PEERS_TOOLS=blkpolicy BLKPOLICY_PEERS_ROWS=root bench/peers.sh --suite trixie
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
args=("$@")
if [[ ${#args[@]} -eq 0 ]]; then args=(--suite trixie --suite trixie-bpo); fi
runs=${BLKPOLICY_VM_RUNS:-/var/tmp/blkpolicy-peers-runs}
rc=0
BLKPOLICY_VM_RUNS=$runs /usr/bin/python3 tests/vm/run.py --only peers --keep "${args[@]}" || rc=$?
results=$(ls -td "$runs"/*/ | head -n1)results.json
mkdir -p build
cp "$results" build/peers-results.json
/usr/bin/python3 - build/peers-results.json <<'PY'
import collections, json, re, sys
figures = json.load(open(sys.argv[1]))["figures"]
tools = ["blkpolicy", "tuned", "udev", "floor"]
tables = collections.defaultdict(dict)  # suite -> row -> tool -> value
kernels = {}
for f in figures:
    if f["name"] == "guest kernel":
        kernels[f["suite"]] = f["value"]
    m = re.fullmatch(r"peers (.*) \(([^()]*)\)", f["name"])
    if not m:
        continue
    row, tool = m.groups()
    tables[f["suite"]].setdefault(row + (f" ({f['unit']})" if f["unit"] else ""), {})[tool] = str(f["value"])
for suite, rows in tables.items():
    cols = [t for t in tools if any(t in v for v in rows.values())]
    extra = sorted({k for v in rows.values() for k in v if k not in tools})
    print(f"\n{suite}, kernel {kernels.get(suite, '?')}\n")
    print("| row | " + " | ".join(cols + extra) + " |")
    print("|---" * (1 + len(cols) + len(extra)) + "|")
    for row, v in rows.items():
        print(f"| {row} | " + " | ".join(v.get(c, "") for c in cols + extra) + " |")
PY
echo "figures: build/peers-results.json; run directory kept: $(dirname "$results")"
exit "$rc"
