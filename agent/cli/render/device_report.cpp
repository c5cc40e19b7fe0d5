// SPDX-License-Identifier: MIT
#include "agent/cli/render/device_report.hpp"

#include "agent/cli/render/common.hpp"
#include "util/names.hpp"
#include "util/text.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

namespace {
constexpr util::Named<Standing> kStandings[] = {
    {Standing::ok, "ok"},
    {Standing::drift, "drift"},
    {Standing::skipped, "skipped"},
    {Standing::refused, "refused"},
    {Standing::unavailable, "unavailable"},
};
static_assert(util::in_enum_order(kStandings));
}  // namespace

const char* to_string(Standing s) { return util::name_of(kStandings, s); }

Standing standing_of(const policy::Action& a) {
    if (a.kind == policy::ActionKind::skip) return Standing::skipped;
    if (a.kind == policy::ActionKind::refuse) return Standing::refused;
    if (a.kind == policy::ActionKind::unavailable) return Standing::unavailable;
    // iosched tunables of a scheduler not active yet have no current value.
    return a.current == a.expected ? Standing::ok : Standing::drift;
}

policy::FactNeeds DeviceReport::facts_shown() const {
    return json_ ? policy::kAllFacts
                 : policy::kFactDrivers | policy::kFactModel | policy::kFactSerial | policy::kFactStack;  // facts_line
}

void DeviceReport::device(const DeviceView& v, const DeviceResult* result) {
    count(v, result);
    if (json_) {
        auto d = device_head_json(v);
        add_json(d, v, result);
        devices_.push_back(std::move(d));
        return;
    }
    // Devices with nothing to say are summarised on one line at the end.
    if (v.plan.matched.empty()) {
        unmatched_.push_back(v.facts.name);
        return;
    }
    out_ << facts_line(v.facts) << '\n';
    for (const auto& r : v.plan.matched) out_ << "  rule: " << r.name << " (" << r.pos.file_line() << ")\n";
    if (!v.plan.not_tuned.empty()) {
        out_ << "  not tuned: " << v.plan.not_tuned << "\n\n";
        return;
    }
    print_table(v, result);
    out_ << '\n';
}

void DeviceReport::finish() {
    if (json_) {
        json doc = {{"format", kJsonFormatVersion}, {"devices", std::move(devices_)}};
        if (policy_) doc["host"] = host_json(*policy_);
        add_json_summary(doc);
        out_ << doc.dump(2) << '\n';
        return;
    }
    if (!unmatched_.empty()) out_ << "no rule matches: " << util::join(unmatched_, " ") << '\n';
    if (policy_) print_host(out_, *policy_);
    print_footer();
}

}  // namespace blkpolicy::agent
