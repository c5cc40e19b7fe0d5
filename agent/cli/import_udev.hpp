// SPDX-License-Identifier: MIT
// `blkpolicy import-udev FILE|DIR...`: udev tuning rules -> policy TOML.
#pragma once

#include <ostream>

#include "agent/options.hpp"

namespace blkpolicy::agent {

int run_import_udev(const Options& o, std::ostream& out, std::ostream& err);

}  // namespace blkpolicy::agent
