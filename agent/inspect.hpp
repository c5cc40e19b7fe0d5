// `blkpolicy explain DEV...` and `blkpolicy audit`: read-only views that say
// where each value comes from and what looks wrong.
#pragma once

#include <optional>
#include <ostream>

#include "agent/cli.hpp"
#include "policy/kernel.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

int run_explain(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);
int run_audit(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);

// Inputs read from sysfs, shared by explain and audit.
std::optional<int> read_wbt_state(const udev::Sysfs& sysfs, const std::string& device);
int count_hw_queues(const udev::Sysfs& sysfs, const std::string& device);
std::optional<bool> single_last_level_cache(const udev::Sysfs& sysfs);

}  // namespace blkpolicy::agent
