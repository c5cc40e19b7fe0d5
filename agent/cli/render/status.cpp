// SPDX-License-Identifier: MIT
// The report of `blkpolicy status`: each managed value against the policy,
// and the running daemon's last results.
#include <map>

#include "agent/boot.hpp"
#include "agent/cli/render/common.hpp"
#include "agent/cli/render/device_report.hpp"
#include "agent/measured.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

namespace {

class StatusReport final : public DeviceReport {
public:
    StatusReport(bool as_json, std::ostream& out, json daemon, json boot)
        : DeviceReport(as_json, out), daemon_(std::move(daemon)), boot_(std::move(boot)) {}
    // Exit 1 unless every managed value is as the policy says: drifted, or
    // one this host cannot give (unavailable) or blkpolicy would not write.
    bool found_something() const override {
        return n(Standing::drift) + n(Standing::refused) + n(Standing::unavailable) > 0;
    }

private:
    void add_json(json& d, const DeviceView& v, const DeviceResult*) const override {
        d["attributes"] = json::array();
        for (const auto& a : v.plan.actions)
            d["attributes"].push_back({{"attribute", a.attribute},
                                       {"current", a.current},
                                       {"desired", a.expected.empty() ? a.desired : a.expected},
                                       {"state", to_string(standing_of(a))},
                                       {"note", a.note},
                                       {"rule", rule_json(a.rule)}});
        d["measured"] = measured_device(daemon_, v.facts.name);
    }
    void count(const DeviceView& v, const DeviceResult*) override {
        for (const auto& a : v.plan.actions) standings_[standing_of(a)]++;
    }
    void print_table(const DeviceView& v, const DeviceResult*) const override {
        Table t({"ATTRIBUTE", "CURRENT", "DESIRED", "STATE", "RULE", "NOTE"});
        for (const auto& a : v.plan.actions) {
            auto st = standing_of(a);
            t.add({a.attribute, or_dash(a.current), a.expected.empty() ? a.desired : a.expected, to_string(st),
                   a.rule.pos.file_line(), st == Standing::ok ? "" : a.note});
        }
        t.print(out_, "  ");
        const auto measured = measured_device(daemon_, v.facts.name);
        if (!measured.is_object()) return;
        out_ << "  " << measured_when(daemon_) << ":\n";
        for (const char* figure : {"wbt", "flushes", "readahead", "completions"}) {
            const auto& f = measured[figure];
            if (f.is_object() && f.contains("sentence") && f["sentence"].is_string())
                out_ << "    " << figure << ": " << f["sentence"].get<std::string>() << '\n';
        }
    }
    void add_json_summary(json& doc) const override {
        doc["daemon"] = daemon_;
        doc["initramfs"] = boot_;
    }
    void print_footer() const override {
        out_ << n(Standing::ok) << " in policy, " << n(Standing::drift) << " drifted, " << n(Standing::skipped)
             << " skipped, " << n(Standing::refused) << " refused, " << n(Standing::unavailable)
             << " unavailable here\n";
        if (boot_.is_object()) out_ << "this boot's " << boot_line(boot_record_from(boot_)) << '\n';
        if (!daemon_.is_object()) return;
        out_ << "daemon: pid " << daemon_["pid"] << ", " << daemon_["mode"].get<std::string>() << " mode, "
             << daemon_["devices_managed"] << " device(s) managed, " << daemon_["drifted"] << " drifted, "
             << daemon_["failed"] << " failed";
        if (daemon_.contains("last_pass") && daemon_["last_pass"].is_number())
            out_ << "; last pass " << pass_time_text(daemon_["last_pass"].get<double>(), ::time(nullptr));
        out_ << '\n';
    }
    int n(Standing s) const {
        auto it = standings_.find(s);
        return it == standings_.end() ? 0 : it->second;
    }

    json daemon_;
    json boot_;
    std::map<Standing, int> standings_;
};

}  // namespace

std::unique_ptr<DeviceReport> status_report(bool as_json, std::ostream& out, json daemon, json boot) {
    return std::make_unique<StatusReport>(as_json, out, std::move(daemon), std::move(boot));
}

}  // namespace blkpolicy::agent
