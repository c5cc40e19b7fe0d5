// SPDX-License-Identifier: MIT
// `blkpolicy explain DEV...` and `blkpolicy audit`: read-only views that say
// where each value comes from and what looks wrong. Their renderers are in
// render/explain and render/audit.
#pragma once

#include <optional>
#include <ostream>

#include "agent/options.hpp"
#include "policy/policy.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

int run_explain(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);
int run_audit(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);

// The policy, when there is one: explicit --policy must load; the default
// locations may be empty (then these views work without a policy). On an
// invalid policy the errors are printed and `rc` is set to kExitPolicy.
std::optional<policy::Policy> optional_policy(const Options& o, const udev::Sysfs& sysfs, std::ostream& err, int& rc);

}  // namespace blkpolicy::agent
