// `blkpolicy explain DEV...` and `blkpolicy audit`: read-only views that say
// where each value comes from and what looks wrong.
#pragma once

#include <optional>
#include <ostream>

#include "agent/options.hpp"
#include "policy/kernel.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

int run_explain(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);
int run_audit(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);

}  // namespace blkpolicy::agent
