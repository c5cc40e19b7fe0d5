// SPDX-License-Identifier: MIT
// wbt_lat_usec: a switch to bfq turns a default wbt off; a latency written
// while wbt is off is retained and does nothing until 0 is written first;
// the kernel's own values are 0 under bfq and the default for the queue's
// rotational flag (what -1 gives).
#include "policy/units/units.hpp"

namespace blkpolicy::policy::units {
namespace {

void wbt_after_writes(Action& a, const PlanSoFar& so_far) {
    if (a.expected == "0") return;
    if (so_far.by(kernel::WriteCause::scheduler_switch, a.id) && so_far.final_scheduler == "bfq") {
        a.kind = ActionKind::write;
        a.zero_first = true;
        a.note = "switching to bfq turns default wbt off: written as 0, then the value";
    } else if (a.current == "0") {
        kernel::kernel_row(kernel::KRow::wbt_store_retained_value_noop);
        a.zero_first = true;
        a.note = "wbt is off: written as 0, then the value (the value alone can be a no-op)";
    }
}

// When wbt reads 0 (off, e.g. after bfq disabled the default) a non-zero
// value equal to the retained latency is a silent no-op: 0 first makes it stick.
bool wbt_zero_first(const Action& a, const std::string& value, const std::string& before) {
    if (value == "0" || (before != "0" && !a.zero_first)) return false;
    kernel::kernel_row(kernel::KRow::wbt_store_retained_value_noop);
    return true;
}

Judgement wbt_judge(const FoundValue& f) {
    const auto& a = f.action;
    if (a.current == "0" && value_of(f.values, Key::scheduler) == "bfq" &&
        kernel::disturbed_by(kernel::WriteCause::scheduler_switch, a.id, f.kernel))
        return Judgement::the_kernel;
    const bool rotational = value_of(f.values, Key::rotational) == "1";
    if (a.current == std::to_string(kernel::wbt_default_usec(rotational))) return Judgement::the_kernel;
    return Judgement::open;
}

}  // namespace

const UnitHooks kWbt = {.after_writes = wbt_after_writes, .zero_first = wbt_zero_first, .judge = wbt_judge};

}  // namespace blkpolicy::policy::units
