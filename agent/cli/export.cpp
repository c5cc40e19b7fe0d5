// SPDX-License-Identifier: MIT
// `blkpolicy export [--by-serial] [DEV...]`: the host's values that differ
// from the kernel's own defaults, as a policy (report/export), on stdout.
#include "report/export.hpp"

#include <map>

#include "agent/cli/commands.hpp"
#include "agent/cli/inspect.hpp"
#include "udev/host.hpp"

namespace blkpolicy::agent {

int run_export(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    if (int rc = check_sysfs_and_devices(o, sysfs, err)) return rc;
    StateDir state(o.state_dir);
    std::vector<std::string> warnings;
    const auto host = udev::read_host_context(sysfs, o.kernel_release);
    const auto how = every_value_look(o, host);
    // No policy: what the devices hold now is the point, whoever set it.
    auto all = look(sysfs, state, policy::Policy{}, {}, how, warnings);
    for (const auto& w : warnings) err << "blkpolicy: warning: " << w << '\n';
    std::vector<std::string> names;
    std::map<std::string, DeviceView> views;
    for (auto& v : all) {
        if (o.devices.empty() && v.facts.has_queue && !v.facts.hidden) names.push_back(v.facts.name);
        views.emplace(v.facts.name, std::move(v));
    }
    if (!o.devices.empty()) names = o.devices;

    report::ExplainContext ctx{host};
    std::vector<report::ExportInput> inputs;
    for (const auto& name : names) {
        const auto it = views.find(name);
        if (it == views.end()) return device_went_away(name, err);
        const auto& v = it->second;
        if (!v.facts.has_queue) {
            err << "blkpolicy: " << name << " has no queue of its own (a partition?): export its disk\n";
            return kExitUsage;
        }
        read_device_context(ctx, sysfs, v);
        inputs.push_back({report::explain_device(v.facts, v.values, v.plan, ctx, stack_of(views, name)), v.values});
    }
    const auto exported = report::export_policy(inputs, {o.by_serial});
    const std::string release = host.kernel_release.empty() ? "not known" : host.kernel_release;
    std::string read;
    for (const auto& n : names) read += (read.empty() ? "" : " ") + n;
    out << report::export_toml(
        exported, {"blkpolicy export: the values that differ from the kernel's own defaults, as a policy",
                   "(kernel " + release + "; read on " + read + ").",
                   "A rule applies to every device its match selects, here and on any host the file goes to:",
                   "review it, then `blkpolicy plan -p FILE` says what it would write."});
    for (const auto& n : exported.notes) err << "blkpolicy: note: " << n << '\n';
    return kExitOk;
}

}  // namespace blkpolicy::agent
