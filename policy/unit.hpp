// SPDX-License-Identifier: MIT
// What makes an attribute special, beside its row (policy/attributes): the
// hooks plan, apply and the daemon ask instead of testing its key. A plain
// attribute has none; a quirky one has a file of its own under
// policy/units/ holding them, named in its row. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernel/rows.hpp"
#include "policy/facts.hpp"
#include "policy/plan.hpp"
#include "util/text.hpp"

namespace blkpolicy::policy {

// Another attribute's value once the plan has run: the policy's where the
// plan writes or keeps it (FROM: "(rule NAME)"), else the device's ("on
// this device").
struct OtherValue {
    std::optional<std::int64_t> value;
    std::string from;
    bool planned = false;
};

// What the plan knows of the writes before an action, in its second pass
// (write order), when it asks that action's unit what they do to it.
struct PlanSoFar {
    const std::vector<Action>& actions;  // the whole plan, in write order
    const Values& current;               // the device's values before any write
    const PlanContext& ctx;
    std::string final_scheduler;           // the scheduler once the writes before have run
    std::int64_t final_nr = -1;            // nr_requests then; -1: a switch reset it to a default not known here
    std::set<kernel::WriteCause> written;  // what the writes before it cause
    // The kernel's row saying that a write of CAUSE before this one moves
    // attribute ID on this kernel; null when none was written or it moves nothing.
    const kernel::KernelRow* by(kernel::WriteCause cause, Key id) const {
        return written.count(cause) ? kernel::disturbed_by(cause, id, ctx.kernel) : nullptr;
    }
    // KEY's value once the whole plan has run (bdi's ratios, md's speeds:
    // each is planned against the other).
    OtherValue other(Key key) const {
        for (const auto& x : actions)
            if (x.id == key && (x.kind == ActionKind::write || x.kind == ActionKind::unchanged))
                return {util::parse_int(x.expected), "(" + x.rule.name + ")", true};
        return {util::parse_int(value_of(current, key)), "on this device", false};
    }
};

// What the daemon found: a value that is not the one it wrote.
struct FoundValue {
    const Action& action;          // expected, and current (what is there now)
    const Values& values;          // the device's values read in this pass
    const Values& inputs;          // the unit's judge_inputs, read just now
    kernel::KernelVersion kernel;  // the running kernel
};
// Who put it there, as far as the unit can tell from the kernel's rules.
enum class Judgement {
    open,        // the unit cannot tell: the daemon's general rules decide
    the_kernel,  // a value the kernel itself puts there (reverted)
    someone,     // a value the kernel never puts there (drift)
};

// The kernel's own value of an attribute on a device, as explain shows it:
// the value, the kernel row it comes from, how the kernel arrives at it,
// and what else moves it.
struct KernelDefault {
    std::string value;
    std::string_view row;  // the row's id
    std::string derivation;
    std::string disturbs;
};

struct UnitHooks {
    // Why the plan leaves it alone on this device before anything else
    // (empty: it does not), e.g. read_ahead_kb on a hidden multipath path.
    std::string (*skip)(const DeviceFacts& facts) = nullptr;
    // The device has no file for it now. decided_after_writes: it may
    // appear after an earlier write (a scheduler's tunables after the
    // switch), so the plan resolves it as if there and after_writes
    // decides. Otherwise `missing` may reword the plain "device has no
    // PATH" (and its kind).
    bool decided_after_writes = false;
    void (*missing)(Action& a) = nullptr;
    // The plan's second pass, for an action that writes or is unchanged:
    // what the writes before it (a scheduler switch, an nr_requests write,
    // a limits commit, another attribute's value) make of it.
    void (*after_writes)(Action& a, const PlanSoFar& so_far) = nullptr;
    // apply: whether VALUE goes in only after a 0 (BEFORE: what was read
    // just before the write).
    bool (*zero_first)(const Action& a, const std::string& value, const std::string& before) = nullptr;
    // The daemon: whether the value found is one the kernel puts there
    // itself, reading judge_inputs for it.
    Judgement (*judge)(const FoundValue& found) = nullptr;
    std::vector<Key> judge_inputs = {};
    // explain: the kernel's own value of attribute ID on this device and
    // host (nullopt: not known from what was read).
    std::optional<KernelDefault> (*kernel_default)(Key id, const DeviceFacts& facts, const Values& values,
                                                   const HostContext& host) = nullptr;
    // The value as the kernel shows it (trimmed), in the form a policy
    // compares and a restore writes back (md's "1000 (system)": "system").
    std::string (*read)(std::string_view shown) = nullptr;
};

// The hooks of an action's attribute (its row's), or nullptr for a plain one.
const UnitHooks* hooks_of(Key id);

}  // namespace blkpolicy::policy
