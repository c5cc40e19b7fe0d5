#include "agent/daemon/outputs.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/options.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

json daemon_json(const Reconciler& r, long pid, double last_pass_unix, const ReloadOutcome& reload) {
    const auto s = r.summary();
    json devices = json::array();
    for (const auto& [name, d] : r.devices()) {
        if (d.attrs.empty()) continue;
        json attrs = json::array();
        for (const auto& [attr, rec] : d.attrs)
            attrs.push_back({{"attribute", attr},
                             {"expected", rec.expected},
                             {"actual", rec.actual},
                             {"state", to_string(rec.status)},
                             {"rule", rec.rule},
                             {"drifts", rec.drifts},
                             {"failures", rec.failures}});
        devices.push_back({{"device", name}, {"attributes", attrs}});
    }
    return {{"pid", pid},
            {"mode", policy::to_string(r.mode())},
            {"last_pass", last_pass_unix},
            {"devices_managed", s.devices},
            {"drifted", s.drifted},
            {"failed", s.failed},
            {"busy", s.busy},
            {"devices", devices},
            {"reload", {{"generation", reload.generation}, {"ok", reload.ok}, {"errors", reload.errors}}}};
}

namespace {
std::string label(const std::string& device, const std::string& attr) {
    return "{device=\"" + device + "\",attribute=\"" + attr + "\"}";
}
}  // namespace

std::string metrics_text(const Reconciler& r, double last_pass_unix) {
    const auto s = r.summary();
    std::ostringstream o;
    o << "# HELP blkpolicy_devices_managed Block devices with at least one attribute managed by the policy.\n"
      << "# TYPE blkpolicy_devices_managed gauge\n"
      << "blkpolicy_devices_managed " << s.devices << "\n"
      << "# HELP blkpolicy_last_verify_timestamp_seconds When the daemon last compared every device with the policy.\n"
      << "# TYPE blkpolicy_last_verify_timestamp_seconds gauge\n"
      << "blkpolicy_last_verify_timestamp_seconds " << static_cast<long long>(last_pass_unix) << "\n";
    std::ostringstream in_policy, drifts, failures;
    for (const auto& [name, d] : r.devices())
        for (const auto& [attr, rec] : d.attrs) {
            in_policy << "blkpolicy_attribute_in_policy" << label(name, attr) << ' '
                      << (rec.status == AttrStatus::ok ? 1 : 0) << '\n';
            drifts << "blkpolicy_drifts_total" << label(name, attr) << ' ' << rec.drifts << '\n';
            failures << "blkpolicy_failures_total" << label(name, attr) << ' ' << rec.failures << '\n';
        }
    o << "# HELP blkpolicy_attribute_in_policy 1 when the attribute reads as the policy says.\n"
      << "# TYPE blkpolicy_attribute_in_policy gauge\n"
      << in_policy.str() << "# HELP blkpolicy_drifts_total Times the attribute was found moved away from the policy.\n"
      << "# TYPE blkpolicy_drifts_total counter\n"
      << drifts.str() << "# HELP blkpolicy_failures_total Times the attribute could not be set.\n"
      << "# TYPE blkpolicy_failures_total counter\n"
      << failures.str();
    return o.str();
}

std::optional<json> read_daemon_json(const std::string& state_dir) {
    std::ifstream in(std::filesystem::path(state_dir) / "daemon.json");
    if (!in) return std::nullopt;
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer()) return std::nullopt;
    const auto pid = j["pid"].get<long>();
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) return std::nullopt;
    return j;
}

}  // namespace blkpolicy::agent

namespace blkpolicy::agent {

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
