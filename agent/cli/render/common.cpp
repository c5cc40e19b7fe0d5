// SPDX-License-Identifier: MIT
#include "agent/cli/render/common.hpp"

#include <algorithm>

#include "policy/match.hpp"
#include "util/names.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

void Table::print(std::ostream& out, const std::string& indent) const {
    std::vector<std::size_t> width;
    for (const auto& row : rows_)
        for (std::size_t i = 0; i < row.size(); ++i) {
            if (width.size() <= i) width.push_back(0);
            width[i] = std::max(width[i], row[i].size());
        }
    for (const auto& row : rows_) {
        std::string line = indent;
        for (std::size_t i = 0; i < row.size(); ++i) {
            line += row[i];
            if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out << line << '\n';
    }
}

json rule_json(const policy::RuleRef& r) { return {{"name", r.name}, {"file", r.pos.file}, {"line", r.pos.line}}; }

json facts_json(const policy::DeviceFacts& f) {
    return {{"name", f.name},
            {"devnum", f.devnum},
            {"syspath", f.syspath},
            {"driver", f.driver},
            {"drivers", f.drivers},
            {"vendor", f.vendor},
            {"model", f.model},
            {"serial", f.serial},
            {"wwid", f.wwid},
            {"rotational", f.rotational},
            {"removable", f.removable},
            {"hidden", f.hidden},
            {"facts_frozen", f.facts_frozen},
            {"request_based", f.request_based},
            {"has_queue", f.has_queue},
            {"stack", policy::to_string(f.stack)},
            {"dm_name", f.dm_name},
            {"dm_uuid", f.dm_uuid},
            {"md_level", f.md_level},
            {"loop_backing_file", f.loop_backing_file},
            {"slaves", f.slaves},
            {"holders", f.holders},
            {"schedulers", f.schedulers},
            {"scheduler", f.scheduler},
            {"cache_type", f.cache_type}};
}

json rules_json(const std::vector<policy::RuleRef>& rules) {
    json out = json::array();
    for (const auto& r : rules) out.push_back(rule_json(r));
    return out;
}

json host_json(const policy::Policy& policy) {
    json out = json::object();
    for (const auto& name : policy::host_fact_names()) {
        const auto value = policy::host_fact(policy.host, name);
        out[name] = value.empty() ? json(nullptr) : json(value);
    }
    out["source"] = policy.host.source;
    json left_out = json::array();
    for (const auto& r : policy.rules)
        if (!r.host_ok) left_out.push_back({{"name", r.name}, {"at", r.pos.file_line()}, {"why", r.host_why}});
    out["rules_not_for_this_host"] = left_out;
    return out;
}

void print_host(std::ostream& out, const policy::Policy& policy) {
    if (std::none_of(policy.rules.begin(), policy.rules.end(), [](const auto& r) { return r.has_host_clauses(); }))
        return;
    out << "host:";
    for (const auto& name : policy::host_fact_names()) {
        const auto value = policy::host_fact(policy.host, name);
        out << ' ' << name << '=' << (value.empty() ? "-" : "\"" + value + "\"");
    }
    out << '\n';
    for (const auto& r : policy.rules)
        if (!r.host_ok)
            out << "  not for this host: " << r.name << " (" << r.pos.file_line() << "): " << r.host_why << '\n';
}

json device_head_json(const DeviceView& v) {
    return {{"device", v.facts.name},
            {"facts", facts_json(v.facts)},
            {"matched", rules_json(v.plan.matched)},
            {"not_tuned", v.plan.not_tuned}};
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string facts_line(const policy::DeviceFacts& f) {
    std::string s = f.name + "  " + or_dash(f.devnum) + "  driver=" + or_dash(f.driver) +
                    "  rotational=" + (f.rotational ? "1" : "0") + (f.facts_frozen ? " (frozen)" : "") +
                    "  stack=" + policy::to_string(f.stack);
    if (!f.vendor.empty()) s += "  vendor=\"" + f.vendor + "\"";
    if (!f.model.empty()) s += "  model=\"" + f.model + "\"";
    if (!f.serial.empty()) s += "  serial=" + f.serial;
    if (!f.dm_name.empty()) s += "  dm_name=" + f.dm_name;
    if (!f.md_level.empty()) s += "  md_level=" + f.md_level;
    if (!f.request_based && f.has_queue) s += "  bio-based";
    if (f.hidden) s += "  hidden";
    return s;
}

std::string pass_time_text(double when_unix, std::time_t now) {
    const auto when = static_cast<std::time_t>(when_unix);
    std::tm local{};
    ::localtime_r(&when, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
    const long age = static_cast<long>(now - when);
    std::string ago;
    if (age < 0)
        ago = "in the future: is the clock right?";
    else if (age < 120)
        ago = std::to_string(age) + " s ago";
    else if (age < 7200)
        ago = std::to_string(age / 60) + " min ago";
    else
        ago = std::to_string(age / 3600) + " h ago";
    return std::string(stamp) + " (" + ago + ")";
}

}  // namespace blkpolicy::agent
