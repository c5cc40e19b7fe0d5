// SPDX-License-Identifier: MIT
#include "agent/cli/render/explain.hpp"

#include "agent/cli/render/common.hpp"
#include "agent/measured.hpp"
#include "util/names.hpp"
#include "util/text.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

namespace {
json written_by_json(const std::vector<writers::FoundWriter>& writers) {
    json out = json::array();
    for (const auto& found : writers) {
        const auto* w = found.writer;
        const bool may = found.selection.verdict == writers::Selects::may;
        out.push_back({{"writer", w->where()},
                       {"kind", writers::to_string(w->kind)},
                       {"context", w->context},
                       {"value", w->value.empty() ? json(nullptr) : json(w->value)},
                       {"why_inexact", w->why_inexact},
                       {"certain", !may},
                       {"depends_on", may ? json(found.selection.because) : json(nullptr)}});
    }
    return out;
}

}  // namespace

json explanation_json(const report::DeviceExplanation& x, const policy::DevicePlan& plan) {
    json attrs = json::array();
    for (const auto& e : x.attributes) {
        json inputs = json::object();
        for (const auto& [k, v] : e.inputs) inputs[k] = v;
        attrs.push_back(
            {{"attribute", e.attribute},
             {"current", e.current},
             {"managed", e.managed},
             {"desired", e.managed ? json(e.desired) : json(nullptr)},
             {"rule", e.managed ? rule_json(e.rule) : json(nullptr)},
             {"overridden", rules_json(e.overridden)},
             {"plan_note", e.plan_note},
             {"kernel_default", e.kernel_default.empty() ? json(nullptr) : json(e.kernel_default)},
             {"derivation", e.derivation},
             {"inputs", inputs},
             {"disturbs", e.disturbs},
             {"kernel_rule", e.kernel_rule.empty() ? json(nullptr) : json(e.kernel_rule)},
             {"kernel_rule_standing", e.kernel_rule_standing.empty() ? json(nullptr) : json(e.kernel_rule_standing)},
             {"written_by", written_by_json(e.written_by)}});
    }
    return {
        {"device", x.facts.name},
        {"facts", facts_json(x.facts)},
        {"matched", rules_json(plan.matched)},
        {"attributes", attrs},
        {"wbt", x.wbt_state.empty() ? json(nullptr) : json{{"state", x.wbt_state}, {"consequence", x.wbt_consequence}}},
        {"stack",
         {{"tops", x.stack.tops}, {"lowers", x.stack.lowers}, {"lowers_tuned_in_vain", x.stack.lowers_tuned_in_vain}}}};
}

void print_explanation(std::ostream& out, const report::DeviceExplanation& x, const policy::DevicePlan& plan,
                       bool have_policy, const json& daemon) {
    const auto& f = x.facts;
    const auto measured = measured_device(daemon, f.name);
    out << f.name << "  " << f.devnum << "  driver=" << (f.driver.empty() ? "-" : f.driver)
        << "  stack=" << policy::to_string(f.stack) << (f.request_based ? "" : "  bio-based") << '\n';
    if (!have_policy) out << "  (no policy: kernel side only)\n";
    for (const auto& r : plan.matched) out << "  rule: " << r.name << " (" << r.pos.file_line() << ")\n";
    for (const auto& e : x.attributes) {
        out << '\n' << e.attribute << '\n';
        out << "  now        " << (e.current.empty() ? "-" : e.current) << '\n';
        if (e.managed) {
            out << "  policy     " << e.desired << "  from " << e.rule.name << " (" << e.rule.pos.file_line() << ")";
            for (const auto& o : e.overridden) out << "; overrides " << o.name << " (" << o.pos.file_line() << ")";
            out << '\n';
            if (!e.plan_note.empty()) out << "  plan       " << e.plan_note << '\n';
        } else if (have_policy) {
            out << "  policy     not set by any rule\n";
        }
        if (!e.kernel_default.empty()) out << "  kernel     " << e.kernel_default << '\n';
        if (!e.derivation.empty()) out << "  because    " << e.derivation << '\n';
        if (!e.inputs.empty()) {
            out << "  inputs    ";
            for (const auto& [k, v] : e.inputs) out << ' ' << k << '=' << (v.empty() ? "-" : v);
            out << '\n';
        }
        if (!e.disturbs.empty()) out << "  moved by   " << e.disturbs << '\n';
        for (const auto& found : e.written_by) {
            const auto* w = found.writer;
            const bool may = found.selection.verdict == writers::Selects::may;
            out << (may ? "  may write  " : "  written by ") << w->describe() << ": "
                << (w->value.empty() ? "(" + w->why_inexact + ")"
                                     : w->value + (w->why_inexact.empty() ? "" : " (" + w->why_inexact + ")"));
            if (may) out << ", depending on " << found.selection.because;
            out << '\n';
        }
        if (!e.kernel_rule.empty())
            out << "  rule       " << e.kernel_rule
                << (e.kernel_rule_standing == "holds" ? "" : " (" + e.kernel_rule_standing + ")") << '\n';
        if (const auto sentence = measured_sentence(measured, e.attribute); !sentence.empty())
            out << "  measured   " << sentence << '\n';
    }
    out << '\n';
    if (measured.is_object()) out << measured_when(daemon) << '\n';
    if (!x.wbt_state.empty())
        out << "wbt state: " << x.wbt_state << ": " << x.wbt_consequence << '\n';
    else
        out << "wbt state: unknown (mount debugfs on /sys/kernel/debug to read it)\n";
    if (!x.stack.lowers.empty() || x.stack.tops != std::vector<std::string>{f.name}) {
        out << "stack: filesystems read through " << (x.stack.tops.empty() ? "-" : util::join(x.stack.tops, ", "));
        if (!x.stack.lowers.empty()) out << "; below: " << util::join(x.stack.lowers, ", ");
        out << '\n';
        if (!x.stack.lowers_tuned_in_vain.empty())
            out << "  read_ahead_kb set on " << util::join(x.stack.lowers_tuned_in_vain, ", ")
                << " is not used by reads through " << f.name << '\n';
    }
}

void print_kernel_rules(std::ostream& out, const kernel::KernelVersion& k, const std::string& release, bool as_json) {
    if (as_json) {
        json rows = json::array();
        for (const auto& r : kernel::kernel_rows())
            rows.push_back({{"id", r.id},
                            {"holds", r.holds_on(k)},
                            {"standing", kernel::standing_on(r, k)},
                            {"newest_seen", r.newest_seen.major == 0 ? json(nullptr)
                                                                     : json(std::to_string(r.newest_seen.major) + "." +
                                                                            std::to_string(r.newest_seen.minor) + "." +
                                                                            std::to_string(r.newest_seen.patch))},
                            {"behaviour", r.behaviour},
                            {"known_by", kernel::to_string(r.known_by)},
                            {"how", r.how},
                            {"observed", r.observed},
                            {"source", r.source}});
        out << json{{"format", kJsonFormatVersion}, {"kernel", release}, {"rules", rows}}.dump(2) << '\n';
        return;
    }
    out << "What blkpolicy expects kernel " << release << " to do, and how it knows:\n";
    for (const auto& r : kernel::kernel_rows()) {
        if (!r.holds_on(k)) continue;
        out << "\n" << r.id;
        if (r.beyond_observed(k)) out << "  (" << kernel::standing_on(r, k) << ")";
        out << "\n  " << r.behaviour << "\n  known by: " << kernel::to_string(r.known_by);
        if (!r.how.empty()) out << " (" << r.how << ")";
        out << "\n  observed: " << (r.observed.empty() ? "not on these machines; from the kernel source" : r.observed);
        if (!r.source.empty()) out << "\n  source: " << r.source;
        out << '\n';
    }
}

}  // namespace blkpolicy::agent
