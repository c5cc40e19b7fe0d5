// SPDX-License-Identifier: MIT
// `blkpolicy explain DEVICE...` and `explain --kernel-rules`.
#include "agent/cli/render/explain.hpp"

#include <map>
#include <set>

#include "agent/cli/commands.hpp"
#include "agent/cli/inspect.hpp"
#include "agent/cli/render/common.hpp"
#include "agent/daemon_client.hpp"
#include "agent/measured.hpp"
#include "agent/policy_files.hpp"
#include "agent/snapshot.hpp"
#include "policy/match.hpp"
#include "report/explain.hpp"
#include "udev/discovery.hpp"
#include "udev/host.hpp"
#include "udev/probes.hpp"
#include "writers/scan.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

std::optional<policy::Policy> optional_policy(const Options& o, const policy::HostContext& host, std::ostream& err,
                                              int& rc) {
    if (o.no_policy) return std::nullopt;
    auto files = find_policy_files(o.policies);
    if (o.policies.empty() && files.files.empty()) return std::nullopt;
    auto loaded = load_policy_from(o.policies);
    if (!loaded.ok()) {
        for (const auto& e : loaded.errors) err << e.str() << '\n';
        rc = kExitPolicy;
        return std::nullopt;
    }
    policy::bind_host(loaded.policy, host.facts);
    return loaded.policy;
}

namespace {

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

}  // namespace

report::StackView stack_of(const std::map<std::string, DeviceView>& views, const std::string& name) {
    report::StackView s;
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
            if (a.id == policy::Key::read_ahead_kb && a.kind != policy::ActionKind::skip &&
                a.kind != policy::ActionKind::unavailable)
                s.lowers_tuned_in_vain.push_back(low);
    }
    return s;
}

LookOptions every_value_look(const Options& o, const policy::HostContext& host) {
    LookOptions how;
    how.all_values = true;
    how.udev_db = o.udev_db();
    how.context = policy::PlanContext(host);
    return how;
}

void read_device_context(report::ExplainContext& ctx, const udev::Sysfs& sysfs, const DeviceView& v) {
    const auto& name = v.facts.name;
    ctx.wbt_state = udev::read_wbt_state(sysfs, name);
    ctx.hw_queues = udev::count_hw_queues(sysfs, name);
    ctx.hw_tags = udev::hw_tags(sysfs, name);
    ctx.rotation_rate = udev::rotation_rate(sysfs, name);
    const auto backing = udev::loop_backing_store(sysfs, v.facts.loop_backing_file);
    ctx.backing_known = backing.known;
    ctx.backing_store = backing.what;
    ctx.backing_rotational = backing.rotational;
    ctx.lowers_rotational = udev::lowers_rotational(sysfs, name);
}

int run_explain(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    if (o.kernel_rules) {
        const std::string release = o.kernel_release.empty() ? running_kernel_release() : o.kernel_release;
        const auto k = kernel::parse_kernel_release(release);
        if (!k) {  // uname says something blkpolicy cannot read (a given release was checked by the parser)
            err << "blkpolicy: cannot read the kernel release \"" << release << "\"\n";
            return kExitRuntime;
        }
        print_kernel_rules(out, *k, release, o.json);
        return kExitOk;
    }
    if (o.devices.empty()) {
        err << "blkpolicy: explain needs a device, e.g. blkpolicy explain sda\nTry 'blkpolicy --help'.\n";
        return kExitUsage;
    }
    int rc = kExitOk;
    const auto host = udev::read_host_context(sysfs, o.kernel_release);
    auto pol = optional_policy(o, host, err, rc);
    if (rc != kExitOk) return rc;
    if (int rc2 = check_sysfs_and_devices(o, sysfs, err)) return rc2;
    StateDir state(o.state_dir);
    std::vector<std::string> warnings;
    const auto how = every_value_look(o, host);
    auto all = look(sysfs, state, pol ? *pol : policy::Policy{}, {}, how, warnings);
    std::map<std::string, DeviceView> views;
    for (auto& v : all) views.emplace(v.facts.name, std::move(v));

    report::ExplainContext ctx{host};
    std::vector<std::string> writer_warnings;
    ctx.writers = writers::scan_writers({o.udev_rules_dirs, o.config_root}, &writer_warnings);
    for (const auto& w : writer_warnings) err << "blkpolicy: warning: " << w << '\n';
    const auto reads = writers::reads_of(ctx.writers);
    json docs = json::array();
    bool first = true;
    // The running daemon's last measured figures, where it measures.
    const json daemon = read_daemon_json(o.state_dir).value_or(nullptr);
    for (const auto& name : o.devices) {
        const auto it = views.find(name);
        if (it == views.end()) return device_went_away(name, err);
        const auto& v = it->second;
        read_device_context(ctx, sysfs, v);
        ctx.device = udev_device(sysfs, v.facts, reads);
        auto x = report::explain_device(v.facts, v.values, v.plan, ctx, stack_of(views, name));
        if (o.json) {
            docs.push_back(explanation_json(x, v.plan));
            docs.back()["measured"] = measured_device(daemon, name);
        } else {
            if (!first) out << "\n";
            first = false;
            print_explanation(out, x, v.plan, pol.has_value(), daemon);
        }
    }
    if (o.json)
        out << json{{"format", kJsonFormatVersion}, {"host", pol ? host_json(*pol) : json(nullptr)}, {"devices", docs}}
                   .dump(2)
            << '\n';
    else if (pol)
        print_host(out, *pol);
    return kExitOk;
}

}  // namespace blkpolicy::agent
