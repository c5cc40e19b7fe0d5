// SPDX-License-Identifier: MIT
// What a window of measurement says about each device: every figure beside
// the counter that proves it, a zero explained, and the one finding that
// loses data (writes with no flush over a volatile cache the queue was told
// is write through). Pure: counters and the device's settings in, figures
// and sentences out, shared by `blkpolicy measure`, the daemon's metrics,
// status and explain.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "measure/drive_cache.hpp"
#include "measure/events.hpp"
#include "measure/stat.hpp"
#include "policy/facts.hpp"
#include "report/audit.hpp"

namespace blkpolicy::measure {

// The device's own cache, the second opinion beside queue/write_cache.
struct DeviceCache {
    enum class Mode { unknown, write_back, write_through, none };
    Mode mode = Mode::unknown;
    std::string source;  // where it was read: "cache_type", "loop: backing file page cache", ...
    bool volatile_cache() const { return mode == Mode::write_back; }
};
const char* to_string(DeviceCache::Mode m);

// Which it is: SCSI and virtio cache_type; a loop device's backing file
// (its page cache is volatile unless the loop uses direct I/O, and with
// direct I/O the writes land in the cache of the disk under the file:
// `backing`); otherwise queue/write_cache as first recorded
// (`first_write_cache`, from the state directory; empty when not recorded)
// where it says write back. A first record of write through is no proof:
// a udev rule, TuneD or a unit may have written it before blkpolicy looked,
// so the cache is then unknown.
struct LoopBacking {
    std::string dio;          // loop/dio: "1" with direct I/O
    std::string disk;         // the disk under the backing file ("" without one)
    std::string what;         // what the file lives on when there is no disk ("tmpfs")
    std::string write_cache;  // that disk's queue/write_cache
};
// A SCSI or SATA disk's cache is the drive's own when its caching page was
// read (`drive`): cache_type is the kernel's view, which "temporary write
// through" turns to write through with the drive's cache still on.
DeviceCache device_cache(const policy::DeviceFacts& facts, const LoopBacking& backing,
                         const std::string& first_write_cache, const DriveCache& drive = {});

// The device's settings as they were when the window ended.
struct DeviceSettings {
    std::string name;
    std::string devnum;
    std::string driver;
    policy::Stack stack = policy::Stack::none;
    bool request_based = false;       // blk-mq: request tracepoints, wbt, rq_affinity
    std::vector<std::string> slaves;  // a bio-based stack's members, where its flushes are counted
    // A bio-based stack's members and their queue/write_cache: the block
    // layer drops PREFLUSH and FUA at a bio-based queue that says write
    // through, before the members see them.
    std::vector<std::pair<std::string, std::string>> members_write_cache;
    std::string scheduler;
    std::string wbt_lat_usec;      // as sysfs reads it ("" when the queue has none)
    std::optional<int> wbt_state;  // debugfs rqos/wbt/enabled (nullopt: debugfs not mounted)
    std::string write_cache;       // queue/write_cache
    DeviceCache cache;
    std::string read_ahead_kb;
    std::string rq_affinity;
    int hw_queues = 0;
};

// Whether and how the window was traced.
struct Tracing {
    bool on = false;
    std::string why_not;               // when not on: tracefs not mounted, not root, lockdown, ...
    std::vector<std::string> missing;  // events the kernel lacks ("wbt_lat", ...)
    // The share of the window the request tracepoints were on (sampling,
    // --sample / daemon.measure_sample): the readahead and completion counts
    // are of that share; their shares stand for the whole window.
    double requests_traced = 1.0;
    std::uint64_t lost_events = 0;  // dropped + overrun, every CPU
    std::uint64_t missed_pages = 0;
    std::uint64_t bad_pages = 0;
    std::uint64_t page_size = 4096;  // the pages the filemap events count
    bool lossy() const { return lost_events + missed_pages + bad_pages > 0; }
};

struct WbtFigure {
    bool traced = false;
    std::string state;  // "on", "off", "none"
    std::string state_detail;
    WbtTally counts;
    std::uint64_t writes = 0;  // stat field 5
    std::string zero_reason;   // why nothing happened, when nothing did
};

struct FlushFigure {
    bool counted = false;  // stat has fields 16 and 17 (5.5+) and the queue counts them
    std::uint64_t flushes = 0;
    std::uint64_t flush_ms = 0;
    std::uint64_t writes = 0;
    std::string write_cache;
    DeviceCache cache;
    bool at_risk = false;
    std::string note;
};

struct ReadaheadFigure {
    std::uint64_t reads = 0;         // stat field 1
    std::uint64_t sectors_read = 0;  // stat field 3
    std::string read_ahead_kb;
    bool traced = false;
    std::uint64_t read_requests = 0;  // traced issues
    std::uint64_t read_sectors = 0;
    std::uint64_t readahead_requests = 0;
    std::uint64_t readahead_sectors = 0;
    std::string note;
    // What applications asked through the page cache (mm_filemap_fault,
    // mm_filemap_get_pages, on the filesystems whose device this is), the
    // traced share of the window, and why it is not known where it is not.
    bool asked_traced = false;
    std::uint64_t asked_pages = 0;
    std::uint64_t faults = 0;
    std::uint64_t page_size = 4096;
    double asked_share = 1.0;
    std::string asked_note;
    std::optional<double> sectors_per_read() const;
    std::optional<double> readahead_share() const;  // of read sectors issued
    // Sectors read (stat) over sectors asked (the traced asks scaled to the
    // window): 1 when readahead read what was then used, above when it read
    // pages nobody asked for.
    std::optional<double> amplification() const;
};

struct CompletionFigure {
    std::uint64_t completed = 0;  // stat: reads + writes + discards + flushes completed
    bool traced = false;
    RequestTally counts;
    std::string rq_affinity;
    int hw_queues = 0;
    std::string note;
    // Of the completions whose submitting CPU was traced, the share
    // completed there: what rq_affinity moves.
    std::optional<double> same_cpu_share() const;
    // Of the matched completions, the share completed on the CPU that issued
    // them to the driver (the same CPU without a scheduler or a deferred run).
    std::optional<double> issuing_cpu_share() const;
};

struct DeviceFigures {
    std::string device;
    std::string devnum;
    double seconds = 0;
    bool stat_ok = false;
    std::string stat_note;  // why the counters could not be read
    IoStat delta;
    bool undercounted = false;     // the window's tracing lost events: traced counts are at least these
    double requests_traced = 1.0;  // the share of the window its requests were traced (a sample below 1)
    WbtFigure wbt;
    FlushFigure flush;
    ReadaheadFigure readahead;
    CompletionFigure completion;
    std::vector<report::Finding> findings;
};

// The finding code of writes with no flush over a volatile cache.
inline constexpr const char* kFlushesDropped = "flushes-dropped";

// One device's figures. `delta` is null when the stat counters could not be
// read at both ends; `traced` is null when the device was not traced (or
// tracing is off: see `tracing`).
DeviceFigures device_figures(const DeviceSettings& settings, double seconds, const IoStat* delta,
                             const std::string& stat_note, const Tracing& tracing, const DeviceTally* traced);

// "34 step-downs, 31 step-ups, 23 latency violations (worst 290.1 ms) in
// 60 s beside 12,345 writes" and the like: one sentence per figure.
std::string wbt_sentence(const DeviceFigures& f);
std::string flush_sentence(const DeviceFigures& f);
std::string readahead_sentence(const DeviceFigures& f);
std::string completion_sentence(const DeviceFigures& f);
// "60 s" / "1.5 s" / "500 ms"
std::string duration_text(double seconds);

}  // namespace blkpolicy::measure
