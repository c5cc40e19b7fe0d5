// SPDX-License-Identifier: MIT
#include "measure/events.hpp"

#include <algorithm>
#include <charconv>

namespace blkpolicy::measure {

namespace {
constexpr std::array<TracedEventSpec, 9> kEvents = {{
    {TracedEvent::rq_issue, "block", "block_rq_issue", "requests issued to the driver, with their CPU"},
    {TracedEvent::rq_complete, "block", "block_rq_complete", "requests completed, with their CPU"},
    {TracedEvent::wbt_lat, "wbt", "wbt_lat", "a window's latency above the target"},
    {TracedEvent::wbt_step, "wbt", "wbt_step", "write depth scaled down or up"},
    {TracedEvent::wbt_timer, "wbt", "wbt_timer", "a window ended, with its status"},
    {TracedEvent::rq_getrq, "block", "block_getrq",
     "requests allocated, on the submitting CPU (the one rq_affinity completes on)"},
    {TracedEvent::fm_fault, "filemap", "mm_filemap_fault", "page faults on file pages: the pages mmap readers asked"},
    {TracedEvent::fm_get_pages, "filemap", "mm_filemap_get_pages", "page-cache reads: the pages read() asked"},
    {TracedEvent::fm_map_pages, "filemap", "mm_filemap_map_pages",
     "page faults on file mappings (fault-around): one page an mmap reader asked"},
}};
constexpr bool in_enum_order() {
    for (std::size_t i = 0; i < kEvents.size(); ++i)
        if (static_cast<std::size_t>(kEvents[i].kind) != i) return false;
    return true;
}
static_assert(in_enum_order());

struct Rwbs {
    bool read = false, write = false, readahead = false, flush = false;
};
// blk_fill_rwbs: an optional 'F' (preflush), the operation (R, W, D, N, F
// for a flush), then flags: F (FUA), A (readahead), S (sync), M (meta), ...
Rwbs parse_rwbs(std::string_view s) {
    Rwbs r;
    std::size_t i = 0;
    if (s.size() > 1 && s[0] == 'F' && std::string_view("RWDNF").find(s[1]) != std::string_view::npos) i = 1;
    if (i < s.size()) {
        r.read = s[i] == 'R';
        r.write = s[i] == 'W';
        r.flush = s[i] == 'F';
        for (std::size_t j = i + 1; j < s.size(); ++j)
            if (s[j] == 'A') r.readahead = true;
    }
    return r;
}
}  // namespace

const std::array<TracedEventSpec, 9>& traced_events() { return kEvents; }
const TracedEventSpec& spec(TracedEvent e) { return kEvents[static_cast<std::size_t>(e)]; }

std::uint32_t kernel_dev(unsigned major, unsigned minor) { return (major << 20) | (minor & 0xfffffu); }

std::optional<std::uint32_t> kernel_dev_from_text(std::string_view t) {
    const auto colon = t.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    unsigned ma = 0, mi = 0;
    const auto a = std::from_chars(t.data(), t.data() + colon, ma);
    const auto b = std::from_chars(t.data() + colon + 1, t.data() + t.size(), mi);
    if (a.ec != std::errc() || a.ptr != t.data() + colon || b.ec != std::errc() || b.ptr != t.data() + t.size() ||
        colon == 0 || colon + 1 == t.size() || ma > 0xfff || mi > 0xfffff)
        return std::nullopt;
    return kernel_dev(ma, mi);
}

std::string devnum_text(std::uint32_t dev) { return std::to_string(dev >> 20) + ":" + std::to_string(dev & 0xfffff); }

const char* to_string(WbtWindow w) {
    switch (w) {
        case WbtWindow::ok:
            return "ok";
        case WbtWindow::unknown:
            return "unknown";
        case WbtWindow::unknown_writes:
            return "unknown_writes";
        case WbtWindow::exceeded:
            return "exceeded";
        case WbtWindow::other:
            break;
    }
    return "other";
}

void Decoder::add_format(TracedEvent kind, EventFormat format) {
    known_.push_back({kind, std::move(format)});
    // The field pointers point into the formats, which moved with the vector.
    for (auto& k : known_) {
        const auto& f = k.format;
        k.dev = f.field("dev");
        k.sector = f.field("sector");
        k.nr_sector = f.field("nr_sector");
        k.rwbs = f.field("rwbs");
        k.name = f.field("name");
        k.lat = f.field("lat");
        k.msg = f.field("msg");
        k.step = f.field("step");
        k.status = f.field("status");
        k.s_dev = f.field("s_dev");
        k.ino = f.field("i_ino");
        k.index = f.field("index");
        k.last_index = f.field("last_index");
    }
    common_type_ = known_.front().format.field("common_type");
}

bool Decoder::knows(TracedEvent kind) const {
    return std::any_of(known_.begin(), known_.end(), [&](const Known& k) { return k.kind == kind; });
}

std::optional<Event> Decoder::decode(const RawRecord& r, int cpu) const {
    if (!common_type_) return std::nullopt;
    const auto type = read_unsigned(r.data, *common_type_);
    if (!type) return std::nullopt;
    const Known* k = nullptr;
    for (const auto& candidate : known_)
        if (candidate.format.id == *type) k = &candidate;
    if (!k) return std::nullopt;
    Event e;
    e.kind = k->kind;
    e.ts = r.ts;
    e.cpu = cpu;
    switch (k->kind) {
        case TracedEvent::rq_issue:
        case TracedEvent::rq_complete:
        case TracedEvent::rq_getrq: {
            if (!k->dev || !k->sector || !k->nr_sector || !k->rwbs) return std::nullopt;
            const auto dev = read_unsigned(r.data, *k->dev);
            const auto sector = read_unsigned(r.data, *k->sector);
            const auto nr = read_unsigned(r.data, *k->nr_sector);
            const auto rwbs = read_chars(r.data, *k->rwbs);
            if (!dev || !sector || !nr || !rwbs) return std::nullopt;
            e.dev = static_cast<std::uint32_t>(*dev);
            e.sector = *sector;
            e.nr_sector = static_cast<std::uint32_t>(*nr);
            const auto flags = parse_rwbs(*rwbs);
            e.read = flags.read;
            e.write = flags.write;
            e.readahead = flags.readahead;
            e.flush = flags.flush;
            return e;
        }
        case TracedEvent::fm_fault:
        case TracedEvent::fm_get_pages:
        case TracedEvent::fm_map_pages: {
            if (!k->s_dev || !k->ino || !k->index) return std::nullopt;
            const auto dev = read_unsigned(r.data, *k->s_dev);
            const auto ino = read_unsigned(r.data, *k->ino);
            const auto index = read_unsigned(r.data, *k->index);
            if (!dev || !ino || !index) return std::nullopt;
            e.dev = static_cast<std::uint32_t>(*dev);
            e.ino = *ino;
            e.index = e.last_index = *index;
            if (k->kind != TracedEvent::fm_fault) {
                const auto last = k->last_index ? read_unsigned(r.data, *k->last_index) : std::nullopt;
                if (!last || *last < *index) return std::nullopt;
                e.last_index = *last;
            }
            return e;
        }
        case TracedEvent::wbt_lat:
        case TracedEvent::wbt_step:
        case TracedEvent::wbt_timer: {
            if (!k->name) return std::nullopt;
            const auto name = read_chars(r.data, *k->name);
            const auto dev = name ? kernel_dev_from_text(*name) : std::nullopt;
            if (!dev) return std::nullopt;
            e.dev = *dev;
            if (k->kind == TracedEvent::wbt_lat) {
                const auto lat = k->lat ? read_unsigned(r.data, *k->lat) : std::nullopt;
                if (!lat) return std::nullopt;
                e.lat_usec = *lat;
            } else if (k->kind == TracedEvent::wbt_step) {
                const auto step = k->step ? read_unsigned(r.data, *k->step) : std::nullopt;
                if (!step) return std::nullopt;
                e.step = static_cast<int>(static_cast<std::int32_t>(static_cast<std::uint32_t>(*step)));
                if (const auto msg = k->msg ? read_unsigned(r.data, *k->msg) : std::nullopt) {
                    auto it = printk_.find(*msg);
                    if (it != printk_.end()) {
                        if (it->second == "scale down") e.direction = -1;
                        if (it->second == "scale up") e.direction = +1;
                    }
                }
            } else {
                const auto status = k->status ? read_unsigned(r.data, *k->status) : std::nullopt;
                if (!status) return std::nullopt;
                e.window = *status >= 1 && *status <= 4 ? static_cast<WbtWindow>(*status) : WbtWindow::other;
            }
            return e;
        }
    }
    return std::nullopt;
}

std::uint64_t WbtTally::window_count() const {
    std::uint64_t n = 0;
    for (auto w : windows) n += w;
    return n;
}

DeviceTally& Tally::device(std::uint32_t dev) {
    if (!last_ || last_dev_ != dev) {
        last_ = &devices_[dev];
        last_dev_ = dev;
    }
    return *last_;
}

std::size_t Tally::slot_of(std::uint32_t dev, std::uint64_t key) {
    const std::uint64_t h = (key * 0x9e3779b97f4a7c15ULL) ^ (static_cast<std::uint64_t>(dev) * 0xc2b2ae3d27d4eb4fULL);
    return static_cast<std::size_t>(h >> (64 - kSlotBits));
}

void Tally::matched(DeviceTally& d, int issued_cpu, int submitted_cpu, int completed_cpu) {
    ++d.rq.matched;
    if (issued_cpu == completed_cpu) ++d.rq.same_cpu_as_issue;
    const auto count = [](std::vector<std::uint64_t>& by_cpu, int cpu) {
        const auto i = static_cast<std::size_t>(cpu);
        if (by_cpu.size() <= i) by_cpu.resize(i + 1);
        ++by_cpu[i];
    };
    count(d.rq.completed_on, completed_cpu);
    count(d.rq.issued_on, issued_cpu);
    if (submitted_cpu < 0) return;
    ++d.rq.submitted;
    if (submitted_cpu == completed_cpu) ++d.rq.same_cpu;
    count(d.rq.submitted_on, submitted_cpu);
}

void Tally::asked(const Event& e) {
    const auto disk = disk_of_.empty() ? e.dev : disk_of(e.dev);
    auto& d = device(disk);
    const auto slot = slot_of(disk, e.ino);  // the file's, in reading_ and retrying_
    if (e.kind == TracedEvent::fm_map_pages || e.kind == TracedEvent::fm_fault) {
        // One page a fault, whatever its events: fault-around first
        // (map_pages, for every read fault on a file mapping), the file's
        // fault handler where that did not map the page (fault, on the same
        // CPU), and, when the handler had to wait for the disk, the whole
        // fault again once the page is in (VM_FAULT_RETRY: map_pages, or
        // fault without fault-around, for the page the handler was called for).
        const auto cpu = static_cast<std::size_t>(std::max(e.cpu, 0));
        if (around_.size() <= cpu) around_.resize(cpu + 1);
        auto& last = around_[cpu];
        auto& retry = retrying_[slot];
        const bool retries = retry.of(disk, e.ino) && retry.index >= e.index && retry.index <= e.last_index;
        if (e.kind == TracedEvent::fm_map_pages) {
            last = {e.ino, e.index, e.last_index, disk, true};
            if (retries) {
                retry.used = false;
                return;
            }
        } else {
            const bool after_around = last.of(disk, e.ino) && e.index >= last.index && e.index <= last.last;
            last.used = false;
            retry = {e.ino, e.index, e.index, disk, true};
            if (after_around || retries) return;
        }
        ++d.rq.faults;
        ++d.rq.asked_pages;
        return;
    }
    auto& r = reading_[slot];
    // filemap_read asks [index, last] and, as it copies, [index', last] for
    // the rest of the same read (index' later, last the same).
    const bool goes_on = r.of(disk, e.ino) && r.last == e.last_index && e.index > r.index && e.index <= r.last;
    if (!goes_on) d.rq.asked_pages += e.last_index - e.index + 1;
    r = {e.ino, e.index, e.last_index, disk, true};
}

void Tally::add(const Event& e) {
    if (e.kind == TracedEvent::fm_fault || e.kind == TracedEvent::fm_get_pages || e.kind == TracedEvent::fm_map_pages)
        return asked(e);
    if (e.kind == TracedEvent::rq_getrq) {
        // Counted at its issue, whose device and sector it has (a
        // partition's bio is remapped to its disk's before a request is
        // allocated for it); only its CPU is kept.
        if (e.nr_sector == 0) return;
        allocated_[slot_of(e.dev, e.sector)] = {e.sector, e.ts, e.dev, e.cpu};
        return;
    }
    auto& d = device(e.dev);
    switch (e.kind) {
        case TracedEvent::rq_issue: {
            ++d.rq.issued;
            if (e.nr_sector == 0) break;
            if (e.read) {
                ++d.rq.read_requests;
                d.rq.read_sectors += e.nr_sector;
                if (e.readahead) {
                    ++d.rq.readahead_requests;
                    d.rq.readahead_sectors += e.nr_sector;
                }
            }
            const auto i = slot_of(e.dev, e.sector);
            // The CPU that allocated it (a scheduler's request may be
            // dispatched from a kblockd worker or another submitter's run of
            // the queue): where rq_affinity sends its completion.
            int submitted_cpu = -1;
            if (auto& a = allocated_[i]; a.holds(e.dev, e.sector) && a.ts <= e.ts && same_side(a.ts, e.ts)) {
                submitted_cpu = a.cpu;
                a.cpu = -1;
            }
            // Its completion may have been read first, from another CPU's page.
            if (auto& c = early_[i]; c.holds(e.dev, e.sector) && c.ts >= e.ts && same_side(e.ts, c.ts)) {
                matched(d, e.cpu, submitted_cpu, c.cpu);
                c.cpu = -1;
            } else {
                inflight_[i] = {e.sector, e.ts, e.dev, e.cpu, submitted_cpu};
            }
            break;
        }
        case TracedEvent::rq_getrq:
        case TracedEvent::fm_fault:
        case TracedEvent::fm_get_pages:
        case TracedEvent::fm_map_pages:
            break;  // above
        case TracedEvent::rq_complete: {
            if (e.nr_sector == 0) break;
            ++d.rq.completed;
            const auto i = slot_of(e.dev, e.sector);
            if (auto& issue = inflight_[i];
                issue.holds(e.dev, e.sector) && issue.ts <= e.ts && same_side(issue.ts, e.ts)) {
                matched(d, issue.cpu, issue.submitted_cpu, e.cpu);
                issue.cpu = -1;
            } else {
                early_[i] = {e.sector, e.ts, e.dev, e.cpu};  // waits for its issue (settle)
            }
            break;
        }
        case TracedEvent::wbt_lat:
            ++d.wbt.violations;
            d.wbt.max_violation_usec = std::max(d.wbt.max_violation_usec, e.lat_usec);
            break;
        case TracedEvent::wbt_step: {
            int direction = e.direction;
            auto last = last_step_.find(e.dev);
            if (direction == 0 && last != last_step_.end() && last->second != e.step)
                direction = e.step > last->second ? -1 : +1;  // a higher step throttles more
            last_step_[e.dev] = e.step;
            if (direction < 0)
                ++d.wbt.step_down;
            else if (direction > 0)
                ++d.wbt.step_up;
            else
                ++d.wbt.step_unknown;
            d.wbt.deepest_step = std::max(d.wbt.deepest_step, e.step);
            break;
        }
        case TracedEvent::wbt_timer:
            ++d.wbt.windows[static_cast<std::size_t>(e.window)];
            break;
    }
}

void Tally::settle(std::uint64_t now_ts, std::uint64_t horizon_ns) {
    if (now_ts < last_sweep_ + horizon_ns) return;
    last_sweep_ = now_ts;
    for (auto& c : early_)
        if (c.cpu >= 0 && c.ts + horizon_ns < now_ts) c.cpu = -1;  // its issue never came: unmatched
    for (auto* table : {&inflight_, &allocated_})
        for (auto& s : *table)
            if (s.cpu >= 0 && s.ts + kInFlightHorizon < now_ts) s.cpu = -1;  // never issued, or never completed
}

void Tally::forget_in_flight() {
    for (auto* table : {&inflight_, &early_, &allocated_})
        for (auto& s : *table) s.cpu = -1;
    for (auto& r : reading_) r.used = false;
    for (auto& r : retrying_) r.used = false;
    around_.clear();
}

void Tally::finish() { forget_in_flight(); }

}  // namespace blkpolicy::measure
