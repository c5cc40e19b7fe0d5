// SPDX-License-Identifier: MIT
#include "agent/restore.hpp"

#include <algorithm>

#include "policy/attributes.hpp"
#include "udev/discovery.hpp"
#include "util/names.hpp"

namespace blkpolicy::agent {

using policy::ActionKind;
using R = Restored::Result;

namespace {
constexpr util::Named<R> kResults[] = {
    {R::restored, "restored"}, {R::already, "already"}, {R::left, "left"},
    {R::failed, "failed"},     {R::busy, "busy"},       {R::dropped, "dropped"},
};
static_assert(util::in_enum_order(kResults));
}  // namespace

const char* to_string(Restored::Result r) { return util::name_of(kResults, r); }

bool note_writes(WrittenValues& values, const policy::DevicePlan& plan, const DeviceResult& result) {
    bool changed = false;
    for (const auto& r : result.results) {
        if (r.attempts == 0 || (r.outcome != Outcome::applied && r.outcome != Outcome::not_stuck)) continue;
        const auto a = std::find_if(plan.actions.begin(), plan.actions.end(),
                                    [&](const policy::Action& x) { return x.attribute == r.attribute; });
        if (a == plan.actions.end() || a->current.empty()) continue;  // nothing was there to put back
        auto [it, fresh] = values.try_emplace(r.attribute, WrittenValue{a->current, r.after});
        if (!fresh && it->second.written != r.after) {
            it->second.written = r.after;
            changed = true;
        }
        changed = changed || fresh;
    }
    return changed;
}

std::set<std::string> declared_attributes(const policy::DevicePlan& plan) {
    std::set<std::string> out;
    for (const auto& a : plan.actions)
        if (a.kind != ActionKind::skip) out.insert(a.attribute);
    return out;
}

std::vector<Restored> restore_values(udev::Sysfs& sysfs, const std::string& device, WrittenValues& values,
                                     const std::set<std::string>& keep, const BusyRetry& retry) {
    std::vector<Restored> out;
    std::vector<std::string> keys;
    for (const auto& [attr, v] : values)
        if (!keep.count(attr)) keys.push_back(attr);
    if (keys.empty()) return out;
    const auto now = udev::read_values(sysfs, device, keys);
    const bool scheduler_back = [&] {
        const auto it = values.find("scheduler");
        return it != values.end() && !keep.count("scheduler") && now.count("scheduler") &&
               now.at("scheduler") == it->second.written && it->second.written != it->second.original;
    }();
    policy::DevicePlan plan;
    plan.device = device;
    for (const auto& attr : keys) {
        const auto& v = values.at(attr);
        Restored r{attr, v.original, v.written, policy::value_of(now, attr), {}, R::restored, {}};
        const auto spec = policy::find_attribute(attr);
        if (!spec || !now.count(attr)) {
            r.result = R::dropped;
            r.detail = "the device has no " + attr + " now";
        } else if (spec->id == policy::Key::iosched && scheduler_back) {
            r.result = R::dropped;
            r.detail = "it goes back with the scheduler";
        } else if (r.before == v.original) {
            r.result = R::already;
            r.after = r.before;
        } else if (r.before != v.written) {
            r.result = R::left;
            r.after = r.before;
            r.detail =
                "it is now " + r.before + ", not the " + v.written + " blkpolicy wrote: someone else set it since";
        } else {
            policy::Action a;
            a.id = spec->id;
            a.attribute = attr;
            a.path = spec->path;
            a.phase = spec->phase;
            a.cause = spec->cause;
            a.rank = policy::write_rank(*spec);
            a.current = r.before;
            a.desired = a.value = a.expected = v.original;
            a.kind = ActionKind::write;
            plan.actions.push_back(std::move(a));
        }
        out.push_back(std::move(r));
    }
    std::stable_sort(plan.actions.begin(), plan.actions.end(),
                     [](const policy::Action& a, const policy::Action& b) { return a.rank < b.rank; });
    if (!plan.actions.empty()) {
        for (const auto& res : execute(sysfs, plan, retry).results) {
            auto r =
                std::find_if(out.begin(), out.end(), [&](const Restored& x) { return x.attribute == res.attribute; });
            r->after = res.after;
            if (res.outcome == Outcome::busy) {
                r->result = R::busy;
                r->detail = res.detail;
            } else if ((res.outcome == Outcome::applied || res.outcome == Outcome::unchanged) &&
                       res.after == r->original) {
                r->result = R::restored;
            } else {
                r->result = R::failed;
                r->detail = res.detail.empty() ? "it reads " + res.after + " after the write" : res.detail;
            }
        }
    }
    for (const auto& r : out)
        if (r.result != R::busy) values.erase(r.attribute);
    return out;
}

systemd::Alert restored_alert(const std::string& device, const Restored& r, const std::string& why) {
    systemd::Alert al;
    al.kind = systemd::AlertKind::restored;
    al.device = device;
    al.attribute = r.attribute;
    al.expected = r.original;
    al.actual = r.after;
    al.message = restored_sentence(device, r) + (r.result == R::restored ? why : std::string());
    al.fields = {{"RESTORE", to_string(r.result)}, {"WRITTEN", r.written}};
    return al;
}

std::string restored_sentence(const std::string& device, const Restored& r) {
    const std::string what = r.attribute + " of " + device;
    switch (r.result) {
        case R::restored:
            return "put " + what + " back to " + r.original + ", what it was before blkpolicy set " + r.written;
        case R::already:
            return what + " is back at " + r.original + " already";
        case R::left:
            return "left " + what + " as it is: " + r.detail;
        case R::failed:
            return "cannot put " + what + " back to " + r.original + ": " + r.detail;
        case R::busy:
            return "cannot put " + what + " back to " + r.original + " yet: " + r.detail;
        case R::dropped:
            return "nothing to put back for " + what + ": " + r.detail;
    }
    return {};
}

}  // namespace blkpolicy::agent
