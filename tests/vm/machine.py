# SPDX-License-Identifier: MIT
"""The guest machine the tests boot: its disks, the policy installed on it,
and what that policy must leave on each disk. Disks are found by the serial
given to qemu (sdX names change between boots)."""

import json
import shlex
import time

from guest import Disk, GuestError

SCSI_CONTROLLER = "virtio-scsi-pci,id=scsi0"
# Free PCIe slots for hot-added virtio-blk and NVMe devices (q35's root bus
# takes no hotplug).
ROOT_PORTS = [f"pcie-root-port,id=rp{i},chassis={i},slot={i}" for i in range(1, 4)]
# The NVMe disk's own root port: QEMU cannot save an nvme controller's state,
# so a guest started from a snapshot gets it hot-added there (guest.Disk),
# and a guest that boots finds it there from the start: the same place in
# the guest's PCI tree either way.
NVME_PORT = "pcie-root-port,id=rp-nvme,chassis=8,slot=8"
CONTROLLERS = [SCSI_CONTROLLER] + ROOT_PORTS + [NVME_PORT]

# serial -> qemu device. The root disk (virtio-blk, serial bproot) is added
# by guest.py itself.
DISKS = [
    Disk("bp-virtio1", "256M", "virtio-blk-pci"),
    Disk("bp-scsi-hdd", "256M", "scsi-hd", bus="scsi0.0", vendor="SEAGATE", product="ST4000NM0035", wwn="0x5000c500a1b2c3d4",
         rotation_rate="7200"),
    Disk("bp-scsi-ssd", "256M", "scsi-hd", bus="scsi0.0", vendor="SAMSUNG", product="MZ7LH960HAJR",
         rotation_rate="1"),
    # A cloud VM's disk: QEMU HARDDISK, no rotation rate given, so it claims
    # to spin; the shipped cloud-vm policy's case.
    Disk("bp-scsi-qemu", "256M", "scsi-hd", bus="scsi0.0"),
    Disk("bp-nvme1", "256M", "nvme", bus="rp-nvme"),
    Disk("bp-sata1", "256M", "ide-hd", bus="ide.0", model="WDC WD40EFRX-68N32N0", rotation_rate="5400"),
    # Members of the stacks the device tests build: an md raid1 on two
    # virtio disks, an LVM volume group on a SCSI disk, dm-crypt on virtio.
    Disk("bp-md-a", "128M", "virtio-blk-pci"),
    Disk("bp-md-b", "128M", "virtio-blk-pci"),
    Disk("bp-lvm", "256M", "scsi-hd", bus="scsi0.0", vendor="QEMU", product="LVM PV DISK"),
    Disk("bp-crypt", "128M", "virtio-blk-pci"),
]

POLICY = """\
# The policy the guest tests install in /etc/blkpolicy/policy.toml: one rule
# per device class, keyed on what the disk says it is.
[daemon]
mode = "enforce"
verify_interval = "5s"

[[rule]]
name = "virtio disks do not spin"
[rule.match]
driver = "virtio_blk"
rotational = true
[rule.set]
rotational = 0
wbt_lat_usec = 2000
read_ahead_kb = 256

[[rule]]
name = "virtual SCSI disks do not spin"
[rule.match]
driver = "virtio_scsi"
model = "QEMU HARDDISK"
rotational = true
[rule.set]
rotational = 0
wbt_lat_usec = 2000
read_ahead_kb = 128

[[rule]]
name = "archive disk on bfq"
[rule.match]
vendor = "SEAGATE"
model = "ST4000NM*"
[rule.set]
scheduler = "bfq"
nr_requests = 64
wbt_lat_usec = 75000
read_ahead_kb = 1024

[[rule]]
name = "solid SCSI"
[rule.match]
driver = "sd"
rotational = false
[rule.set]
scheduler = ["kyber", "mq-deadline"]
read_ahead_kb = 64

[[rule]]
name = "nvme"
[rule.match]
driver = "nvme"
[rule.set]
nr_requests = 64
read_ahead_kb = 512

[[rule]]
name = "sata"
[rule.match]
model = "WDC WD40EFRX*"
[rule.set]
scheduler = "mq-deadline"
iosched.fifo_batch = 32
read_ahead_kb = 2048
"""

# What POLICY leaves on each disk, as read from sysfs (queue/ relative).
EXPECTED = {
    "bproot": {"rotational": "0", "wbt_lat_usec": "2000", "read_ahead_kb": "256"},
    "bp-virtio1": {"rotational": "0", "wbt_lat_usec": "2000", "read_ahead_kb": "256"},
    "bp-scsi-hdd": {"scheduler": "bfq", "nr_requests": "64", "wbt_lat_usec": "75000", "read_ahead_kb": "1024"},
    "bp-scsi-ssd": {"scheduler": "kyber", "read_ahead_kb": "64"},
    "bp-scsi-qemu": {"rotational": "0", "wbt_lat_usec": "2000", "read_ahead_kb": "128"},
    "bp-nvme1": {"nr_requests": "64", "read_ahead_kb": "512"},
    "bp-sata1": {"scheduler": "mq-deadline", "iosched/fifo_batch": "32", "read_ahead_kb": "2048"},
}

def install_package(g, timeout=300, if_missing=False):
    """blkpolicy from the share's local repository (the package under test
    and what it depends on); IF_MISSING: unless it is installed already."""
    g.write_file("/etc/apt/sources.list.d/blkpolicy-test.list", "deb [trusted=yes] file:/mnt/share/repo ./\n")
    install = "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q blkpolicy >/dev/null 2>&1"
    if if_missing:
        install = f"dpkg-query -W -f '${{Status}}' blkpolicy 2>/dev/null | grep -q ' installed' || ({install})"
    g.sh(install, timeout=timeout)


def quick_triggers(g):
    """Every guest's setup for the installs and purges of its group (and
    of the saved guest with the package installed): the initramfs is not made again (initramfs_updates), nor man-db's
    index (its trigger runs mandb on every package carrying man pages unless
    /var/lib/man-db/auto-update exists; man(1), which systemd-analyze verify
    runs, reads the pages without it)."""
    initramfs_updates(g, False)
    g.sh("rm -f /var/lib/man-db/auto-update")


def initramfs_updates(g, on):
    """Whether update-initramfs -u (the trigger every install, upgrade and
    purge of the package pulls, its hook being in the initramfs) makes the
    initramfs again: update_initramfs in update-initramfs.conf. It took
    158 s a time in Debian 13's guest (a package build beside it), and the
    harness boots its guests with the host's copy of the image's initramfs,
    never the one in the guest's /boot: only the groups that copy that one
    out (boot, peers) turn it on."""
    g.sh(f"sed -i 's/^update_initramfs=.*/update_initramfs={'yes' if on else 'no'}/' "
         "/etc/initramfs-tools/update-initramfs.conf")


def disks_by_serial(guest):
    """{serial: kernel name} of every disk udev knows, serial as udev says
    it: SCSI's unit serial (VPD 0x80; ID_SERIAL_SHORT is the WWN when the
    disk has one), else ID_SERIAL_SHORT, else ID_SERIAL. One read of
    udev's database (a udevadm per disk cost 3 s of the guest's CPU under
    TCG for a dozen disks; this, a tenth of that)."""
    out = {}
    for block in guest.sh("udevadm info --export-db", retries=2).split("\n\n"):
        props = dict(line[3:].split("=", 1) for line in block.splitlines() if line.startswith("E: ") and "=" in line)
        if props.get("SUBSYSTEM") != "block" or props.get("DEVTYPE") != "disk" or "DEVNAME" not in props:
            continue
        serial = props.get("ID_SCSI_SERIAL") or props.get("ID_SERIAL_SHORT") or props.get("ID_SERIAL")
        if serial:
            out[serial] = props["DEVNAME"].rsplit("/", 1)[1]
    return out


def hot_add(g, node, device="scsi-hd", settle=True, **props):
    """Hot-adds a disk (qemu's null-co backend) and returns its name once
    the kernel shows it with its serial (and, with SETTLE, udev is done
    with it)."""
    if device == "scsi-hd":
        props.setdefault("bus", "scsi0.0")
    g.hotplug(node, device, **props)
    # The serial as the kernel shows it: SCSI's unit serial page, NVMe's
    # and virtio's serial attribute (udev need not run).
    # (One grep over every disk's serial files, binary VPD pages included.)
    find = (f"grep -alE '(^|[^a-z0-9-]){node}( |$)' /sys/block/*/device/vpd_pg80 /sys/block/*/device/serial "
            f"/sys/block/*/serial 2>/dev/null | head -n 1 | grep .")
    name = g.wait_for(find, timeout=60, what=f"hot-added disk {node}").strip().split("/")[3]
    if settle:
        g.sh("udevadm settle")
    return name


def wait_all_disks(g, timeout=120):
    """Until every disk of the machine is there and udev is done with it:
    SCSI and NVMe disks come from modules that probe late in the boot."""
    want = {d.node for d in DISKS} | {"bproot"}
    deadline = time.monotonic() + timeout
    while True:
        g.sh("udevadm settle")
        have = set(disks_by_serial(g))
        if want <= have:
            return
        if time.monotonic() > deadline:
            raise GuestError(f"disks missing after the boot: {sorted(want - have)}")
        time.sleep(2)


def read_queues(guest, wanted):
    """{name: {attr: value}} for queue/ATTR of each NAME in WANTED ({name:
    [attr...]}), in one command with no process per file (sh's own read:
    a fork costs tens of milliseconds of the guest's CPU under TCG); the
    scheduler as its active name."""
    lines = []
    for name, attrs in wanted.items():
        for a in attrs:
            path = shlex.quote(f"/sys/block/{name}/queue/{a}")
            lines.append(f"v=; read -r v 2>/dev/null < {path}; printf '%s\\t%s\\t%s\\n' {shlex.quote(name)} "
                         f"{shlex.quote(a)} \"$v\"")
    # A reply that lost its output is asked again by Guest.run (its end
    # mark); the shell prints a line per attribute even when a read fails.
    out = guest.sh("\n".join(lines), retries=2)
    got = {}
    for line in out.splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3:
            got.setdefault(parts[0], {})[parts[1]] = parts[2]
    result = {}
    for name, attrs in wanted.items():
        vals = got.get(name, {})
        missing = sorted(set(attrs) - set(vals))
        if missing:
            raise GuestError(f"reading {name}'s queue returned no line for {missing}: {out!r}")
        if "scheduler" in vals:
            v = vals["scheduler"]
            vals["scheduler"] = v[v.find("[") + 1:v.find("]")] if "[" in v else v
        result[name] = vals
    return result


def read_queue(guest, name, attrs):
    """{attr: value} for queue/ATTR of NAME; the scheduler as its active name."""
    return read_queues(guest, {name: attrs})[name]


# q NAME ATTR OP VALUE: whether /sys/block/NAME/queue/ATTR holds VALUE (OP
# "=" or "!="; "in" for the scheduler's active name), with sh's own read, [
# and case: a poll over many disks starts no process per file (a fork costs
# tens of milliseconds of the guest's CPU under TCG).
_Q_FUNCTION = ('q() { v=; read -r v 2>/dev/null < "/sys/block/$1/queue/$2" || return 1; '
               'case $3 in in) case "$v" in *"[$4]"*) return 0;; esac; return 1;; '
               '=) [ "$v" = "$4" ];; *) [ "$v" != "$4" ];; esac; }')


def queue_is(*conditions):
    """A shell condition, true when every (NAME, ATTR, OP, VALUE) holds on
    the guest's queues (OP: "=", "!=", or "in" for the active scheduler)."""
    return _Q_FUNCTION + "; " + " && ".join(f"q {shlex.quote(n)} {shlex.quote(a)} {op} {shlex.quote(str(v))}"
                                            for n, a, op, v in conditions)


def wbt_states(guest, names):
    """{name: debugfs rqos/wbt/enabled, or None}, debugfs mounted when needed."""
    reads = "".join(f"v=; read -r v 2>/dev/null < /sys/kernel/debug/block/{n}/rqos/wbt/enabled && "
                    f"echo {n} $v\n" for n in names)
    out = guest.sh("mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug\n" + reads +
                   "true", retries=2)
    found = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return {n: found.get(n) for n in names}


def wbt_enabled(guest, name):
    """debugfs rqos/wbt/enabled (mounting debugfs when needed), or None."""
    return wbt_states(guest, [name])[name]


def mismatches(guest, expected=None):
    """What differs from EXPECTED (or EXPECTED updated with EXPECTED_CHANGES)
    on the guest's disks, as readable lines."""
    bad = []
    names = disks_by_serial(guest)
    want_of = {}
    for serial, want in (expected or EXPECTED).items():
        if serial in names:
            want_of[names[serial]] = (serial, want)
        else:
            bad.append(f"{serial}: no such disk (disks: {names})")
    have_of = read_queues(guest, {name: list(want) for name, (_, want) in want_of.items()})
    wbt = wbt_states(guest, [n for n, (_, want) in want_of.items() if want.get("wbt_lat_usec", "0") != "0"])
    for name, (serial, want) in want_of.items():
        have = have_of[name]
        for attr, value in want.items():
            if have.get(attr) != value:
                bad.append(f"{serial} ({name}) {attr}: {have.get(attr)!r}, policy says {value!r}")
        state = wbt.get(name)
        if state is not None and state not in ("1", "2"):
            bad.append(f"{serial} ({name}) wbt: debugfs enabled={state} (off) while the policy wants "
                       f"{want['wbt_lat_usec']}")
    return bad


def journal(guest, args):
    """journalctl -o json entries as dicts."""
    out = guest.sh(f"journalctl --no-pager -o json {args}", retries=2)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def since(guest, cursor_, **fields):
    """Entries after CURSOR_ whose fields equal FIELDS. (journalctl 252
    returns nothing for --after-cursor combined with a match when the
    cursor's own entry does not match: the filtering is done here.)"""
    entries = journal(guest, f"--after-cursor={shlex.quote(cursor_)}") if cursor_ else journal(guest, "-b")
    return [e for e in entries if all(e.get(k) == v for k, v in fields.items())]


def wait_journal(guest, cursor_, timeout, what, **fields):
    """The first entry after CURSOR_ with FIELDS, waiting up to TIMEOUT s."""
    deadline = time.monotonic() + timeout
    while True:
        found = since(guest, cursor_, **fields)
        if found:
            return found
        if time.monotonic() > deadline:
            raise GuestError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(1)


def cursor(guest):
    """The journal's current end, to read only what comes after it: the
    last entry's cursor, else the one --show-cursor prints. Never empty,
    which since() would read as "the whole boot": once, in the clock-jump
    fault row, `journalctl -n 1 -o json` printed no entry, the cursor came
    back empty, and the check read every entry of the boot as new."""
    for attempt in range(5):
        out = guest.sh("journalctl --no-pager -n 0 --show-cursor -q; journalctl --no-pager -n 1 -o json",
                       retries=2)
        last = [line for line in out.splitlines() if line.startswith("{")]
        if last:
            return json.loads(last[-1])["__CURSOR"]
        shown = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("-- cursor:")]
        if shown:
            return shown[-1]
        time.sleep(0.5)
    raise GuestError(f"journalctl gave no cursor five times: {out!r}")


def unit_prop(guest, unit, prop):
    return guest.sh(f"systemctl show -P {prop} {unit}").strip()


# --- the service, as systemd and the journal see it ------------------------

SERVICE = "blkpolicy.service"


def installed_packages(guest):
    """The names of the packages installed in the guest (not those dpkg
    only remembers, removed with their configuration kept)."""
    out = guest.sh("dpkg-query -W -f '${db:Status-Status} ${Package}\\n'")
    return {line.split()[1] for line in out.splitlines() if line.startswith("installed ")}


def main_pid(guest, unit=SERVICE):
    return int(unit_prop(guest, unit, "MainPID"))


def wait_active(guest, unit=SERVICE, timeout=60):
    guest.wait_for(f"systemctl is-active -q {unit}", timeout=timeout, what=f"{unit} to be active")


def wait_restarted(guest, old_pid, what, unit=SERVICE, timeout=40):
    """Until the unit is active again under another main process."""
    guest.wait_for(f"p=$(systemctl show -P MainPID {unit}); test \"$p\" != {old_pid} && test \"$p\" != 0 && "
                   f"systemctl is-active -q {unit}", timeout=timeout, what=what)


def facts_digest(guest):
    """The daemon's frozen facts, file by file."""
    return guest.sh("cd /run/blkpolicy/facts && sha256sum * | sort")


def blkpolicy_alerts(guest, cursor_, min_priority=None):
    """blkpolicy's alerts after CURSOR_ (at MIN_PRIORITY or more urgent)."""
    entries = [e for e in since(guest, cursor_, SYSLOG_IDENTIFIER="blkpolicy") if "BLKPOLICY_EVENT" in e]
    if min_priority is not None:
        entries = [e for e in entries if int(e.get("PRIORITY", 6)) <= min_priority]
    return entries


def unit_messages(guest, cursor_, unit=SERVICE):
    """What systemd and the service said about the unit after CURSOR_."""
    return "\n".join(e.get("MESSAGE", "") for e in since(guest, cursor_)
                     if unit in (e.get("UNIT"), e.get("_SYSTEMD_UNIT")))
