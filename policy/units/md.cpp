// SPDX-License-Identifier: MIT
// An md array's own tunables, under md/ of the array (not of its members):
// stripe_cache_size, the stripe cache of raid4/5/6 (the raid456
// personality's file), and sync_speed_min/max, how fast a resync, recovery
// or check may go (every array with redundancy: raid1, raid4/5/6, raid10).
// Neither is a queue value, nothing else writes them, and the kernel drops
// both when the array stops (the array's next start is a new change event).
// sync_speed_* read back "N (local)" or "N (system)", the latter following
// the sysctl dev.raid.speed_limit_*: udev/sysfs_text reads the second as
// "system", which a restore writes back.
#include "kernel/rows.hpp"
#include "policy/units/units.hpp"
#include "util/text.hpp"

namespace blkpolicy::policy::units {
namespace {

std::string not_an_array(const DeviceFacts& facts) {
    if (facts.stack == Stack::md) return {};
    return "not an md array: md/ tunables are the array's own (its members have none)";
}

std::string stripe_cache_skip(const DeviceFacts& facts) {
    if (auto why = not_an_array(facts); !why.empty()) return why;
    if (facts.md_level.empty() || kernel::md_has_stripe_cache(facts.md_level)) return {};
    return "an md " + facts.md_level + " array has no stripe cache (raid4, raid5 and raid6 have one)";
}

std::string sync_speed_skip(const DeviceFacts& facts) {
    if (auto why = not_an_array(facts); !why.empty()) return why;
    if (facts.md_level.empty() || kernel::md_resyncs(facts.md_level)) return {};
    return "an md " + facts.md_level + " array never resyncs: it has no sync speed";
}

// The array has no file for it although its level has one: not running
// (the personality's files come with its start: the change event after).
void not_running(Action& a) { a.note = "the array has no " + a.path + " now (its level has one once the array runs)"; }

// A min above the max is taken (kernel row md-sync-speed:min-over-max-taken)
// and makes the max do nothing below it: said on whichever the policy sets,
// planned against the other as it will be. ("system" is the sysctl's,
// whose number the plan does not read.)
void speed_after_writes(Action& a, const PlanSoFar& so_far) {
    const bool is_max = a.id == Key::md_sync_speed_max;
    const auto mine = util::parse_int(a.expected);
    const auto other = so_far.other(is_max ? Key::md_sync_speed_min : Key::md_sync_speed_max);
    if (!mine || !other.value) return;
    const auto min = is_max ? *other.value : *mine, max = is_max ? *mine : *other.value;
    if (kernel::md_speed_max_holds(min, max)) return;
    if (!a.note.empty()) a.note += "; ";
    a.note += is_max ? "below md.sync_speed_min (" + std::to_string(min) + " " + other.from +
                           "): the kernel takes it, and a resync still goes at least that fast"
                     : "above md.sync_speed_max (" + std::to_string(max) + " " + other.from +
                           "): the kernel takes it, and the max holds no resync back below this";
}

// Fixed defaults (the speeds the sysctls'), dropped with the array's stop.
std::optional<KernelDefault> md_kernel_default(Key id, const DeviceFacts&, const Values&, const HostContext&) {
    auto value = kernel::md_default(id);
    if (!value) return std::nullopt;
    std::string how = "the raid4/5/6 personality starts every array with 256 stripes";
    if (id != Key::md_stripe_cache_size)
        how = std::string("an array follows the sysctl dev.raid.speed_limit_") +
              (id == Key::md_sync_speed_min ? "min" : "max") + " until a number is written to it";
    return KernelDefault{std::move(*value), kernel::kernel_row(kernel::KRow::md_defaults).id, std::move(how),
                         "nothing while the array runs; its stop drops a written value (the next start has the "
                         "default)"};
}

}  // namespace

const UnitHooks kMdStripeCache = {
    .skip = stripe_cache_skip, .missing = not_running, .kernel_default = md_kernel_default};
const UnitHooks kMdSyncSpeed = {.skip = sync_speed_skip,
                                .missing = not_running,
                                .after_writes = speed_after_writes,
                                .kernel_default = md_kernel_default,
                                .read = kernel::md_speed_value};

}  // namespace blkpolicy::policy::units
