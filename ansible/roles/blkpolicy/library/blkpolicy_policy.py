#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Ansible module: one blkpolicy policy file, checked before it is put in
place, and the values it sets on the host's devices."""

DOCUMENTATION = r"""
module: blkpolicy_policy
short_description: Put a blkpolicy policy file in place and apply it
description:
  - Writes one policy file (by default the drop-in
    C(/etc/blkpolicy/policy.d/50-ansible.toml)) and sees that the host's
    devices hold what the whole policy says.
  - The new file is checked with the rest of the policy (C(blkpolicy check))
    before it replaces anything; a policy that does not check fails the task
    with the checker's C(file:line:col) messages and the file in place is
    left as it was.
  - Where the daemon runs, it is asked to read the policy again
    (C(blkpolicy reload), which waits for its answer); where it does not,
    C(blkpolicy apply) writes the values.
  - I(changed) only when the file's text changed or a value on a device
    would change (C(blkpolicy plan --detailed-exitcode)).
  - Check mode writes nothing and says what would change; diff mode shows
    the file's text before and after.
options:
  content:
    description: The policy file's text (TOML, blkpolicy.toml(5)). Required with I(state=present).
    type: str
  dest:
    description: The policy file.
    type: path
    default: /etc/blkpolicy/policy.d/50-ansible.toml
  state:
    description: C(absent) removes the file (the daemon puts back what only it set, as its on_removal says).
    type: str
    choices: [present, absent]
    default: present
  apply:
    description: Make the devices hold the policy's values (reload the daemon, or apply).
    type: bool
    default: true
  policy:
    description:
      - Where the whole policy is read from, as blkpolicy's C(--policy) (files or directories).
      - Default, blkpolicy's own locations (C(/etc/blkpolicy/policy.toml) and the C(policy.d) drop-ins).
    type: list
    elements: path
  devices:
    description: Only these block devices (kernel names); default every device.
    type: list
    elements: str
  state_dir:
    description: blkpolicy's C(--state-dir) (default C(/run/blkpolicy)).
    type: path
  binary:
    description: The blkpolicy program.
    type: path
    default: /usr/sbin/blkpolicy
"""

EXAMPLES = r"""
- name: Spinning disks keep a long readahead
  blkpolicy_policy:
    content: |
      [[rule]]
      name = "spinning disks"
      [rule.match]
      rotational = true
      [rule.set]
      read_ahead_kb = 4096
"""

RETURN = r"""
policy_changed:
  description: Whether the file's text changed (or would).
  type: bool
writes:
  description: The writes that change a value, as "DEVICE ATTRIBUTE: NOW -> WANTED" (before they were made).
  type: list
  elements: str
"""

import json
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

EXIT_CHANGES = 5  # plan --detailed-exitcode: a write would change a value
EXIT_NO_DAEMON = 4  # reload: no daemon answered


class Blkpolicy:
    def __init__(self, module):
        self.m = module
        self.p = module.params

    def common(self):
        return ["--state-dir", self.p["state_dir"]] if self.p["state_dir"] else []

    def run(self, *args):
        return self.m.run_command([self.p["binary"], *args, *self.common()])

    def policy_args(self, swap=None):
        """--policy arguments for the whole policy, the file in place taken
        from SWAP (a candidate of the same name elsewhere) where given."""
        given = self.p["policy"] or []
        if swap is None:
            return [a for p in given for a in ("--policy", p)]
        rc, out, err = self.run("check", "--json", *[a for p in given for a in ("--policy", p)])
        try:
            files = json.loads(out)["files"]
        except (ValueError, KeyError):
            files = []
        dest = os.path.abspath(self.p["dest"])
        files = [f for f in files if os.path.abspath(f) != dest]
        # The candidate where the file will be: among its directory's files
        # by name (drop-ins are read in name order), else last.
        pos = len(files)
        for i, f in enumerate(files):
            if os.path.dirname(os.path.abspath(f)) == os.path.dirname(dest) and os.path.basename(f) > \
                    os.path.basename(dest):
                pos = i
                break
        files.insert(pos, swap)
        return [a for f in files for a in ("--policy", f)]

    def check(self, args, swap, shown_as):
        """`blkpolicy check` with ARGS (policy_args), whose SWAP is shown as SHOWN_AS."""
        rc, out, err = self.run("check", *args)
        if rc != 0:
            text = (err or out).strip().replace(swap, shown_as)
            self.m.fail_json(msg=f"the policy does not check (blkpolicy check, exit {rc}):\n{text}", rc=rc,
                             checker=text)

    def pending(self, args=None):
        """The writes the plan would make under the policy (ARGS from
        policy_args; the one in place when None): (exit status,
        ["DEV ATTR: a -> b"])."""
        args = self.policy_args() if args is None else args
        rc, out, err = self.run("plan", "--detailed-exitcode", "--json", *args, *(self.p["devices"] or []))
        if rc not in (0, EXIT_CHANGES):
            self.m.fail_json(msg=f"blkpolicy plan failed (exit {rc}): {(err or out).strip()}", rc=rc)
        writes = []
        for d in json.loads(out).get("devices", []):
            for a in d.get("actions", []):
                if a.get("action") == "write" and a.get("current") != a.get("expected"):
                    writes.append(f"{d.get('device')} {a.get('attribute')}: {a.get('current')} -> "
                                  f"{a.get('expected') or a.get('desired')}")
        return rc, writes

    def make_it_so(self):
        """The daemon reads the policy again where it runs; else apply."""
        rc, out, err = self.run("reload")
        if rc == 0:
            return "the daemon read the policy again"
        if rc != EXIT_NO_DAEMON:
            self.m.fail_json(msg=f"blkpolicy reload failed (exit {rc}): {(err or out).strip()}", rc=rc)
        rc, out, err = self.run("apply", *self.policy_args(), *(self.p["devices"] or []))
        if rc != 0:
            self.m.fail_json(msg=f"blkpolicy apply left values unset (exit {rc}):\n{(out + err).strip()}", rc=rc)
        return "applied (no daemon runs)"


def _listed_files(bp):
    """The policy files blkpolicy reads now (check --json's list)."""
    rc, out, err = bp.run("check", "--json", *bp.policy_args())
    try:
        return json.loads(out).get("files") or []
    except ValueError:
        return []


def put(path, text):
    """TEXT as PATH, whole: written aside under a hidden name (which
    blkpolicy never reads, nor its daemon's watch) and moved in."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = os.path.join(os.path.dirname(path) or ".", "." + os.path.basename(path) + ".ansible-tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    if os.path.exists(path):
        shutil.copymode(path, tmp)
    else:
        os.chmod(tmp, 0o644)
    os.rename(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            content=dict(type="str"),
            dest=dict(type="path", default="/etc/blkpolicy/policy.d/50-ansible.toml"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            apply=dict(type="bool", default=True),
            policy=dict(type="list", elements="path"),
            devices=dict(type="list", elements="str"),
            state_dir=dict(type="path"),
            binary=dict(type="path", default="/usr/sbin/blkpolicy"),
        ),
        required_if=[("state", "present", ["content"])],
        supports_check_mode=True,
    )
    p = module.params
    bp = Blkpolicy(module)
    if not os.access(p["binary"], os.X_OK):
        module.fail_json(msg=f"{p['binary']} is not there: install the blkpolicy package first")
    dest = p["dest"]
    before = None
    if os.path.exists(dest):
        with open(dest, encoding="utf-8", errors="replace") as f:
            before = f.read()
    after = p["content"] if p["state"] == "present" else None
    if after is not None and not after.endswith("\n"):
        after += "\n"
    policy_changed = before != after
    result = dict(changed=False, policy_changed=policy_changed, writes=[], dest=dest)
    if module._diff and policy_changed:
        result["diff"] = dict(before=before or "", after=after or "", before_header=dest, after_header=dest)

    # The candidate, checked and planned beside the rest of the policy, in
    # a directory of its own under the same name: nothing where the daemon
    # looks until it checks.
    work = tempfile.mkdtemp(prefix="blkpolicy-ansible.")
    try:
        writes = []
        if after is not None:
            candidate = os.path.join(work, os.path.basename(dest))
            with open(candidate, "w", encoding="utf-8") as f:
                f.write(after)
            # The policy's files listed once (check --json), the candidate in its place.
            candidate_args = bp.policy_args(candidate)
            bp.check(candidate_args, candidate, dest)
            if p["apply"]:
                _, writes = bp.pending(candidate_args)
        result["writes"] = writes
        result["changed"] = policy_changed or bool(writes)
        if module.check_mode or not result["changed"]:
            module.exit_json(**result)

        if policy_changed:
            if after is None:
                os.remove(dest)
            else:
                put(dest, after)
            # The policy as it now is on disk must check (another file can
            # clash with this one); otherwise the old file goes back.
            rc, out, err = bp.run("check", *bp.policy_args())
            if rc != 0 and after is None and not _listed_files(bp):
                rc = 0  # the last policy file removed: no policy is left, which is not a broken one
            if rc != 0:
                if before is None:
                    os.remove(dest)
                else:
                    put(dest, before)
                module.fail_json(msg=f"the policy with {dest} does not check (exit {rc}); the old file is back:\n"
                                     f"{(err or out).strip()}", rc=rc)
        if p["apply"] and after is None:
            # Removed: a running daemon reads the rest (and puts back what
            # only this file set, as its on_removal says); without one the
            # values stay as they are.
            rc, out, err = bp.run("reload")
            if rc not in (0, EXIT_NO_DAEMON):
                module.fail_json(msg=f"{dest} removed, but the daemon kept its old policy (blkpolicy reload, exit "
                                     f"{rc}): {(err or out).strip()}", rc=rc, **result)
            result["how"] = ("the daemon read the policy again" if rc == 0 else
                             "removed; no daemon runs, so the values it set stay (blkpolicy restore puts back what "
                             "blkpolicy changed)")
        elif p["apply"]:
            result["how"] = bp.make_it_so()
            rc, left = bp.pending()
            if rc == EXIT_CHANGES:
                module.fail_json(msg="values still differ from the policy after it was applied", left=left, **result)
        module.exit_json(**result)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
