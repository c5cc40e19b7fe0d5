// SPDX-License-Identifier: MIT
#include "agent/daemon_client.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "agent/options.hpp"

namespace blkpolicy::agent {

using json = nlohmann::json;

namespace {

std::optional<json> read_json_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    return j;
}

long pid_in(const json& j) { return j.contains("pid") && j["pid"].is_number_integer() ? j["pid"].get<long>() : 0; }

unsigned long generation_in(const json& j) {
    if (!j.contains("reload") || !j["reload"].is_object()) return 0;
    const auto& g = j["reload"]["generation"];
    return g.is_number_unsigned() ? g.get<unsigned long>() : 0;
}

bool process_gone(long pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

}  // namespace

std::optional<json> read_daemon_json(const std::string& state_dir) {
    auto j = read_json_file(std::filesystem::path(state_dir) / "daemon.json");
    if (!j) return std::nullopt;
    const long pid = pid_in(*j);
    if (pid <= 0 || process_gone(pid)) return std::nullopt;
    return j;
}

int reload_daemon(const std::string& state_dir, long pid, std::ostream& out, std::ostream& err) {
    const auto path = std::filesystem::path(state_dir) / "daemon.json";
    const auto before = read_json_file(path);
    if (pid <= 0) pid = before ? pid_in(*before) : 0;
    if (pid <= 0) {
        err << "blkpolicy: no running daemon named in " << path.string() << "; pass --pid PID\n";
        return kExitRuntime;
    }
    // Only this process's own record counts: a file left by an earlier
    // daemon says nothing about this one.
    const unsigned long seen = before && pid_in(*before) == pid ? generation_in(*before) : 0;
    if (::kill(static_cast<pid_t>(pid), SIGHUP) != 0) {
        err << "blkpolicy: cannot send SIGHUP to pid " << pid << ": " << std::strerror(errno) << '\n';
        return kExitRuntime;
    }
    // Well inside systemd's default 90 s for ExecReload=, so that the reason
    // is printed before systemd gives up on the command.
    constexpr int kWaitMs = 60'000;
    constexpr int kStepMs = 20;
    for (int waited = 0; waited < kWaitMs; waited += kStepMs) {
        ::usleep(kStepMs * 1000);
        const auto now = read_json_file(path);
        if (now && pid_in(*now) == pid && generation_in(*now) > seen) {
            const auto& r = (*now)["reload"];
            if (r.value("ok", false)) {
                out << "blkpolicy: the daemon (pid " << pid << ") reloaded its policy\n";
                return kExitOk;
            }
            if (r.contains("errors") && r["errors"].is_array())
                for (const auto& e : r["errors"])
                    if (e.is_string()) err << e.get<std::string>() << '\n';
            err << "blkpolicy: the new policy is invalid; the daemon (pid " << pid << ") keeps the old one\n";
            return kExitPolicy;
        }
        if (process_gone(pid)) {
            err << "blkpolicy: the daemon (pid " << pid << ") exited before answering the reload\n";
            return kExitRuntime;
        }
    }
    err << "blkpolicy: no answer from the daemon (pid " << pid << ") within " << kWaitMs / 1000 << " s\n";
    return kExitRuntime;
}

}  // namespace blkpolicy::agent
