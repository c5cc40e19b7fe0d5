// SPDX-License-Identifier: MIT
// What a scheduler switch and an nr_requests write do to the values written
// after them: nr_requests (reset by a switch), async_depth (7.0+: reset by
// a switch, rescaled by nr_requests, capped at it, refused under none) and
// the scheduler's own tunables iosched.NAME (made anew by a switch, absent
// under another scheduler or none). The kernel rows name each behaviour.
#include "policy/units/units.hpp"
#include "util/text.hpp"

namespace blkpolicy::policy::units {
namespace {

void nr_requests_after_writes(Action& a, const PlanSoFar& so_far) {
    if (!so_far.by(kernel::WriteCause::scheduler_switch, a.id)) return;
    a.kind = ActionKind::write;
    a.note = "the scheduler switch resets nr_requests";
}

void async_depth_missing(Action& a) {
    kernel::kernel_row(kernel::KRow::async_depth_iosched_tunable);
    a.note =
        "this kernel has no queue/async_depth (7.0 and later have it; before, mq-deadline has "
        "iosched.async_depth)";
}

void async_depth_after_writes(Action& a, const PlanSoFar& so_far) {
    const auto want = util::parse_int(a.expected).value_or(0);
    if (so_far.final_scheduler == "none") {
        kernel::kernel_row(kernel::KRow::async_depth_write_capped_refused_under_none);
        a.kind = ActionKind::skip;
        a.note = "under scheduler none the kernel refuses async_depth (EINVAL): it follows nr_requests";
    } else if (so_far.final_nr > 0 && want > so_far.final_nr) {
        kernel::kernel_row(kernel::KRow::async_depth_write_capped_refused_under_none);
        a.kind = ActionKind::refuse;
        a.note = "above nr_requests (" + std::to_string(so_far.final_nr) + "): the kernel would cap it at that";
    } else if (so_far.by(kernel::WriteCause::scheduler_switch, a.id)) {
        a.kind = ActionKind::write;
        a.note = "the switch to " + so_far.final_scheduler + " resets async_depth";
    } else if (so_far.by(kernel::WriteCause::nr_requests_write, a.id)) {
        a.kind = ActionKind::write;
        a.note = "writing nr_requests rescales async_depth";
    }
}

void iosched_after_writes(Action& a, const PlanSoFar& so_far) {
    const std::string& scheduler = so_far.final_scheduler;
    if (scheduler == "none") {
        a.kind = ActionKind::skip;
        a.note = "scheduler none has no tunables";
    } else if (a.attribute == "iosched." + std::string(key_text(Key::async_depth)) && scheduler == "mq-deadline" &&
               so_far.current.count(std::string(key_text(Key::async_depth)))) {
        kernel::kernel_row(kernel::KRow::async_depth_queue_attribute);
        a.kind = ActionKind::unavailable;
        a.note = "moved: since 7.0 mq-deadline has no iosched/async_depth; set async_depth instead";
    } else if (a.current.empty() && !so_far.written.count(kernel::WriteCause::scheduler_switch)) {
        a.kind = ActionKind::skip;
        a.note = "scheduler " + scheduler + " has no tunable " + a.attribute.substr(8);
    } else if (so_far.by(kernel::WriteCause::scheduler_switch, a.id)) {
        a.kind = ActionKind::write;
        a.note = "the switch to " + scheduler + " recreates iosched/ with defaults";
    }
}

}  // namespace

const UnitHooks kNrRequests = {.after_writes = nr_requests_after_writes};
const UnitHooks kAsyncDepth = {.missing = async_depth_missing, .after_writes = async_depth_after_writes};
const UnitHooks kIosched = {.decided_after_writes = true, .after_writes = iosched_after_writes};

}  // namespace blkpolicy::policy::units
