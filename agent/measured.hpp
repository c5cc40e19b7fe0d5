// SPDX-License-Identifier: MIT
// Measured figures as JSON: `blkpolicy measure --json`, and the daemon's
// last window in daemon.json, which `status` and `explain` read back.
#pragma once

#include <nlohmann/json.hpp>

#include "measure/figures.hpp"
#include "measure/tracefs.hpp"
#include "report/audit.hpp"

namespace blkpolicy::agent {

nlohmann::json figures_json(const measure::DeviceFigures& f);
nlohmann::json tracing_json(const measure::Tracing& t, const measure::TraceInstance* instance);
nlohmann::json finding_json(const report::Finding& f);

// What the running daemon measured of `device` in its last window (its
// daemon.json, as read_daemon_json gives it): the figures_json object, or
// null when it does not measure or has not measured the device yet.
nlohmann::json measured_device(const nlohmann::json& daemon, const std::string& device);
// The sentence of a figure that shows what an attribute does: wbt_lat_usec
// the wbt activity, write_cache the flushes, read_ahead_kb the readahead,
// rq_affinity the completions; empty for any other attribute.
std::string measured_sentence(const nlohmann::json& figures, const std::string& attribute);
// "in the daemon's window of 60 s that ended 2026-12-02 07:24:49 (12 s ago)"
std::string measured_when(const nlohmann::json& daemon);

}  // namespace blkpolicy::agent
