// SPDX-License-Identifier: MIT
#include "agent/daemon/pending.hpp"

#include <algorithm>

namespace blkpolicy::agent {

bool PendingEvents::note(const udev::Uevent& e) {
    if (e.controller) {
        // Which paths came or went is read from sysfs, in a full pass.
        rescan_ = true;
        return false;
    }
    if (e.action == "remove") {
        removed_.insert(e.name);
        pending_.erase(e.name);
        return false;
    }
    removed_.erase(e.name);
    const Trigger t = e.source == udev::EventSource::udev ? Trigger::udev_processed
                      : e.action == "add"                 ? Trigger::added
                                                          : Trigger::changed;
    if (pending_.size() >= max_ && !pending_.count(e.name)) {
        const bool first = !rescan_;
        rescan_ = true;
        return first;
    }
    auto& slot = pending_[e.name];
    slot = std::max(slot, t);
    return false;
}

PendingEvents::Batch PendingEvents::take() {
    Batch b;
    b.removed = std::move(removed_);
    b.reconcile = std::move(pending_);
    b.rescan = rescan_;
    removed_.clear();
    pending_.clear();
    rescan_ = false;
    return b;
}

}  // namespace blkpolicy::agent
