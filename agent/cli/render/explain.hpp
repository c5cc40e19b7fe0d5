// SPDX-License-Identifier: MIT
// How `blkpolicy explain` shows a device's explanation, and --kernel-rules.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "policy/plan.hpp"
#include "report/explain.hpp"

namespace blkpolicy::agent {

nlohmann::json explanation_json(const report::DeviceExplanation& x, const policy::DevicePlan& plan);
// `daemon`: the running daemon's daemon.json (null when none runs): its last
// measured figures of the device are shown beside the attributes they prove.
void print_explanation(std::ostream& out, const report::DeviceExplanation& x, const policy::DevicePlan& plan,
                       bool have_policy, const nlohmann::json& daemon = nullptr);
// The kernel rows (kernel/rows) that hold on kernel `k`; --json lists
// every row with whether it holds.
void print_kernel_rules(std::ostream& out, const kernel::KernelVersion& k, const std::string& release, bool as_json);

}  // namespace blkpolicy::agent
