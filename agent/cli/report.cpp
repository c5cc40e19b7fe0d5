#include "agent/cli/report.hpp"

#include <algorithm>

#include "policy/names.hpp"
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

namespace {
constexpr policy::Named<Standing> kStandings[] = {
    {Standing::ok, "ok"},
    {Standing::drift, "drift"},
    {Standing::skipped, "skipped"},
    {Standing::refused, "refused"},
};
static_assert(policy::in_enum_order(kStandings));
}  // namespace

const char* to_string(Standing s) { return policy::name_of(kStandings, s); }

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

CommandReport::CommandReport(Kind kind, bool as_json, std::ostream& out) : kind_(kind), json_(as_json), out_(out) {}

policy::FactNeeds CommandReport::facts_shown() const {
    return json_ ? policy::kAllFacts
                 : policy::kFactDrivers | policy::kFactModel | policy::kFactSerial | policy::kFactStack;  // facts_line
}

void CommandReport::device(const DeviceView& v, const DeviceResult* result) {
    if (json_) {
        auto d = device_head(v);
        if (kind_ == Kind::plan) {
            d["actions"] = json::array();
            for (const auto& a : v.plan.actions) d["actions"].push_back(action_json(a));
        } else if (kind_ == Kind::status) {
            d["attributes"] = json::array();
            for (const auto& a : v.plan.actions)
                d["attributes"].push_back({{"attribute", a.attribute},
                                           {"current", a.current},
                                           {"desired", a.expected.empty() ? a.desired : a.expected},
                                           {"state", to_string(standing_of(a))},
                                           {"note", a.note},
                                           {"rule", rule_json(a.rule)}});
        } else {
            d["results"] = json::array();
            for (const auto& r : result->results)
                d["results"].push_back({{"attribute", r.attribute},
                                        {"before", r.before},
                                        {"after", r.after},
                                        {"expected", r.expected},
                                        {"outcome", to_string(r.outcome)},
                                        {"detail", r.detail},
                                        {"rule", rule_json(r.rule)}});
        }
        devices_.push_back(std::move(d));
    }
    if (kind_ == Kind::plan) {
        for (const auto& a : v.plan.actions) {
            if (a.kind != ActionKind::write) continue;
            // A value that reads as wanted already is only checked again
            // before writing (an earlier write can move it): not a write.
            if (a.current == a.expected) ++rechecks_;
            else ++writes_;
        }
    } else if (kind_ == Kind::status) {
        for (const auto& a : v.plan.actions) standings_[standing_of(a)]++;
    } else {
        for (const auto& r : result->results) outcomes_[r.outcome]++;
    }
    if (json_) return;

    if (quiet(v)) {
        unmatched_.push_back(v.facts.name);
        return;
    }
    out_ << facts_line(v.facts) << '\n';
    print_rules(out_, v.plan);
    if (!v.plan.not_tuned.empty()) {
        out_ << "  not tuned: " << v.plan.not_tuned << "\n\n";
        return;
    }
    if (kind_ == Kind::plan) {
        Table t({"ATTRIBUTE", "CURRENT", "DESIRED", "ACTION", "RULE", "NOTE"});
        for (const auto& a : v.plan.actions)
            t.add({a.attribute, or_dash(a.current), a.expected.empty() ? a.desired : a.expected,
                   policy::to_string(a.kind), a.rule.pos.file_line(), a.note});
        t.print(out_, "  ");
    } else if (kind_ == Kind::status) {
        Table t({"ATTRIBUTE", "CURRENT", "DESIRED", "STATE", "RULE", "NOTE"});
        for (const auto& a : v.plan.actions) {
            auto st = standing_of(a);
            t.add({a.attribute, or_dash(a.current), a.expected.empty() ? a.desired : a.expected, to_string(st),
                   a.rule.pos.file_line(), st == Standing::ok ? "" : a.note});
        }
        t.print(out_, "  ");
    } else {
        Table t({"ATTRIBUTE", "BEFORE", "AFTER", "RESULT", "RULE", "DETAIL"});
        for (const auto& r : result->results)
            t.add({r.attribute, or_dash(r.before), or_dash(r.after), to_string(r.outcome), r.rule.pos.file_line(),
                   r.detail});
        t.print(out_, "  ");
    }
    out_ << '\n';
}

void CommandReport::finish(const nlohmann::json& daemon) {
    if (json_) {
        json doc = {{"format", kJsonFormatVersion}, {"devices", std::move(devices_)}};
        if (kind_ == Kind::apply) {
            json summary = json::object();
            for (auto o : {Outcome::unchanged, Outcome::applied, Outcome::skipped, Outcome::failed, Outcome::not_stuck,
                           Outcome::refused})
                summary[to_string(o)] = outcomes_[o];
            doc["summary"] = summary;
        }
        if (kind_ == Kind::status) doc["daemon"] = daemon;
        if (kind_ == Kind::plan) doc["loadable_schedulers"] = loadable_ ? json(*loadable_) : json(nullptr);
        out_ << doc.dump(2) << '\n';
        return;
    }
    if (!unmatched_.empty()) out_ << "no rule matches: " << policy::join(unmatched_, " ") << '\n';
    if (kind_ == Kind::plan) {
        out_ << writes_ << " write(s) planned";
        if (rechecks_) out_ << ", " << rechecks_ << " value(s) checked again after earlier writes";
        out_ << "; nothing was written\n";
        if (loadable_ && !loadable_->empty())
            out_ << "schedulers this kernel loads as modules when named: " << policy::join(*loadable_, " ") << '\n';
    } else if (kind_ == Kind::status) {
        out_ << standings_[Standing::ok] << " in policy, " << standings_[Standing::drift] << " drifted, "
             << standings_[Standing::skipped] << " skipped, " << standings_[Standing::refused] << " refused\n";
        if (daemon.is_object()) {
            out_ << "daemon: pid " << daemon["pid"] << ", " << daemon["mode"].get<std::string>() << " mode, "
                 << daemon["devices_managed"] << " device(s) managed, " << daemon["drifted"] << " drifted, "
                 << daemon["failed"] << " failed";
            if (daemon.contains("last_pass") && daemon["last_pass"].is_number())
                out_ << "; last pass " << pass_time_text(daemon["last_pass"].get<double>(), ::time(nullptr));
            out_ << '\n';
        }
    } else {
        out_ << outcomes_[Outcome::applied] << " applied, " << outcomes_[Outcome::unchanged] << " unchanged, "
             << outcomes_[Outcome::skipped] << " skipped, " << outcomes_[Outcome::failed] << " failed, "
             << outcomes_[Outcome::not_stuck] << " did not stick, " << outcomes_[Outcome::refused] << " refused\n";
    }
}

std::string pass_time_text(double when_unix, std::time_t now) {
    const auto when = static_cast<std::time_t>(when_unix);
    std::tm local{};
    ::localtime_r(&when, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
    const long age = static_cast<long>(now - when);
    std::string ago;
    if (age < 0) ago = "in the future: is the clock right?";
    else if (age < 120) ago = std::to_string(age) + " s ago";
    else if (age < 7200) ago = std::to_string(age / 60) + " min ago";
    else ago = std::to_string(age / 3600) + " h ago";
    return std::string(stamp) + " (" + ago + ")";
}

bool CommandReport::drift() const {
    auto it = standings_.find(Standing::drift);
    return it != standings_.end() && it->second > 0;
}

bool CommandReport::failed() const {
    for (const auto& [o, n] : outcomes_)
        if (is_failure(o) && n > 0) return true;
    return false;
}

}  // namespace blkpolicy::agent
