#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Ansible role and module (ansible/) with Debian's ansible-core against
localhost, on two loop devices made here (free indexes from 230 up, on
sparse files), with a policy directory, state directory and Ansible
configuration of the test's own (never the host's /etc/blkpolicy or
/etc/ansible):

1. the first run puts the policy in place and applies it: changed, the
   values on the device the policy names, nothing on the other;
2. the second run: unchanged;
3. a value moved by hand: the next run puts it back, changed, and says
   which write;
4. check mode with a new policy, in diff mode: changed, the diff shows the
   file's old and new text, nothing written (file and values as they were);
5. a broken policy: the task fails with the checker's file:line:col message
   (the file's own path), the old file and values stay;
6. a policy that checks alone but clashes with another file of the policy
   (a rule name used twice): the task fails naming both, the old file stays;
7. with the daemon running, the module has it read the policy again
   (blkpolicy reload) instead of writing the values itself;
8. state absent: the file removed (changed), the values left as they are
   with no daemon (said), and again: unchanged.

Exit 0 all passed, 1 a check failed, 77 cannot run here (not root, no
ansible-playbook, no loop driver), with the reason."""

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROLES = os.path.join(HERE, "..", "..", "ansible", "roles")
LOOP_CTL_ADD, LOOP_CTL_REMOVE = 0x4C80, 0x4C81
PLAYBOOK = "/usr/bin/ansible-playbook"

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


class Loop:
    """A loop device at a free index from 230 up, bound to a sparse file."""

    def __init__(self, directory):
        ctl = os.open("/dev/loop-control", os.O_RDWR)
        try:
            for i in range(230, 256):
                if os.path.exists(f"/sys/block/loop{i}"):
                    continue
                fcntl.ioctl(ctl, LOOP_CTL_ADD, i)
                self.index = i
                break
            else:
                raise RuntimeError("no free loop index from 230 to 255")
        finally:
            os.close(ctl)
        self.name = f"loop{self.index}"
        self.node = f"/dev/{self.name}"
        if not os.path.exists(self.node):
            os.mknod(self.node, 0o600 | 0o060000, os.makedev(7, self.index))
        self.backing = os.path.join(directory, f"{self.name}.img")
        with open(self.backing, "wb") as f:
            f.truncate(64 << 20)
        subprocess.run(["losetup", self.node, self.backing], check=True)

    def queue(self, attr):
        with open(f"/sys/block/{self.name}/queue/{attr}") as f:
            text = f.read().strip()
        return text[text.index("[") + 1:text.index("]")] if "[" in text else text

    def write(self, attr, value):
        with open(f"/sys/block/{self.name}/queue/{attr}", "w") as f:
            f.write(value)

    def remove(self):
        subprocess.run(["losetup", "-d", self.node], check=False, stderr=subprocess.DEVNULL)
        ctl = os.open("/dev/loop-control", os.O_RDWR)
        try:
            fcntl.ioctl(ctl, LOOP_CTL_REMOVE, self.index)
        except OSError:
            pass
        finally:
            os.close(ctl)
        if os.path.exists(self.node) and not os.path.exists(f"/sys/block/{self.name}"):
            os.remove(self.node)


def policy(loop, read_ahead, rq_affinity=2):
    return (f'[[rule]]\nname = "ansible test"\n[rule.match]\nkernel = "{loop.name}"\n[rule.set]\n'
            f'scheduler = "mq-deadline"\nread_ahead_kb = {read_ahead}\nrq_affinity = {rq_affinity}\n')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blkpolicy", required=True, help="the blkpolicy binary under test")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIPPED: needs root (loop devices)")
        return 77
    if not os.access(PLAYBOOK, os.X_OK):
        print("SKIPPED: no /usr/bin/ansible-playbook (scripts/install-deps.sh --tests installs ansible-core)")
        return 77
    if not os.path.exists("/dev/loop-control"):
        print("SKIPPED: no /dev/loop-control (the loop driver)")
        return 77

    with tempfile.TemporaryDirectory(prefix="blkpolicy-ansible-test.") as tmp:
        loops = []
        try:
            loops = [Loop(tmp), Loop(tmp)]
            return run(args, tmp, *loops)
        finally:
            for loop in loops:
                loop.remove()


def run(args, tmp, tuned, other):
    policy_dir = os.path.join(tmp, "policy.d")
    os.makedirs(policy_dir)
    dest = os.path.join(policy_dir, "50-ansible.toml")
    cfg = os.path.join(tmp, "ansible.cfg")
    with open(cfg, "w") as f:
        f.write("[defaults]\n")
    env = dict(os.environ, ANSIBLE_CONFIG=cfg, ANSIBLE_ROLES_PATH=ROLES, 
               ANSIBLE_LOCAL_TEMP=os.path.join(tmp, "ansible-local"),
               ANSIBLE_REMOTE_TEMP=os.path.join(tmp, "ansible-remote"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3", ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
               ANSIBLE_LOCALHOST_WARNING="False", HOME=tmp)
    env.pop("PYTHONPATH", None)
    before = {"read_ahead_kb": other.queue("read_ahead_kb"), "scheduler": other.queue("scheduler"),
              "rq_affinity": other.queue("rq_affinity")}

    def play(text, *extra, state="present"):
        book = os.path.join(tmp, "play.yml")
        role_vars = {
            "blkpolicy_policy": text, "blkpolicy_policy_dest": dest, "blkpolicy_policy_paths": [policy_dir],
            "blkpolicy_state_dir": os.path.join(tmp, "state"), "blkpolicy_binary": args.blkpolicy,
            "blkpolicy_devices": [tuned.name, other.name], "blkpolicy_install": False, "blkpolicy_service": False,
            "blkpolicy_policy_state": state,
        }
        out = os.path.join(tmp, "result.json")
        if os.path.exists(out):
            os.remove(out)
        # What the role's task returned (blkpolicy_result), or its failure,
        # written to OUT (in check mode too).
        keep = {"ansible.builtin.copy": {"dest": out}, "check_mode": False, "diff": False}
        with open(book, "w") as f:
            # JSON is YAML: no YAML writer needed.
            json.dump([{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [{
                "block": [
                    {"ansible.builtin.include_role": {"name": "blkpolicy"}, "vars": role_vars},
                    dict(keep, **{"ansible.builtin.copy": {"dest": out,
                                                           "content": "{{ blkpolicy_result | to_json }}"}}),
                ],
                "rescue": [
                    dict(keep, **{"ansible.builtin.copy": {"dest": out,
                                                           "content": "{{ ansible_failed_result | to_json }}"}}),
                    {"ansible.builtin.fail": {"msg": "the role failed"}},
                ],
            }]}], f)
        r = subprocess.run([PLAYBOOK, "-i", "localhost,", book, *extra], env=env, capture_output=True, text=True,
                           timeout=300)
        if not os.path.exists(out):
            print(r.stdout[-3000:], r.stderr[-3000:])
            raise AssertionError("the play wrote no result")
        with open(out) as f:
            return r.returncode, json.load(f)

    def file_text():
        with open(dest) as f:
            return f.read()

    # 1. First run.
    rc, res = play(policy(tuned, 2048))
    check(rc == 0 and res.get("changed") is True and res.get("policy_changed") is True,
          f"first run: changed (exit {rc}, {res.get('msg', '')})")
    check((tuned.queue("scheduler"), tuned.queue("read_ahead_kb"), tuned.queue("rq_affinity")) ==
          ("mq-deadline", "2048", "2"), f"first run: the values on {tuned.name}")
    check({a: other.queue(a) for a in before} == before, f"first run: {other.name} untouched")
    check(f"{tuned.name} read_ahead_kb: " in " ".join(res.get("writes", [])), f"first run: its writes {res.get('writes')}")
    check(file_text() == policy(tuned, 2048), "first run: the file's text")

    # 2. Again: nothing to do.
    rc, res = play(policy(tuned, 2048))
    check(rc == 0 and res.get("changed") is False and not res.get("writes"),
          f"second run: unchanged (exit {rc}, writes {res.get('writes')})")

    # 3. Moved by hand: put back, and said.
    tuned.write("read_ahead_kb", "128")
    rc, res = play(policy(tuned, 2048))
    check(rc == 0 and res.get("changed") is True and res.get("policy_changed") is False,
          f"after a manual change: changed, the file not (exit {rc})")
    check(res.get("writes") == [f"{tuned.name} read_ahead_kb: 128 -> 2048"], f"the write named: {res.get('writes')}")
    check(tuned.queue("read_ahead_kb") == "2048", "the value back")

    # 4. Check mode, diff mode: says, writes nothing.
    rc, res = play(policy(tuned, 4096), "--check", "--diff")
    diff = res.get("diff") or {}
    if isinstance(diff, list):
        diff = diff[0] if diff else {}
    check(rc == 0 and res.get("changed") is True, f"check mode: changed (exit {rc})")
    check("read_ahead_kb = 2048" in diff.get("before", "") and "read_ahead_kb = 4096" in diff.get("after", ""),
          f"check mode: the diff {diff}")
    check(res.get("writes") == [f"{tuned.name} read_ahead_kb: 2048 -> 4096"],
          f"check mode: the write it would make {res.get('writes')}")
    check(file_text() == policy(tuned, 2048) and tuned.queue("read_ahead_kb") == "2048",
          "check mode: the file and the value as they were")

    # 5. A broken policy: fails with the checker's message, keeps the old.
    rc, res = play(policy(tuned, 4096, rq_affinity=7))
    msg = res.get("msg", "")
    check(rc != 0 and res.get("failed") is True, f"broken policy: the task fails (exit {rc})")
    check(f"{dest}:8:15: rq_affinity = 7 is out of range" in msg, f"broken policy: the checker's message: {msg!r}")
    check(file_text() == policy(tuned, 2048) and tuned.queue("read_ahead_kb") == "2048",
          "broken policy: the old file and values stay")

    # 6. Checks alone, clashes with another file of the policy: fails,
    # naming both places, and keeps the old.
    other_file = os.path.join(policy_dir, "60-other.toml")
    with open(other_file, "w") as f:
        f.write('[[rule]]\nname = "ansible test"\n[rule.match]\nkernel = "none-such"\n[rule.set]\nnomerges = 1\n')
    rc, res = play(policy(tuned, 4096))
    msg = res.get("msg", "")
    os.remove(other_file)
    check(rc != 0 and res.get("failed") is True, f"a clash with {other_file}: the task fails (exit {rc})")
    check('duplicate rule name "ansible test"' in msg and dest in msg and other_file in msg,
          f"a clash: the checker's message names both files: {msg!r}")
    check(file_text() == policy(tuned, 2048) and tuned.queue("read_ahead_kb") == "2048",
          "a clash: the old file and values stay")

    # 7. With the daemon running: the module has it read the policy again
    # (blkpolicy reload waits for its answer) rather than writing itself.
    daemon = subprocess.Popen([args.blkpolicy, "run", "--policy", policy_dir, "--state-dir",
                               os.path.join(tmp, "state"), "--log-target", "console"],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "daemon.log"), "w"))
    try:
        report = os.path.join(tmp, "state", "daemon.json")
        for _ in range(100):
            if os.path.exists(report):
                break
            time.sleep(0.1)
        rc, res = play(policy(tuned, 4096))
        check(rc == 0 and res.get("changed") is True and res.get("how") == "the daemon read the policy again",
              f"with the daemon: it read the policy again (exit {rc}, {res.get('how')!r}, {res.get('msg', '')})")
        check(tuned.queue("read_ahead_kb") == "4096", "with the daemon: the new value in place")
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    check(daemon.returncode == 0, f"the daemon stopped cleanly (exit {daemon.returncode})")

    # 8. Removed (no daemon runs now): the file goes, changed, the values
    # stay and it says so; again: unchanged.
    rc, res = play("", state="absent")
    check(rc == 0 and res.get("changed") is True and not os.path.exists(dest),
          f"absent: the file removed, changed (exit {rc}, {res.get('msg', '')})")
    check("no daemon runs" in res.get("how", "") and tuned.queue("read_ahead_kb") == "4096",
          f"absent without a daemon: the values stay, and it says so ({res.get('how')!r})")
    rc, res = play("", state="absent")
    check(rc == 0 and res.get("changed") is False, f"absent again: unchanged (exit {rc})")

    print(f"{len(failures)} check(s) failed" if failures else "every check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
