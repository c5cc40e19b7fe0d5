// SPDX-License-Identifier: MIT
#include "agent/daemon/verdict.hpp"

#include "util/names.hpp"

namespace blkpolicy::agent {

namespace {
constexpr util::Named<AttrStatus> kAttrStatuses[] = {
    {AttrStatus::ok, "ok"},
    {AttrStatus::drifted, "drifted"},
    {AttrStatus::failed, "failed"},
    {AttrStatus::busy, "busy"},
};
static_assert(util::in_enum_order(kAttrStatuses));
}  // namespace

const char* to_string(AttrStatus s) { return util::name_of(kAttrStatuses, s); }

Verdict verdict(const AttrPass& p) {
    using S = AttrStatus;
    // Refused, or not to be had on this host: said once, until the plan changes.
    if (p.unattainable) {
        const bool said = p.status == S::failed;
        return {S::failed, said ? Say::nothing : Say::cannot_set, Shown::found, false, !said};
    }
    // Already as the policy says: the end of a state other than ok is said.
    if (p.in_policy) {
        return {S::ok, !p.fresh && p.status != S::ok ? Say::back_in_policy : Say::nothing, Shown::found, false, false};
    }
    // Out of policy, observe mode: said once per value found.
    if (!p.enforce) {
        const bool said = p.status == S::drifted && p.already_shown;
        return {S::drifted, said ? Say::nothing : Say::left_alone, Shown::found, !said, false};
    }
    // Enforce mode, written and read back as the policy says.
    if (p.stuck) {
        if (p.fresh) return {S::ok, Say::set_first, Shown::expected, false, false};
        if (p.settling && p.moved_by == systemd::AlertKind::reverted && p.status == S::ok)
            return {S::ok, Say::set_while_settling, Shown::expected, false, false};
        if (p.status == S::failed) return {S::ok, Say::resolved_by_write, Shown::expected, false, false};
        if (p.status == S::busy) return {S::ok, Say::set_after_busy, Shown::expected, false, false};
        return {S::ok, Say::re_applied, Shown::expected, true, false};
    }
    // Contention: a failure only when the next pass finds it busy too.
    if (p.busy) {
        if (p.status == S::busy) return {S::failed, Say::still_busy, Shown::after, false, true};
        if (p.status == S::failed) return {S::failed, Say::nothing, Shown::after, false, false};
        return {S::busy, Say::busy_once, Shown::after, false, false};
    }
    const bool said = p.status == S::failed;
    return {S::failed, said ? Say::nothing : Say::write_failed, Shown::after, false, !said};
}

}  // namespace blkpolicy::agent
