// SPDX-License-Identifier: MIT
// `blkpolicy import FILE|DIR|PROFILE...` (and its alias import-udev): what
// udev rules, TuneD profiles, sysfsutils and tmpfiles.d set -> policy TOML.
#pragma once

#include <ostream>

#include "agent/options.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

int run_import(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);

}  // namespace blkpolicy::agent
