// SPDX-License-Identifier: MIT
// `blkpolicy restore [DEVICE...]`: every value blkpolicy changed goes back
// to what the device had before, unless someone else moved it since.
#pragma once

#include <ostream>

#include "agent/options.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

int run_restore(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);

}  // namespace blkpolicy::agent
