// SPDX-License-Identifier: MIT
// Uevents waiting to be handled: coalesced per device (the strongest
// trigger wins), removals remembered, and bounded: past `max_devices`
// distinct devices the batch becomes a full rescan instead.
#pragma once

#include <map>
#include <set>
#include <string>

#include "agent/daemon/reconciler.hpp"
#include "udev/monitor.hpp"

namespace blkpolicy::agent {

class PendingEvents {
public:
    explicit PendingEvents(std::size_t max_devices = 65536) : max_(max_devices) {}

    // Returns true when this event tipped the set into a rescan.
    bool note(const udev::Uevent& e);
    // The kernel dropped events (ENOBUFS): only a rescan is exact.
    void note_overflow() { rescan_ = true; }

    struct Batch {
        std::set<std::string> removed;
        std::map<std::string, Trigger> reconcile;
        bool rescan = false;
    };
    Batch take();
    bool empty() const { return removed_.empty() && pending_.empty() && !rescan_; }

private:
    std::size_t max_;
    std::map<std::string, Trigger> pending_;
    std::set<std::string> removed_;
    bool rescan_ = false;
};

}  // namespace blkpolicy::agent
