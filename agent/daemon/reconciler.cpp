// SPDX-License-Identifier: MIT
#include "agent/daemon/reconciler.hpp"

#include <syslog.h>

#include "agent/executor.hpp"
#include "agent/snapshot.hpp"
#include "policy/attributes.hpp"
#include "policy/plan.hpp"
#include "policy/unit.hpp"
#include "udev/discovery.hpp"
#include "util/names.hpp"
#include "util/text.hpp"

namespace blkpolicy::agent {

using policy::Action;
using policy::ActionKind;
using policy::Key;
using systemd::AlertKind;

namespace {
constexpr util::Named<Trigger> kTriggers[] = {
    {Trigger::verify, "verify"},
    {Trigger::udev_processed, "udev"},
    {Trigger::changed, "change"},
    {Trigger::added, "add"},
};
static_assert(util::in_enum_order(kTriggers));
}  // namespace

const char* to_string(Trigger t) { return util::name_of(kTriggers, t); }

Reconciler::Reconciler(udev::Sysfs& sysfs, const StateDir& state, systemd::EventLog& log,
                       const policy::HostContext& host)
    : sysfs_(sysfs), state_(state), log_(log), context_(host) {}

void Reconciler::forget(const std::string& device) {
    devices_.erase(device);
    state_.forget(device);
}

Summary Reconciler::summary() const {
    Summary s;
    for (const auto& [name, d] : devices_) {
        if (!d.attrs.empty()) ++s.devices;
        for (const auto& [attr, r] : d.attrs) {
            if (r.status == AttrStatus::drifted) ++s.drifted;
            if (r.status == AttrStatus::failed) ++s.failed;
            if (r.status == AttrStatus::busy) ++s.busy;
        }
    }
    return s;
}

namespace {
std::string rule_text(const policy::RuleRef& r) { return r.name + " (" + r.pos.file_line() + ")"; }
}  // namespace

void say_save_once(systemd::EventLog& log, const util::Status& st, std::string& last, const std::string& going_on,
                   const std::string& recovered) {
    if (!st.ok() && st.message() != last) log.log(LOG_WARNING, st.message() + going_on);
    if (st.ok() && !last.empty()) log.log(LOG_INFO, recovered + last + ")");
    last = st.message();
}

AlertKind Reconciler::classify(const policy::DeviceFacts& facts, const Action& a, const AttrRecord& r,
                               const policy::Values& values, Trigger trigger, writers::FoundWriter& writer) const {
    const std::string& device = facts.name;
    if (!writers_.empty()) {
        // Which writers' conditions select the device: decided on its
        // parents and properties, read now (only a value out of policy gets here).
        policy::DeviceFacts seen = facts;
        if (!(seen.read & policy::kFactProperties) || !(seen.read & policy::kFactDrivers)) {
            if (auto live =
                    udev::read_facts(sysfs_, device, udev_db_, policy::kFactDrivers | policy::kFactProperties)) {
                seen.syspath = live->syspath;
                seen.properties = live->properties;
                seen.read |= policy::kFactDrivers | policy::kFactProperties;
            }
        }
        if (auto found =
                writers::find_writer(writers_, udev_device(sysfs_, seen, writer_reads_), a.attribute, a.current)) {
            const auto* w = found.writer;
            // A udev rule ran just before this event; any writer whose value
            // is the one found there wrote it.
            const bool udev_ran = trigger == Trigger::udev_processed && w->kind == writers::WriterKind::udev_rule;
            if (udev_ran || (!w->value.empty() && util::trim(w->value) == a.current)) {
                writer = found;
                return AlertKind::conflict;
            }
        }
    }
    // The attribute's unit knows what the kernel itself puts there (a value
    // recomputed from the limits, wbt off under bfq), reading what it needs.
    if (const auto* hooks = policy::hooks_of(a.id); hooks && hooks->judge) {
        std::vector<std::string> wanted;
        for (const Key k : hooks->judge_inputs) wanted.emplace_back(policy::key_text(k));
        const auto inputs = wanted.empty() ? policy::Values{} : udev::read_values(sysfs_, device, wanted);
        switch (hooks->judge({a, values, inputs, context_.kernel})) {
            case policy::Judgement::the_kernel:
                return AlertKind::reverted;
            case policy::Judgement::someone:
                return AlertKind::drift;
            case policy::Judgement::open:
                break;
        }
    }
    if (!r.original.empty() && r.original != r.expected && a.current == r.original) return AlertKind::reverted;
    return AlertKind::drift;
}

void Reconciler::alert(AlertKind kind, const std::string& device, const Action& a, const AttrRecord& r,
                       const std::string& actual, const std::string& message, const writers::FoundWriter& found) {
    const auto* writer = found.writer;
    systemd::Alert al;
    al.kind = kind;
    al.device = device;
    al.attribute = a.attribute;
    al.expected = a.expected;
    al.actual = actual;
    al.rule = r.rule;
    if (writer) {
        al.writer = writer->where();
        al.writer_kind = writers::to_string(writer->kind);
        al.writer_context = writer->context;
    }
    al.message = message;
    log_.alert(al);
}

void Reconciler::say(Say what_to_say, const AttrPass& p, const std::string& device, const Action& a,
                     const AttrRecord& r, const std::string& before, const std::string& after,
                     const AttributeResult* res, const writers::FoundWriter& writer) {
    const std::string what = a.attribute + " of " + device;
    const std::string was = before.empty() ? "unset" : before;
    // Who moved it, for the three kinds of a value out of policy.
    const auto cause = [&] {
        std::string c;
        switch (p.moved_by) {
            case AlertKind::reverted:
                c = what + " went back to the kernel's own value " + before;
                break;
            case AlertKind::conflict:
                c = writer.selection.verdict == writers::Selects::may
                        ? writer.writer->describe() + " may have set " + what + " to " + before + " (depending on " +
                              writer.selection.because + ")"
                        : writer.writer->describe() + " set " + what + " to " + before;
                break;
            default:
                c = what + " is " + before + ", changed outside blkpolicy";
                break;
        }
        return c + " (policy says " + a.expected + ")";
    };
    switch (what_to_say) {
        case Say::nothing:
            return;
        case Say::cannot_set:
            return alert(AlertKind::failed, device, a, r, a.current,
                         (a.kind == ActionKind::refuse ? "refusing to set " : "cannot set ") + what + " to " +
                             (a.expected.empty() ? a.desired : a.expected) + ": " + a.note);
        case Say::back_in_policy:
            return alert(AlertKind::resolved, device, a, r, before,
                         what + " is " + a.expected + " again, as the policy says");
        case Say::left_alone:
            return alert(p.moved_by, device, a, r, before,
                         (p.fresh ? what + " is " + before + ", policy says " + a.expected : cause()) +
                             "; observe mode: left as it is",
                         writer);
        case Say::set_first:
            return alert(AlertKind::applied, device, a, r, a.expected,
                         "set " + what + " to " + a.expected + " (was " + was + ")");
        case Say::set_while_settling:
            return alert(AlertKind::applied, device, a, r, a.expected,
                         "set " + what + " to " + a.expected + " again: the kernel put back " + before +
                             " while the device was still being set up; re-applied");
        case Say::resolved_by_write:
            return alert(AlertKind::resolved, device, a, r, a.expected,
                         what + " is " + a.expected + " now, as the policy says");
        case Say::set_after_busy:
            return alert(AlertKind::applied, device, a, r, a.expected,
                         "set " + what + " to " + a.expected + " (was " + was +
                             "; another writer held the queue at the pass before)");
        case Say::re_applied:
            return alert(p.moved_by, device, a, r, before, cause() + "; re-applied", writer);
        case Say::busy_once:
            // Contention, not a failure yet: the next pass tries again.
            return log_.log(LOG_INFO, "cannot set " + what + " to " + a.expected + " yet: " + res->detail +
                                          "; trying again at the next pass");
        case Say::still_busy:
            return alert(AlertKind::failed, device, a, r, after,
                         "cannot set " + what + " to " + a.expected + ": still busy at a second pass: " + res->detail);
        case Say::write_failed:
            return alert(AlertKind::failed, device, a, r, after,
                         "cannot set " + what + " to " + a.expected + ": " + (res ? res->detail : "not attempted"),
                         writer);
    }
}

bool Reconciler::put_back(const std::string& device, const policy::DeviceFacts& facts, DeviceRecord& rec,
                          const std::set<std::string>& declared) {
    const auto items = restore_values(sysfs_, device, rec.written, declared, retry_);
    if (items.empty()) return false;
    bool wrote = false;
    for (const auto& r : items) {
        using Result = Restored::Result;
        if (r.result == Result::dropped || r.result == Result::busy) {
            log_.log(LOG_INFO, restored_sentence(device, r));
            continue;
        }
        wrote = wrote || r.result == Result::restored || r.result == Result::failed;
        log_.alert(restored_alert(device, r, ": the policy no longer sets it"));
        rec.attrs.erase(r.attribute);
    }
    save_written(device, facts, rec);
    return wrote;
}

void Reconciler::save_written(const std::string& device, const policy::DeviceFacts& facts, DeviceRecord& rec) {
    say_save_once(log_, state_.save_written(facts, rec.written), rec.written_error,
                  "; the values blkpolicy changed on " + device + " cannot be put back when the policy drops them",
                  "recorded the values blkpolicy changed on " + device + " (they could not be: ");
}

bool Reconciler::reconcile(const std::string& device, Trigger trigger) {
    // The path to the first write reads only what the policy's rules match
    // on; recording frozen facts and the alerts come after the writes.
    std::vector<std::string> warnings;
    LookOptions how;
    how.shown = 0;
    const auto known = devices_.find(device);
    const bool label_now = identity_labels_ && (known == devices_.end() || !known->second.labels.known ||
                                                trigger == Trigger::added || trigger == Trigger::changed);
    if (label_now) how.shown = policy::kFactDrivers | policy::kFactModel | policy::kFactSerial | policy::kFactStack;
    how.udev_db = udev_db_;
    how.context = context_;
    auto view = look_one(sysfs_, state_, policy_, device, how, warnings);
    for (const auto& w : warnings) log_.log(LOG_WARNING, w);
    if (!view) {
        forget(device);
        return false;
    }
    const auto& [facts, values, plan] = *view;
    const auto identity = identity_of(facts);  // freezing changes rotational and removable only

    auto& rec = devices_[device];
    if (rec.identity != identity) {
        rec = DeviceRecord{};
        rec.identity = identity;
        // Only a device whose add uevent is seen can still be in its
        // driver's setup; one found on a pass was there before.
        rec.verifies_since_add = trigger == Trigger::added ? 0 : kSettlePasses;
    } else if (trigger == Trigger::added) {
        rec.verifies_since_add = 0;
    }
    if (label_now) {
        rec.labels = {true,
                      facts.driver,
                      facts.model,
                      facts.vendor,
                      facts.serial,
                      policy::to_string(facts.stack),
                      facts.rotational};
    }
    // The pass that completes the count is still within the window: a
    // reset that came just after the first pass is seen at the second.
    const bool settling = rec.verifies_since_add < kSettlePasses;
    if (trigger == Trigger::verify && settling) ++rec.verifies_since_add;
    if (!rec.written_loaded) {
        std::string problem;
        rec.written = state_.load_written(facts, &problem);
        if (!problem.empty()) log_.log(LOG_WARNING, problem);
        rec.written_loaded = true;
    }
    if (mode_ == policy::Mode::enforce && policy_.daemon.restore_on_removal && !rec.written.empty() &&
        put_back(device, facts, rec, declared_attributes(plan))) {
        // What was put back can move what the policy still sets (a limits
        // write raises read_ahead_kb): the plan is made again from what the
        // device reads now. The names above refer to the new look.
        view = look_one(sysfs_, state_, policy_, device, how, warnings);
        if (!view) {
            forget(device);
            return false;
        }
    }
    // Attributes the policy no longer manages on this device.
    for (auto it = rec.attrs.begin(); it != rec.attrs.end();) {
        bool managed = false;
        for (const auto& a : plan.actions)
            managed = managed || (a.attribute == it->first && a.kind != ActionKind::skip);
        it = managed ? std::next(it) : rec.attrs.erase(it);
    }

    const bool enforce = mode_ == policy::Mode::enforce;
    bool differs = false;
    for (const auto& a : plan.actions)
        if ((a.kind == ActionKind::write || a.kind == ActionKind::unchanged) && a.current != a.expected) differs = true;
    std::map<std::string, AttributeResult> results;
    // What the driver set, before blkpolicy writes anything: recorded with the facts below.
    const std::string first_write_cache = facts.facts_frozen ? std::string() : read_write_cache(sysfs_, device);
    if (enforce && differs) {
        auto done = execute(sysfs_, plan, retry_);
        if (note_writes(rec.written, plan, done)) save_written(device, facts, rec);
        for (auto& r : done.results) {
            context_.refused_schedulers.insert(r.refused.begin(), r.refused.end());
            results[r.attribute] = std::move(r);
        }
        // Pulled while its queue was being written (a volume detached, a
        // SCSI host reset): what failed, failed because the device is gone,
        // not because of the policy. Information, not a failed alert; its
        // remove uevent follows.
        if (device_going_away(sysfs_, plan)) {
            log_.log(LOG_INFO, device + " went away while its queue was being written; forgetting it");
            forget(device);
            return false;
        }
    }
    if (!facts.facts_frozen) {
        // Not frozen, so these are the live facts, read before the writes:
        // what the device said of itself, which later matches keep using.
        // Tried at every pass until it works; said once, and once more when it does.
        say_save_once(log_, record_facts(state_, facts, first_write_cache), rec.record_error,
                      "; tried again at every pass", "recorded the facts of " + device + " (they could not be: ");
    }

    for (const auto& planned : plan.actions) {
        if (planned.kind == ActionKind::skip) continue;
        auto res = results.find(planned.attribute);
        // A scheduler list whose first name the kernel refused: the one it
        // accepted is what the policy asks of this device from now on.
        policy::Action a = planned;
        if (res != results.end() && !res->second.refused.empty() && res->second.outcome == Outcome::applied)
            a.expected = res->second.expected;
        const bool existed = rec.attrs.count(a.attribute) > 0;
        auto& r = rec.attrs[a.attribute];
        const bool fresh = !existed || r.expected != a.expected;  // first sight, or the policy changed
        if (fresh)
            r = AttrRecord{a.expected, a.current, a.current, rule_text(a.rule), AttrStatus::ok, r.drifts, r.failures};
        r.rule = rule_text(a.rule);

        // What the attribute read just before blkpolicy would write it: after
        // the earlier writes of this pass (a bfq switch zeroes wbt).
        const bool written = res != results.end() && res->second.outcome != Outcome::unchanged;
        // Moved while this pass ran by something no write of it can have
        // done, and written back: that other writer's value is what is said
        // (at first sight, what the device had is).
        const bool moved_outside = written && !fresh && !res->second.moved_outside.empty();
        // In policy when planned, moved by this pass's own earlier write (a
        // scheduler switch resets nr_requests) and written back: part of
        // applying, nobody else's doing.
        const bool own_write_moved_it =
            written && !moved_outside && a.current == a.expected && res->second.outcome == Outcome::applied;
        const std::string before = moved_outside                    ? res->second.moved_outside
                                   : written && !own_write_moved_it ? res->second.before
                                                                    : a.current;

        AttrPass pass;
        pass.unattainable = a.kind == ActionKind::refuse || a.kind == ActionKind::unavailable;
        pass.fresh = fresh;
        pass.status = r.status;
        // Already as the policy says (a retried scheduler list may still
        // have written the name it had: nothing moved).
        pass.in_policy = before == a.expected;
        pass.already_shown = r.actual == before;
        pass.enforce = enforce;
        pass.settling = settling;
        pass.stuck = res != results.end() && res->second.after == a.expected &&
                     (res->second.outcome == Outcome::applied || res->second.outcome == Outcome::unchanged);
        pass.busy = res != results.end() && res->second.outcome == Outcome::busy;
        writers::FoundWriter writer;
        if (!pass.unattainable && !pass.in_policy && !fresh) {
            policy::Action seen = a;
            seen.current = before;
            pass.moved_by = classify(facts, seen, r, values, trigger, writer);
        }

        const Verdict v = verdict(pass);
        const std::string after = res == results.end() ? before : res->second.after;
        const std::string& shown = v.shown == Shown::found ? before : v.shown == Shown::expected ? a.expected : after;
        if (v.counts_drift) ++r.drifts;
        if (v.counts_failure) ++r.failures;
        say(v.say, pass, device, a, r, before, after, res == results.end() ? nullptr : &res->second, writer);
        r.status = v.status;
        r.actual = shown;
    }
    return true;
}

}  // namespace blkpolicy::agent
