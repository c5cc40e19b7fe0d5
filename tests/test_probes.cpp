// SPDX-License-Identifier: MIT
// udev/probes on fake trees: debugfs's wbt state, hardware queues, the
// stack neighbours, whether a medium is there, the CPU cache topology.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "support/fake_sysfs.hpp"
#include "udev/probes.hpp"

using namespace blkpolicy;
using test::FakeSysfs;

TEST_CASE("probes: wbt state only where debugfs shows it, in range") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    udev::Sysfs s(t.root());
    CHECK_FALSE(udev::read_wbt_state(s, "loop0"));  // debugfs not mounted
    t.set_wbt_state("loop0", 3);
    // Mounted since: not looked for again until the daemon's next pass says so.
    CHECK_FALSE(udev::read_wbt_state(s, "loop0"));
    s.forget_mounts();
    CHECK(udev::read_wbt_state(s, "loop0") == 3);
    t.set_wbt_state("loop0", 9);
    CHECK_FALSE(udev::read_wbt_state(s, "loop0"));
}

TEST_CASE("probes: hardware queues, stack neighbours, medium") {
    FakeSysfs t;
    t.add_nvme("nvme0n1");
    t.add_virtio_disk("vda", 1, "0000:00:02.0", 0);
    t.add_md("md0", "raid1", 0);
    t.stack("md0", "vda");
    udev::Sysfs s(t.root());
    CHECK(udev::count_hw_queues(s, "vda") > 0);
    CHECK(udev::count_hw_queues(s, "md0") == 0);  // bio-based
    CHECK(udev::stacked_neighbours(s, "vda") == std::vector<std::string>{"md0"});
    CHECK(udev::stacked_neighbours(s, "md0") == std::vector<std::string>{"vda"});
    CHECK(udev::stacked_neighbours(s, "nvme0n1").empty());
    CHECK(udev::has_medium(s, "vda"));
    t.file(t.devpath_of("vda") + "/size", "0");
    CHECK_FALSE(udev::has_medium(s, "vda"));
}

TEST_CASE("probes: one last-level cache for every CPU, or several") {
    FakeSysfs one;
    one.add_cpus(4, [](int) { return std::string("0-3"); });
    CHECK(udev::single_last_level_cache(udev::Sysfs(one.root())) == true);
    FakeSysfs two;
    two.add_cpus(4, [](int cpu) { return std::string(cpu < 2 ? "0-1" : "2-3"); });
    CHECK(udev::single_last_level_cache(udev::Sysfs(two.root())) == false);
    FakeSysfs none;
    CHECK_FALSE(udev::single_last_level_cache(udev::Sysfs(none.root())));
}

TEST_CASE("probes: the kernel's HZ from its config, wherever the line is") {
    FakeSysfs t;  // any scratch directory
    const auto path = (t.root() / "config-6.12.117+deb13-amd64").string();
    CHECK_FALSE(udev::kernel_hz(path));  // no config: unknown
    auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
    write("CONFIG_HZ=1000\nCONFIG_HZ_1000=y\n");
    CHECK(udev::kernel_hz(path) == 1000);  // the first line
    write(
        "#\n# Automatically generated file; DO NOT EDIT.\nCONFIG_HZ_250=y\n# CONFIG_HZ_1000 is not set\n"
        "CONFIG_HZ=250\nCONFIG_SCHED_HRTICK=y\n");
    CHECK(udev::kernel_hz(path) == 250);      // CONFIG_HZ_250=y is not the key
    write("CONFIG_HZ_250=y\nCONFIG_HZ=300");  // the last line, no newline after it
    CHECK(udev::kernel_hz(path) == 300);
    write("CONFIG_HZ_250=y\n# CONFIG_HZ=100\n");
    CHECK_FALSE(udev::kernel_hz(path));  // only a comment names it
    write("CONFIG_HZ=0\n");
    CHECK_FALSE(udev::kernel_hz(path));  // out of range
}
