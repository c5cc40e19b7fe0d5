// SPDX-License-Identifier: MIT
// The command line's side of a running daemon (blkpolicy status, explain,
// restore and reload): its last results in <state-dir>/daemon.json, and the
// reload handshake. The daemon writes that file (agent/daemon/outputs); the
// commands read it here without the daemon's own code.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

namespace blkpolicy::agent {

// The daemon's last results, when a daemon with that pid is still running.
std::optional<nlohmann::json> read_daemon_json(const std::string& state_dir);

// `blkpolicy reload`: sends SIGHUP to the daemon PID (0: the pid in
// daemon.json) and waits for its answer in daemon.json. Returns the exit
// status: 0 reloaded, 3 the new policy is invalid (the daemon kept the old
// one; ERR gets its errors), 4 no such daemon or no answer in time.
int reload_daemon(const std::string& state_dir, long pid, std::ostream& out, std::ostream& err);

}  // namespace blkpolicy::agent
