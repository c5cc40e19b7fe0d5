// SPDX-License-Identifier: MIT
#include "agent/snapshot.hpp"

#include <sys/utsname.h>

#include "policy/attributes.hpp"
#include "policy/match.hpp"
#include "udev/discovery.hpp"
#include "udev/probes.hpp"

namespace blkpolicy::agent {

std::string running_kernel_release() {
    utsname u{};
    ::uname(&u);
    return u.release;
}

std::optional<DeviceView> look_one(const udev::Sysfs& sysfs, const StateDir& state, const policy::Policy& policy,
                                   const std::string& name, const LookOptions& how,
                                   std::vector<std::string>& warnings) {
    auto live = udev::read_facts(sysfs, name, how.udev_db, how.shown | policy::fact_needs(policy),
                                 policy::attribute_names(policy));
    if (!live) return std::nullopt;  // vanished since listing
    std::string warning;
    DeviceView v;
    v.facts = freeze_facts(state, std::move(*live), how.record, &warning, &sysfs);
    if (!warning.empty()) warnings.push_back(warning);
    v.values = how.all_values
                   ? udev::read_values(sysfs, name)
                   : udev::read_values(sysfs, name, policy::value_keys_for(policy, v.facts), v.facts.live_values);
    v.plan = policy::plan_device(policy, v.facts, v.values, how.context);
    return v;
}

std::vector<DeviceView> look(const udev::Sysfs& sysfs, const StateDir& state, const policy::Policy& policy,
                             const std::vector<std::string>& only, const LookOptions& how,
                             std::vector<std::string>& warnings) {
    const auto names = only.empty() ? udev::list_block_devices(sysfs) : only;
    std::vector<DeviceView> out;
    for (const auto& name : names)
        if (auto v = look_one(sysfs, state, policy, name, how, warnings)) out.push_back(std::move(*v));
    return out;
}

writers::UdevDevice udev_device(const udev::Sysfs& sysfs, const policy::DeviceFacts& facts,
                                const writers::UdevReads& reads) {
    auto d = writers::UdevDevice::named(facts.name);
    if (facts.read & policy::kFactProperties) {
        d.properties = facts.properties;
        d.properties_known = true;
    }
    d.removable = facts.removable;  // a basic fact: always read
    const auto syspath = facts.syspath.empty() ? sysfs.resolve("block/" + facts.name) : facts.syspath;
    if (!syspath) return d;
    d.devpath = "/" + *syspath;
    const std::string rotational(policy::value_path(policy::Key::rotational));
    for (const auto& level : udev::device_levels(sysfs, *syspath)) {
        writers::UdevLevel l;
        l.kernel = level.kernel;
        l.subsystem = level.subsystem;
        l.driver = level.driver;
        const bool own = d.levels.empty();
        for (const auto& a : reads.parent_attributes)
            l.attributes[a] = udev::read_attribute(sysfs, level.dir + "/" + a);
        if (own) {
            for (const auto& a : reads.own_attributes)
                l.attributes[a] = udev::read_attribute(sysfs, level.dir + "/" + a);
            // A rule matched the rotational flag the kernel gave the device at add.
            if (l.attributes.count(rotational) && facts.has_queue)
                l.attributes[rotational] = facts.rotational ? "1" : "0";
            for (const auto& p : reads.tested_paths) {
                if (p.empty()) continue;
                const std::string path = p.front() == '/' ? p : d.devpath + "/" + p;
                // Only what lies in sysfs is looked at; anything else stays undecided.
                if (path.rfind("/sys/", 0) == 0)
                    d.tested[p] = sysfs.exists(path.substr(5));
                else if (path.rfind("/devices/", 0) == 0)
                    d.tested[p] = sysfs.exists(path.substr(1));
            }
        }
        d.levels.push_back(std::move(l));
    }
    return d;
}

report::AuditInput audit_input(const udev::Sysfs& sysfs, const policy::Policy* policy,
                               std::vector<writers::WriterAssignment> writers, const std::string& udev_db,
                               const policy::HostContext& host) {
    report::AuditInput in;
    const policy::PlanContext ctx(host);
    in.with_policy = policy != nullptr;
    in.writers = std::move(writers);
    in.single_llc = udev::single_last_level_cache(sysfs);
    in.host = host;
    const auto reads = writers::reads_of(in.writers);
    const auto attributes = policy ? policy::attribute_names(*policy) : policy::AttributeNames{};
    for (const auto& name : udev::list_block_devices(sysfs)) {
        auto f = udev::read_facts(sysfs, name, udev_db, policy::kAllFacts, attributes);
        if (!f) continue;
        report::AuditDevice d;
        d.facts = std::move(*f);
        d.udev = udev_device(sysfs, d.facts, reads);
        d.values = udev::read_values(sysfs, name);
        if (policy) d.plan = policy::plan_device(*policy, d.facts, d.values, ctx);
        d.wbt_state = udev::read_wbt_state(sysfs, name);
        d.has_medium = udev::has_medium(sysfs, name);
        in.devices.push_back(std::move(d));
    }
    return in;
}

}  // namespace blkpolicy::agent
