// One consistent look at the devices: facts (frozen where recorded), current
// values, and the plan for each under a policy.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/state.hpp"
#include "policy/kernel.hpp"
#include "policy/plan.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

struct DeviceView {
    policy::DeviceFacts facts;
    policy::Values values;
    policy::DevicePlan plan;
};

// One device: facts (frozen where recorded), the values the policy needs, the
// plan. nullopt when it vanished. With `all_values`, every attribute is read
// (explain); otherwise only those the matching rules need.
// `shown`: fact groups wanted beyond what the policy's rules match on.
std::optional<DeviceView> look_one(const udev::Sysfs& sysfs, const StateDir& state, const policy::Policy& policy,
                                   const std::string& name, bool record, std::vector<std::string>& warnings,
                                   const std::string& udev_db = {}, bool all_values = false,
                                   policy::FactNeeds shown = policy::kAllFacts);

// Every device under <sysfs>/block, or only `only` (validated by the caller).
// With `record`, facts of first-seen devices are written to the state dir.
std::vector<DeviceView> look(const udev::Sysfs& sysfs, const StateDir& state, const policy::Policy& policy,
                             const std::vector<std::string>& only, bool record, std::vector<std::string>& warnings,
                             const std::string& udev_db = {}, bool all_values = false);

policy::PlanContext host_plan_context();
// The running kernel's release as major.minor (0.0 when uname says otherwise).
policy::KernelVersion running_kernel_version();

}  // namespace blkpolicy::agent
