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


class Results:
    def __init__(self, run_dir):
        self.run_dir = run_dir
        self.rows = []      # (suite, check, "PASS"|"FAIL", detail, seconds)
        self.figures = []   # (suite, name, value, unit)

    @contextlib.contextmanager
    def step(self, suite, name, fatal=False):
        t0 = time.monotonic()
        try:
            yield
        except Exception as e:  # a check failing, or the guest misbehaving
            detail = str(e) if isinstance(e, (CheckFailed,)) else f"{type(e).__name__}: {e}"
            if not isinstance(e, CheckFailed):
                detail += "\n" + "".join(traceback.format_exception(e)[-4:])
            self.rows.append((suite, name, "FAIL", detail, time.monotonic() - t0))
            print(f"FAIL {suite}: {name} ({time.monotonic() - t0:.1f} s)\n     " + detail.replace("\n", "\n     "),
                  flush=True)
            if fatal:
                e.recorded = True  # the group stops; its runner need not count it again
                raise
            return
        self.rows.append((suite, name, "PASS", "", time.monotonic() - t0))
        print(f"PASS {suite}: {name} ({time.monotonic() - t0:.1f} s)", flush=True)

    def group_stopped(self, suite, group, e):
        """A group ended by an exception outside any step (a reboot, the
        share not mounting) is a failure of its own: the checks it did not
        reach never ran."""
        print(f"     {suite}: group {group} stopped: {type(e).__name__}", flush=True)
        if getattr(e, "recorded", False):
            return
        detail = f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e)[-4:])
        self.rows.append((suite, f"{group}: the group ran to its end", "FAIL", detail, 0.0))
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

    def failed(self):
        return [r for r in self.rows if r[2] == "FAIL"]

    def write(self):
        path = os.path.join(self.run_dir, "results.json")
        with open(path, "w") as f:
            json.dump({"checks": [dict(zip(("suite", "check", "result", "detail", "seconds"), r)) for r in self.rows],
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
        return "\n".join(lines)


def fatal_exit(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)
