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

TEST_CASE("udev rules: a later line reads what an earlier one wrote, as udevd reads sysfs again") {
    // USB flash drives made non-rotational, then schedulers by the flag.
    auto rules = writers::parse_udev_rules(
        "60-flash.rules",
        "KERNEL==\"sd*\", ATTR{removable}==\"1\", ATTR{queue/rotational}=\"0\"\n"
        "KERNEL==\"sd*\", ATTR{queue/rotational}==\"0\", ATTR{queue/scheduler}=\"kyber\"\n"
        "KERNEL==\"sd*\", ATTR{queue/rotational}==\"1\", ATTR{queue/scheduler}=\"bfq\"\n"
        "KERNEL==\"sd*\", ATTR{queue/scheduler}==\"*[kyber]*\", ATTR{queue/read_ahead_kb}=\"64\"\n");
    REQUIRE(rules.size() == 4);
    auto disk = [](const std::string& removable, const std::string& rotational) {
        auto d = writers::UdevDevice::named("sdb");
        writers::UdevLevel l;
        l.kernel = "sdb";
        l.subsystem = "block";
        l.attributes = {{"removable", removable},
                        {"queue/rotational", rotational},
                        {"queue/scheduler", "[mq-deadline] kyber bfq none"}};
        d.levels.push_back(l);
        return d;
    };
    // The stick the kernel called rotational: the first line makes it not,
    // and the second line, not the third, gives its scheduler.
    const auto stick = disk("1", "1");
    CHECK(writers::find_writer(rules, stick, "rotational").writer == &rules[0]);
    CHECK(writers::find_writer(rules, stick, "scheduler").writer == &rules[1]);
    // What a scheduler write leaves in queue/scheduler is not its value: the
    // fourth line may write, no more.
    const auto ra = writers::find_writer(rules, stick, "read_ahead_kb");
    REQUIRE(ra.writer == &rules[3]);
    CHECK(ra.selection.verdict == writers::Selects::may);
    // A fixed disk that spins: the first line passes it by, the third line's bfq.
    const auto fixed = disk("0", "1");
    CHECK(writers::find_writer(rules, fixed, "rotational").writer == nullptr);
    CHECK(writers::find_writer(rules, fixed, "scheduler").writer == &rules[2]);
    auto all = writers::writers_of(rules, stick);
    std::vector<int> lines;
    for (const auto& f : all) lines.push_back(f.writer->line);
    CHECK(lines == std::vector<int>{1, 2, 4});
    // A write that may happen leaves what it writes not known.
    auto maybe =
        writers::parse_udev_rules("61-maybe.rules",
                                  "KERNEL==\"sd*\", PROGRAM==\"/bin/is-flash\", ATTR{queue/rotational}=\"0\"\n"
                                  "KERNEL==\"sd*\", ATTR{queue/rotational}==\"1\", ATTR{queue/nr_requests}=\"64\"\n");
    REQUIRE(maybe.size() == 2);
    CHECK(writers::find_writer(maybe, fixed, "nr_requests").selection.verdict == writers::Selects::may);
}
