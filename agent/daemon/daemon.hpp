// SPDX-License-Identifier: MIT
// `blkpolicy run`: one sd-event loop owns the uevent monitors, the verify
// timer and the signals; handlers are short and hand off to the Reconciler.
#pragma once

#include "agent/options.hpp"

namespace blkpolicy::agent {

int run_daemon(const Options& options);

}  // namespace blkpolicy::agent
