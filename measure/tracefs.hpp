// SPDX-License-Identifier: MIT
// A private tracefs instance for one measurement: its own buffer (shrunk
// at once: a new instance allocates about 1.4 MB per CPU), its own events
// and filters, read raw per CPU, and removed again whatever way its owner
// ends. Instances of a blkpolicy process that is gone (kill -9) are removed
// by the next one. Nothing here touches a queue attribute.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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
    // Their partitions (kernel_dev): the filemap events name a file's
    // filesystem by its device, which may be one of these.
    std::vector<std::uint32_t> partitions;
    unsigned buffer_kb = 256;         // per CPU
    unsigned watermark_percent = 50;  // a CPU's buffer wakes its reader when this full
    // The kernel's list of online CPUs: tracefs has a buffer directory for
    // every possible CPU, and the buffer of one that is not online answers
    // poll with an error at once, forever.
    std::string online_cpus_file = "/sys/devices/system/cpu/online";
};

// "0-3,8,10-11\n" (a sysfs CPU list) -> {0,1,2,3,8,10,11}; nullopt when it
// is not one.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

// What the kernel could not keep: a lossy window undercounts.
struct Loss {
    std::uint64_t dropped = 0;       // per_cpu stats "dropped events" (buffer full, overwrite off)
    std::uint64_t overrun = 0;       // "overrun" and "commit overrun"
    std::uint64_t missed_pages = 0;  // pages read with the kernel's missed-events flag
    std::uint64_t bad_pages = 0;     // pages that did not parse (counted, never guessed)
    std::uint64_t events() const { return dropped + overrun; }
    bool lossy() const { return dropped + overrun + missed_pages + bad_pages > 0; }
};

// Instances are named blkpolicy-NS-PID-N: NS is the inode number of the
// PID namespace the process lives in (/proc/self/ns/pid). Processes in two
// namespaces (a container beside its host, both seeing one tracefs) can
// have the same PID; the namespace keeps their names apart, and a process
// removes a dead process's instance only when both are of its namespace
// (where its kill(PID, 0) speaks of that very process).
struct InstanceOwner {
    std::uint64_t pid_ns = 0;
    long pid = 0;
    bool operator==(const InstanceOwner&) const = default;
};
std::string instance_name(InstanceOwner owner, unsigned sequence);
// The owner a name says; nullopt for every other name (another tool's, or
// blkpolicy-PID-N of releases before the namespace was in the name).
std::optional<InstanceOwner> instance_owner(std::string_view name);
// This process's PID namespace; 0 when /proc cannot say (then no instance
// is ever taken for stale).
std::uint64_t own_pid_namespace();

class TraceInstance {
public:
    // Makes instances/blkpolicy-NS-PID-N under `tracefs`, sized and filtered
    // as asked, with every traced event the kernel has enabled. Events the
    // kernel lacks (no wbt without CONFIG_BLK_WBT) are listed in missing().
    static util::Result<std::unique_ptr<TraceInstance>> open(const std::string& tracefs, const TraceOptions& options);
    ~TraceInstance();  // tracing off, descriptors closed, the instance removed
    TraceInstance(const TraceInstance&) = delete;
    TraceInstance& operator=(const TraceInstance&) = delete;

    const std::string& name() const { return name_; }
    const std::string& path() const { return path_; }
    const std::vector<TracedEvent>& missing() const { return missing_; }
    // The trace_pipe_raw descriptors (non-blocking) of the online CPUs, to
    // poll for POLLIN. Every possible CPU's is open and read at each drain.
    std::vector<int> fds() const;
    // Reads the online list again: a CPU that came online is polled from
    // now on, one that went offline no longer (its buffer is still read).
    // True when fds() changed. Cheap: one small sysfs file.
    bool follow_cpus();
    // A descriptor poll reported an error for (POLLERR, POLLHUP): not polled
    // until the online list changes (it is still read at each drain).
    void poll_failed(int fd);
    // The CPUs whose buffers are polled (online), of those tracefs has.
    std::size_t cpus() const {
        return static_cast<std::size_t>(
            std::count_if(cpus_.begin(), cpus_.end(), [](const Cpu& c) { return c.polled; }));
    }
    std::size_t possible_cpus() const { return cpus_.size(); }

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
        bool polled = false;  // online, and poll has not failed on it since the list last changed
    };
    std::string online_file_;
    std::string online_text_;  // the list as last read
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
    std::uint64_t gap_ts_ = 0;  // the latest page the kernel flagged missed events before
    std::uint64_t bad_pages_ = 0;
};

}  // namespace blkpolicy::measure
