// SPDX-License-Identifier: MIT
// One measurement over a window: the stat counters of each device at both
// ends, and (where tracefs lets it) a private tracing instance counting the
// tracepoints in between. `blkpolicy measure` runs one window; the daemon
// runs them back to back on the same instance.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "measure/figures.hpp"
#include "measure/tracefs.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::measure {

struct SessionOptions {
    std::vector<std::string> devices;  // empty: every device under block/, as it comes and goes
    bool trace = true;                 // false: the stat counters only
    unsigned buffer_kb = 256;          // per CPU
    // The share of each sampling period (10 s) the request tracepoints are
    // on, in percent: 100 traces every request; less bounds what tracing
    // costs a busy disk (the daemon's default is 10); 0 never traces them.
    unsigned sample_percent = 100;
    // queue/write_cache as the device had it when it first appeared, where
    // recorded (agent/state); empty when not known.
    std::function<std::string(const policy::DeviceFacts&)> first_write_cache;
    // The drive's own cache of a SCSI or SATA disk (ask_drive_cache on its
    // node); unset with a fake sysfs tree, whose names are no host's disks.
    std::function<DriveCache(const std::string& name)> drive_cache;
};

// Each partition of DISKS (names under block/) -> its disk, as kernel_dev.
std::map<std::uint32_t, std::uint32_t> partitions_of(const udev::Sysfs& sysfs, const std::vector<std::string>& disks);

class Session {
public:
    Session(const udev::Sysfs& sysfs, SessionOptions options);
    // The window starts: stat baselines, then tracing where it can (why not
    // is in tracing().why_not; the stat counters are measured either way).
    void start();
    // The CPUs' trace_pipe_raw descriptors, readable when a buffer passed
    // its watermark: call readable() then (every CPU is read).
    std::vector<int> fds() const;
    void readable(int fd);
    // CPUs coming online or going offline during a window (TraceInstance::
    // follow_cpus): true when fds() changed. poll_failed: poll said POLLERR
    // or POLLHUP for FD; it is not polled again until the online list changes.
    bool follow_cpus() { return instance_ && instance_->follow_cpus(); }
    void poll_failed(int fd) {
        if (instance_) instance_->poll_failed(fd);
    }
    // Sampling: when the request tracepoints switch on or off next (the
    // time_point's max when they never do), and the switch, made when due.
    std::chrono::steady_clock::time_point next_switch() const { return next_switch_; }
    void advance(std::chrono::steady_clock::time_point now);
    static constexpr std::chrono::seconds kSamplePeriod{10};
    // The window ends: figures for every device that was there at both
    // ends. With `again`, the next window starts at once on the same instance.
    std::vector<DeviceFigures> take(bool again);
    const Tracing& tracing() const { return tracing_; }
    double seconds() const;
    // What the instance's buffers hold in all (0 without tracing).
    std::uint64_t buffer_total_kb() const { return instance_ ? instance_->buffer_total_kb() : 0; }
    const TraceInstance* instance() const { return instance_.get(); }

private:
    struct Baseline {
        IoStat stat;
        std::chrono::steady_clock::time_point at;
    };
    std::vector<std::string> names() const;
    void baseline_all();
    DeviceSettings settings_of(const std::string& name) const;

    const udev::Sysfs& sysfs_;
    SessionOptions options_;
    std::map<std::string, Baseline> base_;
    std::chrono::steady_clock::time_point started_{};
    std::unique_ptr<TraceInstance> instance_;
    Loss loss_at_start_;
    Tally tally_;
    Tracing tracing_;
    // Sampling state: whether the request tracepoints are on, since when,
    // how long they were on in this window, and the next switch.
    bool requests_on_ = false;
    std::chrono::steady_clock::time_point requests_since_{};
    std::chrono::steady_clock::duration requests_on_for_{};
    std::chrono::steady_clock::time_point next_switch_ = std::chrono::steady_clock::time_point::max();
    void set_requests(bool on, std::chrono::steady_clock::time_point now);
};

}  // namespace blkpolicy::measure
