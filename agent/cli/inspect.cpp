#include "agent/cli/inspect.hpp"

#include <map>
#include <set>

#include "agent/cli/commands.hpp"
#include "agent/policy_files.hpp"
#include "agent/cli/report.hpp"
#include "agent/snapshot.hpp"
#include "udev/rules_files.hpp"
#include "policy/audit.hpp"
#include "policy/explain.hpp"
#include "policy/values.hpp"
#include "udev/discovery.hpp"
#include "udev/probes.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

namespace {

// The policy, when there is one: explicit --policy must load; the default
// locations may be empty (then these views work without a policy).
std::optional<policy::Policy> optional_policy(const Options& o, std::ostream& err, int& rc) {
    if (o.no_policy) return std::nullopt;
    auto files = find_policy_files(o.policies);
    if (o.policies.empty() && files.files.empty()) return std::nullopt;
    auto loaded = load_policy_from(o.policies);
    if (!loaded.ok()) {
        for (const auto& e : loaded.errors) err << e.str() << '\n';
        rc = kExitPolicy;
        return std::nullopt;
    }
    return loaded.policy;
}

std::vector<std::string> walk(const std::map<std::string, DeviceView>& views, const std::string& from, bool up) {
    std::vector<std::string> out;
    std::set<std::string> seen;
    std::vector<std::string> todo = {from};
    while (!todo.empty()) {
        auto name = todo.back();
        todo.pop_back();
        auto it = views.find(name);
        if (it == views.end()) continue;
        for (const auto& next : up ? it->second.facts.holders : it->second.facts.slaves) {
            if (!seen.insert(next).second) continue;
            out.push_back(next);
            todo.push_back(next);
        }
    }
    return out;
}

policy::StackView stack_of(const std::map<std::string, DeviceView>& views, const std::string& name) {
    policy::StackView s;
    for (const auto& up : walk(views, name, true)) {
        auto it = views.find(up);
        if (it != views.end() && it->second.facts.holders.empty()) s.tops.push_back(up);
    }
    auto self = views.find(name);
    if (s.tops.empty() && self != views.end() && self->second.facts.holders.empty()) s.tops.push_back(name);
    for (const auto& low : walk(views, name, false)) {
        s.lowers.push_back(low);
        auto it = views.find(low);
        if (it == views.end()) continue;
        for (const auto& a : it->second.plan.actions)
            if (a.attribute == "read_ahead_kb" && a.kind != policy::ActionKind::skip) s.lowers_tuned_in_vain.push_back(low);
    }
    return s;
}

json explanation_json(const policy::DeviceExplanation& x, const policy::DevicePlan& plan) {
    json attrs = json::array();
    for (const auto& e : x.attributes) {
        json inputs = json::object();
        for (const auto& [k, v] : e.inputs) inputs[k] = v;
        json overridden = json::array();
        for (const auto& r : e.overridden) overridden.push_back(rule_json(r));
        attrs.push_back({{"attribute", e.attribute},
                         {"current", e.current},
                         {"managed", e.managed},
                         {"desired", e.managed ? json(e.desired) : json(nullptr)},
                         {"rule", e.managed ? rule_json(e.rule) : json(nullptr)},
                         {"overridden", overridden},
                         {"plan_note", e.plan_note},
                         {"kernel_default", e.kernel_default.empty() ? json(nullptr) : json(e.kernel_default)},
                         {"derivation", e.derivation},
                         {"inputs", inputs},
                         {"disturbs", e.disturbs},
                         {"kernel_rule", e.kernel_rule.empty() ? json(nullptr) : json(e.kernel_rule)}});
    }
    json matched = json::array();
    for (const auto& r : plan.matched) matched.push_back(rule_json(r));
    return {{"device", x.facts.name},
            {"facts", facts_json(x.facts)},
            {"matched", matched},
            {"attributes", attrs},
            {"wbt", x.wbt_state.empty() ? json(nullptr)
                                        : json{{"state", x.wbt_state}, {"consequence", x.wbt_consequence}}},
            {"stack", {{"tops", x.stack.tops}, {"lowers", x.stack.lowers},
                       {"lowers_tuned_in_vain", x.stack.lowers_tuned_in_vain}}}};
}

void print_explanation(std::ostream& out, const policy::DeviceExplanation& x, const policy::DevicePlan& plan,
                       bool have_policy) {
    const auto& f = x.facts;
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
    }
    out << '\n';
    if (!x.wbt_state.empty()) out << "wbt state: " << x.wbt_state << ": " << x.wbt_consequence << '\n';
    else out << "wbt state: unknown (mount debugfs on /sys/kernel/debug to read it)\n";
    if (!x.stack.lowers.empty() || x.stack.tops != std::vector<std::string>{f.name}) {
        out << "stack: filesystems read through " << (x.stack.tops.empty() ? "-" : policy::join(x.stack.tops, ", "));
        if (!x.stack.lowers.empty()) out << "; below: " << policy::join(x.stack.lowers, ", ");
        out << '\n';
        if (!x.stack.lowers_tuned_in_vain.empty())
            out << "  read_ahead_kb set on " << policy::join(x.stack.lowers_tuned_in_vain, ", ")
                << " is not used by reads through " << f.name << '\n';
    }
}

}  // namespace

namespace {

// explain --kernel-rules: the kernel rows (policy/kernel) that hold on the
// kernel; --json lists every row with whether it holds.
int print_kernel_rules(const policy::KernelVersion& k, const std::string& release, bool as_json, std::ostream& out) {
    if (as_json) {
        json rows = json::array();
        for (const auto& r : policy::kernel_rows())
            rows.push_back({{"id", r.id},
                            {"holds", r.holds_on(k)},
                            {"behaviour", r.behaviour},
                            {"known_by", policy::to_string(r.known_by)},
                            {"how", r.how},
                            {"observed", r.observed},
                            {"source", r.source}});
        out << json{{"format", kJsonFormatVersion}, {"kernel", release}, {"rules", rows}}.dump(2) << '\n';
        return kExitOk;
    }
    out << "What blkpolicy expects kernel " << release << " to do, and how it knows:\n";
    for (const auto& r : policy::kernel_rows()) {
        if (!r.holds_on(k)) continue;
        out << "\n" << r.id << "\n  " << r.behaviour << "\n  known by: " << policy::to_string(r.known_by);
        if (!r.how.empty()) out << " (" << r.how << ")";
        out << "\n  observed: " << (r.observed.empty() ? "not on these machines; from the kernel source" : r.observed);
        if (!r.source.empty()) out << "\n  source: " << r.source;
        out << '\n';
    }
    return kExitOk;
}

}  // namespace

int run_explain(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    if (o.kernel_rules) {
        std::string release = o.kernel_release.empty() ? running_kernel_release() : o.kernel_release;
        auto k = policy::parse_kernel_release(release);
        if (!k) {
            err << "blkpolicy: --kernel-release wants a release such as 6.12.0, not \"" << release << "\"\n";
            return kExitUsage;
        }
        return print_kernel_rules(*k, release, o.json, out);
    }
    if (o.devices.empty()) {
        err << "blkpolicy: explain needs a device, e.g. blkpolicy explain sda\nTry 'blkpolicy --help'.\n";
        return kExitUsage;
    }
    int rc = kExitOk;
    auto pol = optional_policy(o, err, rc);
    if (rc != kExitOk) return rc;
    if (int rc2 = check_sysfs_and_devices(o, sysfs, err)) return rc2;
    StateDir state(o.state_dir);
    std::vector<std::string> warnings;
    LookOptions how;
    how.all_values = true;
    how.udev_db = o.udev_db();
    how.context = host_plan_context(o.sysfs_root);
    auto all = look(sysfs, state, pol ? *pol : policy::Policy{}, {}, how, warnings);
    std::map<std::string, DeviceView> views;
    for (auto& v : all) views.emplace(v.facts.name, std::move(v));

    policy::ExplainContext ctx;
    ctx.kernel = running_kernel_version();
    ctx.loadable_schedulers = how.context.loadable_schedulers;
    if (!o.kernel_release.empty()) {
        auto k = policy::parse_kernel_release(o.kernel_release);
        if (!k) {
            err << "blkpolicy: --kernel-release wants a release such as 6.12.0, not \"" << o.kernel_release << "\"\n";
            return kExitUsage;
        }
        ctx.kernel = *k;
    }
    json docs = json::array();
    bool first = true;
    for (const auto& name : o.devices) {
        const auto it = views.find(name);
        if (it == views.end()) return device_went_away(name, err);
        const auto& v = it->second;
        ctx.wbt_state = udev::read_wbt_state(sysfs, name);
        ctx.hw_queues = udev::count_hw_queues(sysfs, name);
        ctx.hw_tags = udev::hw_tags(sysfs, name);
        ctx.rotation_rate = udev::rotation_rate(sysfs, name);
        const auto backing = udev::loop_backing_store(sysfs, v.facts.loop_backing_file);
        ctx.backing_known = backing.known;
        ctx.backing_store = backing.what;
        ctx.backing_rotational = backing.rotational;
        ctx.lowers_rotational = udev::lowers_rotational(sysfs, name);
        auto x = policy::explain_device(v.facts, v.values, v.plan, ctx, stack_of(views, name));
        if (o.json) {
            docs.push_back(explanation_json(x, v.plan));
        } else {
            if (!first) out << "\n";
            first = false;
            print_explanation(out, x, v.plan, pol.has_value());
        }
    }
    if (o.json) out << json{{"format", kJsonFormatVersion}, {"devices", docs}}.dump(2) << '\n';
    return kExitOk;
}

int run_audit(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    int rc = kExitOk;
    auto pol = optional_policy(o, err, rc);
    if (rc != kExitOk) return rc;
    if (int rc2 = check_sysfs_and_devices(o, sysfs, err)) return rc2;
    policy::AuditInput in;
    in.with_policy = pol.has_value();
    std::vector<std::string> rule_warnings;
    in.udev_rules = udev::scan_udev_rules(o.udev_rules_dirs, &rule_warnings);
    for (const auto& w : rule_warnings) err << "blkpolicy: warning: " << w << '\n';
    in.single_llc = udev::single_last_level_cache(sysfs);
    in.include_empty = o.all;
    const auto ctx = host_plan_context();
    const auto names = o.devices.empty() ? udev::list_block_devices(sysfs) : o.devices;
    // Stack findings need every device, even when the output is limited.
    for (const auto& name : udev::list_block_devices(sysfs)) {
        auto f = udev::read_facts(sysfs, name, o.udev_db());
        if (!f) continue;
        policy::AuditDevice d;
        d.facts = *f;
        d.values = udev::read_values(sysfs, name);
        if (pol) d.plan = policy::plan_device(*pol, d.facts, d.values, ctx);
        d.wbt_state = udev::read_wbt_state(sysfs, name);
        d.has_medium = policy::parse_int(sysfs.read("block/" + name + "/size").value).value_or(1) > 0;
        in.devices.push_back(std::move(d));
    }
    auto findings = policy::audit(in);
    if (!o.devices.empty()) {
        std::erase_if(findings, [&](const policy::Finding& f) {
            return f.device != policy::kHostDevice && std::find(names.begin(), names.end(), f.device) == names.end();
        });
    }
    bool serious = false;
    std::map<policy::Severity, int> count;
    for (const auto& f : findings) {
        count[f.severity]++;
        serious = serious || f.severity != policy::Severity::info;
    }
    if (o.json) {
        json arr = json::array();
        for (const auto& f : findings) {
            json ev = json::object();
            for (const auto& [k, v] : f.evidence) ev[k] = v;
            arr.push_back({{"device", f.device},
                           {"code", f.code},
                           {"severity", policy::to_string(f.severity)},
                           {"message", f.message},
                           {"evidence", ev},
                           {"fix", f.fix.empty() ? json(nullptr) : json(f.fix)}});
        }
        out << json{{"format", kJsonFormatVersion}, {"policy", pol.has_value()}, {"findings", arr}}.dump(2) << '\n';
    } else {
        for (const auto& f : findings) {
            out << policy::to_string(f.severity) << "  " << f.device << "  " << f.code << "\n  " << f.message << '\n';
            for (const auto& [k, v] : f.evidence) out << "  evidence: " << k << " = " << v << '\n';
            if (!f.fix.empty()) {
                out << "  fix:\n";
                std::string line;
                for (char c : f.fix) {
                    if (c == '\n') {
                        out << "    " << line << '\n';
                        line.clear();
                    } else {
                        line += c;
                    }
                }
            }
            out << '\n';
        }
        out << findings.size() << " finding(s): " << count[policy::Severity::critical] << " critical, "
            << count[policy::Severity::warning] << " warning, " << count[policy::Severity::info] << " info"
            << (pol ? "" : " (no policy: policy checks skipped)") << '\n';
    }
    return serious ? kExitPartial : kExitOk;
}

}  // namespace blkpolicy::agent
