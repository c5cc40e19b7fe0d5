// SPDX-License-Identifier: MIT
// The report of `blkpolicy plan`: the ordered writes, nothing written.
#include "agent/cli/render/common.hpp"
#include "agent/cli/render/device_report.hpp"
#include "util/text.hpp"

namespace blkpolicy::agent {

using nlohmann::json;
using policy::ActionKind;

namespace {

json action_json(const policy::Action& a) {
    return {{"attribute", a.attribute},
            {"path", a.path},
            {"current", a.current},
            {"desired", a.desired},
            {"write", a.value},
            {"expected", a.expected},
            {"action", policy::to_string(a.kind)},
            {"note", a.note},
            {"rule", rule_json(a.rule)},
            {"overridden", rules_json(a.overridden)}};
}

class PlanReport final : public DeviceReport {
public:
    PlanReport(bool as_json, std::ostream& out, std::optional<std::vector<std::string>> loadable)
        : DeviceReport(as_json, out), loadable_(std::move(loadable)) {}
    bool found_something() const override { return false; }
    bool changes_pending() const override { return writes_ > 0; }

private:
    void add_json(json& d, const DeviceView& v, const DeviceResult*) const override {
        d["actions"] = json::array();
        for (const auto& a : v.plan.actions) d["actions"].push_back(action_json(a));
    }
    void count(const DeviceView& v, const DeviceResult*) override {
        for (const auto& a : v.plan.actions) {
            if (a.kind != ActionKind::write) continue;
            // A value that reads as wanted already is only checked again
            // before writing (an earlier write can move it): not a write.
            if (a.current == a.expected)
                ++rechecks_;
            else
                ++writes_;
        }
    }
    void print_table(const DeviceView& v, const DeviceResult*) const override {
        Table t({"ATTRIBUTE", "CURRENT", "DESIRED", "ACTION", "RULE", "NOTE"});
        for (const auto& a : v.plan.actions)
            t.add({a.attribute, or_dash(a.current), a.expected.empty() ? a.desired : a.expected,
                   policy::to_string(a.kind), a.rule.pos.file_line(), a.note});
        t.print(out_, "  ");
    }
    void add_json_summary(json& doc) const override {
        doc["loadable_schedulers"] = loadable_ ? json(*loadable_) : json(nullptr);
        // What --detailed-exitcode decides on: writes that change a value,
        // and values only read again before a write.
        doc["writes"] = writes_;
        doc["rechecks"] = rechecks_;
    }
    void print_footer() const override {
        out_ << writes_ << " write(s) planned";
        if (rechecks_) out_ << ", " << rechecks_ << " value(s) checked again after earlier writes";
        out_ << "; nothing was written\n";
        if (loadable_ && !loadable_->empty())
            out_ << "schedulers this kernel loads as modules when named: " << util::join(*loadable_, " ") << '\n';
    }

    std::optional<std::vector<std::string>> loadable_;
    std::size_t writes_ = 0;    // writes that change a value
    std::size_t rechecks_ = 0;  // values read again before a write, already as wanted
};

}  // namespace

std::unique_ptr<DeviceReport> plan_report(bool as_json, std::ostream& out,
                                          std::optional<std::vector<std::string>> loadable_schedulers) {
    return std::make_unique<PlanReport>(as_json, out, std::move(loadable_schedulers));
}

}  // namespace blkpolicy::agent
