// SPDX-License-Identifier: MIT
#include "policy/plan.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "policy/match.hpp"
#include "policy/unit.hpp"
#include "util/names.hpp"
#include "util/text.hpp"

namespace blkpolicy::policy {

namespace {
constexpr util::Named<ActionKind> kActionKinds[] = {
    {ActionKind::write, "write"},   {ActionKind::unchanged, "unchanged"},     {ActionKind::skip, "skip"},
    {ActionKind::refuse, "refuse"}, {ActionKind::unavailable, "unavailable"},
};
static_assert(util::in_enum_order(kActionKinds));
}  // namespace

const char* to_string(ActionKind k) { return util::name_of(kActionKinds, k); }

namespace {

struct Winner {
    const Setting* setting = nullptr;
    RuleRef rule;
    std::vector<RuleRef> overridden;
    const Rule* rule_ptr = nullptr;
};

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Fills value/expected/kind for one action from the winning setting,
// deciding skip or refuse where the device cannot take the value.
void resolve(Action& a, const AttributeSpec& spec, const Winner& w, const DeviceFacts& facts, const Values& current,
             const PlanContext& ctx, bool final_rotational) {
    const auto& values = w.setting->values;
    a.desired = util::join(values, ", ");
    a.value = values.front();
    a.expected = a.value;

    if (spec.kind == ValueKind::scheduler) {
        auto listed = [](const std::vector<std::string>& list, const std::string& s) {
            return std::find(list.begin(), list.end(), s) != list.end();
        };
        // Offered now, or one the kernel may load when the name is written.
        auto possible = [&](const std::string& s) {
            if (listed(facts.schedulers, s)) return true;
            if (ctx.refused_schedulers.count(s)) return false;
            return !ctx.loadable_schedulers || listed(*ctx.loadable_schedulers, s);
        };
        std::vector<std::string> candidates;
        for (const auto& v : values)
            if (possible(v)) candidates.push_back(v);
        if (candidates.empty()) {
            a.kind = ActionKind::unavailable;
            a.note = "the kernel has none of " + a.desired + " (loaded: " + util::join(facts.schedulers, " ");
            if (ctx.loadable_schedulers)
                a.note += ctx.loadable_schedulers->empty() ? "; no scheduler modules"
                                                           : "; loadable: " + util::join(*ctx.loadable_schedulers, " ");
            if (!ctx.refused_schedulers.empty())
                a.note +=
                    "; refused: " + util::join({ctx.refused_schedulers.begin(), ctx.refused_schedulers.end()}, " ");
            a.note += ")";
            return;
        }
        a.value = a.expected = candidates.front();
        a.alternatives.assign(candidates.begin() + 1, candidates.end());
        if (a.value != values.front()) a.note = "first available of " + a.desired;
        if (!listed(facts.schedulers, a.value)) {
            const std::string load = ctx.loadable_schedulers ? "writing it makes the kernel load its module"
                                                             : "writing it asks the kernel to load a module for it";
            a.note = (a.note.empty() ? "" : a.note + "; ") + a.value + " is not loaded yet: " + load;
            if (!a.alternatives.empty()) a.note += " (if it refuses: " + util::join(a.alternatives, ", ") + ")";
        }
    } else if (spec.readback) {
        auto r = spec.readback(a.value, {ctx.page_size, final_rotational, ctx.hz, ctx.hz_known});
        a.value = std::move(r.value);
        a.expected = std::move(r.expected);
        if (!r.note.empty()) a.note = std::move(r.note);
    }

    if (spec.device_check) {
        auto check = spec.device_check(a.value, current, facts, w.rule_ptr->acknowledge);
        if (check.verdict != DeviceCheck::Verdict::fine) {
            a.kind = check.verdict == DeviceCheck::Verdict::skip ? ActionKind::skip : ActionKind::refuse;
            a.note = std::move(check.note);
            return;
        }
    }
    a.kind = (a.current == a.expected) ? ActionKind::unchanged : ActionKind::write;
}

}  // namespace

std::vector<std::string> value_keys_for(const Policy& policy, const DeviceFacts& facts) {
    std::set<std::string> keys;
    for (const auto& rule : policy.rules) {
        if (!rule_matches(rule, facts)) continue;
        for (const auto& s : rule.set) keys.insert(s.attribute);
    }
    if (keys.empty()) return {};
    // Every plan asks the final rotational flag (defaults follow it) and the
    // scheduler (what a switch disturbs); each row adds its own inputs.
    std::set<Key> inputs = {Key::rotational, Key::scheduler};
    for (const auto& k : keys) {
        if (const auto* spec = fixed_attribute(k))
            inputs.insert(spec->inputs.begin(), spec->inputs.end());
        else if (auto made = find_attribute(k))  // iosched.NAME
            inputs.insert(made->inputs.begin(), made->inputs.end());
    }
    for (const Key k : inputs) keys.emplace(key_text(k));
    return {keys.begin(), keys.end()};
}

DevicePlan plan_device(const Policy& policy, const DeviceFacts& facts, const Values& current, const PlanContext& ctx) {
    DevicePlan plan;
    plan.device = facts.name;

    std::map<std::string, Winner> winners;
    for (const auto& rule : policy.rules) {
        if (!rule_matches(rule, facts)) continue;
        RuleRef ref{rule.name, rule.pos};
        plan.matched.push_back(ref);
        for (const auto& s : rule.set) {
            auto& w = winners[s.attribute];
            if (w.setting) w.overridden.push_back(w.rule);
            w.setting = &s;
            w.rule = ref;
            w.rule_ptr = &rule;
        }
    }
    if (!facts.has_queue) {
        plan.not_tuned = "no queue/ directory: nothing to tune";
        return plan;
    }

    // What rotational will read once the plan has run (wbt "default" depends on it).
    const std::string rotational(key_text(Key::rotational));
    bool final_rotational = current.count(rotational) ? current.at(rotational) == "1" : facts.rotational;
    if (auto it = winners.find(rotational); it != winners.end())
        final_rotational = it->second.setting->values.front() == "1";

    // Each attribute's spec and write rank first; the actions are then made
    // in write order (a stable sort of pointers, not of whole actions).
    struct Pending {
        int rank;
        const std::string* key;
        const Winner* winner;
        const AttributeSpec* spec;
    };
    std::vector<Pending> order;
    std::vector<AttributeSpec> tunables;  // iosched.NAME specs, made for their keys
    tunables.reserve(winners.size());
    order.reserve(winners.size());
    for (const auto& [key, w] : winners) {
        const AttributeSpec* spec = fixed_attribute(key);
        if (!spec) {
            auto made = find_attribute(key);
            if (!made) continue;  // the loader only admits known keys
            spec = &tunables.emplace_back(std::move(*made));
        }
        order.push_back({write_rank(*spec), &key, &w, spec});
    }
    std::stable_sort(order.begin(), order.end(), [](const Pending& x, const Pending& y) { return x.rank < y.rank; });

    plan.actions.reserve(order.size());
    for (const auto& [rank, key_ptr, w_ptr, spec] : order) {
        const std::string& key = *key_ptr;
        const Winner& w = *w_ptr;
        Action a;
        a.id = spec->id;
        a.attribute = key;
        a.path = spec->path;
        a.phase = spec->phase;
        a.cause = spec->cause;
        a.rank = rank;
        a.rule = w.rule;
        a.overridden = w.overridden;
        a.desired = util::join(w.setting->values, ", ");
        auto cur = current.find(key);
        if (cur != current.end()) a.current = cur->second;

        const UnitHooks* hooks = spec->hooks;
        std::string skipped = hooks && hooks->skip ? hooks->skip(facts) : std::string();
        if (spec->mq_only && !facts.request_based) {
            a.kind = ActionKind::skip;
            a.note = "bio-based queue: no " + spec->path;
        } else if (!skipped.empty()) {
            a.kind = ActionKind::skip;
            a.note = std::move(skipped);
        } else if (cur == current.end() && hooks && hooks->decided_after_writes) {
            // It may appear after an earlier write (a scheduler's tunables
            // after the switch): resolved as if there, decided after the writes.
            resolve(a, *spec, w, facts, current, ctx, final_rotational);
            a.kind = ActionKind::write;
        } else if (cur == current.end()) {
            // A queue attribute this kernel does not have is a value the
            // host cannot give; one of the device's driver (device/timeout
            // on a disk that is not SCSI) is not the device's kind.
            a.kind = starts_with(spec->path, "queue/") && !spec->by_driver ? ActionKind::unavailable : ActionKind::skip;
            a.value = a.expected = w.setting->values.front();  // what the policy asks, as it says it
            a.note = "device has no " + spec->path;
            if (spec->by_driver) a.note += " (its driver has no timeout handler)";
            if (hooks && hooks->missing) hooks->missing(a);
        } else {
            resolve(a, *spec, w, facts, current, ctx, final_rotational);
        }
        plan.actions.push_back(std::move(a));
    }

    // Side effects of earlier writes on later attributes, each asked of the
    // attribute's unit (policy/units): the kernel rows say which writes move
    // which attribute (kernel/rows).
    PlanSoFar so_far{plan.actions,
                     current,
                     ctx,
                     facts.scheduler,
                     util::parse_int(value_of(current, Key::nr_requests)).value_or(-1),
                     {}};
    for (auto& a : plan.actions) {
        const bool active = a.kind == ActionKind::write || a.kind == ActionKind::unchanged;
        if (a.cause == kernel::WriteCause::scheduler_switch && a.kind == ActionKind::write) {
            so_far.final_scheduler = a.expected;
            so_far.final_nr = -1;  // the switch resets it to the new scheduler's default
        }
        if (a.cause == kernel::WriteCause::nr_requests_write && active)
            so_far.final_nr = util::parse_int(a.expected).value_or(-1);
        if (const UnitHooks* hooks = hooks_of(a.id); active && hooks && hooks->after_writes)
            hooks->after_writes(a, so_far);
        if (a.kind == ActionKind::write && a.cause != kernel::WriteCause::none) so_far.written.insert(a.cause);
    }
    return plan;
}

}  // namespace blkpolicy::policy
