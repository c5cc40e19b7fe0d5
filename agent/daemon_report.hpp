// What the daemon leaves behind after each pass: <state-dir>/daemon.json
// (read by `blkpolicy status`) and, when asked, Prometheus text metrics.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "agent/reconciler.hpp"

namespace blkpolicy::agent {

nlohmann::json daemon_json(const Reconciler& r, long pid, double last_pass_unix);
std::string metrics_text(const Reconciler& r, double last_pass_unix);

// The daemon's last results, when a daemon with that pid is still running.
std::optional<nlohmann::json> read_daemon_json(const std::string& state_dir);

}  // namespace blkpolicy::agent
