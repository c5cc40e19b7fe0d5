// SPDX-License-Identifier: MIT
// A Sysfs over a fake tree that also does what the kernel does behind the
// writer's back (the rows of kernel/rows.cpp): limits commits raise read_ahead_kb, a scheduler
// switch resets nr_requests and iosched/, bfq turns default wbt off, writing
// the retained wbt latency is a no-op, read_ahead_kb rounds to pages, and
// on a queue with async_depth (7.0+) a switch resets it and an nr_requests
// write rescales it. It
// records every write and can fail chosen paths. The real-kernel tests prove
// the same behaviours on loop devices.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernel/rows.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::test {

class KernelModelSysfs : public udev::Sysfs {
public:
    using udev::Sysfs::Sysfs;

    int write(const std::string& rel, std::string_view value) override;
    udev::ReadResult read(const std::string& rel) const override;

    struct Write {
        std::string path;  // relative to block/NAME/
        std::string value;
        int err;
    };
    std::vector<Write> writes;
    // Fault injection, by attribute path relative to the device
    // ("queue/max_sectors_kb"), for any device:
    std::map<std::string, int> fail;       // writes fail with this errno
    std::map<std::string, int> busy;       // the next N writes fail with EBUSY (another writer holds the queue)
    std::map<std::string, int> read_fail;  // reads fail with this errno
    std::set<std::string> short_read;      // reads return only the first half
    std::set<std::string> vanish;          // the file disappears when first opened
    // Run just before a write of that attribute reaches the tree (a device
    // pulled in the middle of a plan).
    std::map<std::string, std::function<void()>> before_write;
    // I/O schedulers "built as modules": writing such a name that the
    // device does not list yet loads it (it is listed from then on).
    std::set<std::string> loadable_schedulers;
    // The kernel modelled where behaviour depends on the version: what a
    // limits commit does to read_ahead_kb, what a wbt that bfq turned off
    // reads as (before 6.2 the latency; debugfs shows the state). All from
    // the product's own kernel rows (kernel/rows).
    kernel::KernelVersion kernel{6, 18, 0};
    // Keep debugfs rqos/wbt/enabled (kernel/debug/block/NAME/...) up to date.
    bool debugfs = false;
    // 1 on-default, 2 on-manual, 3 off-default, 4 off-manual.
    int wbt_state(const std::string& dev) const { return wbt_.count(dev) ? wbt_.at(dev).state : 1; }
    mutable std::vector<std::string> reads;  // every path read, in order

private:
    struct Wbt {
        int state = 1;  // 1 on-default, 2 on-manual, 3 off-default, 4 off-manual
        long lat = -1;  // retained minimum latency; -1 until first seen
    };
    std::map<std::string, Wbt> wbt_;
    int simulate(const std::string& dev, const std::string& attr, std::string_view value);
    void sync_debugfs(const std::string& dev);
};

}  // namespace blkpolicy::test
