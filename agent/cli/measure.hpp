// SPDX-License-Identifier: MIT
// `blkpolicy measure [DEV...] --for D`: passive and read-only. What the
// values do on this host's own load over a window: writeback throttling,
// flushes against the cache modes, readahead, where completions run. Its
// renderer is render/measure.
#pragma once

#include <ostream>

#include "agent/options.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

int run_measure(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);

}  // namespace blkpolicy::agent
