#include "agent/snapshot.hpp"

#include <unistd.h>

#include "udev/discovery.hpp"

namespace blkpolicy::agent {

policy::PlanContext host_plan_context() {
    policy::PlanContext ctx;
    long page = ::sysconf(_SC_PAGESIZE);
    if (page > 0) ctx.page_size = page;
    return ctx;
}

std::vector<DeviceView> look(const udev::Sysfs& sysfs, const StateDir& state, const policy::Policy& policy,
                             const std::vector<std::string>& only, bool record, std::vector<std::string>& warnings,
                             const std::string& udev_db) {
    const auto names = only.empty() ? udev::list_block_devices(sysfs) : only;
    const auto ctx = host_plan_context();
    std::vector<DeviceView> out;
    for (const auto& name : names) {
        auto live = udev::read_facts(sysfs, name, udev_db);
        if (!live) continue;  // vanished since listing
        std::string warning;
        DeviceView v;
        v.facts = freeze_facts(state, std::move(*live), record, &warning);
        if (!warning.empty()) warnings.push_back(warning);
        v.values = udev::read_values(sysfs, name);
        v.plan = policy::plan_device(policy, v.facts, v.values, ctx);
        out.push_back(std::move(v));
    }
    return out;
}

}  // namespace blkpolicy::agent
