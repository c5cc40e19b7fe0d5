// SPDX-License-Identifier: MIT
#include "agent/executor.hpp"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <set>

#include "measure/stat.hpp"
#include "policy/unit.hpp"
#include "udev/discovery.hpp"
#include "util/files.hpp"
#include "util/names.hpp"
#include "util/text.hpp"

namespace blkpolicy::agent {

using policy::Action;
using policy::ActionKind;

namespace {
constexpr util::Named<Outcome> kOutcomes[] = {
    {Outcome::unchanged, "unchanged"}, {Outcome::applied, "applied"},         {Outcome::skipped, "skipped"},
    {Outcome::failed, "failed"},       {Outcome::not_stuck, "not-stuck"},     {Outcome::refused, "refused"},
    {Outcome::busy, "busy"},           {Outcome::unavailable, "unavailable"},
};
static_assert(util::in_enum_order(kOutcomes));
}  // namespace

const char* to_string(Outcome o) { return util::name_of(kOutcomes, o); }

bool is_failure(Outcome o) {
    return o == Outcome::failed || o == Outcome::not_stuck || o == Outcome::refused || o == Outcome::busy ||
           o == Outcome::unavailable;
}

const BusyRetry& default_busy_retry() {
    static const BusyRetry r = [] {
        BusyRetry b;
        b.pause = [](std::chrono::microseconds d) {
            struct timespec ts {
                static_cast<time_t>(d.count() / 1'000'000), static_cast<long>(d.count() % 1'000'000) * 1000
            };
            while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        };
        return b;
    }();
    return r;
}

namespace {

class DeviceExecutor {
public:
    DeviceExecutor(udev::Sysfs& sysfs, const policy::DevicePlan& plan, const BusyRetry& retry)
        : sysfs_(sysfs), plan_(plan), retry_(retry), dir_("block/" + plan.device + "/") {}

    DeviceResult run() {
        DeviceResult out;
        out.device = plan_.device;
        out.not_tuned = plan_.not_tuned;
        for (const auto& a : plan_.actions) out.results.push_back(first_pass(a));
        verify_and_reapply(out);
        return out;
    }

private:
    // Reads the attribute now (the value, or the errno of the failed read).
    udev::ReadResult current(const Action& a) const { return udev::read_value(sysfs_, plan_.device, a.attribute); }

    // A read that failed: gone (the device or the attribute) is skipped; any
    // other read error means nothing can be said: failed.
    void read_failed(const Action& a, int err, AttributeResult& r) const {
        r.outcome = err == ENOENT ? Outcome::skipped : Outcome::failed;
        r.detail = vanished_detail(a, err);
    }

    // A read or write that failed with ENOENT or ENODEV because the whole
    // device is on its way out (not only this attribute).
    bool gone_with_device(int err) const {
        return (err == ENOENT || err == ENODEV) && device_going_away(sysfs_, plan_);
    }

    std::string vanished_detail(const Action& a, int err) const {
        const bool missing = err == ENOENT || err == ENODEV;
        if (gone_with_device(err) || (!missing && !sysfs_.exists("block/" + plan_.device))) return "device vanished";
        if (err == ENOENT) return "device has no " + a.path;
        return "cannot read " + a.path + ": " + util::errno_text(err);
    }

    // One write(2) as the kernel finally answers it: a write refused with
    // EBUSY (another writer holds the queue's update lock) is made again
    // after a pause, within the retry bound.
    int write_settled(const Action& a, const std::string& value, AttributeResult& r) {
        auto pause = retry_.first_pause;
        std::chrono::microseconds waited{0};
        for (int attempt = 1;; ++attempt) {
            ++r.attempts;
            const int err = sysfs_.write(dir_ + a.path, value);
            if (err != EBUSY) return err;
            if (attempt == 1) kernel::kernel_row(kernel::KRow::write_contended_ebusy);
            ++r.busy;
            if (attempt >= retry_.max_attempts || waited + pause > retry_.budget) return err;
            if (retry_.pause) retry_.pause(pause);
            waited += pause;
            r.busy_waited += pause;
            pause = std::min(pause * 2, retry_.max_pause);
        }
    }

    // The write itself, after a 0 where the attribute's unit asks for one
    // (wbt: a latency written while wbt is off is a silent no-op).
    int write(const Action& a, const std::string& value, const std::string& before, AttributeResult& r) {
        const auto* hooks = policy::hooks_of(a.id);
        if (hooks && hooks->zero_first && hooks->zero_first(a, value, before))
            if (int err = write_settled(a, "0", r)) return err;
        return write_settled(a, value, r);
    }

    // A queue write freezes the queue (a scheduler switch, nr_requests, wbt
    // and limits writes on every kernel: shared/KERNEL.md): it waits for the
    // requests in flight, and while it waits every new I/O of the disk waits
    // behind it. Requests that make no progress (a device that stopped
    // answering, a write the host holds) would hold that freeze, and every
    // reader of the disk with it, for as long as they do: LVM's scan at
    // boot, a mount. So before this pass's first queue write, requests in
    // flight must complete or drain within kStuckWindow; where none does,
    // the device's queue writes are left, as busy, for a later pass.
    static constexpr std::chrono::milliseconds kStuckWindow{200};
    static constexpr std::chrono::milliseconds kStuckLook{10};

    bool io_stuck() {
        if (stuck_checked_) return stuck_;
        stuck_checked_ = true;
        using measure::StatField;
        // The disk's stat file: requests in flight now, and those completed.
        auto look = [&]() -> std::optional<measure::IoStat> {
            auto text = sysfs_.read(dir_ + "stat");
            return text.ok() ? measure::parse_stat(text.value) : std::nullopt;
        };
        auto completed = [](const measure::IoStat& st) {
            std::uint64_t n = st[StatField::reads] + st[StatField::writes];
            for (auto f : {StatField::discards, StatField::flushes})
                if (st.has(f)) n += st[f];
            return n;
        };
        const auto first = look();
        if (!first || (*first)[StatField::in_flight] == 0) return false;
        auto now = first;
        for (auto waited = std::chrono::milliseconds(0); waited < kStuckWindow; waited += kStuckLook) {
            if (retry_.pause) retry_.pause(kStuckLook);
            now = look();
            if (!now || (*now)[StatField::in_flight] == 0 || completed(*now) != completed(*first)) return false;
        }
        stuck_ = true;
        stuck_detail_ = std::to_string((*now)[StatField::in_flight]) + " request(s) in flight completed none in " +
                        std::to_string(kStuckWindow.count()) +
                        " ms: a queue write would freeze the queue behind them, and every reader of the disk with "
                        "it";
        return true;
    }

    // A write the kernel still refused with EBUSY when the bound ran out.
    void busy(const AttributeResult& r, Outcome& outcome, std::string& detail) const {
        using std::chrono::duration_cast;
        using std::chrono::milliseconds;
        outcome = Outcome::busy;
        detail = "the kernel answered EBUSY " + std::to_string(r.busy) + " of " + std::to_string(r.attempts) +
                 " times in " + std::to_string(duration_cast<milliseconds>(r.busy_waited).count()) +
                 " ms: another writer held the queue's update lock throughout";
    }

    // What to write for the action now: a scheduler whose first choice the
    // kernel refused is written as the one it accepted.
    static const std::string& value_of(const Action& a, const AttributeResult& r) {
        return r.expected == a.expected ? a.value : r.expected;
    }

    // A scheduler preference list: the kernel refuses (EINVAL) a name it
    // neither has nor can load as a module; the next name is tried then.
    int write_first_accepted(const Action& a, const std::string& before, AttributeResult& r) {
        std::string tried = a.value;
        int err = write(a, tried, before, r);
        for (const auto& next : a.alternatives) {
            if (err != EINVAL) break;
            r.refused.push_back(tried);
            tried = next;
            err = write(a, tried, before, r);
        }
        if (err == EINVAL && !a.alternatives.empty()) r.refused.push_back(tried);
        if (!err && tried != a.value) r.expected = tried;  // a scheduler: value and expected are the name
        return err;
    }

    std::string refused_text(const AttributeResult& r) const {
        return "the kernel refused " + util::join(r.refused, ", ") + " (no such scheduler, built in or as a module)";
    }

    AttributeResult first_pass(const Action& a) {
        AttributeResult r;
        r.attribute = a.attribute;
        r.expected = a.expected;
        r.rule = a.rule;
        r.before = a.current;
        if (a.kind == ActionKind::skip) {
            r.outcome = Outcome::skipped;
            r.detail = a.note;
            return r;
        }
        if (a.kind == ActionKind::refuse || a.kind == ActionKind::unavailable) {
            r.outcome = a.kind == ActionKind::refuse ? Outcome::refused : Outcome::unavailable;
            r.detail = a.note;
            return r;
        }
        // Read again just before writing once this pass has written: an
        // earlier write (a scheduler switch freezes the queue) takes time in
        // which another writer can move the value. What the kernel rows
        // (kernel/rows.cpp) say an earlier write of this pass moves is its
        // own doing; anything else that moved is another writer's. The plan's
        // own reading is fresh before the first write. Everything is read
        // back once at the end.
        if (wrote_) {
            const auto now = current(a);
            if (!now.ok()) {
                r.before.clear();  // unknown now
                read_failed(a, now.err, r);
                return r;
            }
            if (!disturbed(a) && now.value != a.current) r.moved_outside = now.value;
            r.before = now.value;
        } else if (a.current.empty() && !sysfs_.exists(dir_ + a.path)) {
            r.outcome = Outcome::skipped;
            r.detail = vanished_detail(a, ENOENT);
            return r;
        }
        // (A wbt that bfq turned off can still read as the wanted latency.)
        if (r.before == a.expected && !a.zero_first) {
            r.outcome = Outcome::unchanged;
            r.after = r.before;
            return r;
        }
        if (a.path.rfind("queue/", 0) == 0 && io_stuck()) {
            r.outcome = Outcome::busy;
            r.after = r.before;
            r.detail = stuck_detail_;
            return r;
        }
        if (int werr = write_first_accepted(a, r.before, r)) {
            r.after = r.before;  // a refused write leaves the value as it was
            if (werr == EBUSY) {
                busy(r, r.outcome, r.detail);
                return r;
            }
            r.outcome = gone_with_device(werr) ? Outcome::skipped : Outcome::failed;
            r.detail =
                r.outcome == Outcome::skipped ? "device vanished" : "write " + a.value + ": " + util::errno_text(werr);
            if (r.outcome == Outcome::failed && !r.refused.empty()) r.detail = refused_text(r);
            return r;
        }
        r.outcome = Outcome::applied;
        if (!r.refused.empty()) r.detail = refused_text(r) + "; " + r.expected + " accepted";
        note_write(a);
        return r;
    }

    // What a write does to later attributes: a queue-limits commit can raise
    // read_ahead_kb; a scheduler switch resets nr_requests, async_depth and
    // iosched/ and can turn a default wbt off; an nr_requests write rescales
    // async_depth.
    void note_write(const Action& a) {
        wrote_ = true;
        if (a.cause != kernel::WriteCause::none) written_.insert(a.cause);
    }
    // The kernel rows say which writes move which attribute; the executor
    // does not know the kernel's version, so every such row counts.
    bool disturbed(const Action& a) const {
        return std::any_of(written_.begin(), written_.end(),
                           [&](kernel::WriteCause c) { return kernel::disturbed_by(c, a.id, {}) != nullptr; });
    }

    // Reads everything back. What differs (undone by a later write, or never
    // taken) is written once more, in write order, and read back again.
    void verify_and_reapply(DeviceResult& out) {
        for (std::size_t i = 0; i < plan_.actions.size(); ++i) {
            auto& r = out.results[i];
            const auto& a = plan_.actions[i];
            if (r.outcome != Outcome::applied && r.outcome != Outcome::unchanged) continue;
            const auto now = current(a);
            if (!now.ok()) {
                r.after.clear();  // unknown now
                read_failed(a, now.err, r);
                continue;
            }
            r.after = now.value;
            if (r.after == r.expected) continue;

            const bool was_unchanged = r.outcome == Outcome::unchanged;
            // Nothing this pass wrote moves this attribute: someone else
            // wrote it while the pass ran (a tool restarted beside the daemon).
            const bool outside = !disturbed(a);
            if (int werr = write(a, value_of(a, r), r.after, r)) {
                if (werr == EBUSY) {
                    busy(r, r.outcome, r.detail);
                    continue;
                }
                r.outcome = Outcome::failed;
                r.detail = "write " + value_of(a, r) + ": " + util::errno_text(werr);
                continue;
            }
            const std::string undone_to = r.after;
            const auto again = current(a);
            r.after = again.ok() ? again.value : std::string();
            if (!again.ok()) {
                read_failed(a, again.err, r);
            } else if (r.after == r.expected) {
                r.outcome = Outcome::applied;
                r.detail = "re-applied: a later write had changed it to " + undone_to;
                if (was_unchanged) r.detail = "re-applied: a write to another attribute changed it to " + undone_to;
                if (outside) {
                    r.moved_outside = undone_to;
                    r.detail = "re-applied: changed to " + undone_to + " outside blkpolicy while it was being written";
                }
            } else {
                r.outcome = Outcome::not_stuck;
                r.detail = "wrote " + value_of(a, r) + ", reads back " + (r.after.empty() ? "nothing" : r.after);
            }
        }
    }

    udev::Sysfs& sysfs_;
    const policy::DevicePlan& plan_;
    const BusyRetry& retry_;
    std::string dir_;
    std::set<kernel::WriteCause> written_;
    bool wrote_ = false;          // anything written yet in this pass
    bool stuck_checked_ = false;  // requests in flight looked at (once a pass)
    bool stuck_ = false;          // ... and none of them completed
    std::string stuck_detail_;
};

}  // namespace

bool device_going_away(const udev::Sysfs& sysfs, const policy::DevicePlan& plan) {
    const std::string dir = "block/" + plan.device;
    if (!sysfs.exists(dir + "/queue")) return true;  // (missing too when block/NAME is)
    return std::any_of(plan.actions.begin(), plan.actions.end(), [&](const Action& a) {
        return a.kind == policy::ActionKind::write && !a.current.empty() && a.path.rfind("queue/", 0) == 0 &&
               a.path.rfind("queue/iosched/", 0) != 0 && !sysfs.exists(dir + "/" + a.path);
    });
}

DeviceResult execute(udev::Sysfs& sysfs, const policy::DevicePlan& plan, const BusyRetry& retry) {
    return DeviceExecutor(sysfs, plan, retry).run();
}

}  // namespace blkpolicy::agent
