#include "agent/daemon_report.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <signal.h>
#include <sstream>
#include <unistd.h>

namespace blkpolicy::agent {

using nlohmann::json;

json daemon_json(const Reconciler& r, long pid, double last_pass_unix) {
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
            {"devices", devices}};
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
      << in_policy.str()
      << "# HELP blkpolicy_drifts_total Times the attribute was found moved away from the policy.\n"
      << "# TYPE blkpolicy_drifts_total counter\n"
      << drifts.str()
      << "# HELP blkpolicy_failures_total Times the attribute could not be set.\n"
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
