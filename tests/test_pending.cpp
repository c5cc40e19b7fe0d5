// SPDX-License-Identifier: MIT
// agent/daemon/pending: how uevents wait for the next pass.
#include <doctest/doctest.h>

#include <set>

#include "agent/daemon/pending.hpp"

using namespace blkpolicy;
using agent::Trigger;

TEST_CASE("pending events: bursts coalesce per device, removals win, and the queue is bounded") {
    using blkpolicy::udev::EventSource;
    agent::PendingEvents p(3);
    for (int i = 0; i < 1000; ++i) p.note({"change", "loop0", EventSource::kernel});
    p.note({"add", "loop0", EventSource::kernel});
    p.note({"change", "loop1", EventSource::udev});
    p.note({"add", "loop2", EventSource::kernel});
    p.note({"remove", "loop2", EventSource::kernel});
    auto b = p.take();
    CHECK(b.reconcile.size() == 2);
    CHECK(b.reconcile.at("loop0") == Trigger::added);  // the strongest trigger of the burst
    CHECK(b.reconcile.at("loop1") == Trigger::udev_processed);
    CHECK(b.removed == std::set<std::string>{"loop2"});
    CHECK_FALSE(b.rescan);
    CHECK(p.empty());

    // Past the bound: a rescan, said once.
    CHECK_FALSE(p.note({"change", "a", EventSource::kernel}));
    CHECK_FALSE(p.note({"change", "b", EventSource::kernel}));
    CHECK_FALSE(p.note({"change", "c", EventSource::kernel}));
    CHECK(p.note({"change", "d", EventSource::kernel}));
    CHECK_FALSE(p.note({"change", "e", EventSource::kernel}));
    CHECK(p.take().rescan);
    CHECK(p.empty());
}

TEST_CASE("pending events: an NVMe controller's event asks for a rescan, its name is no disk") {
    using blkpolicy::udev::EventSource;
    // A controller re-added brings its hidden multipath paths back without
    // block uevents (6.12, 7.3): only its own add and change come.
    agent::PendingEvents p;
    CHECK_FALSE(p.note({"add", "nvme1", EventSource::kernel, true}));
    CHECK_FALSE(p.empty());
    auto b = p.take();
    CHECK(b.rescan);
    CHECK(b.reconcile.empty());
    CHECK(b.removed.empty());
    p.note({"remove", "nvme1", EventSource::udev, true});
    b = p.take();
    CHECK(b.rescan);
    CHECK(b.removed.empty());  // "nvme1" is not a disk that went
}
