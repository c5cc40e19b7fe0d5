// SPDX-License-Identifier: MIT
// A device's writeback limits (its bdi): max_ratio and min_ratio, percents
// of the dirty page cache, and strict_limit (6.2+). The kernel refuses a
// min_ratio above the max_ratio whichever is written (kernel row
// bdi-ratios:min-not-above-max), so each is planned against the other as
// it will be: the policy's value where it sets one, else the device's.
#include "policy/units/units.hpp"
#include "util/text.hpp"

namespace blkpolicy::policy::units {
namespace {

void max_ratio_after_writes(Action& a, const PlanSoFar& so_far) {
    const auto max = util::parse_int(a.expected);
    const auto min = util::parse_int(value_of(so_far.current, Key::bdi_min_ratio));
    if (!max || !min || kernel::bdi_ratios_accepted(*min, *max)) return;
    // min_ratio is written after it: even where the plan lowers it, this
    // write would meet the old one first.
    const auto planned = so_far.other(Key::bdi_min_ratio);
    a.kind = ActionKind::refuse;
    a.note = "below bdi.min_ratio (" + std::to_string(*min) + " on this device): the kernel refuses it (EINVAL)";
    if (planned.planned && planned.value && kernel::bdi_ratios_accepted(*planned.value, *max))
        a.note += "; this plan lowers bdi.min_ratio to " + std::to_string(*planned.value) + " " + planned.from +
                  ", after which the next pass (or apply again) writes it";
}

void min_ratio_after_writes(Action& a, const PlanSoFar& so_far) {
    const auto min = util::parse_int(a.expected);
    const auto max = so_far.other(Key::bdi_max_ratio);
    if (!min || !max.value || kernel::bdi_ratios_accepted(*min, *max.value)) return;
    a.kind = ActionKind::refuse;
    a.note =
        "above bdi.max_ratio (" + std::to_string(*max.value) + " " + max.from + "): the kernel refuses it (EINVAL)";
}

void strict_limit_missing(Action& a) {
    kernel::kernel_row(kernel::KRow::bdi_strict_limit_present);
    a.kind = ActionKind::unavailable;
    a.note = "this kernel has no bdi/strict_limit (6.2 and later have it)";
}

// Fixed defaults, moved only by writes.
std::optional<KernelDefault> bdi_kernel_default(Key id, const DeviceFacts&, const Values&, const HostContext&) {
    const auto value = kernel::bdi_default(id);
    if (!value) return std::nullopt;
    return KernelDefault{std::to_string(*value), kernel::kernel_row(kernel::KRow::bdi_defaults).id,
                         id == Key::bdi_strict_limit
                             ? "a block device's writeback is held to the global dirty limit only, not to its "
                               "own share"
                         : id == Key::bdi_max_ratio ? "a block device's writeback may take the whole dirty limit"
                                                    : "no part of the dirty limit is kept for one block device",
                         "nothing the kernel does later; the kernel refuses a min_ratio above the max_ratio"};
}

}  // namespace

const UnitHooks kBdiMaxRatio = {.after_writes = max_ratio_after_writes, .kernel_default = bdi_kernel_default};
const UnitHooks kBdiMinRatio = {.after_writes = min_ratio_after_writes, .kernel_default = bdi_kernel_default};
const UnitHooks kBdiStrictLimit = {.missing = strict_limit_missing, .kernel_default = bdi_kernel_default};

}  // namespace blkpolicy::policy::units
