// SPDX-License-Identifier: MIT
// `blkpolicy explain DEV...` and `blkpolicy audit`: read-only views that say
// where each value comes from and what looks wrong. Their renderers are in
// render/explain and render/audit.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "agent/options.hpp"
#include "agent/snapshot.hpp"
#include "policy/policy.hpp"
#include "report/explain.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

int run_explain(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);
int run_audit(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);
// `blkpolicy export [DEV...]`: agent/cli/export.cpp.
int run_export(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);

// How explain and export look at the devices: every value read, udev's
// database for env.* matches, the host (read once by the command).
LookOptions every_value_look(const Options& o, const policy::HostContext& host);
// The device's own inputs of explain's kernel side (debugfs's wbt state,
// hardware queues and tags, rotation rate, a loop device's backing store,
// the devices below), into CTX.
void read_device_context(report::ExplainContext& ctx, const udev::Sysfs& sysfs, const DeviceView& v);
// Which devices a filesystem on NAME reads through, and which are below it.
report::StackView stack_of(const std::map<std::string, DeviceView>& views, const std::string& name);

// The policy, when there is one: explicit --policy must load; the default
// locations may be empty (then these views work without a policy). On an
// invalid policy the errors are printed and `rc` is set to kExitPolicy.
// The host's facts decide its host.* clauses.
std::optional<policy::Policy> optional_policy(const Options& o, const policy::HostContext& host, std::ostream& err,
                                              int& rc);

}  // namespace blkpolicy::agent
