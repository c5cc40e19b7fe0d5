// SPDX-License-Identifier: MIT
// One consistent look at the devices: facts (frozen where recorded), current
// values, and the plan for each under a policy.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/state.hpp"
#include "kernel/rows.hpp"
#include "policy/plan.hpp"
#include "report/audit.hpp"
#include "udev/sysfs.hpp"
#include "writers/model.hpp"

namespace blkpolicy::agent {

struct DeviceView {
    policy::DeviceFacts facts;
    policy::Values values;
    policy::DevicePlan plan;
};

// How to look at a device.
struct LookOptions {
    bool record = false;      // write facts of first-seen devices to the state dir
    bool all_values = false;  // read every attribute (explain), not only what the matching rules need
    policy::FactNeeds shown = policy::kAllFacts;  // fact groups wanted beyond what the rules match on
    std::string udev_db;                          // udev's database directory, for env.* matches ("" = none)
    policy::PlanContext context;                  // host-wide inputs of the plan (page size, schedulers)
};

// One device: facts (frozen where recorded), the values the policy needs, the
// plan. nullopt when it vanished.
std::optional<DeviceView> look_one(const udev::Sysfs& sysfs, const StateDir& state, const policy::Policy& policy,
                                   const std::string& name, const LookOptions& how, std::vector<std::string>& warnings);

// Every device under <sysfs>/block, or only `only` (validated by the caller).
std::vector<DeviceView> look(const udev::Sysfs& sysfs, const StateDir& state, const policy::Policy& policy,
                             const std::vector<std::string>& only, const LookOptions& how,
                             std::vector<std::string>& warnings);

std::string running_kernel_release();  // uname -r

// What audit reads, for every device under <sysfs>/block (stack findings
// need them all): live facts, every value, the plan under `policy` (null:
// kernel side only), debugfs's wbt state and whether a medium is there.
// `audit` and the daemon's metrics share it.
// The device as udevd sees it, for deciding which other writers' conditions
// select it: its parents (kernel name, subsystem, driver), the attributes
// and paths those conditions read, its properties and removable flag from
// `facts` (queue/rotational as first seen, the way a rule saw it at add).
writers::UdevDevice udev_device(const udev::Sysfs& sysfs, const policy::DeviceFacts& facts,
                                const writers::UdevReads& reads);

report::AuditInput audit_input(const udev::Sysfs& sysfs, const policy::Policy* policy,
                               std::vector<writers::WriterAssignment> writers, const std::string& udev_db,
                               const policy::HostContext& host);

}  // namespace blkpolicy::agent
