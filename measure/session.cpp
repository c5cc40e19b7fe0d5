// SPDX-License-Identifier: MIT
#include "measure/session.hpp"

#include <unistd.h>

#include <algorithm>

#include "udev/discovery.hpp"
#include "udev/probes.hpp"
#include "util/text.hpp"

namespace blkpolicy::measure {

Session::Session(const udev::Sysfs& sysfs, SessionOptions options) : sysfs_(sysfs), options_(std::move(options)) {}

namespace {
std::optional<std::uint32_t> dev_of(const udev::Sysfs& sysfs, const std::string& rel) {
    const auto r = sysfs.read(rel + "/dev");
    return r.ok() ? kernel_dev_from_text(util::trim(r.value)) : std::nullopt;
}
}  // namespace

std::map<std::uint32_t, std::uint32_t> partitions_of(const udev::Sysfs& sysfs, const std::vector<std::string>& disks) {
    std::map<std::uint32_t, std::uint32_t> out;
    for (const auto& disk : disks) {
        const auto whole = dev_of(sysfs, "block/" + disk);
        if (!whole) continue;
        // block/DISK/DISKpN/partition: a disk's partitions are the
        // directories below it that have one.
        for (const auto& entry : sysfs.list("block/" + disk)) {
            const auto rel = "block/" + disk + "/" + entry;
            if (!sysfs.exists(rel + "/partition")) continue;
            if (const auto part = dev_of(sysfs, rel)) out[*part] = *whole;
        }
    }
    return out;
}

std::vector<std::string> Session::names() const {
    if (!options_.devices.empty()) return options_.devices;
    // Every device with a medium: an unbound loop device or an empty drive
    // has nothing to measure (named on the command line, it is still shown).
    auto all = udev::list_block_devices(sysfs_);
    std::erase_if(all, [this](const std::string& n) { return !udev::has_medium(sysfs_, n); });
    return all;
}

void Session::baseline_all() {
    const auto now = std::chrono::steady_clock::now();
    base_.clear();
    for (const auto& name : names()) {
        const auto r = sysfs_.read("block/" + name + "/stat");
        if (!r.ok()) continue;
        if (auto s = parse_stat(r.value)) base_[name] = {*s, now};
    }
}

void Session::start() {
    tracing_ = Tracing{};
    if (const long page = ::sysconf(_SC_PAGESIZE); page > 0) tracing_.page_size = static_cast<std::uint64_t>(page);
    if (options_.trace) {
        std::string why;
        const auto dir = find_tracefs(sysfs_.root().string(), &why);
        if (dir.empty()) {
            tracing_.why_not = why;
        } else {
            TraceOptions t;
            t.buffer_kb = options_.buffer_kb;
            t.online_cpus_file = (sysfs_.root() / "devices/system/cpu/online").string();
            for (const auto& name : options_.devices)
                if (auto k = dev_of(sysfs_, "block/" + name)) t.devices.push_back(*k);
            auto partitions = partitions_of(sysfs_, names());
            for (const auto& [part, disk] : partitions)
                if (std::find(t.devices.begin(), t.devices.end(), disk) != t.devices.end())
                    t.partitions.push_back(part);
            tally_.set_partitions(std::move(partitions));
            auto opened = TraceInstance::open(dir, t);
            if (opened.ok()) {
                instance_ = std::move(*opened);
                tracing_.on = true;
                for (auto m : instance_->missing()) tracing_.missing.emplace_back(spec(m).name);
                loss_at_start_ = instance_->loss();
            } else {
                tracing_.why_not = opened.message();
            }
        }
    } else {
        tracing_.why_not = "tracing was not asked for";
    }
    baseline_all();
    started_ = std::chrono::steady_clock::now();
    requests_on_for_ = {};
    requests_on_ = instance_ != nullptr;  // the instance starts with every event on
    requests_since_ = started_;
    next_switch_ = std::chrono::steady_clock::time_point::max();
    if (instance_ && options_.sample_percent < 100) {
        const auto on_for = std::chrono::milliseconds(kSamplePeriod) * options_.sample_percent / 100;
        if (options_.sample_percent == 0)
            set_requests(false, started_);
        else
            next_switch_ = started_ + on_for;
    }
}

void Session::set_requests(bool on, std::chrono::steady_clock::time_point now) {
    if (!instance_ || on == requests_on_) return;
    if (requests_on_) requests_on_for_ += now - requests_since_;
    if (on) {
        // Requests that were in flight when the tracepoints went off completed
        // untraced: what they left is read and forgotten, so that no request
        // traced from now on is paired with one of theirs.
        instance_->drain_all(tally_);
        tally_.forget_in_flight();
    }
    instance_->set_requests(on);
    requests_on_ = on;
    requests_since_ = now;
}

void Session::advance(std::chrono::steady_clock::time_point now) {
    if (!instance_ || now < next_switch_) return;
    const auto on_for = std::chrono::milliseconds(kSamplePeriod) * options_.sample_percent / 100;
    // On for the sample's share of each period, off for the rest.
    set_requests(!requests_on_, now);
    next_switch_ = now + (requests_on_ ? on_for : kSamplePeriod - on_for);
}

std::vector<int> Session::fds() const { return instance_ ? instance_->fds() : std::vector<int>{}; }

void Session::readable(int) {
    // Whichever CPU's buffer passed its watermark, every CPU is read: the
    // issues and completions of one moment are tallied in time order.
    if (instance_) instance_->drain_all(tally_);
}

double Session::seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

DeviceSettings Session::settings_of(const std::string& name) const {
    DeviceSettings s;
    s.name = name;
    const auto facts = udev::read_facts(
        sysfs_, name, {}, policy::kFactDrivers | policy::kFactCache | policy::kFactStack | policy::kFactTopology);
    if (!facts) return s;
    s.devnum = facts->devnum;
    s.driver = facts->driver;
    s.stack = facts->stack;
    s.request_based = facts->request_based;
    s.slaves = facts->slaves;
    using policy::Key;
    const auto v = udev::read_values(
        sysfs_, name,
        policy::key_texts({Key::scheduler, Key::wbt_lat_usec, Key::write_cache, Key::read_ahead_kb, Key::rq_affinity}),
        facts->live_values);
    s.scheduler = policy::value_of(v, Key::scheduler);
    s.wbt_lat_usec = policy::value_of(v, Key::wbt_lat_usec);
    s.write_cache = policy::value_of(v, Key::write_cache);
    s.read_ahead_kb = policy::value_of(v, Key::read_ahead_kb);
    s.rq_affinity = policy::value_of(v, Key::rq_affinity);
    if (s.request_based) {
        s.wbt_state = udev::read_wbt_state(sysfs_, name);
        s.hw_queues = udev::count_hw_queues(sysfs_, name);
    }
    LoopBacking loop;
    if (facts->stack == policy::Stack::loop) {
        const auto r = sysfs_.read("block/" + name + "/loop/dio");
        if (r.ok()) loop.dio = util::trim(r.value);
        if (loop.dio == "1") {
            const auto store = udev::loop_backing_store(sysfs_, facts->loop_backing_file);
            loop.disk = store.disk;
            loop.what = store.what;
            loop.write_cache = store.write_cache;
        }
    }
    if (!s.request_based) s.members_write_cache = udev::lowers_queue(sysfs_, name, "write_cache");
    const std::string first = options_.first_write_cache ? options_.first_write_cache(*facts) : std::string();
    const DriveCache drive = facts->driver == "sd" && options_.drive_cache ? options_.drive_cache(name) : DriveCache{};
    s.cache = device_cache(*facts, loop, first, drive);
    return s;
}

std::vector<DeviceFigures> Session::take(bool again) {
    const auto now = std::chrono::steady_clock::now();
    if (instance_) {
        // The share of the window the requests were traced.
        auto on_for = requests_on_for_ + (requests_on_ ? now - requests_since_ : std::chrono::steady_clock::duration{});
        const auto window = now - started_;
        tracing_.requests_traced =
            window.count() > 0 ? std::min(1.0, std::chrono::duration<double>(on_for) / window) : 1.0;
        requests_on_for_ = {};
        requests_since_ = now;
        if (!again) instance_->stop();
        instance_->drain_all(tally_);
        if (!again) tally_.finish();
        const auto loss = instance_->loss();
        tracing_.lost_events = loss.events() - std::min(loss.events(), loss_at_start_.events());
        tracing_.missed_pages = loss.missed_pages - loss_at_start_.missed_pages;
        tracing_.bad_pages = loss.bad_pages - loss_at_start_.bad_pages;
        loss_at_start_ = loss;
    }
    std::vector<DeviceFigures> out;
    std::map<std::string, Baseline> next;
    for (const auto& name : names()) {
        const auto r = sysfs_.read("block/" + name + "/stat");
        const auto stat = r.ok() ? parse_stat(r.value) : std::nullopt;
        if (stat) next[name] = {*stat, now};
        const auto base = base_.find(name);
        const bool named = !options_.devices.empty();
        // A device that came during the window counts from the next one;
        // one asked for by name is reported all the same, saying why.
        if (base == base_.end() && !named) continue;
        const auto settings = settings_of(name);
        if (settings.devnum.empty() && !named) continue;  // gone
        std::optional<IoStat> delta = stat && base != base_.end() ? stat_delta(base->second.stat, *stat) : std::nullopt;
        const std::string note = base == base_.end() ? "block/" + name + "/stat could not be read when the window began"
                                 : !stat             ? "cannot read block/" + name + "/stat"
                                 : !delta            ? std::string("a counter went backwards: the device was replaced")
                                                     : std::string();
        const auto dev = kernel_dev_from_text(settings.devnum);
        const auto traced = dev ? tally_.devices().find(*dev) : tally_.devices().end();
        const double secs =
            std::chrono::duration<double>(now - (base == base_.end() ? started_ : base->second.at)).count();
        out.push_back(device_figures(settings, secs, delta ? &*delta : nullptr, note, tracing_,
                                     traced != tally_.devices().end() ? &traced->second : nullptr));
    }
    if (again) {
        tally_.reset_counts();
        // The partitions as they are now (the daemon's windows go on while
        // disks come and go, and traces every device when none was named).
        if (options_.devices.empty()) tally_.set_partitions(partitions_of(sysfs_, names()));
    } else {
        tally_ = Tally{};
    }
    if (again) {
        base_ = std::move(next);
        started_ = now;
    } else {
        instance_.reset();
    }
    return out;
}

}  // namespace blkpolicy::measure
