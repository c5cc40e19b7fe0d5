// SPDX-License-Identifier: MIT
// Carries a device plan out: writes in plan order, reads every value back,
// re-applies once what a later write undid, and reports per attribute.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "policy/plan.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

enum class Outcome {
    unchanged,    // already as desired; nothing written
    applied,      // written and read back as expected
    skipped,      // the device lacks the attribute (or vanished)
    failed,       // the kernel refused the write
    not_stuck,    // written without error, but reads back otherwise
    refused,      // blkpolicy would not write it (unsafe or impossible here)
    busy,         // the kernel kept refusing the write with EBUSY (another writer held the queue) within the bound
    unavailable,  // this host cannot give the value (no such attribute, no such scheduler): not written
};
const char* to_string(Outcome o);
// failed, not-stuck, refused, busy and unavailable: the attribute is not as
// the policy says.
bool is_failure(Outcome o);

// Since 7.0 (and in the 6.18.y and 6.19.y stable series) a write of
// scheduler or nr_requests returns EBUSY when another writer holds the
// queue's update lock, instead of waiting for it (kernel row
// write-contended:ebusy). That is contention, not a refusal: the write is
// tried again after a pause that doubles from `first_pause` up to
// `max_pause`, until it is taken, `max_attempts` writes were made, or the
// pauses add up to `budget`.
struct BusyRetry {
    int max_attempts = 40;
    std::chrono::milliseconds budget{1000};
    std::chrono::microseconds first_pause{1000};
    std::chrono::microseconds max_pause{32000};
    // How to pause; a real sleep unless a test counts the pauses instead.
    std::function<void(std::chrono::microseconds)> pause;
};
// The bound the commands and the daemon use (real sleeps).
const BusyRetry& default_busy_retry();

struct AttributeResult {
    std::string attribute;
    std::string before;  // read just before writing
    std::string after;   // read back at the end
    // Read back at the end as a value no write of this pass can have put
    // there (no kernel row links them): another writer's, written over.
    std::string moved_outside;
    std::string expected;              // what a correct read-back shows (a scheduler: the name the kernel accepted)
    std::vector<std::string> refused;  // scheduler names the kernel refused (EINVAL) before one was accepted
    int attempts = 0;                  // writes made, EBUSY retries included (0: nothing written)
    int busy = 0;                      // of those, refused with EBUSY
    std::chrono::microseconds busy_waited{0};  // time paused between them
    Outcome outcome = Outcome::unchanged;
    std::string detail;
    policy::RuleRef rule;
};

struct DeviceResult {
    std::string device;
    std::string not_tuned;
    std::vector<AttributeResult> results;  // in write order
};

DeviceResult execute(udev::Sysfs& sysfs, const policy::DevicePlan& plan, const BusyRetry& retry = default_busy_retry());

// Whether the plan's device is being removed: its directory is gone, or its
// queue directory (7.x removes that first), or a queue attribute the plan
// read a moment ago (6.1 was seen mid-way, the queue directory still there
// and nr_requests gone). On a live queue only iosched/ files come and go,
// with the scheduler. What a write to such a device returns (ENOENT, ENODEV)
// is the removal, not a refusal: the executor says "device vanished", the
// daemon forgets the device.
bool device_going_away(const udev::Sysfs& sysfs, const policy::DevicePlan& plan);

}  // namespace blkpolicy::agent
