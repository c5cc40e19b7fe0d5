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
