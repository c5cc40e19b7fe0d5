// SPDX-License-Identifier: MIT
// io_timeout: on SCSI, device/timeout is the same request timer in seconds
// (kernel row io-timeout:one-timer-with-scsi-timeout), so a plan that sets
// both must set the same time.
#include <algorithm>

#include "policy/units/units.hpp"
#include "util/text.hpp"

namespace blkpolicy::policy::units {
namespace {

void io_timeout_after_writes(Action& a, const PlanSoFar& so_far) {
    const auto timeout = std::find_if(so_far.actions.begin(), so_far.actions.end(), [](const Action& x) {
        return x.id == Key::device_timeout && (x.kind == ActionKind::write || x.kind == ActionKind::unchanged);
    });
    if (timeout == so_far.actions.end()) return;
    kernel::kernel_row(kernel::KRow::io_timeout_one_timer_with_scsi_timeout);
    const auto s = util::parse_int(timeout->expected).value_or(0);
    const auto ms = util::parse_int(a.expected).value_or(0);
    if (s * 1000 == ms) return;
    a.kind = ActionKind::refuse;
    a.note = "device.timeout = " + timeout->expected + " (" + timeout->rule.name + ") sets the same request timer to " +
             std::to_string(s * 1000) + " ms: set one of the two, or both to the same time";
}

}  // namespace

const UnitHooks kIoTimeout = {.after_writes = io_timeout_after_writes};

}  // namespace blkpolicy::policy::units
