// SPDX-License-Identifier: MIT
// `blkpolicy audit`: read-only findings, with or without a policy.
#include "agent/cli/render/audit.hpp"

#include <algorithm>

#include "agent/boot.hpp"
#include "agent/cli/commands.hpp"
#include "agent/cli/inspect.hpp"
#include "agent/snapshot.hpp"
#include "report/audit.hpp"
#include "udev/discovery.hpp"
#include "udev/host.hpp"
#include "udev/probes.hpp"
#include "writers/scan.hpp"

namespace blkpolicy::agent {

int run_audit(const Options& o, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err) {
    int rc = kExitOk;
    const auto host = udev::read_host_context(sysfs, o.kernel_release);
    auto pol = optional_policy(o, host, err, rc);
    if (rc != kExitOk) return rc;
    if (int rc2 = check_sysfs_and_devices(o, sysfs, err)) return rc2;
    std::vector<std::string> rule_warnings;
    auto rules = writers::scan_writers({o.udev_rules_dirs, o.config_root}, &rule_warnings);
    for (const auto& w : rule_warnings) err << "blkpolicy: warning: " << w << '\n';
    const auto names = o.devices.empty() ? udev::list_block_devices(sysfs) : o.devices;
    auto in = audit_input(sysfs, pol ? &*pol : nullptr, std::move(rules), o.udev_db(), host);
    in.include_empty = o.all;
    if (pol) initramfs_audit_input(*pol, o.config_root, in);
    // This boot's initramfs, with a policy or without.
    if (auto boot = read_boot_record(o.state_dir)) boot_audit_input(boot_record_from(*boot), in);
    auto findings = report::audit(in);
    if (!o.devices.empty()) {
        std::erase_if(findings, [&](const report::Finding& f) {
            return f.device != report::kHostDevice && std::find(names.begin(), names.end(), f.device) == names.end();
        });
    }
    const bool serious = std::any_of(findings.begin(), findings.end(),
                                     [](const report::Finding& f) { return f.severity != report::Severity::info; });
    print_findings(out, findings, o.json, pol.has_value());
    return serious ? kExitPartial : kExitOk;
}

}  // namespace blkpolicy::agent
