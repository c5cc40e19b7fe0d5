# SPDX-License-Identifier: MIT
"""Checks, results and figures for the guest tests.

A check is a step with a name; it passes when its body returns, fails with
the message of the exception it raised. Steps after a failed one still run
(each says what it needs), except where a step is marked fatal. Figures are
measurements worth keeping (times, counts); they are printed at the end and
written to results.json in the run directory.
"""

import contextlib
import json
import os
import sys
import time
import traceback


class CheckFailed(AssertionError):
    pass


def expect(cond, message):
    if not cond:
        raise CheckFailed(message)


def expect_eq(actual, expected, what):
    if actual != expected:
        raise CheckFailed(f"{what}: expected {expected!r}, got {actual!r}")


class Skip(Exception):
    """The whole run cannot happen here; the reason is printed and the run
    counts as skipped (exit 77), never as passed."""


def _guest_now():
    from guest import current_guest  # the harness's own guests only
    g = current_guest()
    return g, (g.total_cpu_seconds() if g else 0.0)


class Results:
    def __init__(self, run_dir):
        self.run_dir = run_dir
        self.rows = []      # (suite, check, "PASS"|"FAIL", detail, seconds, qemu CPU seconds or None)
        self.figures = []   # (suite, name, value, unit)
        self.jobs = []      # (suite, group, wall s, qemu CPU s or None, boots, restores)

    @contextlib.contextmanager
    def step(self, suite, name, fatal=False):
        """A check; its wall time and the CPU time its guest's qemu spent
        meanwhile are kept with it (the guests are CPU-bound: the CPU time
        is what a check costs the run)."""
        t0 = time.monotonic()
        g0, c0 = _guest_now()

        def took():
            # A check that starts a guest of its own counts that guest whole.
            g1, c1 = _guest_now()
            cpu = None if g1 is None else round(c1 - (c0 if g1 is g0 else 0.0), 1)
            return round(time.monotonic() - t0, 1), cpu

        try:
            yield
        except Exception as e:  # a check failing, or the guest misbehaving
            detail = str(e) if isinstance(e, (CheckFailed,)) else f"{type(e).__name__}: {e}"
            if not isinstance(e, CheckFailed):
                detail += "\n" + "".join(traceback.format_exception(e)[-4:])
            wall, cpu = took()
            self.rows.append((suite, name, "FAIL", detail, wall, cpu))
            print(f"FAIL {suite}: {name} ({wall} s, qemu CPU {cpu} s)\n     " + detail.replace("\n", "\n     "),
                  flush=True)
            if fatal:
                e.recorded = True  # the group stops; its runner need not count it again
                raise
            return
        wall, cpu = took()
        self.rows.append((suite, name, "PASS", "", wall, cpu))
        print(f"PASS {suite}: {name} ({wall} s, qemu CPU {cpu} s)", flush=True)

    def group_stopped(self, suite, group, e):
        """A group ended by an exception outside any step (a reboot, the
        share not mounting) is a failure of its own: the checks it did not
        reach never ran."""
        print(f"     {suite}: group {group} stopped: {type(e).__name__}", flush=True)
        if getattr(e, "recorded", False):
            return
        detail = f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e)[-4:])
        self.rows.append((suite, f"{group}: the group ran to its end", "FAIL", detail, 0.0, None))
        print(f"FAIL {suite}: {group}: the group ran to its end\n     " + detail.replace("\n", "\n     "), flush=True)

    def figure(self, suite, name, value, unit=""):
        self.figures.append((suite, name, value, unit))
        print(f"     {suite}: {name} = {value}{(' ' + unit) if unit else ''}", flush=True)

    @contextlib.contextmanager
    def timed(self, suite, name):
        """A figure of the seconds the body took (also when it raised):
        where a long step's time goes."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.figure(suite, name, round(time.monotonic() - t0, 1), "s")

    def job_done(self, suite, group, wall, cpu, boots, restores):
        """A job's share of the budget (tests/vm/README.md, "How long it
        takes")."""
        self.jobs.append((suite, group, round(wall), None if cpu is None else round(cpu), boots, restores))

    def budget(self):
        """The jobs, the costliest first: wall time, qemu's CPU time, boots
        and restores; and the steps that cost most CPU."""
        lines = ["budget (wall s, qemu CPU s, boots, restores from a snapshot):"]
        for suite, group, wall, cpu, boots, restores in sorted(self.jobs, key=lambda j: -(j[3] or 0)):
            lines.append(f"  {suite:10} {group:10} {wall:6} {cpu if cpu is not None else '-':>6} {boots:3} {restores:3}")
        cpu_total = sum(j[3] or 0 for j in self.jobs)
        lines.append(f"  {'all':21} {'':6} {cpu_total:6} {sum(j[4] for j in self.jobs):3} "
                     f"{sum(j[5] for j in self.jobs):3}")
        costly = sorted((r for r in self.rows if r[5] is not None), key=lambda r: -r[5])[:15]
        if costly:
            lines.append("the checks that cost most qemu CPU (s, wall s):")
            lines += [f"  {r[5]:7} {r[4]:7}  {r[0]}: {r[1][:100]}" for r in costly]
        return "\n".join(lines)

    @classmethod
    def load(cls, path):
        """The Results a run wrote (its results.json), for its budget."""
        with open(path) as f:
            data = json.load(f)
        r = cls(os.path.dirname(path))
        keys = ("suite", "check", "result", "detail", "seconds", "qemu_cpu_seconds")
        r.rows = [tuple(c.get(k) for k in keys) for c in data.get("checks", [])]
        r.figures = [tuple(x.get(k) for k in ("suite", "name", "value", "unit")) for x in data.get("figures", [])]
        r.jobs = [tuple(j.get(k) for k in ("suite", "group", "seconds", "qemu_cpu_seconds", "boots", "restores"))
                  for j in data.get("jobs", [])]
        return r

    def failed(self):
        return [r for r in self.rows if r[2] == "FAIL"]

    def write(self):
        path = os.path.join(self.run_dir, "results.json")
        with open(path, "w") as f:
            json.dump({"checks": [dict(zip(("suite", "check", "result", "detail", "seconds", "qemu_cpu_seconds"), r))
                                  for r in self.rows],
                       "jobs": [dict(zip(("suite", "group", "seconds", "qemu_cpu_seconds", "boots", "restores"), j))
                                for j in self.jobs],
                       "figures": [dict(zip(("suite", "name", "value", "unit"), x)) for x in self.figures]},
                      f, indent=2)
        return path

    def summary(self):
        passed = sum(1 for r in self.rows if r[2] == "PASS")
        lines = [f"{passed} passed, {len(self.failed())} failed"]
        for r in self.failed():
            lines.append(f"  FAILED {r[0]}: {r[1]}")
        if self.figures:
            lines.append("figures:")
            for s, n, v, u in self.figures:
                lines.append(f"  {s:9} {n}: {v}{(' ' + u) if u else ''}")
        if self.jobs:
            lines.append(self.budget())
        return "\n".join(lines)


def fatal_exit(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)
