// SPDX-License-Identifier: MIT
// A reconciler over a fake tree whose sysfs behaves like the kernel, with a
// log that records the alerts: the daemon's decisions without its loop.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "agent/daemon/reconciler.hpp"
#include "support/fake_sysfs.hpp"
#include "support/kernel_model.hpp"
#include "support/policies.hpp"

namespace blkpolicy::test {

// One rule, "loops", for every loop device.
inline policy::Policy loops_policy(const std::string& set) {
    return one_rule_policy(set, "loops", "kernel = \"loop*\"\n");
}

// The host as a fake tree's test gives it: a kernel, nothing else known.
inline policy::HostContext host_on(kernel::KernelVersion kernel) {
    policy::HostContext host;
    host.kernel = kernel;
    return host;
}

struct RecordingLog : systemd::EventLog {
    std::vector<std::string> alerts;
    std::vector<systemd::Alert> full;
    std::vector<std::string> lines;
    void alert(const systemd::Alert& a) override {
        alerts.push_back(std::string(systemd::to_string(a.kind)) + " " + a.device + " " + a.attribute + " " +
                         a.expected + " " + a.actual);
        full.push_back(a);
    }
    void log(int, const std::string& m) override { lines.push_back(m); }
    std::vector<std::string> take() { return std::exchange(alerts, {}); }
};

struct World {
    FakeSysfs tree;
    KernelModelSysfs sysfs{init()};
    agent::StateDir state{tree.root() / "state"};
    RecordingLog log;
    agent::Reconciler rec{sysfs, state, log, host_on({6, 18})};

    std::filesystem::path init() {
        tree.add_loop("loop0", 0, "/img");
        return tree.root();
    }
    std::string q(const std::string& attr) { return tree.read(tree.devpath_of("loop0") + "/queue/" + attr); }
    void poke(const std::string& attr, const std::string& v) {
        REQUIRE(sysfs.write("block/loop0/queue/" + attr, v) == 0);
    }
};

}  // namespace blkpolicy::test
