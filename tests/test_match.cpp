// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>

#include "policy/loader.hpp"
#include "policy/match.hpp"

using namespace blkpolicy::policy;

namespace {
Rule rule_from(const std::string& match_toml) {
    auto r = load_policy(
        {{"m.toml", "[[rule]]\nname = \"r\"\n[rule.match]\n" + match_toml + "\n[rule.set]\nnomerges = 1\n"}});
    REQUIRE(r.ok());
    return r.policy.rules.front();
}

DeviceFacts scsi_disk() {
    DeviceFacts f;
    f.name = "sda";
    f.driver = "sd";
    f.drivers = {"sd", "virtio_scsi", "virtio-pci"};
    f.vendor = "QEMU";
    f.model = "QEMU HARDDISK";
    f.serial = "drive-scsi0";
    f.rotational = true;
    f.properties = {{"ID_BUS", "scsi"}, {"ID_SERIAL_SHORT", "drive-scsi0"}};
    return f;
}
}  // namespace

TEST_CASE("match keys against facts") {
    const auto sda = scsi_disk();
    DeviceFacts crypt;
    crypt.name = "dm-0";
    crypt.stack = Stack::dm;
    crypt.dm_name = "luks-root";
    crypt.dm_uuid = "CRYPT-LUKS2-abc-luks-root";

    const struct {
        const char* match;
        const DeviceFacts* facts;
        bool expected;
    } cases[] = {
        {"kernel = \"sd*\"", &sda, true},
        {"kernel = \"sd[b-z]\"", &sda, false},
        {"kernel = [\"vd*\", \"sd?\"]", &sda, true},
        {"driver = \"sd\"", &sda, true},
        {"driver = \"virtio_scsi\"", &sda, true},  // any parent's driver, like udev DRIVERS
        {"driver = \"virtio_blk\"", &sda, false},
        {"model = \"QEMU HARDDISK\"", &sda, true},
        {"model = \"QEMU*\"", &sda, true},
        {"vendor = \"ATA\"", &sda, false},
        {"serial = \"drive-*\"", &sda, true},
        {"wwid = \"*\"", &sda, false},  // a missing fact never matches a pattern
        {"rotational = true", &sda, true},
        {"rotational = false", &sda, false},
        {"removable = false", &sda, true},
        {"stack = \"none\"", &sda, true},
        {"stack = [\"dm\", \"md\"]", &sda, false},
        {"stack = \"dm\"", &crypt, true},
        {"dm_uuid = \"CRYPT-*\"", &crypt, true},
        {"dm_uuid = \"LVM-*\"", &crypt, false},
        {"dm_name = \"luks-*\"\nstack = \"dm\"", &crypt, true},
        {"md_level = \"raid1\"", &crypt, false},
        {"driver = \"sd\"\nrotational = false", &sda, false},  // every key must match
        {"env.ID_BUS = \"scsi\"", &sda, true},
        {"env.ID_BUS = [\"ata\", \"usb\"]", &sda, false},
        {"env.ID_SERIAL_SHORT = \"drive-*\"", &sda, true},
        {"env.ID_WWN = \"*\"", &sda, false},  // a property the device lacks never matches
    };
    for (const auto& c : cases) {
        CAPTURE(c.match);
        CHECK(rule_matches(rule_from(c.match), *c.facts) == c.expected);
    }
}

TEST_CASE("a rule without match keys matches every device") {
    auto r = load_policy({{"m.toml", "[[rule]]\nname = \"all\"\n[rule.set]\nnomerges = 1\n"}});
    REQUIRE(r.ok());
    CHECK(rule_matches(r.policy.rules[0], scsi_disk()));
}

TEST_CASE("a policy reads only the fact groups its match keys use") {
    auto needs_of = [](const std::string& toml) {
        auto r = load_policy({{"n.toml", toml}});
        REQUIRE(r.ok());
        return fact_needs(r.policy);
    };
    const std::string set = "\n[rule.set]\nnomerges = 1\n";
    CHECK(needs_of("[[rule]]\nname = \"a\"\n[rule.match]\nkernel = \"loop*\"" + set) == 0u);
    CHECK(needs_of("[[rule]]\nname = \"a\"\n[rule.match]\nrotational = true" + set) == 0u);
    CHECK(needs_of("[[rule]]\nname = \"a\"\n[rule.match]\ndriver = \"sd\"" + set) == kFactDrivers);
    CHECK(needs_of("[[rule]]\nname = \"a\"\n[rule.match]\nmodel = \"X*\"\nserial = \"1\"" + set) ==
          (kFactModel | kFactSerial));
    CHECK(needs_of("[[rule]]\nname = \"a\"\n[rule.match]\ndm_name = \"vg-*\"" + set) == kFactStack);
    CHECK(needs_of("[[rule]]\nname = \"a\"\n[rule.match]\nenv.ID_BUS = \"ata\"" + set) == kFactProperties);
    // Planning write_cache compares with the device's cache mode.
    CHECK(needs_of(
              "[[rule]]\nname = \"a\"\n[rule.match]\nkernel = \"sd*\"\n[rule.set]\nwrite_cache = \"write back\"\n") ==
          kFactCache);
    // Two rules: the union.
    CHECK(needs_of("[[rule]]\nname = \"a\"\n[rule.match]\nwwid = \"x\"" + set +
                   "[[rule]]\nname = \"b\"\n[rule.match]\ndriver = \"nvme\"" + set) == (kFactWwid | kFactDrivers));
}

namespace {
// A USB flash drive's chain as the kernel lays it out (sdj, its SCSI
// device, host, the USB interface and the USB device, the xHCI): the levels
// udev's parent keys walk, the device first.
DeviceFacts usb_flash() {
    DeviceFacts f;
    f.name = "sdj";
    f.removable = true;
    using L = DeviceFacts::Level;
    f.levels = {L{"sdj", "block", "", {{"removable", "1"}}},
                L{"6:0:0:0", "scsi", "sd", {{"vendor", "QEMU"}}},
                L{"host6", "scsi", "", {}},
                L{"2-1:1.0", "usb", "usb-storage", {}},
                L{"2-1", "usb", "usb", {{"idVendor", "46f4"}, {"idProduct", "0001"}, {"removable", "removable"}}},
                L{"0000:01:00.0", "pci", "xhci_hcd", {}}};
    for (const auto& l : f.levels)
        for (const auto& [a, v] : l.attributes) f.parent_attributes[a].push_back(v);
    return f;
}
}  // namespace

TEST_CASE("a parent table: every test on one level, as udevd requires of one rule's parent keys") {
    const auto usb = usb_flash();
    const struct {
        const char* match;
        bool expected;
    } cases[] = {
        {"parent.subsystem = \"usb\"\nparent.attr.idVendor = \"46f4\"", true},
        {"parent.attr.idVendor = \"46f4\"\nparent.attr.idProduct = \"0001\"", true},
        {"parent.attr.idVendor = \"46f4\"\nparent.attr.idProduct = \"0002\"", false},
        // idVendor on the USB device, removable "1" on the disk: no one level has both...
        {"parent.attr.idVendor = \"46f4\"\nparent.attr.removable = \"1\"", false},
        // ...which attrs.NAME, each on a level of its own, does not ask.
        {"attrs.idVendor = \"46f4\"\nattrs.removable = \"1\"", true},
        {"parent.attr.idVendor = \"46f4\"\nparent.attr.removable = \"removable\"", true},
        // The interface has usb-storage, the device the generic usb driver.
        {"parent.driver = \"usb-storage\"\nparent.attr.idVendor = \"46f4\"", false},
        {"parent.driver = \"usb-storage\"\nparent.subsystem = \"usb\"", true},
        {"parent.kernel = \"2-1\"\nparent.attr.idProduct = [\"0001\", \"0002\"]", true},
        {"parent.kernel = \"sd*\"\nparent.subsystem = \"block\"", true},  // the device itself is a level
        {"parent.subsystem = \"scsi\"\nparent.attr.vendor = \"QEMU\"", true},
        {"parent.subsystem = \"usb\"\nparent.attr.vendor = \"QEMU\"", false},
        // An attribute a level lacks reads as "", which only "" matches.
        {"parent.kernel = \"host6\"\nparent.attr.vendor = \"\"", true},
        {"parent.kernel = \"host6\"\nparent.attr.vendor = \"*\"", false},
    };
    for (const auto& c : cases) {
        CAPTURE(c.match);
        CHECK(rule_matches(rule_from(c.match), usb) == c.expected);
    }
    // Under [rule.unless]: no level meets them all.
    auto unless = [&](const std::string& toml) {
        auto r = load_policy(
            {{"u.toml", "[[rule]]\nname = \"r\"\n[rule.unless]\n" + toml + "\n[rule.set]\nnomerges = 1\n"}});
        REQUIRE(r.ok());
        return rule_matches(r.policy.rules.front(), usb);
    };
    CHECK_FALSE(unless("parent.attr.idVendor = \"46f4\"\nparent.attr.idProduct = \"0001\""));
    CHECK(unless("parent.attr.idVendor = \"46f4\"\nparent.attr.removable = \"1\""));
    // A device without levels read (a policy with no parent table) matches none.
    CHECK_FALSE(rule_matches(rule_from("parent.subsystem = \"block\""), scsi_disk()));
}

TEST_CASE("a parent table asks discovery for every level, and the attributes it names") {
    auto r = load_policy({{"p.toml",
                           "[[rule]]\nname = \"r\"\n[rule.match]\nparent.subsystem = \"usb\"\n"
                           "parent.attr.idVendor = \"46f4\"\n[rule.unless]\nparent.attr.serial = \"x\"\n"
                           "attrs.nsid = \"1\"\n[rule.set]\nnomerges = 1\n"}});
    REQUIRE(r.ok());
    const auto names = attribute_names(r.policy);
    CHECK(names.levels);
    CHECK(names.level_attributes == std::set<std::string>{"idVendor", "serial"});
    CHECK(names.parents == std::set<std::string>{"nsid"});
    CHECK(fact_needs(r.policy) == kFactAttributes);
    CHECK_FALSE(attribute_names(load_policy({{"q.toml",
                                              "[[rule]]\nname = \"r\"\n[rule.match]\nattrs.nsid = \"1\"\n"
                                              "[rule.set]\nnomerges = 1\n"}})
                                    .policy)
                    .levels);
}
