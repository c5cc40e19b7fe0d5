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

std::string speed_read(std::string_view shown) { return kernel::md_speed_value(shown); }

}  // namespace

const UnitHooks kMdStripeCache = {
    .skip = stripe_cache_skip, .missing = not_running, .kernel_default = md_kernel_default};
const UnitHooks kMdSyncSpeed = {
    .skip = sync_speed_skip, .missing = not_running, .kernel_default = md_kernel_default, .read = speed_read};

}  // namespace blkpolicy::policy::units
