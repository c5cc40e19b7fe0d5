# SPDX-License-Identifier: MIT
"""One Debian guest under qemu (TCG), driven from the host.

The guest has no network device. The harness talks to it through
qemu-guest-agent on a virtio-serial socket (guest-exec runs a command and
returns its exit code, stdout and stderr) and to qemu through QMP (hotplug,
power). Files come in over 9p. Every boot gets its own run directory (qemu
removes its sockets when it exits) and a throw-away qcow2 overlay, so the
cached image is never written.
"""

import base64
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import threading
import time

from images import ROOT_LABEL, log


class GuestError(Exception):
    pass


class OutputLost(GuestError):
    """The command ran, but its standard output did not come back whole."""


class CommandFailed(GuestError):
    def __init__(self, cmd, rc, out, err):
        super().__init__(f"guest command failed (exit {rc}): {cmd}\n--- stdout\n{out}\n--- stderr\n{err}")
        self.rc, self.out, self.err = rc, out, err


def _read_json_lines(sock_file, want):
    """Reads JSON objects from a QMP/agent stream until WANT(obj) is true."""
    while True:
        line = sock_file.readline()
        if not line:
            raise GuestError("connection closed")
        line = line.strip(b"\xff \r\n")
        if not line:
            continue
        obj = json.loads(line)
        if want(obj):
            return obj


class Agent:
    """qemu-guest-agent over its chardev socket (one client at a time)."""

    def __init__(self, path):
        self.path = path
        self.sock = None
        self.file = None
        self.sync_id = int(time.time()) % 100000

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock = self.file = None

    def connect(self, deadline, alive=lambda: True):
        """Connects and synchronises; the agent starts only once udev made
        its virtio port, so this retries until DEADLINE (or until ALIVE()
        says qemu is gone)."""
        while True:
            try:
                self.close()
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.settimeout(5)
                self.sock.connect(self.path)
                self.file = self.sock.makefile("rb")
                self.sync_id += 1
                self.sock.sendall(json.dumps({"execute": "guest-sync-delimited",
                                              "arguments": {"id": self.sync_id}}).encode())
                _read_json_lines(self.file, lambda o: o.get("return") == self.sync_id)
                self.sock.settimeout(None)
                return
            except (OSError, GuestError, ValueError):
                if time.monotonic() > deadline:
                    raise GuestError(f"guest agent did not answer on {self.path}")
                if not alive():
                    raise GuestError("qemu exited before the guest agent answered")
                time.sleep(0.5)

    def call(self, command, arguments=None, timeout=60):
        msg = {"execute": command}
        if arguments is not None:
            msg["arguments"] = arguments
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(json.dumps(msg).encode())
            reply = _read_json_lines(self.file, lambda o: "return" in o or "error" in o)
        finally:
            if self.sock:
                self.sock.settimeout(None)
        if "error" in reply:
            raise GuestError(f"{command}: {reply['error']}")
        return reply["return"]


class Qmp:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")
        _read_json_lines(self.file, lambda o: "QMP" in o)
        self.call("qmp_capabilities")

    def call(self, command, **arguments):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        self.sock.sendall(json.dumps(msg).encode())
        reply = _read_json_lines(self.file, lambda o: "return" in o or "error" in o)
        if "error" in reply:
            raise GuestError(f"QMP {command}: {reply['error']}")
        return reply["return"]

    def close(self):
        self.sock.close()


class Disk:
    """A data disk: a sparse qcow2 file and the qemu device that shows it."""

    # Devices whose state QEMU 7.2 cannot save (its nvme controller is
    # "unmigratable": a migration with one present fails at once): a saved
    # guest (Snapshot) is made without them, and they are hot-added, on the
    # root port their props name, once it runs again.
    UNMIGRATABLE = ("nvme",)

    def __init__(self, node, size, device, throttle=None, **props):
        self.node = node          # also the serial, so tests find it by serial
        self.size = size
        self.device = device      # virtio-blk-pci, scsi-hd, nvme, ide-hd
        # THROTTLE (ThrottleLimits, e.g. {"bps-write": 64}): no file but
        # qemu's null-co (reads give zeroes, writes go nowhere) behind a
        # throttle group with these limits from the first instruction, so
        # that the guest's early boot meets a write qemu holds.
        self.throttle = throttle
        self.props = props
        self.migratable = device not in self.UNMIGRATABLE

    def path(self, run_dir):
        return os.path.join(run_dir, f"{self.node}.qcow2")

    def spec(self):
        """What the disk is, for a snapshot's cache key."""
        return (self.node, self.size, self.device, sorted(self.props.items()))

    def create(self, run_dir, backing=None):
        """The disk's file in RUN_DIR, unless it is there: empty, or an
        overlay over BACKING (a snapshot's copy of this disk)."""
        path = self.path(run_dir)
        if not os.path.exists(path):
            cmd = ["qemu-img", "create", "-q", "-f", "qcow2", path]
            cmd += ["-b", backing, "-F", "qcow2"] if backing else [self.size]
            subprocess.run(cmd, check=True)
        return path

    def drive_args(self, run_dir):
        if self.throttle is not None:
            size = int(self.size[:-1]) << {"K": 10, "M": 20, "G": 30}[self.size[-1]]
            group = {"qom-type": "throttle-group", "id": "tg-" + self.node, "limits": self.throttle}
            return ["-object", json.dumps(group),
                    "-blockdev", f"driver=null-co,node-name={self.node}-null,size={size},read-zeroes=on",
                    "-blockdev", f"driver=throttle,node-name={self.node},file={self.node}-null,"
                                 f"throttle-group=tg-{self.node}"]
        return ["-blockdev", f"driver=qcow2,node-name={self.node},file.driver=file,file.filename={self.create(run_dir)}"]

    def device_props(self):
        props = {"drive": self.node, "serial": self.node, "id": "dev-" + self.node}
        props.update(self.props)
        return props

    def device_args(self):
        return ["-device", self.device + "," + ",".join(f"{k}={v}" for k, v in self.device_props().items())]


# The guest each harness thread (one per job) started last: the harness
# reads its qemu's CPU time around every check (harness.Results.step).
_current = threading.local()


def current_guest():
    """The guest this thread made last (None: none since forget_current)."""
    return getattr(_current, "guest", None)


def forget_current():
    _current.guest = None


def current_cpu_seconds():
    """qemu's CPU time of this thread's guest so far, or None."""
    g = current_guest()
    return g.total_cpu_seconds() if g else None


def _cpu_seconds(pid):
    """User and system time of a running process (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class Guest:
    """A running guest. Use as a context manager: qemu is stopped, politely
    first, whatever happens in between.

    With a SNAPSHOT (a booted guest saved once per image and machine,
    snapshots.py) the guest starts from it instead of booting: its disks
    are overlays over the snapshot's, and qemu loads the saved machine
    (seconds, where a boot under TCG costs a minute or more of both CPUs).
    restore() goes back to it (pristine disks, nothing installed), reboot()
    is a real power cycle from the disks as they are."""

    # TCG (shared/VM.md: this machine's /dev/kvm boots no stock kernel).
    ACCEL = "tcg,thread=multi"
    CPU_MODEL = "max"

    def __init__(self, image, run_dir, disks=(), share=None, memory_mb=2048, cpus=2, controllers=(),
                 append="", snapshot=None, smbios=None):
        self.image = image
        # Another initrd for the next boots (one the guest made itself, say),
        # and another root (an LVM volume's, say).
        self.initrd = image.initrd
        self.root_arg = f"LABEL={ROOT_LABEL}"
        self.run_dir = run_dir
        self.disks = list(disks)
        self.share = share
        self.memory_mb = memory_mb
        self.cpus = cpus
        self.controllers = list(controllers)
        self.append = append
        # SMBIOS type 1 (e.g. {"manufacturer": ..., "product": ...}): the
        # guest's DMI sys_vendor and product_name, as a cloud sets them.
        self.smbios = dict(smbios or {})
        self.snapshot = snapshot
        self.proc = None
        self.agent = None
        self.qmp = None
        self.boot_count = 0
        self.boot_retries = 0
        self.restore_count = 0
        self.launches = 0
        self.cpu_seconds = 0.0  # qemu's user and system time, all boots
        os.makedirs(run_dir, exist_ok=True)
        self.overlay = os.path.join(run_dir, "root.qcow2")
        _current.guest = self

    # --- life cycle ---

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.kill()  # a qemu that did not come up is not left running
            raise
        return self

    def __exit__(self, *exc):
        self.poweroff()

    def start(self, timeout=420):
        """From the snapshot when the guest has one, else a boot."""
        return self.restore(timeout) if self.snapshot else self.boot(timeout)

    def total_cpu_seconds(self):
        """qemu's CPU time so far, the running process's included."""
        return self.cpu_seconds + (_cpu_seconds(self.proc.pid) if self.proc else 0.0)

    def boot(self, timeout=420):
        """Boots (the overlay persists between boots of one Guest, like a
        disk), and returns once the guest agent answers. A guest whose
        kernel dies before userspace (seen under TCG: an int3 Oops while the
        kernel patches its own code, at about 4 s) is booted once more; the
        retry is logged and counted in boot_retries."""
        try:
            return self._boot(timeout)
        except GuestError as e:
            if self.proc is None or "Kernel panic" not in self.serial_tail(200):
                raise
            log(f"{self.image.suite}: the guest kernel died at boot ({e}); serial log kept in "
                f"{self.serial_log}; booting once more")
            self.boot_retries += 1
            # A kernel that panicked before it could reboot hangs: nothing
            # in it answers a power-down.
            self.poweroff(timeout=0 if self.proc.poll() is None else 90)
            return self._boot(timeout)

    def _panicked(self):
        """Whether the serial log shows a kernel panic, read at most once a
        second (the agent's wait polls twice a second)."""
        now = time.monotonic()
        if now - self._panic_checked >= 1:
            self._panic_checked = now
            self._panic_seen = "Kernel panic" in self.serial_tail(200)
        return self._panic_seen

    def _boot(self, timeout):
        if not os.path.exists(self.overlay):
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", self.image.root, "-F", "raw",
                            self.overlay], check=True)
        self.boot_count += 1
        deadline = self._launch(timeout)
        self._come_up(deadline, timeout)
        self.boot_seconds = time.monotonic() - self.t_start
        log(f"{self.image.suite}: guest up in {self.boot_seconds:.1f} s (boot {self.boot_count})")
        self._after_start()
        return self

    def restore(self, timeout=240):
        """Back to the snapshot: qemu (if running) is stopped without a
        power-down, the disks become fresh overlays over the snapshot's, and
        qemu loads the saved machine. The disks the snapshot could not hold
        (Disk.UNMIGRATABLE) are hot-added, as empty as at the first boot;
        the guest's clock is set to the host's (the saved one stopped when
        the snapshot was taken)."""
        snap = self.snapshot
        self.kill()
        for path in [self.overlay] + [d.path(self.run_dir) for d in self.disks]:
            if os.path.exists(path):
                os.remove(path)
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", snap.root, "-F", "qcow2", self.overlay],
                       check=True)
        for d in self.disks:
            d.create(self.run_dir, backing=snap.disk(d.node) if d.migratable else None)
        self.restore_count += 1
        deadline = self._launch(timeout, incoming=snap.state)
        self._wait_running(deadline)
        for d in self.disks:
            if not d.migratable:
                self.qmp.call("blockdev-add", driver="qcow2", **{"node-name": d.node},
                              file={"driver": "file", "filename": d.path(self.run_dir)})
                self.qmp.call("device_add", driver=d.device, **d.device_props())
        self._come_up(deadline, timeout)
        self.sh(f"date -s @{time.time():.3f} >/dev/null")
        if any(not d.migratable for d in self.disks):
            serials = " ".join(d.node for d in self.disks if not d.migratable)
            # (NVMe pads its serial with blanks.)
            self.wait_for(f"for s in {serials}; do grep -qs \"^$s *$\" /sys/block/*/device/serial || exit 1; done; "
                          "udevadm settle", timeout=60, what="the disks hot-added after the restore")
        self.restore_seconds = time.monotonic() - self.t_start
        log(f"{self.image.suite}: guest restored from its snapshot in {self.restore_seconds:.1f} s")
        self._after_start()
        return self

    def _launch(self, timeout, incoming=None):
        """Starts qemu (INCOMING: loading that saved machine); returns the
        deadline for the guest to come up, once QMP answers."""
        self.launches += 1
        sock_dir = os.path.join(self.run_dir, f"boot{self.launches}")
        os.makedirs(sock_dir, exist_ok=True)
        self.agent_path = os.path.join(sock_dir, "qga.sock")
        self.qmp_path = os.path.join(sock_dir, "qmp.sock")
        self.serial_log = os.path.join(sock_dir, "serial.log")
        cmd = [
            "qemu-system-x86_64", "-nodefaults", "-nic", "none", "-display", "none", "-no-user-config",
            "-accel", self.ACCEL, "-cpu", self.CPU_MODEL, "-smp", str(self.cpus), "-m", str(self.memory_mb),
            "-machine", "q35",
            "-kernel", self.image.kernel, "-initrd", self.initrd,
            # no_timer_check, as cloud images boot their guests: the kernel's
            # check of the IO-APIC timer counts ticks against a loop's
            # speed, and a vCPU starved under TCG beside other guests fails
            # it ("IO-APIC + timer doesn't work", a panic 0.05 s into
            # boot, before the kernel can reboot: seen in CI on 6.12).
            "-append", f"root={self.root_arg} ro console=ttyS0 panic=-1 no_timer_check {self.append}".strip(),
            "-serial", f"file:{self.serial_log}",
            "-blockdev", f"driver=qcow2,node-name=root,file.driver=file,file.filename={self.overlay}",
            "-device", "virtio-blk-pci,drive=root,serial=bproot,id=dev-root",
            "-chardev", f"socket,path={self.agent_path},server=on,wait=off,id=qga0",
            "-device", "virtio-serial-pci,id=vser0",
            "-device", "virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0",
            "-qmp", f"unix:{self.qmp_path},server=on,wait=off",
            "-no-reboot",
        ]
        if self.smbios:
            cmd += ["-smbios", "type=1," + ",".join(f"{k}={v}" for k, v in self.smbios.items())]
        for c in self.controllers:
            cmd += ["-device", c]
        for d in self.disks:
            if incoming is None or d.migratable:
                cmd += d.drive_args(self.run_dir) + d.device_args()
        if self.share:
            cmd += ["-virtfs", f"local,path={self.share},mount_tag=share,security_model=none,id=share0"]
        if incoming:
            cmd += ["-incoming", f"exec:cat {shlex.quote(incoming)}"]
        self.t_start = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=open(os.path.join(sock_dir, "qemu.out"), "w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        _current.guest = self
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.qmp_path):
            if self.proc.poll() is not None:
                raise GuestError(f"qemu exited ({self.proc.returncode}); see {sock_dir}/qemu.out")
            if time.monotonic() > deadline:
                raise GuestError("qemu did not create its QMP socket")
            time.sleep(0.05)
        self.qmp = Qmp(self.qmp_path)
        self.agent = Agent(self.agent_path)
        return deadline

    def _wait_running(self, deadline):
        """Until qemu has loaded the incoming machine, then runs it (it was
        saved stopped, so it loads stopped)."""
        while True:
            status = self.qmp.call("query-status")["status"]
            if status == "paused" and self.qmp.call("query-migrate").get("status") == "completed":
                self.qmp.call("cont")
                continue
            if status == "running":
                return
            if status not in ("inmigrate", "prelaunch", "paused") or time.monotonic() > deadline:
                out = os.path.join(os.path.dirname(self.qmp_path), "qemu.out")
                raise GuestError(f"the saved guest did not load (qemu status {status}); see {out}")
            time.sleep(0.05)

    def _come_up(self, deadline, timeout):
        """Until the guest agent answers."""
        self._panic_checked, self._panic_seen = 0.0, False
        try:
            # Alive while qemu runs and its kernel has not panicked: a panic
            # early in boot does not always reach the reboot that ends qemu.
            self.agent.connect(deadline, alive=lambda: self.proc.poll() is None and not self._panicked())
        except GuestError:
            raise GuestError(f"the guest did not come up in {timeout} s; serial log: {self.serial_log}\n" +
                             self.serial_tail())

    def _after_start(self):
        if self.share:
            # The agent can answer before the 9p transport has bound the
            # share's virtio device; mounting then fails with "no channels
            # available for device share" (seen on Debian 13 under load).
            # Loading the modules can itself take a minute on a starved
            # vCPU (a soft lockup in module_decompress, 58 s, seen on
            # Debian 13's one-vCPU boot guest beside another guest).
            self.sh("mkdir -p /mnt/share; mountpoint -q /mnt/share && exit 0; modprobe 9pnet_virtio; "
                    "for i in $(seq 150); do "
                    "grep -qs share /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag && break; sleep 0.2; done; "
                    "mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 share /mnt/share", timeout=180)
        self.hold_tracepoints()

    def save(self, path, timeout=300):
        """Stops the machine and writes its state to PATH (a migration
        stream qemu loads with -incoming), then stops qemu: the disks stay
        as they were at that moment, the snapshot's other half. The 9p
        share must not be mounted (QEMU refuses to save a guest with a
        mounted 9p export)."""
        self.qmp.call("stop")
        self.qmp.call("migrate", uri=f"exec:cat > {shlex.quote(path)}")
        deadline = time.monotonic() + timeout
        while True:
            info = self.qmp.call("query-migrate")
            if info.get("status") == "completed":
                break
            if info.get("status") in ("failed", "cancelled") or time.monotonic() > deadline:
                raise GuestError(f"saving the guest failed: {info}")
            time.sleep(0.1)
        self.kill()

    def kill(self):
        """Stops qemu at once, without a power-down (its disks are thrown
        away or were saved)."""
        if self.proc is None:
            return
        self.cpu_seconds += _cpu_seconds(self.proc.pid)
        try:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        finally:
            self._disconnect()

    def _disconnect(self):
        if self.agent:
            self.agent.close()
        if self.qmp:
            try:
                self.qmp.close()
            except OSError:
                pass
        self.proc = self.agent = self.qmp = None

    # The tracepoints blkpolicy switches (measure/events.cpp). Under TCG
    # (QEMU 7.2 here) a tracepoint switched on or off while another vCPU
    # runs the code it patches can leave that vCPU trapping on the int3 of
    # the patch after the kernel finished it: "Oops: int3" in
    # blk_mq_start_request, a panic, the guest gone (seen once in CI on
    # 7.3.4, under the daemon's 10% request sample during O_DSYNC writes).
    # An instance of the harness's own, recording nothing, keeps each
    # event's static key on for the whole boot, so the switches blkpolicy
    # makes register and unregister its probes without patching code.
    # Every event measure names, read from its table, so that a new one is
    # held too (a list kept here by hand missed the filemap events: "Oops:
    # int3" in filemap_get_pages on 6.12 in the readahead step).
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "measure", "events.cpp")) as f:
        HELD_EVENTS = tuple(f"{grp}/{ev}" for grp, ev in
                            re.findall(r'TracedEvent::\w+,\s*"(\w+)",\s*"(\w+)"', f.read()))
    # Two of them: an event enabled in one instance makes its tracepoint's
    # static call go straight to the one probe; a second probe (another
    # instance: blkpolicy's) makes it go through the tracepoint's iterator,
    # and that switch patches the call in every function the tracepoint is
    # in, as the key's switch would ("Oops: int3" in blk_mq_submit_bio at a
    # call, on 6.12 in the measure group of 2026-12-06, a udev worker
    # reading a new dm device while measure set its instance up). With two
    # held, the call stays on the iterator whatever blkpolicy enables.
    HOLD_INSTANCES = ("bp-harness-hold", "bp-harness-hold2")

    def hold_tracepoints(self):
        t = "/sys/kernel/tracing"
        enables = " ".join(f"{t}/instances/{i}/events/{e}/enable" for i in self.HOLD_INSTANCES
                           for e in self.HELD_EVENTS)
        dirs = " ".join(f"{t}/instances/{i}" for i in self.HOLD_INSTANCES)
        self.sh(f"mountpoint -q {t} || mount -t tracefs tracefs {t}; for d in {dirs}; do mkdir -p $d; "
                f"echo 0 > $d/tracing_on; done; "
                f"for f in {enables}; do [ -e $f ] && echo 1 > $f; done; true",
                # Right after a boot a one-vCPU guest on a loaded host can
                # spend most of a minute loading a module (soft lockups of
                # 44 s in load_module seen after Debian 13's dracut boots,
                # 2026-12-07): this waits behind that.
                timeout=180)

    def serial_tail(self, n=40):
        try:
            with open(self.serial_log, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def poweroff(self, timeout=90):
        """systemctl poweroff through the agent, then waits for qemu; kills
        it (its own process group) when it does not stop in time."""
        if self.proc is None:
            return
        self.cpu_seconds += _cpu_seconds(self.proc.pid)
        try:
            if self.proc.poll() is None and self.agent and self.agent.sock:
                try:
                    self.agent.call("guest-shutdown", {"mode": "powerdown"}, timeout=10)
                except (GuestError, OSError):
                    pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log("guest did not power off in time: killing qemu")
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        finally:
            self._disconnect()

    def reboot(self, timeout=420):
        self.poweroff()
        return self.boot(timeout)

    # --- hotplug (QMP) ---

    def hotplug(self, node, device, size=256 << 20, throttled=False, **props):
        """Adds a disk NODE (also its serial) on DEVICE (scsi-hd with a bus,
        or virtio-blk-pci / nvme on a free pcie-root-port), backed by
        qemu's null-co driver: reads return zeroes, writes go nowhere.
        THROTTLED puts a throttle filter (group tg-NODE, no limits yet)
        between the disk and its backing: throttle() then holds its I/O."""
        backing = node + "-null" if throttled else node
        self.qmp.call("blockdev-add", driver="null-co", **{"node-name": backing, "size": size, "read-zeroes": True})
        if throttled:
            self.qmp.call("object-add", **{"qom-type": "throttle-group", "id": "tg-" + node})
            self.qmp.call("blockdev-add", driver="throttle", file=backing,
                          **{"node-name": node, "throttle-group": "tg-" + node})
        args = {"driver": device, "id": "dev-" + node, "drive": node, "serial": node}
        args.update(props)
        self.qmp.call("device_add", **args)

    def throttle(self, node, limits):
        """Sets limits (ThrottleLimits keys) of a throttled disk's group.
        With {"bps-write": 8192} the first write goes through at once (the
        bucket is empty) and each 64 KiB write after it waits about 8 s. A
        key set to 0 lifts it; keys not given keep their value."""
        self.qmp.call("qom-set", path="tg-" + node, property="limits", value=limits)

    def unplug(self, node, timeout=30, throttled=False, deleted=False):
        """Removes what hotplug added (DELETED: its device_del was sent
        already); waits until qemu let go of the drive."""
        if not deleted:
            self.qmp.call("device_del", id="dev-" + node)
        deadline = time.monotonic() + timeout
        nodes = [node, node + "-null"] if throttled else [node]
        while nodes:
            try:
                self.qmp.call("blockdev-del", **{"node-name": nodes[0]})
                nodes.pop(0)
            except GuestError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        if throttled:
            self.qmp.call("object-del", id="tg-" + node)

    # --- commands ---

    # Printed after every command's own output: a reply without it lost
    # output on the way back. qemu-guest-agent under a busy TCG guest
    # answered twice with an exit code of 0 and no output at all (Debian 13,
    # a sysfs read and a journalctl query), which a test then read as
    # "nothing there".
    MARK = "@bp-harness-end@"
    END_MARK = f"\n{MARK}\n"

    # One agent call's answer (not the command's run: that is polled). Under
    # TCG beside two other guests a call went unanswered for 60 s once.
    AGENT_TIMEOUT = 150

    def run(self, cmd, timeout=300, check=True, stdin=None, retries=0):
        """Runs CMD (a shell command line) in the guest; returns
        (exit code, stdout, stderr). A reply whose output did not come back
        whole raises OutputLost, after running CMD again up to RETRIES more
        times (for commands that only read)."""
        for attempt in range(retries + 1):
            try:
                return self._run_once(cmd, timeout, check, stdin)
            except OutputLost as e:
                if attempt == retries:
                    raise
                log(f"{self.image.suite}: {e}; running it again")

    def _run_once(self, cmd, timeout, check, stdin):
        # In a subshell, so that an `exit` in CMD still prints the mark.
        wrapped = f"( {cmd}\n); bp_rc=$?; printf '\\n{self.MARK}\\n'; exit $bp_rc"
        args = {"path": "/bin/sh", "arg": ["-c", wrapped], "capture-output": True}
        if stdin is not None:
            args["input-data"] = base64.b64encode(stdin.encode()).decode()
        try:
            pid = self._agent_call("guest-exec", args)["pid"]
        except TimeoutError:  # not asked again: the command may have started
            try:  # a late answer must not be read as the next call's
                self.agent.connect(time.monotonic() + self.AGENT_TIMEOUT, alive=lambda: self.proc.poll() is None)
            except GuestError:
                pass
            raise GuestError(f"the guest agent did not answer guest-exec in {self.AGENT_TIMEOUT} s: `{cmd[:120]}`; "
                             f"serial log {self.serial_log}:\n" + self.serial_tail()) from None
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            try:
                st = self._agent_call("guest-exec-status", {"pid": pid})
            except TimeoutError:
                # No answer in the agent's time: a starved vCPU (three
                # guests on two CPUs; seen once in CI, 2026-12-06, right
                # after a dracut boot) or a lost reply. The status is only
                # read: connect again and ask once more; a second silence
                # is the guest's.
                log(f"{self.image.suite}: the guest agent did not answer guest-exec-status for `{cmd[:80]}`; "
                    "connecting again")
                self.agent.connect(time.monotonic() + self.AGENT_TIMEOUT, alive=lambda: self.proc.poll() is None)
                try:
                    st = self._agent_call("guest-exec-status", {"pid": pid})
                except TimeoutError:
                    raise GuestError(f"the guest agent did not answer in {self.AGENT_TIMEOUT} s, twice, while "
                                     f"running `{cmd[:120]}`; serial log {self.serial_log}:\n" +
                                     self.serial_tail()) from None
            if st.get("exited"):
                break
            if time.monotonic() > deadline:
                raise GuestError(f"guest command timed out after {timeout} s: {cmd}")
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        out = base64.b64decode(st.get("out-data", "")).decode(errors="replace")
        err = base64.b64decode(st.get("err-data", "")).decode(errors="replace")
        rc = st.get("exitcode", -st.get("signal", 0) or -1)
        # The last mark: a process CMD left running may still write after it.
        end = out.rfind(self.END_MARK)
        if end < 0:
            if "signal" in st:
                raise CommandFailed(cmd, rc, out, err)  # killed before the mark: not a lost reply
            raise OutputLost(f"the output of `{cmd[:120]}` came back without its end (exit {rc}, "
                             f"{len(out)} bytes: {out[-200:]!r})")
        out = out[:end] + out[end + len(self.END_MARK):]
        if check and rc != 0:
            raise CommandFailed(cmd, rc, out, err)
        return rc, out, err

    def _agent_call(self, command, arguments):
        """An agent call; a broken connection is named by what broke it
        (qemu gone, with the kernel's last words) rather than a bare
        BrokenPipeError."""
        try:
            return self.agent.call(command, arguments, timeout=self.AGENT_TIMEOUT)
        except TimeoutError:
            raise
        except OSError as e:
            time.sleep(1)
            rc = self.proc.poll() if self.proc else None
            if rc is None:
                raise
            tail = self.serial_tail(60)
            panic = "Kernel panic" in tail or "Oops" in tail
            raise GuestError(f"qemu exited ({rc}) under {command} ({e})" +
                             (f"; the guest kernel died, serial log {self.serial_log}:\n{tail}" if panic
                              else f"; serial log {self.serial_log}")) from e

    def sh(self, cmd, **kw):
        """Runs CMD and returns its stdout; fails on a non-zero exit."""
        return self.run(cmd, **kw)[1]

    def write_file(self, path, text, mode="0644"):
        self.run(f"install -D -m {mode} /dev/stdin {shlex.quote(path)}", stdin=text)

    def read_file(self, path):
        return self.sh(f"cat {shlex.quote(path)}")

    def wait_for(self, cmd, timeout=60, interval=0.5, what=None):
        """Runs CMD until it exits 0; returns its stdout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                rc, out, err = self.run(cmd, check=False)
            except OutputLost as e:  # a probe: ask again
                rc, out, err = -1, "", str(e)
            if rc == 0:
                return out
            if time.monotonic() > deadline:
                raise GuestError(f"timed out after {timeout} s waiting for {what or cmd}: {out}{err}")
            time.sleep(interval)
