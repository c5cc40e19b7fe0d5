// What the daemon leaves behind after each pass: <state-dir>/daemon.json
// (read by `blkpolicy status`) and, when asked, Prometheus text metrics.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "agent/daemon/reconciler.hpp"

namespace blkpolicy::agent {

// The outcome of the last SIGHUP, for `blkpolicy reload` (systemctl reload)
// to wait for: generation counts reloads since the daemon started.
struct ReloadOutcome {
    unsigned long generation = 0;
    bool ok = true;
    std::vector<std::string> errors;  // file:line:col: message, when not ok
};

nlohmann::json daemon_json(const Reconciler& r, long pid, double last_pass_unix, const ReloadOutcome& reload);
std::string metrics_text(const Reconciler& r, double last_pass_unix);

// The daemon's last results, when a daemon with that pid is still running.
std::optional<nlohmann::json> read_daemon_json(const std::string& state_dir);

// `blkpolicy reload`: sends SIGHUP to the daemon PID (0: the pid in
// daemon.json) and waits for its answer in daemon.json. Returns the exit
// status: 0 reloaded, 3 the new policy is invalid (the daemon kept the old
// one; ERR gets its errors), 4 no such daemon or no answer in time.
int reload_daemon(const std::string& state_dir, long pid, std::ostream& out, std::ostream& err);

}  // namespace blkpolicy::agent
