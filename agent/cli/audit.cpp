// `blkpolicy audit`: read-only findings, with or without a policy.
#include "agent/cli/render/audit.hpp"

#include <algorithm>

#include "agent/cli/commands.hpp"
#include "agent/cli/inspect.hpp"
#include "agent/snapshot.hpp"
#include "policy/audit.hpp"
#include "policy/values.hpp"
#include "udev/discovery.hpp"
#include "udev/probes.hpp"
#include "udev/rules_files.hpp"

namespace blkpolicy::agent {

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
    in.kernel = running_kernel_version();
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
        d.has_medium = udev::has_medium(sysfs, name);
        in.devices.push_back(std::move(d));
    }
    auto findings = policy::audit(in);
    if (!o.devices.empty()) {
        std::erase_if(findings, [&](const policy::Finding& f) {
            return f.device != policy::kHostDevice && std::find(names.begin(), names.end(), f.device) == names.end();
        });
    }
    const bool serious = std::any_of(findings.begin(), findings.end(),
                                     [](const policy::Finding& f) { return f.severity != policy::Severity::info; });
    print_findings(out, findings, o.json, pol.has_value());
    return serious ? kExitPartial : kExitOk;
}

}  // namespace blkpolicy::agent
