// Carries a device plan out: writes in plan order, reads every value back,
// re-applies once what a later write undid, and reports per attribute.
#pragma once

#include <string>
#include <vector>

#include "policy/plan.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

enum class Outcome {
    unchanged,  // already as desired; nothing written
    applied,    // written and read back as expected
    skipped,    // the device lacks the attribute (or vanished)
    failed,     // the kernel refused the write
    not_stuck,  // written without error, but reads back otherwise
    refused,    // blkpolicy would not write it (unsafe or impossible here)
};
const char* to_string(Outcome o);
bool is_failure(Outcome o);

struct AttributeResult {
    std::string attribute;
    std::string before;                // read just before writing
    std::string after;                 // read back at the end
    std::string expected;              // what a correct read-back shows (a scheduler: the name the kernel accepted)
    std::vector<std::string> refused;  // scheduler names the kernel refused (EINVAL) before one was accepted
    Outcome outcome = Outcome::unchanged;
    std::string detail;
    policy::RuleRef rule;
};

struct DeviceResult {
    std::string device;
    std::string not_tuned;
    std::vector<AttributeResult> results;  // in write order
};

DeviceResult execute(udev::Sysfs& sysfs, const policy::DevicePlan& plan);

}  // namespace blkpolicy::agent
