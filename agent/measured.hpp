// SPDX-License-Identifier: MIT
// Measured figures as JSON: `blkpolicy measure --json`, and the daemon's
// last window in daemon.json, which `status` and `explain` read back.
#pragma once

#include <nlohmann/json.hpp>

#include "measure/figures.hpp"
#include "measure/tracefs.hpp"
#include "policy/audit.hpp"

namespace blkpolicy::agent {

nlohmann::json figures_json(const measure::DeviceFigures& f);
nlohmann::json tracing_json(const measure::Tracing& t, const measure::TraceInstance* instance);
nlohmann::json finding_json(const policy::Finding& f);

}  // namespace blkpolicy::agent
