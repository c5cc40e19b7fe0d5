// SPDX-License-Identifier: MIT
// plan(facts, current values, policy) -> ordered actions. Pure: the heart of
// blkpolicy. The executor (agent/) carries the actions out.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernel/rows.hpp"
#include "policy/attributes.hpp"
#include "policy/facts.hpp"
#include "policy/host.hpp"
#include "policy/policy.hpp"

namespace blkpolicy::policy {

enum class ActionKind {
    write,      // the value differs now, or an earlier write in this plan will disturb it
    unchanged,  // already as desired
    // Not this device's kind: a bio-based queue has no scheduler or wbt, a
    // disk that is not SCSI no device/timeout, one without discard no
    // discard limit; tunables of a scheduler the device does not end with.
    skip,
    refuse,  // the policy asks for something unsafe or impossible on this device
    // This host cannot give the value: the kernel or device lacks the
    // attribute, or offers and can load none of the wanted schedulers. The
    // policy is not met (apply and status exit 1; the daemon alerts once).
    unavailable,
};
const char* to_string(ActionKind k);

struct Action {
    Key id = Key::rotational;  // the attribute's row (Key::iosched for every iosched.NAME)
    std::string attribute;     // policy key
    std::string path;          // relative to the device's sysfs directory
    Phase phase = Phase::late;
    kernel::WriteCause cause = kernel::WriteCause::none;  // from the attribute table: what the write can disturb
    int rank = 0;                                         // write order
    std::string current;                                  // normalised value at plan time; empty when absent
    std::string desired;                                  // as the policy says it ("bfq", "default", "128")
    std::string value;                                    // what is written ("-1" for wbt "default")
    std::string expected;                                 // what a correct read-back shows
    ActionKind kind = ActionKind::write;
    std::vector<std::string> alternatives;  // scheduler: the next names to try, in order, if the kernel refuses `value`
    // wbt_lat_usec: write 0, then the value, even when the value reads as
    // wanted already: wbt is (or is about to be) off, and writing the
    // latency it retained is a silent no-op (6.1 even shows it in sysfs).
    bool zero_first = false;
    std::string note;                 // why this kind, or what the write disturbs
    RuleRef rule;                     // the winning rule
    std::vector<RuleRef> overridden;  // earlier matching rules that set the same attribute
};

struct DevicePlan {
    std::string device;
    std::vector<RuleRef> matched;  // in policy order
    std::vector<Action> actions;   // in write order
    std::string not_tuned;         // non-empty: why the device is left alone entirely
};

// The host (read once: policy/host) and what the daemon learnt of it on
// this boot.
struct PlanContext : HostContext {
    PlanContext() = default;
    explicit PlanContext(const HostContext& host) : HostContext(host) {}
    // Names the kernel refused on this boot (the daemon remembers them until
    // a reload), so they are not tried on every pass.
    std::set<std::string> refused_schedulers;
};

// The attribute values planning (and the daemon's verdicts) need for this
// device: what its matching rules set, plus their inputs (rotational,
// scheduler, max_hw_sectors_kb, discard_granularity). Empty for a device no
// rule matches: nothing to read. (The inputs of the kernel's own
// read_ahead_kb are read only when a verdict needs them.)
std::vector<std::string> value_keys_for(const Policy& policy, const DeviceFacts& facts);

DevicePlan plan_device(const Policy& policy, const DeviceFacts& facts, const Values& current, const PlanContext& ctx);

}  // namespace blkpolicy::policy
