// SPDX-License-Identifier: MIT
// Why each value is what it is: the policy's side (winning rule, overridden
// rules) and the kernel's side (its own default for this device, how it
// derived it from which inputs, and what else moves it). Pure.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernel/rows.hpp"
#include "policy/facts.hpp"
#include "policy/host.hpp"
#include "policy/plan.hpp"
#include "writers/model.hpp"

namespace blkpolicy::report {

// The host (policy/host, read once per command) and what explain reads of
// the device beyond its facts and values.
struct ExplainContext : policy::HostContext {
    ExplainContext() = default;
    explicit ExplainContext(const policy::HostContext& host) : policy::HostContext(host) {}
    std::optional<int> wbt_state;  // from debugfs, when readable
    int hw_queues = 0;             // entries in mq/
    std::int64_t hw_tags = 0;      // mq/0/nr_tags: the hardware queue depth
    // sd: the Block Device Characteristics VPD page (B1h) medium rotation
    // rate (0 not reported, 1 solid state, else rpm); nullopt: no such page.
    std::optional<int> rotation_rate;
    // A bound loop device: what its backing file lives on, and whether that
    // is rotational (nullopt: no block device under it, e.g. tmpfs).
    std::string backing_store;
    std::optional<bool> backing_rotational;
    bool backing_known = false;
    // md and dm: the devices below, and whether each is rotational now.
    std::vector<std::pair<std::string, bool>> lowers_rotational;
    // The host's other writers (udev rules, TuneD, sysfsutils, tmpfiles.d,
    // units, rc.local): each one whose conditions select the device (or may:
    // a condition no fact decides) is named beside the attribute it writes.
    std::vector<writers::WriterAssignment> writers;
    writers::UdevDevice device;  // what their conditions are decided on
};

struct Explanation {
    std::string attribute;
    std::string current;
    bool managed = false;  // the policy sets it on this device
    std::string desired;   // expected read-back
    policy::RuleRef rule;
    std::vector<policy::RuleRef> overridden;
    std::string plan_note;
    std::string kernel_default;  // empty when the kernel's choice cannot be known from sysfs
    std::string derivation;      // how the kernel arrives at it
    std::vector<std::pair<std::string, std::string>> inputs;  // sysfs attribute -> value read
    std::string disturbs;                                     // what else moves this value
    // Which kernel behaviour applies here, as a stable id for machines:
    // "readahead-on-commit:untouched|reset|raise|unknown" (read_ahead_kb),
    // "bfq-off-wbt-reads:0|latency" (wbt_lat_usec),
    // "async-depth:queue-attribute|iosched-tunable" (async_depth). Empty otherwise.
    std::string kernel_rule;
    // How that row stands on this kernel (standing_on): "holds", or "not
    // observed past 7.3: read back" on a newer one.
    std::string kernel_rule_standing;
    // Other writers of this attribute on this device, in the order they
    // decide, each certain or "may" (with the condition no fact decides).
    std::vector<writers::FoundWriter> written_by;
};

struct StackView {
    std::vector<std::string> tops;    // devices filesystems read through (no holders above)
    std::vector<std::string> lowers;  // every device below this one
    // Lower devices where the policy sets read_ahead_kb: the filesystem on
    // the top never reads through their readahead.
    std::vector<std::string> lowers_tuned_in_vain;
};

struct DeviceExplanation {
    policy::DeviceFacts facts;
    std::vector<Explanation> attributes;  // managed first (write order), then notable ones
    std::string wbt_state;                // empty when debugfs was not readable
    std::string wbt_consequence;
    StackView stack;
};

DeviceExplanation explain_device(const policy::DeviceFacts& facts, const policy::Values& values,
                                 const policy::DevicePlan& plan, const ExplainContext& ctx, StackView stack);

}  // namespace blkpolicy::report
