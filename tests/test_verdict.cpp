// SPDX-License-Identifier: MIT
// The reconciler's state machine for one attribute, as a table: what a pass
// found -> the record's next status, what is said, which value it shows and
// which counter grows. tests/test_reconciler.cpp drives the same machine
// through a fake sysfs; this table names every case.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "agent/daemon/verdict.hpp"

using namespace blkpolicy::agent;
using blkpolicy::systemd::AlertKind;

namespace {

struct Row {
    const char* why;
    AttrPass pass;
    Verdict want;
};

AttrPass found(AttrStatus status) {
    AttrPass p;
    p.status = status;
    return p;
}
AttrPass with(AttrPass p, void (*change)(AttrPass&)) {
    change(p);
    return p;
}

using S = AttrStatus;
constexpr bool kDrift = true, kFailure = true, kNo = false;

const Row kRows[] = {
    // Refused by the plan, or a value the host cannot give.
    {"unattainable, first time: a failed alert",
     with(found(S::ok), [](AttrPass& p) { p.unattainable = true; }),
     {S::failed, Say::cannot_set, Shown::found, kNo, kFailure}},
    {"unattainable again: said already",
     with(found(S::failed), [](AttrPass& p) { p.unattainable = true; }),
     {S::failed, Say::nothing, Shown::found, kNo, kNo}},
    {"unattainable in observe mode: the same",
     with(found(S::ok), [](AttrPass& p) { p.unattainable = true, p.enforce = false; }),
     {S::failed, Say::cannot_set, Shown::found, kNo, kFailure}},

    // In policy before any write of this pass.
    {"in policy, ok: nothing",
     with(found(S::ok), [](AttrPass& p) { p.in_policy = true; }),
     {S::ok, Say::nothing, Shown::found, kNo, kNo}},
    {"in policy at first sight: nothing",
     with(found(S::ok), [](AttrPass& p) { p.in_policy = p.fresh = true; }),
     {S::ok, Say::nothing, Shown::found, kNo, kNo}},
    {"in policy after a drift (observe): resolved",
     with(found(S::drifted), [](AttrPass& p) { p.in_policy = true, p.enforce = false; }),
     {S::ok, Say::back_in_policy, Shown::found, kNo, kNo}},
    {"in policy after a failure: resolved",
     with(found(S::failed), [](AttrPass& p) { p.in_policy = true; }),
     {S::ok, Say::back_in_policy, Shown::found, kNo, kNo}},
    {"in policy after contention: resolved",
     with(found(S::busy), [](AttrPass& p) { p.in_policy = true; }),
     {S::ok, Say::back_in_policy, Shown::found, kNo, kNo}},

    // Observe mode, out of policy.
    {"observe: first sight out of policy",
     with(found(S::ok), [](AttrPass& p) { p.fresh = true, p.enforce = false; }),
     {S::drifted, Say::left_alone, Shown::found, kDrift, kNo}},
    {"observe: moved after being in policy",
     with(found(S::ok), [](AttrPass& p) { p.enforce = false, p.moved_by = AlertKind::conflict; }),
     {S::drifted, Say::left_alone, Shown::found, kDrift, kNo}},
    {"observe: the same drifted value again: said already",
     with(found(S::drifted), [](AttrPass& p) { p.enforce = false, p.already_shown = true; }),
     {S::drifted, Say::nothing, Shown::found, kNo, kNo}},
    {"observe: drifted to another value: said again",
     with(found(S::drifted), [](AttrPass& p) { p.enforce = false; }),
     {S::drifted, Say::left_alone, Shown::found, kDrift, kNo}},

    // Enforce mode, written and read back as the policy says.
    {"enforce: first write",
     with(found(S::ok), [](AttrPass& p) { p.fresh = p.stuck = true; }),
     {S::ok, Say::set_first, Shown::expected, kNo, kNo}},
    {"enforce: the kernel put its value back while settling: applied, not a warning",
     with(found(S::ok), [](AttrPass& p) { p.stuck = p.settling = true, p.moved_by = AlertKind::reverted; }),
     {S::ok, Say::set_while_settling, Shown::expected, kNo, kNo}},
    {"enforce: settling, but someone else wrote it: a drift, re-applied",
     with(found(S::ok), [](AttrPass& p) { p.stuck = p.settling = true; }),
     {S::ok, Say::re_applied, Shown::expected, kDrift, kNo}},
    {"enforce: reverted after settling: re-applied with a warning",
     with(found(S::ok), [](AttrPass& p) { p.stuck = true, p.moved_by = AlertKind::reverted; }),
     {S::ok, Say::re_applied, Shown::expected, kDrift, kNo}},
    {"enforce: another writer's value: a conflict, re-applied",
     with(found(S::ok), [](AttrPass& p) { p.stuck = true, p.moved_by = AlertKind::conflict; }),
     {S::ok, Say::re_applied, Shown::expected, kDrift, kNo}},
    {"enforce: a failed attribute written at last: resolved",
     with(found(S::failed), [](AttrPass& p) { p.stuck = true; }),
     {S::ok, Say::resolved_by_write, Shown::expected, kNo, kNo}},
    {"enforce: settling does not hide a failure's end",
     with(found(S::failed), [](AttrPass& p) { p.stuck = p.settling = true, p.moved_by = AlertKind::reverted; }),
     {S::ok, Say::resolved_by_write, Shown::expected, kNo, kNo}},
    {"enforce: written at the pass after contention: applied",
     with(found(S::busy), [](AttrPass& p) { p.stuck = true; }),
     {S::ok, Say::set_after_busy, Shown::expected, kNo, kNo}},
    {"enforce: a drift found in observe mode, now enforced: re-applied",
     with(found(S::drifted), [](AttrPass& p) { p.stuck = true; }),
     {S::ok, Say::re_applied, Shown::expected, kDrift, kNo}},

    // Enforce mode, contention (EBUSY past the retry bound).
    {"busy once: an info line, tried again",
     with(found(S::ok), [](AttrPass& p) { p.busy = true; }),
     {S::busy, Say::busy_once, Shown::after, kNo, kNo}},
    {"busy at first sight: the same",
     with(found(S::ok), [](AttrPass& p) { p.busy = p.fresh = true; }),
     {S::busy, Say::busy_once, Shown::after, kNo, kNo}},
    {"busy at a second pass: failed",
     with(found(S::busy), [](AttrPass& p) { p.busy = true; }),
     {S::failed, Say::still_busy, Shown::after, kNo, kFailure}},
    {"busy while failed: said already",
     with(found(S::failed), [](AttrPass& p) { p.busy = true; }),
     {S::failed, Say::nothing, Shown::after, kNo, kNo}},

    // Enforce mode, the write did not take.
    {"write failed: a failed alert",
     with(found(S::ok), [](AttrPass& p) { p.fresh = true; }),
     {S::failed, Say::write_failed, Shown::after, kNo, kFailure}},
    {"write failed after contention: a failed alert",
     found(S::busy),
     {S::failed, Say::write_failed, Shown::after, kNo, kFailure}},
    {"write failed again: said already", found(S::failed), {S::failed, Say::nothing, Shown::after, kNo, kNo}},
};

}  // namespace

TEST_CASE("verdict: every case of one attribute's pass, as a table") {
    std::set<Say> said;
    for (const auto& row : kRows) {
        CAPTURE(row.why);
        const Verdict v = verdict(row.pass);
        CHECK(v.status == row.want.status);
        CHECK(v.say == row.want.say);
        CHECK(v.shown == row.want.shown);
        CHECK(v.counts_drift == row.want.counts_drift);
        CHECK(v.counts_failure == row.want.counts_failure);
        said.insert(v.say);
    }
    // Every thing the reconciler can say has a row that says it.
    for (int i = 0; i <= static_cast<int>(Say::write_failed); ++i) {
        CAPTURE(i);
        CHECK(said.count(static_cast<Say>(i)) == 1);
    }
}

TEST_CASE("verdict: a counter grows only with an alert that names it") {
    // Whatever the pass found, a drift count comes with a drift-kind alert
    // and a failure count with a failed one: the metrics' counters and the
    // journal agree.
    for (int bits = 0; bits < (1 << 8); ++bits) {
        for (auto status : {S::ok, S::drifted, S::failed, S::busy}) {
            AttrPass p;
            p.status = status;
            p.unattainable = bits & 1;
            p.fresh = bits & 2;
            p.in_policy = bits & 4;
            p.already_shown = bits & 8;
            p.enforce = bits & 16;
            p.settling = bits & 32;
            p.stuck = bits & 64;
            p.busy = bits & 128;
            const Verdict v = verdict(p);
            CAPTURE(bits);
            CAPTURE(to_string(status));
            CHECK(v.counts_drift == (v.say == Say::left_alone || v.say == Say::re_applied));
            CHECK(v.counts_failure ==
                  (v.say == Say::cannot_set || v.say == Say::still_busy || v.say == Say::write_failed));
            // Out of policy in enforce mode ends ok only when the write took.
            if (p.enforce && !p.unattainable && !p.in_policy) CHECK((v.status == S::ok) == p.stuck);
        }
    }
}
