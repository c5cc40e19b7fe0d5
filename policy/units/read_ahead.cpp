// SPDX-License-Identifier: MIT
// read_ahead_kb: written last, because a queue-limits commit recomputes it
// on the kernels whose rows say so (and from 6.15 only ever raises it); a
// hidden NVMe multipath path has one that no read uses.
#include "policy/units/units.hpp"
#include "util/text.hpp"

namespace blkpolicy::policy::units {
namespace {

std::string read_ahead_skip(const DeviceFacts& facts) {
    if (!facts.hidden) return {};
    // The file is there and takes a value, which no read uses.
    return "hidden NVMe multipath path: reads come through its head" +
           (facts.holders.empty() ? std::string() : " (" + util::join(facts.holders, ", ") + ")") +
           ", whose read_ahead_kb is the one used";
}

void read_ahead_after_writes(Action& a, const PlanSoFar& so_far) {
    if (a.kind != ActionKind::unchanged || !so_far.by(kernel::WriteCause::limits_commit, a.id)) return;
    a.kind = ActionKind::write;
    a.note = "checked again after the limits writes: the kernel can raise read_ahead_kb";
}

Judgement read_ahead_judge(const FoundValue& f) {
    const auto& a = f.action;
    if (kernel::readahead_on_commit(f.kernel) == kernel::ReadaheadOnCommit::raise) {
        // A kernel that only ever raises read_ahead_kb on a limits commit
        // cannot have put a smaller value in place of the policy's (not its
        // computed one, not the device's first): someone wrote it.
        const auto now = util::parse_int(a.current);
        const auto expected = util::parse_int(a.expected);
        if (now && expected && *now < *expected) return Judgement::someone;
    }
    // What the kernel would have put back, from the limits as they are now.
    const bool rotational = value_of(f.values, Key::rotational) == "1";
    const auto computed = kernel::kernel_readahead_kb(
        f.kernel, rotational, util::parse_int(value_of(f.inputs, Key::optimal_io_size, "0")).value_or(0),
        util::parse_int(value_of(f.inputs, Key::max_sectors_kb, "0")).value_or(0));
    if (computed && std::to_string(*computed) == a.current) return Judgement::the_kernel;
    return Judgement::open;
}

}  // namespace

const UnitHooks kReadAhead = {.skip = read_ahead_skip,
                              .after_writes = read_ahead_after_writes,
                              .judge = read_ahead_judge,
                              .judge_inputs = {Key::optimal_io_size, Key::max_sectors_kb}};

}  // namespace blkpolicy::policy::units
