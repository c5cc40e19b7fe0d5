// SPDX-License-Identifier: MIT
#include "policy/plan.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "policy/match.hpp"
#include "policy/values.hpp"
#include "util/names.hpp"

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
    a.desired = join(values, ", ");
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
            a.note = "the kernel has none of " + a.desired + " (loaded: " + join(facts.schedulers, " ");
            if (ctx.loadable_schedulers)
                a.note += ctx.loadable_schedulers->empty() ? "; no scheduler modules"
                                                           : "; loadable: " + join(*ctx.loadable_schedulers, " ");
            if (!ctx.refused_schedulers.empty())
                a.note += "; refused: " + join({ctx.refused_schedulers.begin(), ctx.refused_schedulers.end()}, " ");
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
            if (!a.alternatives.empty()) a.note += " (if it refuses: " + join(a.alternatives, ", ") + ")";
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
        a.desired = join(w.setting->values, ", ");
        auto cur = current.find(key);
        if (cur != current.end()) a.current = cur->second;

        if (spec->mq_only && !facts.request_based) {
            a.kind = ActionKind::skip;
            a.note = "bio-based queue: no " + spec->path;
        } else if (facts.hidden && spec->id == Key::read_ahead_kb) {
            // The file is there and takes a value, which no read uses.
            a.kind = ActionKind::skip;
            a.note = "hidden NVMe multipath path: reads come through its head" +
                     (facts.holders.empty() ? std::string() : " (" + join(facts.holders, ", ") + ")") +
                     ", whose read_ahead_kb is the one used";
        } else if (cur == current.end() && spec->id == Key::iosched) {
            // Under another scheduler the tunable may appear after the switch;
            // resolved below once the scheduler action is known.
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
            if (spec->id == Key::async_depth) {
                kernel::kernel_row(kernel::KRow::async_depth_iosched_tunable);
                a.note =
                    "this kernel has no queue/async_depth (7.0 and later have it; before, mq-deadline has "
                    "iosched.async_depth)";
            }
        } else {
            resolve(a, *spec, w, facts, current, ctx, final_rotational);
        }
        plan.actions.push_back(std::move(a));
    }

    // Side effects of earlier writes on later attributes: the kernel rows
    // say which writes move which attribute (kernel/rows).
    std::set<kernel::WriteCause> written;
    std::string final_scheduler = facts.scheduler;
    // nr_requests once the plan has run; -1 when a switch resets it to a default not known here.
    std::int64_t final_nr = parse_int(value_of(current, Key::nr_requests)).value_or(-1);
    for (auto& a : plan.actions) {
        const bool active = a.kind == ActionKind::write || a.kind == ActionKind::unchanged;
        const auto by = [&](kernel::WriteCause c) -> const kernel::KernelRow* {
            return written.count(c) ? kernel::disturbed_by(c, a.id, ctx.kernel) : nullptr;
        };
        const auto* by_switch = active ? by(kernel::WriteCause::scheduler_switch) : nullptr;
        if (a.id == Key::scheduler && a.kind == ActionKind::write) {
            final_scheduler = a.expected;
            final_nr = -1;  // the switch resets it to the new scheduler's default
        }
        if (a.id == Key::nr_requests && active) final_nr = parse_int(a.expected).value_or(-1);

        if (!active) {
        } else if (a.id == Key::iosched) {
            if (final_scheduler == "none") {
                a.kind = ActionKind::skip;
                a.note = "scheduler none has no tunables";
            } else if (a.attribute == "iosched." + std::string(key_text(Key::async_depth)) &&
                       final_scheduler == "mq-deadline" && current.count(std::string(key_text(Key::async_depth)))) {
                kernel::kernel_row(kernel::KRow::async_depth_queue_attribute);
                a.kind = ActionKind::unavailable;
                a.note = "moved: since 7.0 mq-deadline has no iosched/async_depth; set async_depth instead";
            } else if (a.current.empty() && !written.count(kernel::WriteCause::scheduler_switch)) {
                a.kind = ActionKind::skip;
                a.note = "scheduler " + final_scheduler + " has no tunable " + a.attribute.substr(8);
            } else if (by_switch) {
                a.kind = ActionKind::write;
                a.note = "the switch to " + final_scheduler + " recreates iosched/ with defaults";
            }
        } else if (a.id == Key::nr_requests && by_switch) {
            a.kind = ActionKind::write;
            a.note = "the scheduler switch resets nr_requests";
        } else if (a.id == Key::async_depth) {
            const auto want = parse_int(a.expected).value_or(0);
            if (final_scheduler == "none") {
                kernel::kernel_row(kernel::KRow::async_depth_write_capped_refused_under_none);
                a.kind = ActionKind::skip;
                a.note = "under scheduler none the kernel refuses async_depth (EINVAL): it follows nr_requests";
            } else if (final_nr > 0 && want > final_nr) {
                kernel::kernel_row(kernel::KRow::async_depth_write_capped_refused_under_none);
                a.kind = ActionKind::refuse;
                a.note = "above nr_requests (" + std::to_string(final_nr) + "): the kernel would cap it at that";
            } else if (by_switch) {
                a.kind = ActionKind::write;
                a.note = "the switch to " + final_scheduler + " resets async_depth";
            } else if (by(kernel::WriteCause::nr_requests_write)) {
                a.kind = ActionKind::write;
                a.note = "writing nr_requests rescales async_depth";
            }
        } else if (a.id == Key::wbt_lat_usec && a.expected != "0") {
            if (by_switch && final_scheduler == "bfq") {
                a.kind = ActionKind::write;
                a.zero_first = true;
                a.note = "switching to bfq turns default wbt off: written as 0, then the value";
            } else if (a.current == "0") {
                kernel::kernel_row(kernel::KRow::wbt_store_retained_value_noop);
                a.zero_first = true;
                a.note = "wbt is off: written as 0, then the value (the value alone can be a no-op)";
            }
        } else if (a.id == Key::io_timeout) {
            // SCSI: device/timeout is the same request timer, in seconds.
            const auto timeout = std::find_if(plan.actions.begin(), plan.actions.end(), [](const Action& x) {
                return x.id == Key::device_timeout && (x.kind == ActionKind::write || x.kind == ActionKind::unchanged);
            });
            if (timeout != plan.actions.end()) {
                kernel::kernel_row(kernel::KRow::io_timeout_one_timer_with_scsi_timeout);
                const auto s = parse_int(timeout->expected).value_or(0);
                const auto ms = parse_int(a.expected).value_or(0);
                if (s * 1000 != ms) {
                    a.kind = ActionKind::refuse;
                    a.note = "device.timeout = " + timeout->expected + " (" + timeout->rule.name +
                             ") sets the same request timer to " + std::to_string(s * 1000) +
                             " ms: set one of the two, or both to the same time";
                }
            }
        } else if (a.id == Key::read_ahead_kb && by(kernel::WriteCause::limits_commit) &&
                   a.kind == ActionKind::unchanged) {
            a.kind = ActionKind::write;
            a.note = "checked again after the limits writes: the kernel can raise read_ahead_kb";
        }
        if (a.kind == ActionKind::write && a.cause != kernel::WriteCause::none) written.insert(a.cause);
    }
    return plan;
}

}  // namespace blkpolicy::policy
