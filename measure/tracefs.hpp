// SPDX-License-Identifier: MIT
// A private tracefs instance for one measurement: its own buffer (shrunk
// at once: a new instance allocates about 1.4 MB per CPU), its own events
// and filters, read raw per CPU, and removed again whatever way its owner
// ends. Instances of a blkpolicy process that is gone (kill -9) are removed
// by the next one. Nothing here touches a queue attribute.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "measure/events.hpp"
#include "util/fd.hpp"
#include "util/status.hpp"

namespace blkpolicy::measure {

// Where tracefs is mounted for a sysfs root: ROOT/kernel/tracing, or the
// debugfs compatibility path ROOT/kernel/debug/tracing. Empty with the
// reason in `why_not` when neither is usable (not mounted, not root,
// lockdown).
std::string find_tracefs(const std::string& sysfs_root, std::string* why_not);

struct TraceOptions {
    std::vector<std::uint32_t> devices;  // kernel_dev of the devices to trace; empty: every device
    unsigned buffer_kb = 256;            // per CPU
    unsigned watermark_percent = 50;     // a CPU's buffer wakes its reader when this full
};

// What the kernel could not keep: a lossy window undercounts.
struct Loss {
    std::uint64_t dropped = 0;       // per_cpu stats "dropped events" (buffer full, overwrite off)
    std::uint64_t overrun = 0;       // "overrun" and "commit overrun"
    std::uint64_t missed_pages = 0;  // pages read with the kernel's missed-events flag
    std::uint64_t bad_pages = 0;     // pages that did not parse (counted, never guessed)
    std::uint64_t events() const { return dropped + overrun; }
    bool lossy() const { return dropped + overrun + missed_pages + bad_pages > 0; }
};

class TraceInstance {
public:
    // Makes instances/blkpolicy-PID-N under `tracefs`, sized and filtered
    // as asked, with every traced event the kernel has enabled. Events the
    // kernel lacks (no wbt without CONFIG_BLK_WBT) are listed in missing().
    static util::Result<std::unique_ptr<TraceInstance>> open(const std::string& tracefs, const TraceOptions& options);
    ~TraceInstance();  // tracing off, descriptors closed, the instance removed
    TraceInstance(const TraceInstance&) = delete;
    TraceInstance& operator=(const TraceInstance&) = delete;

    const std::string& name() const { return name_; }
    const std::string& path() const { return path_; }
    const std::vector<TracedEvent>& missing() const { return missing_; }
    // The per-CPU trace_pipe_raw descriptors (non-blocking), to poll for POLLIN.
    std::vector<int> fds() const;
    std::size_t cpus() const { return cpus_.size(); }
    int cpu_of(std::size_t index) const { return cpus_[index].cpu; }

    // Reads what every CPU has into `tally`, in time order across the
    // CPUs, then settles it. Returns the records read.
    std::size_t drain_all(Tally& tally);
    // Stops recording (the window's end), before the last drain_all.
    void stop();
    // Turns the request tracepoints (block_rq_issue, block_rq_complete) on
    // or off: the costly ones, one or two events per I/O (bench/README.md).
    void set_requests(bool on);
    Loss loss() const;
    unsigned buffer_kb_per_cpu() const { return buffer_kb_; }
    // buffer_total_size_kb: what the instance's buffers hold in all.
    std::uint64_t buffer_total_kb() const;

private:
    TraceInstance() = default;
    util::Status configure(const TraceOptions& o);
    void read_cpu(std::size_t index, std::vector<Event>& out);
    struct Cpu {
        int cpu = 0;
        util::Fd fd;
    };
    std::string tracefs_;
    std::string name_;
    std::string path_;
    bool made_ = false;
    std::vector<Cpu> cpus_;
    std::vector<TracedEvent> missing_;
    Decoder decoder_;
    std::size_t page_size_ = 4096;
    std::size_t commit_size_ = 8;
    unsigned buffer_kb_ = 0;
    std::vector<std::uint8_t> page_;
    std::vector<RawRecord> records_;
    std::vector<Event> events_;  // a drain's records, reused
    std::uint64_t missed_pages_ = 0;
    std::uint64_t bad_pages_ = 0;
};

}  // namespace blkpolicy::measure
