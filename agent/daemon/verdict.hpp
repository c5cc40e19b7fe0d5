// SPDX-License-Identifier: MIT
// What a pass means for one managed attribute of one device: the state an
// attribute's record moves to, what is said about it, and which of its
// counters grows. A pure function of what the pass found, so that the whole
// state machine (status x outcome x mode x settling) is one table in
// tests/test_verdict.cpp; the reconciler gathers the inputs, says the words
// and keeps the record.
#pragma once

#include "systemd/alerts.hpp"

namespace blkpolicy::agent {

// busy: the last pass could not write it because another writer held the
// queue (EBUSY past the retry bound); tried again at the next pass, and
// alerted as failed only when that pass finds it busy too.
enum class AttrStatus { ok, drifted, failed, busy };
const char* to_string(AttrStatus s);

// What one pass found for one attribute.
struct AttrPass {
    // The plan refused the value, or the host cannot give it (a scheduler
    // neither built in nor loadable): nothing was written.
    bool unattainable = false;
    // First sight of the attribute, or the policy changed its value: the
    // record starts again (status ok).
    bool fresh = false;
    AttrStatus status = AttrStatus::ok;  // the record's, before this pass
    // The value just before blkpolicy would write it is the policy's.
    bool in_policy = false;
    // The record already shows the value found now (observe mode said it).
    bool already_shown = false;
    bool enforce = true;
    // Within the first verify passes after the device's add uevent.
    bool settling = false;
    // Who moved it, when it is out of policy: drift, reverted or conflict.
    systemd::AlertKind moved_by = systemd::AlertKind::drift;
    // This pass wrote it (or found it unchanged) and read the policy's value back.
    bool stuck = false;
    // This pass's write was refused with EBUSY past the retry bound.
    bool busy = false;
};

// What is said; the reconciler words each.
enum class Say {
    nothing,
    cannot_set,          // failed: refused, or not to be had on this host
    back_in_policy,      // resolved: someone put the policy's value back
    left_alone,          // drift, reverted or conflict; observe mode leaves it
    set_first,           // applied: first write of this value
    set_while_settling,  // applied: the driver's setup put its value back; written again
    resolved_by_write,   // resolved: a failed attribute now written
    set_after_busy,      // applied: written at the pass after contention
    re_applied,          // drift, reverted or conflict; written back
    busy_once,           // an info line: tried again at the next pass
    still_busy,          // failed: busy at a second pass
    write_failed,        // failed: the write did not take
};

// Which value the record shows afterwards.
enum class Shown {
    found,     // the value before blkpolicy would write (the plan's reading)
    expected,  // the policy's, read back after the write
    after,     // what the write left (the found value where nothing was written)
};

struct Verdict {
    AttrStatus status = AttrStatus::ok;
    Say say = Say::nothing;
    Shown shown = Shown::found;
    bool counts_drift = false;    // a drift, reverted or conflict alert
    bool counts_failure = false;  // a failed alert
};

Verdict verdict(const AttrPass& p);

}  // namespace blkpolicy::agent
