#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The fleet test: blkpolicy as fleets watch it, with real engines only, all
on 127.0.0.1.

    tests/fleet/run.py --blkpolicy build/blkpolicy --make-tree build/tests/make-fake-sysfs \\
        --rules prometheus [--hosts 20] [--keep]

HOSTS simulated hosts, each a `blkpolicy run` (observe mode, a 2 s verify
interval) on its own fake sysfs tree with its own state directory and
metrics file, each file served by its own prometheus-node-exporter (textfile
collector only). One Prometheus scrapes them every second with the shipped
rules (prometheus/blkpolicy-rules.yml); one Alertmanager sends what fires to
a webhook receiver in this script. Then:
  - a drift on one host reaches the receiver naming host, device and
    attribute, and nothing comes from the clean hosts;
  - one daemon stopped raises BlkpolicyNotVerifying for that host only;
  - a broken reload raises BlkpolicyPolicyReloadFailed for that host only;
  - the sweep query gives each host's values;
  - one host measures (daemon.measure): writes with no flush under write
    through over its loop device's volatile cache raise
    BlkpolicyCriticalFinding (flushes-dropped) and one at-risk journal entry;
  - a drift alert travels through systemd-journal-upload to a
    systemd-journal-remote on 127.0.0.1 and `journalctl --directory=` finds
    it there by BLKPOLICY_EVENT and BLKPOLICY_DEVICE, every field intact,
    with the sender's host name.
Figures (drift to receiver, samples per host per scrape) are printed.

Exit status: 0 passed, 1 a check failed, 77 cannot run here (not root, a
package missing), with the reason. Every process it starts is stopped by its
pid and every file it writes is under one directory, removed at the end
unless --keep (or a failure) keeps it.
"""

import argparse
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

VERIFY_INTERVAL_S = 2
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
PROMETHEUS = "/usr/bin/prometheus"
ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
PROMTOOL = "/usr/bin/promtool"
JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"
JOURNAL_UPLOAD = "/lib/systemd/systemd-journal-upload"

# Every host runs the same policy: the golden tree's disks as a cloud VM
# policy would have them. Observe mode: the fleet watches, a drift stays
# until someone acts, so it is what the alert is for.
POLICY = """\
[daemon]
mode = "observe"
verify_interval = "{interval}s"

[[rule]]
name = "virtual disks do not spin"
[rule.match]
driver = ["virtio_blk", "virtio_scsi"]
stack = "none"
rotational = true
[rule.set]
rotational = 0
wbt_lat_usec = 2000
read_ahead_kb = 128

[[rule]]
name = "nvme"
[rule.match]
driver = "nvme"
[rule.set]
scheduler = "none"
read_ahead_kb = 256
"""

# The host whose sda keeps write_cache "write through" over a volatile cache.
CRITICAL_HOST = "host15"
# One host measures (daemon.measure): the loop device of its tree is then
# told "write through" over its volatile backing page cache while its stat
# counters show writes and no flush: the measured finding, which audit
# cannot see (a loop device has no cache_type).
MEASURE_HOST = "host13"
MEASURE_DAEMON = '[daemon]\nmeasure = true\nmeasure_window = "2s"\n'

BROKEN_POLICY = POLICY.replace("read_ahead_kb = 256\n", 'read_ahead_kb = "lots"\n')


class Failed(AssertionError):
    pass


def log(msg):
    print(f"[fleet] {msg}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, data=None, timeout=5):
    req = urllib.request.Request(url, data=data)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


def wait(cond, timeout, what, interval=0.25):
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = cond()
        except OSError:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise Failed(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Receiver:
    """Alertmanager's webhook receiver: keeps every alert it is sent, with the
    time it arrived."""

    def __init__(self):
        self.alerts = []  # (monotonic time, alert dict)
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                now = time.monotonic()
                with outer.lock:
                    for a in json.loads(body).get("alerts", []):
                        outer.alerts.append((now, a))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def firing(self, alertname=None):
        with self.lock:
            return [(t, a) for t, a in self.alerts
                    if a.get("status") == "firing" and (alertname is None or a["labels"].get("alertname") == alertname)]

    def stop(self):
        self.server.shutdown()


class Fleet:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.procs = []  # (name, Popen): stopped by pid at the end
        self.hosts = []

    def spawn(self, name, cmd, **kw):
        out = open(os.path.join(self.work, "logs", name + ".log"), "w")
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kw)
        self.procs.append((name, p))
        return p

    def stop_all(self):
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    # --- hosts ---

    def make_host(self, i):
        name = f"host{i:02d}"
        d = os.path.join(self.work, name)
        h = {"name": name, "dir": d, "sys": os.path.join(d, "sys"), "state": os.path.join(d, "state"),
             "textfile": os.path.join(d, "textfile"), "policy": os.path.join(d, "policy.toml")}
        os.makedirs(h["textfile"])
        subprocess.run([self.args.make_tree, h["sys"]], check=True)
        # The golden tree's sda has a volatile cache (cache_type write back).
        # On one host someone told the kernel it writes through: flushes are
        # dropped, audit's critical finding.
        if name == CRITICAL_HOST:
            with open(os.path.join(h["sys"], "block", "sda", "queue", "write_cache"), "w") as f:
                f.write("write through\n")
        policy = POLICY.format(interval=VERIFY_INTERVAL_S)
        if name == MEASURE_HOST:
            policy = policy.replace("[daemon]\n", MEASURE_DAEMON)
            write_stat(h, writes=0, flushes=0)
        with open(h["policy"], "w") as f:
            f.write(policy)
        os.chmod(h["policy"], 0o644)
        # Tuned once, as a host that ran `blkpolicy apply`: clean from the start.
        r = subprocess.run([self.args.blkpolicy, "apply", "--sysfs-root", h["sys"], "--state-dir", h["state"],
                            "--policy", h["policy"]], capture_output=True, text=True)
        if r.returncode != 0:
            raise Failed(f"{name}: apply on its fake tree: exit {r.returncode}\n{r.stdout}{r.stderr}")
        h["metrics"] = os.path.join(h["textfile"], "blkpolicy.prom")
        # Each host's other writers: none, from an empty tree (never this machine's).
        os.makedirs(os.path.join(h["state"], "..", "writers"), exist_ok=True)
        writers = os.path.normpath(os.path.join(h["state"], "..", "writers"))
        h["daemon"] = self.spawn(name + "-blkpolicy", [
            self.args.blkpolicy, "run", "--sysfs-root", h["sys"], "--state-dir", h["state"], "--policy",
            h["policy"], "--metrics-file", h["metrics"], "--log-target", "journal", "--udev-rules-dir", writers,
            "--config-root", writers])
        h["port"] = free_port()
        self.spawn(name + "-node-exporter", [
            NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{h['port']}", "--collector.disable-defaults",
            "--collector.textfile", f"--collector.textfile.directory={h['textfile']}"])
        self.hosts.append(h)
        return h

    def host(self, name):
        return next(h for h in self.hosts if h["name"] == name)

    # --- Prometheus and Alertmanager ---

    def start_engines(self, receiver_port):
        self.am_port = free_port()
        am_dir = os.path.join(self.work, "alertmanager")
        os.makedirs(am_dir)
        with open(os.path.join(am_dir, "alertmanager.yml"), "w") as f:
            f.write(f"""\
route:
  receiver: test
  group_by: [alertname, host, device, attribute]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: test
    webhook_configs:
      - url: http://127.0.0.1:{receiver_port}/
        send_resolved: true
""")
        self.spawn("alertmanager", [
            ALERTMANAGER, f"--config.file={am_dir}/alertmanager.yml", f"--storage.path={am_dir}/data",
            f"--web.listen-address=127.0.0.1:{self.am_port}", "--cluster.listen-address="])
        self.prom_port = free_port()
        prom_dir = os.path.join(self.work, "prometheus")
        os.makedirs(prom_dir)
        targets = "\n".join(f"      - targets: ['127.0.0.1:{h['port']}']\n        labels: {{host: {h['name']}}}"
                            for h in self.hosts)
        rules = os.path.abspath(os.path.join(self.args.rules, "blkpolicy-rules.yml"))
        with open(os.path.join(prom_dir, "prometheus.yml"), "w") as f:
            f.write(f"""\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:{self.am_port}']
scrape_configs:
  - job_name: node
    static_configs:
{targets}
""")
        r = subprocess.run([PROMTOOL, "check", "config", os.path.join(prom_dir, "prometheus.yml")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise Failed(f"promtool check config:\n{r.stdout}{r.stderr}")
        self.spawn("prometheus", [
            PROMETHEUS, f"--config.file={prom_dir}/prometheus.yml", f"--storage.tsdb.path={prom_dir}/data",
            f"--web.listen-address=127.0.0.1:{self.prom_port}"])

    def query(self, expr):
        url = f"http://127.0.0.1:{self.prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        doc = http_json(url)
        if doc.get("status") != "success":
            raise Failed(f"query {expr}: {doc}")
        return doc["data"]["result"]


def journal_upload_check(fleet, drift_host, device, attribute, since_usec):
    """The drift alert through systemd-journal-upload to a journal-remote."""
    remote_dir = os.path.join(fleet.work, "remote-journal")
    os.makedirs(remote_dir)
    port = free_port()
    fleet.spawn("journal-remote", [JOURNAL_REMOTE, f"--listen-http=127.0.0.1:{port}", f"--output={remote_dir}/"])
    wait(lambda: _port_open(port), 10, "systemd-journal-remote to listen")
    t0 = time.monotonic()
    # From the drift's time on: the upload sends the local journal after
    # that cursor, as a unit with --save-state would after its first run.
    upload = fleet.spawn("journal-upload", [JOURNAL_UPLOAD, f"--url=http://127.0.0.1:{port}",
                                            f"--save-state={fleet.work}/upload.state"])

    def found():
        r = subprocess.run(["journalctl", f"--directory={remote_dir}", "-o", "json", "--no-pager",
                            "BLKPOLICY_EVENT=drift", f"BLKPOLICY_DEVICE={device}"], capture_output=True, text=True)
        hits = [json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()]
        return [e for e in hits if e.get("BLKPOLICY_ATTRIBUTE") == attribute
                and drift_host["policy"] in e.get("BLKPOLICY_RULE", "")
                and int(e.get("__REALTIME_TIMESTAMP", 0)) >= since_usec]
    entries = wait(found, 60, "the drift alert in the collector's journal")
    seconds = time.monotonic() - t0
    upload.send_signal(signal.SIGTERM)
    e = entries[0]
    want = {"SYSLOG_IDENTIFIER": "blkpolicy", "BLKPOLICY_EVENT": "drift", "BLKPOLICY_DEVICE": device,
            "BLKPOLICY_ATTRIBUTE": attribute, "BLKPOLICY_EXPECTED": "128", "BLKPOLICY_ACTUAL": "8192",
            "MESSAGE_ID": "7c0ba1f3a4d94f0e9b6c2d8e51a0f302", "PRIORITY": "4",
            "_HOSTNAME": socket.gethostname()}
    bad = {k: (v, e.get(k)) for k, v in want.items() if e.get(k) != v}
    if bad:
        raise Failed(f"the collector's entry differs (want, got): {bad}\n{json.dumps(e, indent=1)}")
    if not e.get("BLKPOLICY_RULE", "").startswith("virtual disks do not spin ("):
        raise Failed(f"BLKPOLICY_RULE: {e.get('BLKPOLICY_RULE')!r}")
    return seconds, e


def write_stat(h, writes, flushes):
    """The measured host's loop0 stat file, as the kernel writes it (17 fields)."""
    fields = [0] * 17
    fields[4], fields[15] = writes, flushes
    with open(os.path.join(h["sys"], "block", "loop0", "stat"), "w") as f:
        f.write(" ".join(f"{v:8d}" for v in fields) + "\n")


def _port_open(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def check(results, name, fn):
    t0 = time.monotonic()
    try:
        out = fn()
    except Exception as e:  # a check failing, or an engine misbehaving
        results.append((name, False, str(e)))
        print(f"FAIL {name} ({time.monotonic() - t0:.1f} s)\n     " + str(e).replace("\n", "\n     "), flush=True)
        return None
    results.append((name, True, ""))
    print(f"PASS {name} ({time.monotonic() - t0:.1f} s)", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blkpolicy", required=True)
    ap.add_argument("--make-tree", required=True)
    ap.add_argument("--rules", required=True, help="the directory of blkpolicy-rules.yml")
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()

    if os.geteuid() != 0:
        print("SKIPPED: the fleet test needs root (blkpolicy refuses policies others could write, and the "
              "journal upload reads the system journal)")
        return 77
    for tool in (NODE_EXPORTER, PROMETHEUS, ALERTMANAGER, PROMTOOL, JOURNAL_REMOTE, JOURNAL_UPLOAD):
        if not os.access(tool, os.X_OK):
            print(f"SKIPPED: {tool} is not installed (scripts/install-deps.sh --tests installs it)")
            return 77
    if subprocess.run(["systemd-cat", "-t", "blkpolicy-fleet-test", "true"]).returncode != 0:
        print("SKIPPED: no journald accepts entries (scripts/test.sh starts one)")
        return 77

    work = tempfile.mkdtemp(prefix="blkpolicy-fleet-", dir="/var/tmp")
    os.makedirs(os.path.join(work, "logs"))
    fleet = Fleet(args, work)
    receiver = Receiver()
    results = []
    figures = []
    try:
        t0 = time.monotonic()
        for i in range(1, args.hosts + 1):
            fleet.make_host(i)
        fleet.start_engines(receiver.port)
        figures.append(("hosts up (trees, apply, daemons, exporters, engines)", f"{time.monotonic() - t0:.1f} s"))

        def all_up():
            up = fleet.query('count(up{job="node"} == 1)')
            info = fleet.query("count(blkpolicy_build_info)")
            return up and info and int(up[0]["value"][1]) == args.hosts and int(info[0]["value"][1]) == args.hosts
        check(results, f"Prometheus scrapes {args.hosts} hosts' blkpolicy metrics through their node_exporters",
              lambda: wait(all_up, 60, f"{args.hosts} targets up with blkpolicy_build_info"))

        def quiet_start():
            got = wait(lambda: receiver.firing("BlkpolicyCriticalFinding"), 60, "BlkpolicyCriticalFinding")
            time.sleep(3 * VERIFY_INTERVAL_S + 2)
            firing = [a["labels"] for _, a in receiver.firing()]
            want = [{"alertname": "BlkpolicyCriticalFinding", "host": CRITICAL_HOST, "device": "sda",
                     "code": "write-through-volatile-cache", "severity": "critical"}]
            if [{k: lb.get(k) for k in want[0]} for lb in firing] != want:
                raise Failed(f"alerts from the fleet: {firing}; want only {want}")
            alerts = {a["metric"]["alertname"] for a in fleet.query("ALERTS")}
            if alerts != {"BlkpolicyCriticalFinding"}:
                raise Failed(f"Prometheus has alerts: {sorted(alerts)}")
            figures.append(("start -> the critical finding at the receiver", f"{got[0][0] - t0:.1f} s"))
        check(results, f"the fleet raises nothing but {CRITICAL_HOST}'s critical finding (write through over a "
                       "volatile cache)", quiet_start)

        # Every daemon's metrics file is valid text format.
        def metrics_valid():
            for h in fleet.hosts:
                r = subprocess.run([PROMTOOL, "check", "metrics"], stdin=open(h["metrics"]), capture_output=True,
                                   text=True)
                if r.returncode != 0:
                    raise Failed(f"{h['name']}: promtool check metrics:\n{r.stdout}{r.stderr}")
        check(results, "promtool check metrics accepts every host's file", metrics_valid)

        # --- a drift on one host ---
        drift_host = fleet.host("host07")
        device, attribute = "vda", "read_ahead_kb"
        drift_usec = int(time.time() * 1e6)

        def drift():
            path = os.path.join(drift_host["sys"], "block", device, "queue", attribute)
            t = time.monotonic()
            with open(path, "w") as f:
                f.write("8192\n")
            got = wait(lambda: receiver.firing("BlkpolicyAttributeDrift"), 60, "BlkpolicyAttributeDrift at the receiver")
            at, alert = got[0]
            figures.append(("drift written -> alert at the webhook receiver", f"{at - t:.1f} s",
                            f"(verify interval {VERIFY_INTERVAL_S} s, scrape and evaluation 1 s, group_wait 1 s)"))
            labels = alert["labels"]
            print("     the receiver got: " + json.dumps({"labels": labels, "annotations": alert["annotations"]},
                                                         indent=1).replace("\n", "\n     "), flush=True)
            want = {"host": "host07", "device": device, "attribute": attribute, "severity": "warning"}
            bad = {k: (v, labels.get(k)) for k, v in want.items() if labels.get(k) != v}
            if bad:
                raise Failed(f"the alert's labels differ (want, got): {bad}")
            time.sleep(2)
            others = [a["labels"] for at2, a in receiver.firing() if at2 >= t and a["labels"].get("host") != "host07"]
            if others:
                raise Failed(f"alerts from clean hosts since the drift: {others}")
            if "8192" not in alert["annotations"].get("description", "") and \
                    "read_ahead_kb of vda on" not in alert["annotations"].get("summary", ""):
                raise Failed(f"annotations: {alert['annotations']}")
        check(results, "a drift on host07 reaches the receiver naming host, device and attribute; clean hosts say "
                       "nothing", drift)

        def sweep():
            rows = fleet.query(f'instance_attribute_value:blkpolicy_devices:count{{attribute="{attribute}"}}')
            per_host = {}
            for r in rows:
                per_host.setdefault(r["metric"]["host"], {})[r["metric"]["value"]] = int(r["value"][1])
            if len(per_host) != args.hosts:
                raise Failed(f"the sweep names {len(per_host)} hosts: {sorted(per_host)}")
            if per_host["host07"].get("8192") != 1:
                raise Failed(f"host07's read_ahead_kb in the sweep: {per_host['host07']}")
            clean = {h: v for h, v in per_host.items() if h != "host07"}
            if any("8192" in v for v in clean.values()):
                raise Failed(f"8192 on a clean host: {clean}")
            lines = [f"{h}: " + ", ".join(f"{n} x {v}" for v, n in sorted(per_host[h].items(), key=lambda x: int(x[0])))
                     for h in sorted(per_host)]
            shown = [ln for ln in lines if ln.split(":")[0] in ("host01", "host02", "host06", "host07", "host08",
                                                                   "host20")]
            print("     sweep: instance_attribute_value:blkpolicy_devices:count{attribute=\"read_ahead_kb\"}\n     " +
                  "\n     ".join(shown), flush=True)
            fleet_rows = fleet.query(f'attribute_value:blkpolicy_devices:count{{attribute="{attribute}"}}')
            print("     fleet-wide: " + ", ".join(f"{r['metric']['value']}: {r['value'][1]} devices"
                                                 for r in fleet_rows), flush=True)
        check(results, "the sweep query gives each host's values (host07 alone at 8192)", sweep)

        def samples():
            rows = fleet.query('scrape_samples_scraped{job="node"}')
            counts = sorted(int(float(r["value"][1])) for r in rows)
            own = fleet.query('count by (host) ({__name__=~"blkpolicy_.+", job="node"})')
            mine = sorted(int(r["value"][1]) for r in own)
            figures.append(("samples per host per scrape (node_exporter total / blkpolicy_*)",
                            f"{counts[0]}-{counts[-1]} / {mine[0]}-{mine[-1]}"))
        check(results, "samples per host per scrape measured", samples)

        # --- a measured finding: writes with no flush over a volatile cache ---
        def measured_at_risk():
            h = fleet.host(MEASURE_HOST)
            with open(os.path.join(h["sys"], "block", "loop0", "queue", "write_cache"), "w") as f:
                f.write("write through\n")
            t = time.monotonic()
            stop = threading.Event()

            def writes():  # the loop device keeps completing writes, and never a flush
                n = 0
                while not stop.is_set():
                    n += 100
                    write_stat(h, writes=n, flushes=0)
                    stop.wait(0.5)
            writer = threading.Thread(target=writes)
            writer.start()
            try:
                got = wait(lambda: [x for x in receiver.firing("BlkpolicyCriticalFinding")
                                    if x[1]["labels"].get("host") == MEASURE_HOST], 60,
                           f"BlkpolicyCriticalFinding from {MEASURE_HOST}")
            finally:
                stop.set()
                writer.join()
            at, alert = got[0]
            labels = alert["labels"]
            want = {"host": MEASURE_HOST, "device": "loop0", "code": "flushes-dropped", "severity": "critical"}
            bad = {k: (v, labels.get(k)) for k, v in want.items() if labels.get(k) != v}
            if bad:
                raise Failed(f"the alert's labels differ (want, got): {bad}")
            figures.append(("write through with writes and no flush -> BlkpolicyCriticalFinding at the receiver",
                            f"{at - t:.1f} s", "(measure window 2 s, scrape and evaluation 1 s)"))
            # The daemon's own journal entry, with what it counted.
            pid = h["daemon"].pid
            r = subprocess.run(["journalctl", "-o", "json", "--no-pager", f"_PID={pid}", "BLKPOLICY_EVENT=at-risk"],
                               capture_output=True, text=True)
            entries = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
            if len(entries) != 1:
                raise Failed(f"{len(entries)} at-risk journal entries from {MEASURE_HOST}'s daemon, not 1")
            e = entries[0]
            for k, v in {"BLKPOLICY_DEVICE": "loop0", "BLKPOLICY_FINDING": "flushes-dropped", "BLKPOLICY_FLUSHES": "0",
                         "BLKPOLICY_ACTUAL": "write through", "PRIORITY": "2"}.items():
                if e.get(k) != v:
                    raise Failed(f"at-risk entry: {k}={e.get(k)!r}, want {v!r}: {e}")
            print(f"     at-risk: {e['MESSAGE']}", flush=True)
        check(results, f"{MEASURE_HOST} measures writes with no flush under write through over a volatile cache: "
                       "BlkpolicyCriticalFinding (flushes-dropped) and one at-risk journal entry", measured_at_risk)

        # --- the central journal ---
        def central():
            seconds, e = journal_upload_check(fleet, drift_host, device, attribute, drift_usec)
            figures.append(("drift alert -> found in the collector's journal (upload started after it)",
                            f"{seconds:.1f} s"))
            print("     " + f"journalctl --directory=... BLKPOLICY_EVENT=drift BLKPOLICY_DEVICE={device}: "
                  f"_HOSTNAME={e['_HOSTNAME']} MESSAGE={e['MESSAGE']!r}", flush=True)
        check(results, "the drift alert reaches a systemd-journal-remote collector through systemd-journal-upload, "
                       "every field intact", central)

        # --- a daemon stops ---
        def stopped():
            h = fleet.host("host12")
            h["daemon"].send_signal(signal.SIGTERM)
            h["daemon"].wait(timeout=10)
            t = time.monotonic()
            got = wait(lambda: receiver.firing("BlkpolicyNotVerifying"), 60, "BlkpolicyNotVerifying")
            figures.append(("daemon stopped -> BlkpolicyNotVerifying at the receiver", f"{got[0][0] - t:.1f} s",
                            f"(3 x verify interval {VERIFY_INTERVAL_S} s)"))
            time.sleep(2)
            hosts = {a["labels"].get("host") for _, a in receiver.firing("BlkpolicyNotVerifying")}
            if hosts != {"host12"}:
                raise Failed(f"BlkpolicyNotVerifying for {sorted(hosts)}, not host12 alone")
        check(results, "one daemon stopped raises BlkpolicyNotVerifying for that host only", stopped)

        # --- a broken reload ---
        def broken_reload():
            h = fleet.host("host03")
            with open(h["policy"], "w") as f:
                f.write(BROKEN_POLICY.format(interval=VERIFY_INTERVAL_S))
            r = subprocess.run([args.blkpolicy, "reload", "--state-dir", h["state"], "--pid", str(h["daemon"].pid)],
                               capture_output=True, text=True)
            if r.returncode != 3:
                raise Failed(f"blkpolicy reload of a broken policy: exit {r.returncode}\n{r.stdout}{r.stderr}")
            got = wait(lambda: receiver.firing("BlkpolicyPolicyReloadFailed"), 60, "BlkpolicyPolicyReloadFailed")
            time.sleep(2)
            hosts = {a["labels"].get("host") for _, a in receiver.firing("BlkpolicyPolicyReloadFailed")}
            if hosts != {"host03"}:
                raise Failed(f"BlkpolicyPolicyReloadFailed for {sorted(hosts)}, not host03 alone")
            if got[0][1]["labels"].get("severity") != "warning":
                raise Failed(f"labels: {got[0][1]['labels']}")
        check(results, "a broken reload raises BlkpolicyPolicyReloadFailed for that host only", broken_reload)

        def others_quiet():
            names = {a["labels"]["alertname"] for _, a in receiver.firing()}
            extra = names - {"BlkpolicyAttributeDrift", "BlkpolicyNotVerifying", "BlkpolicyPolicyReloadFailed",
                             "BlkpolicyCriticalFinding"}
            if extra:
                raise Failed(f"unexpected alerts: {sorted(extra)}")
            for h in fleet.hosts:
                if h["name"] != "host12" and h["daemon"].poll() is not None:
                    raise Failed(f"{h['name']}'s daemon exited ({h['daemon'].returncode}); see logs/")
        check(results, "nothing else fired, and every other daemon still runs", others_quiet)
    finally:
        fleet.stop_all()
        receiver.stop()
        print("\nfigures:")
        for f in figures:
            print("  " + " = ".join(f[:2]) + (" " + f[2] if len(f) > 2 else ""))
        failed = [r for r in results if not r[1]]
        print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed")
        if failed or args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
