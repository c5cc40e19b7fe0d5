// SPDX-License-Identifier: MIT
#include "measure/figures.hpp"

#include <algorithm>
#include <cstdio>

namespace blkpolicy::measure {

namespace {

std::string fixed(double v, int decimals) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", decimals, v);
    return b;
}

std::string percent(double share) { return fixed(share * 100.0, 1) + "%"; }

// "requests traced 10.0% of the window (a sample)"
std::string sampled_text(double share) { return "requests traced " + percent(share) + " of the window (a sample)"; }

std::string count(std::uint64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string joined(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
}

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

// Writes whose flushes the queue drops over a cache nothing here can read:
// a warning that says so, never silence taken for "safe".
report::Finding cannot_tell(const DeviceSettings& s, const FlushFigure& fl, double seconds);

const char* wbt_state_text(int state) {
    switch (state) {
        case 1:
            return "on (the default)";
        case 2:
            return "on (set by hand)";
        case 3:
            return "off (the default turned off, as bfq does)";
        case 4:
            return "off (turned off by hand)";
        default:
            return "unknown";
    }
}

}  // namespace

const char* to_string(DeviceCache::Mode m) {
    switch (m) {
        case DeviceCache::Mode::write_back:
            return "write back";
        case DeviceCache::Mode::write_through:
            return "write through";
        case DeviceCache::Mode::none:
            return "none";
        case DeviceCache::Mode::unknown:
            break;
    }
    return "unknown";
}

namespace {
// The critical finding: writes completed on NAME while the kernel dropped their flushes.
report::Finding flushes_dropped(const DeviceSettings& s, std::string message,
                                std::vector<std::pair<std::string, std::string>> evidence) {
    report::Finding finding;
    finding.device = s.name;
    finding.code = kFlushesDropped;
    finding.severity = report::Severity::critical;
    finding.message = std::move(message);
    finding.evidence = std::move(evidence);
    finding.fix = report::keep_flushes_fix(s.name);
    return finding;
}

report::Finding cannot_tell(const DeviceSettings& s, const FlushFigure& fl, double seconds) {
    report::Finding finding;
    finding.device = s.name;
    finding.code = kFlushesDropped;
    finding.severity = report::Severity::warning;
    finding.message = s.name + ": " + std::to_string(fl.writes) + " writes and no flush reached it in " +
                      duration_text(seconds) +
                      ": queue/write_cache says write through, and whether the cache below is volatile cannot be "
                      "told (" +
                      fl.cache.source + "); if it is, fsync no longer makes data durable";
    finding.evidence = {{"stat writes completed (field 5)", std::to_string(fl.writes)},
                        {"queue/write_cache", s.write_cache},
                        {"device cache", "cannot tell (" + fl.cache.source + ")"}};
    finding.fix = report::keep_flushes_fix(s.name);
    return finding;
}
}  // namespace

DeviceCache device_cache(const policy::DeviceFacts& f, const LoopBacking& loop, const std::string& first,
                         const DriveCache& drive) {
    DeviceCache c;
    const auto mode_of = [](const std::string& t) {
        if (starts_with(t, "write back")) return DeviceCache::Mode::write_back;
        if (starts_with(t, "write through")) return DeviceCache::Mode::write_through;
        if (t == "none") return DeviceCache::Mode::none;
        return DeviceCache::Mode::unknown;
    };
    if (!f.cache_type.empty() && drive.read) {
        c.mode = drive.wce ? DeviceCache::Mode::write_back : DeviceCache::Mode::write_through;
        c.source = std::string("the drive's caching mode page: WCE=") + (drive.wce ? "1" : "0") + ", cache_type \"" +
                   f.cache_type + "\"";
        if (drive.wce != starts_with(f.cache_type, "write back"))
            c.source +=
                ": the kernel's view differs from the drive's (a \"temporary\" mode written to cache_type "
                "changes the kernel's view alone)";
    } else if (!f.cache_type.empty()) {
        c.mode = mode_of(f.cache_type);
        c.source = "cache_type \"" + f.cache_type + "\"";
        if (drive.asked && !drive.error.empty())
            c.source += " (the kernel's view; the drive's own page was not read: " + drive.error + ")";
    } else if (f.stack == policy::Stack::loop && !f.loop_backing_file.empty() && loop.dio != "1") {
        c.mode = DeviceCache::Mode::write_back;
        c.source = "the backing file's page cache: the loop device does not use direct I/O";
    } else if (f.stack == policy::Stack::loop && !f.loop_backing_file.empty()) {
        // Direct I/O passes the page cache by, not the cache of the disk under the file.
        if (!loop.disk.empty() && !loop.write_cache.empty()) {
            c.mode = mode_of(loop.write_cache);
            c.source = "the disk under the backing file (" + loop.disk + "): queue/write_cache \"" + loop.write_cache +
                       "\"; direct I/O passes the page cache by, not the disk's cache";
        } else if (loop.what == "tmpfs") {
            c.mode = DeviceCache::Mode::none;
            c.source = "the backing file is on tmpfs: nothing below it is durable, flushed or not";
        } else {
            c.source = "the loop device uses direct I/O, and the disk under its backing file could not be read";
        }
    } else if (starts_with(first, "write back")) {
        c.mode = DeviceCache::Mode::write_back;
        c.source = "queue/write_cache when the device first appeared (\"" + first + "\")";
    } else if (!first.empty()) {
        c.source = "queue/write_cache was \"" + first +
                   "\" when blkpolicy first saw the device, which a udev rule, TuneD or a unit may have written "
                   "before: the device's own cache is not known";
    } else {
        c.source = "no cache_type, and no record of queue/write_cache from when the device first appeared";
    }
    return c;
}

std::optional<double> ReadaheadFigure::sectors_per_read() const {
    if (reads == 0) return std::nullopt;
    return static_cast<double>(sectors_read) / static_cast<double>(reads);
}

std::optional<double> ReadaheadFigure::readahead_share() const {
    if (!traced || read_sectors == 0) return std::nullopt;
    return static_cast<double>(readahead_sectors) / static_cast<double>(read_sectors);
}

std::optional<double> ReadaheadFigure::amplification() const {
    if (!asked_traced || asked_pages == 0 || asked_share <= 0.0) return std::nullopt;
    const double asked_sectors = static_cast<double>(asked_pages) * static_cast<double>(page_size) / 512.0;
    return static_cast<double>(sectors_read) / (asked_sectors / asked_share);
}

std::optional<double> CompletionFigure::same_cpu_share() const {
    if (!traced || counts.submitted == 0) return std::nullopt;
    return static_cast<double>(counts.same_cpu) / static_cast<double>(counts.submitted);
}

std::optional<double> CompletionFigure::issuing_cpu_share() const {
    if (!traced || counts.matched == 0) return std::nullopt;
    return static_cast<double>(counts.same_cpu_as_issue) / static_cast<double>(counts.matched);
}

DeviceFigures device_figures(const DeviceSettings& s, double seconds, const IoStat* delta, const std::string& stat_note,
                             const Tracing& tracing, const DeviceTally* traced) {
    DeviceFigures f;
    f.device = s.name;
    f.devnum = s.devnum;
    f.seconds = seconds;
    f.stat_ok = delta != nullptr;
    f.stat_note = stat_note;
    if (delta) f.delta = *delta;
    const bool have_trace = tracing.on && s.request_based;
    // Requests never traced in this window (a sample of 0%): the readahead
    // and completion figures have no traced part.
    const bool requests_traced = have_trace && tracing.requests_traced > 0;
    f.undercounted = have_trace && tracing.lossy();
    f.requests_traced = have_trace ? tracing.requests_traced : 0.0;
    static const DeviceTally kNothing{};
    const DeviceTally& t = traced ? *traced : kNothing;
    const std::string not_traced = !tracing.on ? "not traced: " + tracing.why_not
                                   : !s.request_based
                                       ? std::string("bio-based queue: no requests to trace (its members have them)")
                                       : std::string();

    // Writeback throttling.
    auto& w = f.wbt;
    w.traced = have_trace;
    w.counts = t.wbt;
    w.writes = delta ? (*delta)[StatField::writes] : 0;
    if (!s.request_based || s.wbt_lat_usec.empty()) {
        w.state = "none";
        w.state_detail = s.request_based ? "the queue has no wbt_lat_usec" : "bio-based queue: no writeback throttling";
    } else {
        const bool off = s.wbt_state ? (*s.wbt_state == 3 || *s.wbt_state == 4) : s.wbt_lat_usec == "0";
        w.state = off ? "off" : "on";
        w.state_detail = "wbt_lat_usec " + s.wbt_lat_usec;
        if (s.wbt_state)
            w.state_detail +=
                "; debugfs rqos/wbt/enabled " + std::to_string(*s.wbt_state) + ": " + wbt_state_text(*s.wbt_state);
    }
    const bool wbt_missing =
        std::find(tracing.missing.begin(), tracing.missing.end(), "wbt_step") != tracing.missing.end();
    if (w.counts.violations + w.counts.step_down + w.counts.step_up + w.counts.step_unknown == 0) {
        if (w.state == "none")
            w.zero_reason = w.state_detail;
        else if (w.state == "off")
            w.zero_reason = "wbt is off" +
                            std::string(s.scheduler == "bfq" && s.wbt_state == 3 ? ": bfq turned the default off" : "");
        else if (!have_trace)
            w.zero_reason = not_traced;
        else if (wbt_missing)
            w.zero_reason = "this kernel has no wbt tracepoints";
        else if (delta && w.writes == 0)
            w.zero_reason = "no writes completed";
        else
            w.zero_reason =
                "no pressure: " + count(w.counts.window_count(), "window", "windows") + " ended, none over the target";
    }

    // Flushes.
    auto& fl = f.flush;
    fl.write_cache = s.write_cache;
    fl.cache = s.cache;
    fl.writes = w.writes;
    fl.counted = delta && delta->has(StatField::flush_ms) && s.request_based;
    if (delta && delta->has(StatField::flush_ms)) {
        fl.flushes = (*delta)[StatField::flushes];
        fl.flush_ms = (*delta)[StatField::flush_ms];
    }
    if (!delta) {
        fl.note = "the stat counters could not be read";
    } else if (!delta->has(StatField::flush_ms)) {
        fl.note = "this kernel's stat has no flush counters (fields 16 and 17 came in 5.5)";
    } else if (!s.request_based) {
        fl.note = "bio-based: its flushes are counted on its members" +
                  (s.slaves.empty() ? std::string() : " (" + joined(s.slaves) + ")");
    }
    fl.at_risk = fl.counted && fl.writes > 0 && fl.flushes == 0 && starts_with(s.write_cache, "write through") &&
                 s.cache.volatile_cache();
    if (fl.at_risk) {
        fl.note =
            "data at risk: writes completed with no flush, because the queue says write through over a device "
            "cache that is write back; fsync returns before the data is on stable storage";
        f.findings.push_back(flushes_dropped(
            s,
            s.name + ": " + std::to_string(fl.writes) + " writes and no flush in " + duration_text(seconds) +
                ": queue/write_cache says write through over a volatile write-back cache (" + s.cache.source +
                "), so the kernel drops every flush and fsync no longer makes data durable",
            {{"stat writes completed (field 5)", std::to_string(fl.writes)},
             {"stat flushes completed (field 16)", std::to_string(fl.flushes)},
             {"queue/write_cache", s.write_cache},
             {"device cache", std::string(to_string(s.cache.mode)) + " (" + s.cache.source + ")"}}));
    } else if (!s.request_based && delta && fl.writes > 0 && starts_with(s.write_cache, "write through")) {
        // A bio-based queue that says write through: the block layer takes
        // PREFLUSH and FUA off every write there, before the members see
        // them, whatever the members' own queues say.
        std::vector<std::string> volatile_members, unknown_members;
        for (const auto& [member, wc] : s.members_write_cache) {
            if (starts_with(wc, "write back")) volatile_members.push_back(member + " \"" + wc + "\"");
        }
        for (const auto& member : s.slaves) {
            const bool read = std::any_of(s.members_write_cache.begin(), s.members_write_cache.end(),
                                          [&](const auto& m) { return m.first == member; });
            if (!read) unknown_members.push_back(member);
        }
        if (!volatile_members.empty()) {
            fl.at_risk = true;
            fl.cache.mode = DeviceCache::Mode::write_back;
            fl.cache.source = "its members' queue/write_cache: " + joined(volatile_members);
            fl.note =
                "data at risk: the queue of this bio-based device says write through, so the block layer drops "
                "every flush here before its members, whose caches are write back, see it";
            f.findings.push_back(flushes_dropped(
                s,
                s.name + ": " + std::to_string(fl.writes) + " writes in " + duration_text(seconds) +
                    ": queue/write_cache says write through on a bio-based device, so the block layer drops every "
                    "flush and FUA there before its members see them, and their caches are write back (" +
                    joined(volatile_members) + "): fsync no longer makes data durable",
                {{"stat writes completed (field 5)", std::to_string(fl.writes)},
                 {"queue/write_cache", s.write_cache},
                 {"members' queue/write_cache", joined(volatile_members)}}));
        } else if (!unknown_members.empty() || s.slaves.empty()) {
            fl.note =
                "writes with the queue saying write through on a bio-based device, which drops their flushes; "
                "whether a cache below is volatile cannot be told (" +
                (s.slaves.empty() ? std::string("no members shown") : "not read: " + joined(unknown_members)) + ")";
            f.findings.push_back(cannot_tell(s, fl, seconds));
        }
    } else if (fl.counted && fl.writes > 0 && fl.flushes == 0 && starts_with(s.write_cache, "write through") &&
               s.cache.mode == DeviceCache::Mode::unknown) {
        fl.note =
            "writes with no flush: the queue says write through, and whether the device's own cache is volatile "
            "is not known";
        f.findings.push_back(cannot_tell(s, fl, seconds));
    }

    // Readahead.
    auto& ra = f.readahead;
    ra.read_ahead_kb = s.read_ahead_kb;
    if (delta) {
        ra.reads = (*delta)[StatField::reads];
        ra.sectors_read = (*delta)[StatField::sectors_read];
    }
    ra.traced = requests_traced;
    ra.read_requests = t.rq.read_requests;
    ra.read_sectors = t.rq.read_sectors;
    ra.readahead_requests = t.rq.readahead_requests;
    ra.readahead_sectors = t.rq.readahead_sectors;
    if (delta && ra.reads == 0)
        ra.note = "no reads completed";
    else if (!have_trace)
        ra.note = not_traced;
    else if (!requests_traced)
        ra.note = "the request tracepoints were off all window (sample 0%)";
    // What was asked: the filemap events name a filesystem's device, which
    // a bio-based device (dm, md) can be, so they count there too.
    const auto lacks = [&](const char* event) {
        return std::find(tracing.missing.begin(), tracing.missing.end(), event) != tracing.missing.end();
    };
    ra.page_size = tracing.page_size;
    ra.asked_share = tracing.requests_traced;
    if (!tracing.on)
        ra.asked_note = "not traced: " + tracing.why_not;
    else if (lacks("mm_filemap_fault") || lacks("mm_filemap_get_pages") || lacks("mm_filemap_map_pages"))
        ra.asked_note =
            "what applications asked is not known: this kernel has no mm_filemap_fault, mm_filemap_get_pages and "
            "mm_filemap_map_pages tracepoints (6.11 and later have them)";
    else if (tracing.requests_traced <= 0.0)
        ra.asked_note = "the tracepoints were off all window (sample 0%)";
    else
        ra.asked_traced = true;
    ra.asked_pages = t.rq.asked_pages;
    ra.faults = t.rq.faults;
    if (ra.asked_traced && ra.asked_pages == 0 && delta && ra.reads > 0)
        ra.asked_note =
            "no read through the page cache asked of a filesystem on it (direct I/O, the raw device, or a "
            "filesystem that names another device, as btrfs does)";

    // Completions.
    auto& c = f.completion;
    if (delta) {
        c.completed = (*delta)[StatField::reads] + (*delta)[StatField::writes];
        if (delta->has(StatField::discards)) c.completed += (*delta)[StatField::discards];
        if (delta->has(StatField::flushes)) c.completed += (*delta)[StatField::flushes];
    }
    c.traced = requests_traced;
    c.counts = t.rq;
    c.rq_affinity = s.rq_affinity;
    c.hw_queues = s.hw_queues;
    if (!have_trace)
        c.note = not_traced;
    else if (!requests_traced)
        c.note = "the request tracepoints were off all window (sample 0%)";
    else if (c.counts.completed == 0)
        c.note = "no request with data completed";
    return f;
}

std::string duration_text(double seconds) {
    if (seconds < 1.0) return fixed(seconds * 1000.0, 0) + " ms";
    if (seconds == static_cast<double>(static_cast<long>(seconds)))
        return std::to_string(static_cast<long>(seconds)) + " s";
    return fixed(seconds, 1) + " s";
}

std::string wbt_sentence(const DeviceFigures& f) {
    const auto& w = f.wbt;
    const auto& k = w.counts;
    std::string out;
    if (k.violations + k.step_down + k.step_up + k.step_unknown == 0) {
        out = "no wbt activity in " + duration_text(f.seconds) + ": " + w.zero_reason;
    } else {
        out = "wbt stepped down " + count(k.step_down, "time", "times") + " and up " + std::to_string(k.step_up) +
              (k.step_unknown ? " (" + std::to_string(k.step_unknown) + " more of unknown direction)" : "") + " in " +
              duration_text(f.seconds) + " (wbt_step), " +
              count(k.violations, "latency violation", "latency violations");
        if (k.violations) out += " (worst " + fixed(static_cast<double>(k.max_violation_usec) / 1000.0, 1) + " ms)";
        out += " (wbt_lat)";
    }
    if (w.traced) {
        out += "; " + count(k.window_count(), "window", "windows") + " (wbt_timer: " + std::to_string(k.windows[1]) +
               " ok, " + std::to_string(k.windows[4]) + " exceeded, " + std::to_string(k.windows[2] + k.windows[3]) +
               " unknown)";
    }
    if (f.stat_ok) out += "; beside " + count(w.writes, "write", "writes") + " completed (stat)";
    if (f.undercounted) out += "; at least: events were lost";
    return out;
}

std::string flush_sentence(const DeviceFigures& f) {
    const auto& fl = f.flush;
    std::string out;
    if (!f.stat_ok) return "flushes not measured: " + fl.note;
    if (fl.counted || f.delta.has(StatField::flush_ms))
        out = count(fl.flushes, "flush", "flushes") + " (" + std::to_string(fl.flush_ms) + " ms flushing, stat 16/17)";
    else
        out = "flushes not counted";
    out += " beside " + count(fl.writes, "write", "writes") + " completed in " + duration_text(f.seconds);
    if (!fl.write_cache.empty()) out += "; queue/write_cache \"" + fl.write_cache + "\"";
    out += "; device cache " + std::string(to_string(fl.cache.mode)) + " (" + fl.cache.source + ")";
    if (!fl.note.empty()) out += "; " + fl.note;
    return out;
}

std::string readahead_sentence(const DeviceFigures& f) {
    const auto& ra = f.readahead;
    if (!f.stat_ok) return "readahead not measured: the stat counters could not be read";
    std::string out = count(ra.reads, "read", "reads") + " of " + std::to_string(ra.sectors_read) + " sectors in " +
                      duration_text(f.seconds) + " (stat 1/3)";
    if (auto per = ra.sectors_per_read()) out += ", " + fixed(*per / 2.0, 1) + " KiB a read request";
    if (!ra.read_ahead_kb.empty()) out += "; read_ahead_kb " + ra.read_ahead_kb;
    if (auto amp = ra.amplification()) {
        out += "; read " + fixed(*amp, 1) + "x what applications asked through the page cache (" +
               count(ra.asked_pages, "page", "pages") + " asked: " + std::to_string(ra.faults) +
               " by page faults, mm_filemap_map_pages/fault; " + std::to_string(ra.asked_pages - ra.faults) +
               " by read calls, mm_filemap_get_pages)";
    } else if (!ra.asked_note.empty() && ra.reads > 0) {
        out += "; " + ra.asked_note;
    }
    if (auto share = ra.readahead_share()) {
        // Every buffered read goes through the readahead path, the page
        // asked included: the share says how reads came, not what was wasted.
        out += "; " + percent(*share) + " of the read sectors issued came by the readahead path (" +
               std::to_string(ra.readahead_requests) + " of " + std::to_string(ra.read_requests) +
               " read requests carried A, block_rq_issue)";
    }
    if (!ra.note.empty()) out += "; " + ra.note;
    if (ra.traced && f.requests_traced < 1.0) out += "; " + sampled_text(f.requests_traced);
    if (f.undercounted && ra.traced) out += "; traced counts are at least these: events were lost";
    return out;
}

std::string completion_sentence(const DeviceFigures& f) {
    const auto& c = f.completion;
    std::string out;
    const auto by_cpu = [](const std::vector<std::uint64_t>& counts) {
        std::string where;
        for (std::size_t cpu = 0; cpu < counts.size(); ++cpu)
            if (const auto n = counts[cpu])
                where += (where.empty() ? "" : ", ") + ("CPU" + std::to_string(cpu)) + " " + std::to_string(n);
        return where;
    };
    // rq_affinity steers a completion to the CPU that submitted the request
    // (block_getrq fires there); the CPU that issued it to the driver may be
    // a kblockd worker or another submitter's run of the queue.
    if (auto share = c.same_cpu_share()) {
        out = percent(*share) + " of " + std::to_string(c.counts.submitted) +
              " requests completed on the CPU that submitted them (block_getrq/block_rq_complete)";
        if (const auto where = by_cpu(c.counts.submitted_on); !where.empty()) out += "; submitted on " + where;
    } else if (c.counts.matched > 0) {
        out = "the submitting CPU of no completed request was traced (block_getrq)";
    } else {
        out = "no completion share";
    }
    if (const auto where = by_cpu(c.counts.completed_on); !where.empty()) out += "; completed on " + where;
    if (auto issued = c.issuing_cpu_share())
        out += "; " + percent(*issued) + " of " + std::to_string(c.counts.matched) +
               " on the CPU that issued them (block_rq_issue)";
    if (f.stat_ok) out += "; beside " + count(c.completed, "request", "requests") + " completed (stat)";
    if (!c.rq_affinity.empty()) out += "; rq_affinity " + c.rq_affinity;
    if (c.hw_queues > 0)
        out += ", " + count(static_cast<std::uint64_t>(c.hw_queues), "hardware queue", "hardware queues");
    if (!c.note.empty()) out += "; " + c.note;
    if (c.traced && f.requests_traced < 1.0) out += "; " + sampled_text(f.requests_traced);
    if (f.undercounted && c.traced) out += "; at least: events were lost";
    return out;
}

}  // namespace blkpolicy::measure
