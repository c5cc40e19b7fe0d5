// SPDX-License-Identifier: MIT
// writers/udev_rules: which udev rule assignments write queue attributes.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "writers/udev_rules.hpp"

using namespace blkpolicy;
using V = std::vector<std::string>;

TEST_CASE("udev rules: which assignments write queue attributes") {
    auto rules = writers::parse_udev_rules(
        "f.rules",
        "# comment ATTR{queue/scheduler}=\"x\"\n"
        "ACTION==\"add|change\", KERNEL==\"sd[a-z]|vd*\", ATTR{queue/rotational}==\"0\", "
        "ATTR{queue/scheduler}=\"mq-deadline\"\n"
        "\n"
        "SUBSYSTEM==\"block\", ATTR{bdi/read_ahead_kb}:=\"256\", ATTR{device/timeout}=\"60\"\n");
    REQUIRE(rules.size() == 3);
    CHECK(rules[0].attribute == "scheduler");
    CHECK(rules[0].where() == "f.rules:2");
    REQUIRE(rules[0].condition);  // KERNEL and rotational as a condition, not as patterns
    CHECK(rules[0].kernel_patterns.empty());
    CHECK(rules[1].attribute == "read_ahead_kb");
    CHECK(rules[1].value == "256");
    CHECK(rules[2].attribute == "device.timeout");
    CHECK(writers::find_writer(rules, writers::UdevDevice::named("sdb"), "scheduler").writer == &rules[0]);
    CHECK(writers::find_writer(rules, writers::UdevDevice::named("nvme0n1"), "scheduler").writer == nullptr);
    CHECK(writers::find_writer(rules, writers::UdevDevice::named("nvme0n1"), "read_ahead_kb").writer == &rules[1]);
    CHECK(writers::find_writer(rules, writers::UdevDevice::named("sda"), "rotational").writer ==
          nullptr);  // == is a match, not a write
}
