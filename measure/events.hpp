// SPDX-License-Identifier: MIT
// The tracepoints blkpolicy measure counts, decoded from raw records by the
// layout the kernel gives (trace_format), and tallied per device. Pure: the
// session (measure/session) reads the records; tests feed them by hand.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "measure/ring_buffer.hpp"
#include "measure/trace_format.hpp"

namespace blkpolicy::measure {

enum class TracedEvent {
    rq_issue,
    rq_complete,
    wbt_lat,
    wbt_step,
    wbt_timer,
    rq_getrq,
    fm_fault,
    fm_get_pages,
    fm_map_pages
};

struct TracedEventSpec {
    TracedEvent kind;
    const char* system;  // events/SYSTEM/NAME in tracefs
    const char* name;
    const char* proves;  // what its count shows, for reports
};
// Every traced event, in enum order.
const std::array<TracedEventSpec, 9>& traced_events();
const TracedEventSpec& spec(TracedEvent e);

// A kernel dev_t as the block tracepoints carry it: major << 20 | minor.
std::uint32_t kernel_dev(unsigned major, unsigned minor);
// "8:16" -> kernel_dev(8, 16); nullopt for anything else.
std::optional<std::uint32_t> kernel_dev_from_text(std::string_view majmin);
std::string devnum_text(std::uint32_t dev);  // kernel_dev -> "8:16"

// wbt_timer's status, as the kernel numbers it (blk-wbt.c).
enum class WbtWindow : unsigned { other = 0, ok = 1, unknown = 2, unknown_writes = 3, exceeded = 4 };
const char* to_string(WbtWindow w);

struct Event {
    TracedEvent kind = TracedEvent::rq_issue;
    std::uint64_t ts = 0;
    int cpu = 0;
    std::uint32_t dev = 0;  // kernel_dev
    // block_rq_issue, block_rq_complete, block_getrq (all three name the
    // whole disk: a partition's bio has its disk's number and sector there)
    std::uint64_t sector = 0;
    std::uint32_t nr_sector = 0;
    bool read = false, write = false, readahead = false, flush = false;
    // wbt_lat: microseconds; wbt_step: the step after it and its direction
    // (-1 scaled down, +1 up, 0 not known); wbt_timer: the window's status
    std::uint64_t lat_usec = 0;
    int step = 0;
    int direction = 0;
    WbtWindow window = WbtWindow::other;
    // mm_filemap_fault, mm_filemap_get_pages, mm_filemap_map_pages: the
    // file (its filesystem's device is `dev`) and the pages, index to last_index
    std::uint64_t ino = 0;
    std::uint64_t index = 0;
    std::uint64_t last_index = 0;
};

// Turns raw records into Events with the layouts of the events found.
class Decoder {
public:
    // printk: printk_formats, for wbt_step's message ("scale up"/"scale down").
    void add_format(TracedEvent kind, EventFormat format);
    void set_printk_formats(std::map<std::uint64_t, std::string> printk) { printk_ = std::move(printk); }
    bool knows(TracedEvent kind) const;
    // nullopt for a record of an event it does not know, or too short.
    std::optional<Event> decode(const RawRecord& r, int cpu) const;

private:
    struct Known {
        TracedEvent kind;
        EventFormat format;
        // the fields it reads, looked up once
        const FieldFormat* dev = nullptr;
        const FieldFormat* sector = nullptr;
        const FieldFormat* nr_sector = nullptr;
        const FieldFormat* rwbs = nullptr;
        const FieldFormat* name = nullptr;
        const FieldFormat* lat = nullptr;
        const FieldFormat* msg = nullptr;
        const FieldFormat* step = nullptr;
        const FieldFormat* status = nullptr;
        const FieldFormat* s_dev = nullptr;
        const FieldFormat* ino = nullptr;
        const FieldFormat* index = nullptr;
        const FieldFormat* last_index = nullptr;
    };
    std::vector<Known> known_;
    std::map<std::uint64_t, std::string> printk_;
    const FieldFormat* common_type_ = nullptr;
};

struct WbtTally {
    std::uint64_t violations = 0;  // wbt_lat
    std::uint64_t max_violation_usec = 0;
    std::uint64_t step_down = 0;             // wbt_step "scale down": write depth lowered
    std::uint64_t step_up = 0;               // "scale up"
    std::uint64_t step_unknown = 0;          // a step whose direction could not be told
    int deepest_step = 0;                    // the highest scale_step seen (the most throttled)
    std::array<std::uint64_t, 5> windows{};  // wbt_timer by WbtWindow
    std::uint64_t window_count() const;
};

struct RequestTally {
    std::uint64_t issued = 0;
    std::uint64_t read_requests = 0;  // issued reads with data
    std::uint64_t read_sectors = 0;
    std::uint64_t readahead_requests = 0;  // of those, 'A' in rwbs
    std::uint64_t readahead_sectors = 0;
    std::uint64_t completed = 0;  // block_rq_complete with data
    std::uint64_t matched = 0;    // completions whose issue was seen
    // Of those, the ones whose request's allocation (block_getrq, in the
    // submitting task: the CPU rq_affinity steers completions to) was seen.
    std::uint64_t submitted = 0;
    std::uint64_t same_cpu = 0;               // of `submitted`, completed on the CPU that submitted them
    std::uint64_t same_cpu_as_issue = 0;      // of `matched`, completed on the CPU that issued them
    std::vector<std::uint64_t> completed_on;  // by CPU: matched completions there
    std::vector<std::uint64_t> issued_on;     // by CPU: matched completions issued there
    std::vector<std::uint64_t> submitted_on;  // by CPU: submitted completions submitted there
    // Pages applications asked of files on this device through the page
    // cache: each read()'s range once (mm_filemap_get_pages fires again
    // for the rest of a range as it goes), and one page a page fault. A
    // fault first maps the cached pages around it (mm_filemap_map_pages,
    // which fires for every fault on a file mapping) and calls the file's
    // fault handler (mm_filemap_fault) only when its page was not among
    // them: the two on one CPU for one page are one fault. What readahead
    // is measured against.
    std::uint64_t asked_pages = 0;
    std::uint64_t faults = 0;  // of those, asked by page faults
};

struct DeviceTally {
    WbtTally wbt;
    RequestTally rq;
};

// Counts per device. Events of one CPU come in order; the CPUs' pages are
// read one after another, so a completion may come before its issue: it
// waits for it (a while: settle) before it counts as unmatched.
class Tally {
public:
    void add(const Event& e);
    // After a read: completions that have waited longer than `horizon_ns`
    // before `now_ts` for their issue give up (unmatched), and so do issues
    // in flight longer than kInFlightHorizon (their completion was never
    // traced: a sampling pause, lost events), so that a later request at the
    // same sector is not taken for theirs. Looks at them at most once a horizon.
    void settle(std::uint64_t now_ts, std::uint64_t horizon_ns = 2'000'000'000ULL);
    static constexpr std::uint64_t kInFlightHorizon = 60'000'000'000ULL;  // twice SCSI's and NVMe's default timeout
    // The kernel lost events at `ts` (a page flagged missed events): an
    // issue before it is never paired with a completion after it.
    void gap(std::uint64_t ts) { gap_ts_ = std::max(gap_ts_, ts); }
    // The request tracepoints were off a while (sampling): what was in flight
    // or waiting is forgotten, unmatched.
    void forget_in_flight();
    // The end of the window: whatever still waits is unmatched.
    void finish();
    // A new window on the same trace: the counts start again, requests in
    // flight and completions waiting for their issue carry over.
    void reset_counts() {
        devices_.clear();
        last_ = nullptr;
    }
    const std::map<std::uint32_t, DeviceTally>& devices() const { return devices_; }
    // The filemap events name a file's filesystem by its superblock's
    // device: a partition's counts go to its disk (partition -> disk, each
    // kernel_dev). Kept across reset_counts().
    void set_partitions(std::map<std::uint32_t, std::uint32_t> partition_to_disk) {
        disk_of_ = std::move(partition_to_disk);
    }

private:
    DeviceTally& device(std::uint32_t dev);
    void matched(DeviceTally& d, int issued_on, int submitted_on, int completed_on);
    void asked(const Event& e);
    std::uint32_t disk_of(std::uint32_t dev) const {
        const auto it = disk_of_.find(dev);
        return it == disk_of_.end() ? dev : it->second;
    }

    // Requests in flight, and completions read before their issue, each
    // direct-mapped by device and sector: no allocation and no scan per
    // request. One that another takes the slot of before it is paired stays
    // unmatched (counted, never misattributed: the slot keeps device and
    // sector).
    struct Slot {
        std::uint64_t sector = 0;
        std::uint64_t ts = 0;
        std::uint32_t dev = 0;
        std::int32_t cpu = -1;            // -1: empty
        std::int32_t submitted_cpu = -1;  // an issue's: block_getrq's CPU, -1 not seen
        bool holds(std::uint32_t d, std::uint64_t s) const { return cpu >= 0 && dev == d && sector == s; }
    };
    static constexpr unsigned kSlotBits = 11;  // 48 KiB each: far more slots than requests in flight
    // A slot of the direct-mapped tables: by device and sector (requests),
    // or by device and inode (files).
    static std::size_t slot_of(std::uint32_t dev, std::uint64_t key);
    std::map<std::uint32_t, DeviceTally> devices_;
    std::uint32_t last_dev_ = 0;
    DeviceTally* last_ = nullptr;  // the device of the last event (map nodes stay put)
    std::vector<Slot> inflight_ = std::vector<Slot>(std::size_t{1} << kSlotBits);
    std::vector<Slot> early_ = std::vector<Slot>(std::size_t{1} << kSlotBits);      // completions before their issue
    std::vector<Slot> allocated_ = std::vector<Slot>(std::size_t{1} << kSlotBits);  // block_getrq, not yet issued
    std::map<std::uint32_t, std::uint32_t> disk_of_;
    // The read() under way per file, direct-mapped by device and inode: a
    // get_pages with the same last page and a later first page goes on
    // with it and asks nothing new.
    struct Reading {
        std::uint64_t ino = 0;
        std::uint64_t index = 0;
        std::uint64_t last = 0;
        std::uint32_t dev = 0;
        bool used = false;
        bool of(std::uint32_t d, std::uint64_t i) const { return used && dev == d && ino == i; }
    };
    std::vector<Reading> reading_ = std::vector<Reading>(std::size_t{1} << kSlotBits);
    // Per CPU, the last fault-around: a fault handler call for a page in
    // its range on that CPU is the same fault.
    std::vector<Reading> around_;
    // Per file (direct-mapped), the page of the last fault handler call: the
    // fault, retried once its page is read, asks nothing new.
    std::vector<Reading> retrying_ = std::vector<Reading>(std::size_t{1} << kSlotBits);
    std::uint64_t last_sweep_ = 0;
    std::uint64_t gap_ts_ = 0;  // the latest gap: no pair spans it
    bool same_side(std::uint64_t issue_ts, std::uint64_t complete_ts) const {
        return (issue_ts < gap_ts_) == (complete_ts < gap_ts_);
    }
    std::map<std::uint32_t, int> last_step_;  // per device, for a direction printk_formats did not give
};

}  // namespace blkpolicy::measure
