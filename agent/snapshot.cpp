// SPDX-License-Identifier: MIT
#include "agent/snapshot.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include "policy/match.hpp"
#include "udev/discovery.hpp"
#include "udev/probes.hpp"

namespace blkpolicy::agent {

policy::PlanContext host_plan_context(const std::string& sysfs_root, const std::string& kernel_release) {
    policy::PlanContext ctx;
    long page = ::sysconf(_SC_PAGESIZE);
    if (page > 0) ctx.page_size = page;
    if (sysfs_root == "/sys") ctx.kernel = running_kernel_version();
    if (auto k = kernel::parse_kernel_release(kernel_release)) ctx.kernel = *k;
    // Modules belong to the running kernel: only a look at the real /sys
    // asks the real modules directory.
    if (sysfs_root == "/sys") {
        utsname u{};
        ::uname(&u);
        ctx.loadable_schedulers = udev::loadable_schedulers(std::string("/lib/modules/") + u.release);
    }
    return ctx;
}

std::string running_kernel_release() {
    utsname u{};
    ::uname(&u);
    return u.release;
}

kernel::KernelVersion running_kernel_version() {
    return kernel::parse_kernel_release(running_kernel_release()).value_or(kernel::KernelVersion{});
}

std::optional<DeviceView> look_one(const udev::Sysfs& sysfs, const StateDir& state, const policy::Policy& policy,
                                   const std::string& name, const LookOptions& how,
                                   std::vector<std::string>& warnings) {
    auto live = udev::read_facts(sysfs, name, how.udev_db, how.shown | policy::fact_needs(policy));
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

kernel::AuditInput audit_input(const udev::Sysfs& sysfs, const policy::Policy* policy,
                               std::vector<writers::WriterAssignment> writers, const std::string& udev_db,
                               const policy::PlanContext& ctx, kernel::KernelVersion kernel) {
    kernel::AuditInput in;
    in.with_policy = policy != nullptr;
    in.writers = std::move(writers);
    in.single_llc = udev::single_last_level_cache(sysfs);
    in.kernel = kernel;
    for (const auto& name : udev::list_block_devices(sysfs)) {
        auto f = udev::read_facts(sysfs, name, udev_db);
        if (!f) continue;
        kernel::AuditDevice d;
        d.facts = std::move(*f);
        d.values = udev::read_values(sysfs, name);
        if (policy) d.plan = policy::plan_device(*policy, d.facts, d.values, ctx);
        d.wbt_state = udev::read_wbt_state(sysfs, name);
        d.has_medium = udev::has_medium(sysfs, name);
        in.devices.push_back(std::move(d));
    }
    return in;
}

}  // namespace blkpolicy::agent
