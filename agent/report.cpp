#include "agent/report.hpp"

#include <algorithm>

#include "policy/values.hpp"

namespace blkpolicy::agent {

using nlohmann::json;
using policy::ActionKind;

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

json rule_json(const policy::RuleRef& r) {
    return {{"name", r.name}, {"file", r.pos.file}, {"line", r.pos.line}};
}

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

const char* to_string(Standing s) {
    switch (s) {
        case Standing::ok: return "ok";
        case Standing::drift: return "drift";
        case Standing::skipped: return "skipped";
        case Standing::refused: return "refused";
    }
    return "?";
}

Standing standing_of(const policy::Action& a) {
    if (a.kind == ActionKind::skip) return Standing::skipped;
    if (a.kind == ActionKind::refuse) return Standing::refused;
    // iosched tunables of a scheduler not active yet have no current value.
    return a.current == a.expected ? Standing::ok : Standing::drift;
}

namespace {

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
    return s;
}

void print_rules(std::ostream& out, const policy::DevicePlan& p) {
    for (const auto& r : p.matched) out << "  rule: " << r.name << " (" << r.pos.file_line() << ")\n";
}

// Devices with nothing to say are summarised on one line at the end.
bool quiet(const DeviceView& v) { return v.plan.matched.empty(); }

void print_unmatched(std::ostream& out, const std::vector<DeviceView>& views) {
    std::vector<std::string> names;
    for (const auto& v : views)
        if (quiet(v)) names.push_back(v.facts.name);
    if (!names.empty()) out << "no rule matches: " << policy::join(names, " ") << '\n';
}

json action_json(const policy::Action& a) {
    json overridden = json::array();
    for (const auto& o : a.overridden) overridden.push_back(rule_json(o));
    return {{"attribute", a.attribute}, {"path", a.path},         {"current", a.current},
            {"desired", a.desired},     {"write", a.value},       {"expected", a.expected},
            {"action", policy::to_string(a.kind)}, {"note", a.note}, {"rule", rule_json(a.rule)},
            {"overridden", overridden}};
}

json device_head(const DeviceView& v) {
    json matched = json::array();
    for (const auto& r : v.plan.matched) matched.push_back(rule_json(r));
    return {{"device", v.facts.name}, {"facts", facts_json(v.facts)}, {"matched", matched},
            {"not_tuned", v.plan.not_tuned}};
}

}  // namespace

json plan_json(const std::vector<DeviceView>& views) {
    json devices = json::array();
    for (const auto& v : views) {
        auto d = device_head(v);
        d["actions"] = json::array();
        for (const auto& a : v.plan.actions) d["actions"].push_back(action_json(a));
        devices.push_back(d);
    }
    return {{"format", kJsonFormatVersion}, {"devices", devices}};
}

void print_plan(std::ostream& out, const std::vector<DeviceView>& views) {
    std::size_t writes = 0;
    for (const auto& v : views) {
        if (quiet(v)) continue;
        out << facts_line(v.facts) << '\n';
        print_rules(out, v.plan);
        if (!v.plan.not_tuned.empty()) {
            out << "  not tuned: " << v.plan.not_tuned << "\n\n";
            continue;
        }
        Table t({"ATTRIBUTE", "CURRENT", "DESIRED", "ACTION", "RULE", "NOTE"});
        for (const auto& a : v.plan.actions) {
            if (a.kind == ActionKind::write) ++writes;
            t.add({a.attribute, or_dash(a.current), a.expected.empty() ? a.desired : a.expected,
                   policy::to_string(a.kind), a.rule.pos.file_line(), a.note});
        }
        t.print(out, "  ");
        out << '\n';
    }
    print_unmatched(out, views);
    out << writes << " write(s) planned; nothing was written\n";
}

json apply_json(const std::vector<DeviceView>& views, const std::vector<DeviceResult>& results) {
    json devices = json::array();
    std::map<std::string, int> totals;
    for (std::size_t i = 0; i < views.size(); ++i) {
        auto d = device_head(views[i]);
        d["results"] = json::array();
        for (const auto& r : results[i].results) {
            totals[to_string(r.outcome)]++;
            d["results"].push_back({{"attribute", r.attribute},
                                    {"before", r.before},
                                    {"after", r.after},
                                    {"expected", r.expected},
                                    {"outcome", to_string(r.outcome)},
                                    {"detail", r.detail},
                                    {"rule", rule_json(r.rule)}});
        }
        devices.push_back(d);
    }
    json summary = json::object();
    for (auto o : {Outcome::unchanged, Outcome::applied, Outcome::skipped, Outcome::failed, Outcome::not_stuck,
                   Outcome::refused})
        summary[to_string(o)] = totals[to_string(o)];
    return {{"format", kJsonFormatVersion}, {"devices", devices}, {"summary", summary}};
}

void print_apply(std::ostream& out, const std::vector<DeviceView>& views, const std::vector<DeviceResult>& results) {
    std::map<Outcome, int> totals;
    for (std::size_t i = 0; i < views.size(); ++i) {
        const auto& v = views[i];
        if (quiet(v)) continue;
        out << facts_line(v.facts) << '\n';
        print_rules(out, v.plan);
        if (!v.plan.not_tuned.empty()) {
            out << "  not tuned: " << v.plan.not_tuned << "\n\n";
            continue;
        }
        Table t({"ATTRIBUTE", "BEFORE", "AFTER", "RESULT", "RULE", "DETAIL"});
        for (const auto& r : results[i].results) {
            totals[r.outcome]++;
            t.add({r.attribute, or_dash(r.before), or_dash(r.after), to_string(r.outcome), r.rule.pos.file_line(),
                   r.detail});
        }
        t.print(out, "  ");
        out << '\n';
    }
    print_unmatched(out, views);
    out << totals[Outcome::applied] << " applied, " << totals[Outcome::unchanged] << " unchanged, "
        << totals[Outcome::skipped] << " skipped, " << totals[Outcome::failed] << " failed, "
        << totals[Outcome::not_stuck] << " did not stick, " << totals[Outcome::refused] << " refused\n";
}

json status_json(const std::vector<DeviceView>& views) {
    json devices = json::array();
    for (const auto& v : views) {
        auto d = device_head(v);
        d["attributes"] = json::array();
        for (const auto& a : v.plan.actions)
            d["attributes"].push_back({{"attribute", a.attribute},
                                       {"current", a.current},
                                       {"desired", a.expected.empty() ? a.desired : a.expected},
                                       {"state", to_string(standing_of(a))},
                                       {"note", a.note},
                                       {"rule", rule_json(a.rule)}});
        devices.push_back(d);
    }
    return {{"format", kJsonFormatVersion}, {"devices", devices}};
}

void print_status(std::ostream& out, const std::vector<DeviceView>& views) {
    std::map<Standing, int> totals;
    for (const auto& v : views) {
        if (quiet(v)) continue;
        out << facts_line(v.facts) << '\n';
        print_rules(out, v.plan);
        if (!v.plan.not_tuned.empty()) {
            out << "  not tuned: " << v.plan.not_tuned << "\n\n";
            continue;
        }
        Table t({"ATTRIBUTE", "CURRENT", "DESIRED", "STATE", "RULE", "NOTE"});
        for (const auto& a : v.plan.actions) {
            auto s = standing_of(a);
            totals[s]++;
            t.add({a.attribute, or_dash(a.current), a.expected.empty() ? a.desired : a.expected, to_string(s),
                   a.rule.pos.file_line(), s == Standing::ok ? "" : a.note});
        }
        t.print(out, "  ");
        out << '\n';
    }
    print_unmatched(out, views);
    out << totals[Standing::ok] << " in policy, " << totals[Standing::drift] << " drifted, "
        << totals[Standing::skipped] << " skipped, " << totals[Standing::refused] << " refused\n";
}

}  // namespace blkpolicy::agent
