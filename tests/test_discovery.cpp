// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>

#include <cerrno>
#include <fstream>

#include "support/fake_sysfs.hpp"
#include "udev/discovery.hpp"

using namespace blkpolicy;
using blkpolicy::test::FakeSysfs;

namespace {
policy::DeviceFacts facts(const udev::Sysfs& s, const std::string& name) {
    auto f = udev::read_facts(s, name);
    REQUIRE(f.has_value());
    return *f;
}
}  // namespace

TEST_CASE("the fake fleet mirrors the real layout") {
    FakeSysfs t;
    test::build_fleet(t);
    namespace fs = std::filesystem;
    CHECK(fs::is_symlink(t.root() / "block/sda"));
    CHECK(fs::read_symlink(t.root() / "block/sda").string() ==
          "../devices/pci0000:00/0000:00:03.0/virtio2/host0/target0:0:0/0:0:0:0/block/sda");
    CHECK(fs::read_symlink(t.root() / "block/vda").string() == "../devices/pci0000:00/0000:00:02.0/virtio1/block/vda");
    CHECK(fs::read_symlink(t.root() / t.devpath_of("vda") / "device").string() == "../../../virtio1");
    CHECK(fs::read_symlink(t.root() / "devices/pci0000:00/0000:00:02.0/virtio1/driver").string() ==
          "../../../../bus/virtio/drivers/virtio_blk");
    CHECK(t.read(t.devpath_of("sda") + "/device/model") == "QEMU HARDDISK   ");
    CHECK_FALSE(fs::exists(t.root() / "block/sda1"));  // partitions live inside their disk
    CHECK(fs::exists(t.root() / t.devpath_of("sda") / "sda1/partition"));
    CHECK_FALSE(fs::exists(t.root() / t.devpath_of("dm-1") / "queue/scheduler"));
    CHECK_FALSE(fs::exists(t.root() / t.devpath_of("dm-1") / "mq"));
}

TEST_CASE("device facts from the fake fleet") {
    FakeSysfs t;
    test::build_fleet(t);
    udev::Sysfs s(t.root());

    CHECK(udev::list_block_devices(s) ==
          std::vector<std::string>{"dm-0", "dm-1", "loop0", "md0", "nvme0n1", "sda", "vda", "vdb", "vdc", "zram0"});

    SUBCASE("SCSI QEMU HARDDISK") {
        auto f = facts(s, "sda");
        CHECK(f.devnum == "8:0");
        CHECK(f.driver == "sd");
        CHECK(f.drivers == std::vector<std::string>{"sd", "virtio_scsi", "virtio-pci"});
        CHECK(f.vendor == "QEMU");
        CHECK(f.model == "QEMU HARDDISK");
        CHECK(f.serial == "drive-scsi0");
        CHECK(f.wwid == "t10.QEMU    QEMU HARDDISK   drive-scsi0");
        CHECK(f.rotational);
        CHECK(f.request_based);
        CHECK(f.stack == policy::Stack::none);
        CHECK(f.cache_type == "write back");
        CHECK(f.scheduler == "mq-deadline");
        CHECK(f.holders.empty());  // dm-0 holds sda2, a partition, not the disk
    }
    SUBCASE("virtio disk") {
        auto f = facts(s, "vda");
        CHECK(f.driver == "virtio_blk");
        CHECK(f.vendor.empty());  // device/vendor is a PCI id, not a name
        CHECK(f.serial == "vd-serial-vda");
        CHECK(f.cache_type == "write back");
        CHECK(f.syspath == "devices/pci0000:00/0000:00:02.0/virtio1/block/vda");
        CHECK(f.properties.at("DEVTYPE") == "disk");  // from the uevent file, as udev's ENV{} sees it
        CHECK(f.properties.at("DEVNAME") == "vda");
    }
    SUBCASE("NVMe namespace under its controller") {
        auto f = facts(s, "nvme0n1");
        CHECK(f.driver == "nvme");
        CHECK(f.model == "QEMU NVMe Ctrl");
        CHECK(f.serial == "deadbeef");
        CHECK(f.wwid == "eui.0000000000000000525400123456");
        CHECK_FALSE(f.rotational);
    }
    SUBCASE("dm-crypt under LVM") {
        auto crypt = facts(s, "dm-0");
        CHECK(crypt.stack == policy::Stack::dm);
        CHECK(crypt.dm_name == "luks-root");
        CHECK(crypt.dm_uuid.rfind("CRYPT-", 0) == 0);
        CHECK(crypt.slaves == std::vector<std::string>{"sda2"});
        CHECK(crypt.holders == std::vector<std::string>{"dm-1"});
        CHECK_FALSE(crypt.request_based);
        CHECK(crypt.schedulers.empty());
        CHECK(crypt.driver.empty());
        auto lvm = facts(s, "dm-1");
        CHECK(lvm.dm_uuid.rfind("LVM-", 0) == 0);
        CHECK(lvm.slaves == std::vector<std::string>{"dm-0"});
    }
    SUBCASE("md raid1") {
        auto f = facts(s, "md0");
        CHECK(f.stack == policy::Stack::md);
        CHECK(f.md_level == "raid1");
        CHECK(f.slaves == std::vector<std::string>{"vdb", "vdc"});
        CHECK(facts(s, "vdb").holders == std::vector<std::string>{"md0"});
    }
    SUBCASE("bound loop and zram") {
        auto loop = facts(s, "loop0");
        CHECK(loop.stack == policy::Stack::loop);
        CHECK(loop.loop_backing_file == "/var/lib/images/disk.img");
        CHECK(loop.driver.empty());
        auto zram = facts(s, "zram0");
        CHECK(zram.stack == policy::Stack::none);
        CHECK_FALSE(zram.request_based);
        CHECK(zram.has_queue);
    }
    SUBCASE("names that are not devices") {
        CHECK_FALSE(udev::read_facts(s, "nosuch").has_value());
        CHECK_FALSE(udev::read_facts(s, "../block").has_value());
        CHECK_FALSE(udev::read_facts(s, "sda1").has_value());
    }
}

TEST_CASE("values: what a device has - normalised - nothing for what it lacks") {
    FakeSysfs t;
    test::build_fleet(t);
    udev::Sysfs s(t.root());
    auto vda = udev::read_values(s, "vda");
    CHECK(vda.at("scheduler") == "mq-deadline");
    CHECK(vda.at("read_ahead_kb") == "8192");
    CHECK(vda.at("iosched.fifo_batch") == "16");
    CHECK(vda.at("max_hw_sectors_kb") == "2147483647");
    CHECK(vda.count("device.timeout") == 0);
    auto sda = udev::read_values(s, "sda");
    CHECK(sda.at("device.timeout") == "30");
    CHECK(sda.at("device.queue_depth") == "128");
    auto zram = udev::read_values(s, "zram0");
    CHECK(zram.count("scheduler") == 0);
    CHECK(zram.count("wbt_lat_usec") == 0);
    CHECK(zram.count("nr_requests") == 0);
    CHECK(zram.count("rq_affinity") == 0);
    CHECK(zram.at("read_ahead_kb") == "128");
}

TEST_CASE("device names are validated") {
    CHECK(udev::valid_device_name("sda"));
    CHECK(udev::valid_device_name("dm-0"));
    CHECK(udev::valid_device_name("cciss!c0d0"));
    CHECK_FALSE(udev::valid_device_name(""));
    CHECK_FALSE(udev::valid_device_name(".."));
    CHECK_FALSE(udev::valid_device_name("sda/queue"));
    CHECK_FALSE(udev::valid_device_name("a b"));
}

TEST_CASE("the sysfs layer refuses to write outside its root") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    udev::Sysfs s(t.root());
    CHECK(s.write("/etc/passwd", "x") == EPERM);
    CHECK(s.write("block/loop0/../../../etc/x", "x") == EPERM);
    CHECK(s.write("", "x") == EPERM);
    CHECK(s.write("block/loop0/queue/nomerges", "1") == 0);
    CHECK(t.read(t.devpath_of("loop0") + "/queue/nomerges") == "1");
    // A resolved path that leads outside the root is not followed.
    std::filesystem::create_symlink("/", t.root() / "escape");
    CHECK_FALSE(s.resolve("escape").has_value());
}

TEST_CASE("facts are read per need, and identity falls back without a diskseq") {
    FakeSysfs t;
    test::build_fleet(t);
    udev::Sysfs s(t.root());

    SUBCASE("basics only") {
        auto f = udev::read_facts(s, "sda", {}, 0);
        REQUIRE(f.has_value());
        CHECK(f->read == 0u);
        CHECK(f->devnum == "8:0");
        CHECK_FALSE(f->diskseq.empty());
        CHECK(f->rotational);
        CHECK(f->request_based);
        CHECK(f->schedulers.size() > 1);
        // Groups not asked for are not read.
        CHECK(f->drivers.empty());
        CHECK(f->model.empty());
        CHECK(f->serial.empty());
        CHECK(f->cache_type.empty());
        CHECK(f->properties.empty());
    }
    SUBCASE("one group") {
        auto f = udev::read_facts(s, "sda", {}, policy::kFactModel);
        REQUIRE(f.has_value());
        CHECK(f->model == "QEMU HARDDISK");
        CHECK(f->vendor == "QEMU");
        CHECK(f->serial.empty());
        CHECK(f->drivers.empty());
    }
    SUBCASE("the same facts as reading everything, for what was asked") {
        auto all = facts(s, "dm-1");
        auto some = udev::read_facts(s, "dm-1", {}, policy::kFactStack | policy::kFactTopology);
        REQUIRE(some.has_value());
        CHECK(some->stack == all.stack);
        CHECK(some->dm_name == all.dm_name);
        CHECK(some->dm_uuid == all.dm_uuid);
        CHECK(some->slaves == all.slaves);
        CHECK(all.read == policy::kAllFacts);
    }
    SUBCASE("no diskseq: what names the device is read whatever was asked") {
        std::filesystem::remove(t.root() / t.devpath_of("sda") / "diskseq");
        auto f = udev::read_facts(s, "sda", {}, 0);
        REQUIRE(f.has_value());
        CHECK(f->diskseq.empty());
        CHECK((f->read & policy::kIdentityFacts) == policy::kIdentityFacts);
        CHECK(f->serial == "drive-scsi0");
        CHECK(f->driver == "sd");
    }
}

TEST_CASE("a parent table's levels: the device and each parent that is a device, with the attributes named") {
    FakeSysfs t;
    test::build_fleet(t);
    udev::Sysfs s(t.root());
    policy::AttributeNames names;
    names.levels = true;
    names.level_attributes = {"model", "vendor"};
    auto f = udev::read_facts(s, "sda", {}, policy::kFactAttributes, names);
    REQUIRE(f.has_value());
    std::vector<std::string> seen;
    for (const auto& l : f->levels) seen.push_back(l.kernel + "|" + l.subsystem + "|" + l.driver);
    std::string shown;
    for (const auto& l : seen) shown += l + " ";
    CAPTURE(shown);
    CHECK(seen == std::vector<std::string>{"sda|block|", "0:0:0:0|scsi|sd", "target0:0:0|scsi|", "host0|scsi|",
                                           "virtio2|virtio|virtio_scsi", "0000:00:03.0|pci|virtio-pci",
                                           "pci0000:00||"});
    REQUIRE(f->levels.size() > 1);
    CHECK(f->levels[0].attributes.empty());  // the disk has no model of its own
    CHECK(f->levels[1].attributes ==
          std::map<std::string, std::string>{{"model", "QEMU HARDDISK"}, {"vendor", "QEMU"}});
    // Without a parent table, no levels are read.
    policy::AttributeNames parents_only;
    parents_only.parents = {"model"};
    auto plain = udev::read_facts(s, "sda", {}, policy::kFactAttributes, parents_only);
    REQUIRE(plain.has_value());
    CHECK(plain->levels.empty());
    CHECK(plain->parent_attributes.at("model") == std::vector<std::string>{"QEMU HARDDISK"});
}

TEST_CASE("sysfs reads: attributes past one buffer, links resolved to the same directory") {
    FakeSysfs t;
    test::build_fleet(t);
    udev::Sysfs s(t.root());
    const std::string big(10000, 'x');
    t.file(t.devpath_of("vda") + "/big", big);
    CHECK(s.read("block/vda/big").value == big + "\n");
    CHECK(s.read("block/vda/dev").value == "254:0\n");
    // block/<name> resolves to the device's own directory, as canonical() says.
    CHECK(s.resolve("block/vda") == t.devpath_of("vda"));
    CHECK(s.resolve("block/dm-1") == t.devpath_of("dm-1"));
    // A link whose target leads outside the root is refused.
    std::filesystem::create_symlink("../../../../etc", t.root() / "block/evil");
    CHECK_FALSE(s.resolve("block/evil").has_value());
    CHECK_FALSE(s.resolve("block/nosuch").has_value());
}

namespace {
// An ATA Information VPD page (0x89) as libata builds it: 60 bytes of SAT
// header and signature, then the 512-byte IDENTIFY DEVICE data, whose
// strings keep two characters per 16-bit word, the first in the high byte.
std::string vpd89_with_model(const std::string& model) {
    std::string page(572, '\0');
    page[1] = static_cast<char>(0x89);
    page[2] = 0x02;
    page[3] = 0x38;
    std::string padded = model;
    padded.resize(40, ' ');
    for (std::size_t i = 0; i < 40; i += 2) {
        page[60 + 54 + i] = padded[i + 1];
        page[60 + 54 + i + 1] = padded[i];
    }
    return page;
}
}  // namespace

TEST_CASE("a SATA disk's model is the whole ATA model, not the 16 characters of its SCSI inquiry") {
    FakeSysfs t;
    t.add_scsi_disk("sda", "0:0:0:0", "ATA     ", "WDC WD40EFRX-68N", "write back", true, 0);
    CHECK(facts(udev::Sysfs(t.root()), "sda").model == "WDC WD40EFRX-68N");  // no VPD page 0x89: the inquiry
    t.file(t.devpath_of("sda") + "/device/vpd_pg89", vpd89_with_model("WDC WD40EFRX-68N32N0"));
    udev::Sysfs s(t.root());
    auto f = facts(s, "sda");
    CHECK(f.model == "WDC WD40EFRX-68N32N0");  // what udev's ID_MODEL, lsblk and smartctl say
    CHECK(f.vendor == "ATA");
    // A page that is not 0x89, or garbage in it, leaves the inquiry model.
    auto bad = vpd89_with_model("WDC WD40EFRX-68N32N0");
    bad[1] = static_cast<char>(0x80);
    t.file(t.devpath_of("sda") + "/device/vpd_pg89", bad);
    CHECK(facts(s, "sda").model == "WDC WD40EFRX-68N");
}

TEST_CASE("inputs of the kernel's defaults: VPD B1h rotation rate, hardware queue depth") {
    FakeSysfs t;
    t.add_scsi_disk("sda", "0:0:0:0", "SEAGATE ", "ST4000NM0035    ", "write back", true, 0);
    udev::Sysfs s(t.root());
    CHECK_FALSE(udev::rotation_rate(s, "sda"));
    t.file(t.devpath_of("sda") + "/device/vpd_pgb1",
           std::string("\x00\xb1\x00\x3c\x1c\x20", 6) + std::string(58, '\0'));
    CHECK(udev::rotation_rate(s, "sda") == 7200);
    t.file(t.devpath_of("sda") + "/device/vpd_pgb1",
           std::string("\x00\xb1\x00\x3c\x00\x01", 6) + std::string(58, '\0'));
    CHECK(udev::rotation_rate(s, "sda") == 1);
    CHECK(udev::hw_tags(s, "sda") == 128);
}

TEST_CASE("schedulers a kernel can load when named, found as modprobe finds them") {
    FakeSysfs t;  // any scratch directory
    const auto dir = t.root() / "lib/modules/7.3.4+bpo-amd64";
    std::filesystem::create_directories(dir);
    CHECK_FALSE(udev::loadable_schedulers(dir.string()));  // unreadable: unknown, not "none"

    // Debian's kernels (6.1, 6.12, 7.3) as shipped: only bfq.ko declares an
    // alias; kyber is kyber-iosched.ko, whose own name is what the elevator
    // asks modprobe for; mq-deadline is built in under its alias.
    std::ofstream(dir / "modules.alias") << "# Aliases extracted from modules themselves.\n"
                                            "alias bfq-iosched bfq\n"
                                            "alias pci:v00001AF4d00001001sv*sd*bc*sc*i* virtio_blk\n"
                                            "alias -iosched nothing\n";
    SUBCASE("modules.alias alone: kyber is missed (what the lookup got wrong)") {
        CHECK(udev::loadable_schedulers(dir.string()) == std::vector<std::string>{"bfq"});
    }
    SUBCASE("modules.dep's module names: kyber, compressed or not") {
        std::ofstream(dir / "modules.dep")
            << "kernel/block/bfq.ko.xz:\n"
               "kernel/block/kyber-iosched.ko.xz:\n"
               "kernel/drivers/block/virtio_blk.ko.xz: kernel/drivers/virtio/virtio.ko.xz\n"
               "kernel/fs/iosched-notes.ko:\n"
               "kernel/block/-iosched.ko:\n";
        CHECK(udev::loadable_schedulers(dir.string()) == std::vector<std::string>{"bfq", "kyber"});
        std::ofstream(dir / "modules.dep") << "kernel/block/kyber_iosched.ko:\n";  // '_' is '-' to modprobe
        CHECK(udev::loadable_schedulers(dir.string()) == std::vector<std::string>{"bfq", "kyber"});
    }
    SUBCASE("modules.builtin: a scheduler built in under its module name") {
        std::ofstream(dir / "modules.builtin") << "kernel/block/mq-deadline.ko\nkernel/block/kyber-iosched.ko\n";
        CHECK(udev::loadable_schedulers(dir.string()) == std::vector<std::string>{"bfq", "kyber"});
    }
    SUBCASE("only the lines naming iosched count, wherever they are in the file") {
        // The first line, tabs, a second hit on one line, the last line
        // without a newline; a module whose dependency is a scheduler is not one.
        std::ofstream(dir / "modules.alias", std::ios::trunc) << "alias\tmq-deadline-iosched\tmq_deadline\n"
                                                                 "alias of:N*T*Ciosched-notes nothing\n"
                                                                 "alias kyber_iosched kyber_iosched # iosched\n"
                                                                 "alias bfq-iosched bfq";
        std::ofstream(dir / "modules.dep") << "kernel/drivers/md/dm-iosched-test.ko: kernel/block/bfq.ko\n"
                                              "kernel/block/adios-iosched.ko.zst:";
        CHECK(udev::loadable_schedulers(dir.string()) ==
              std::vector<std::string>{"adios", "bfq", "kyber", "mq-deadline"});
    }
    SUBCASE("modules.dep without modules.alias is still read") {
        std::filesystem::remove(dir / "modules.alias");
        std::ofstream(dir / "modules.dep") << "kernel/block/kyber-iosched.ko:\n";
        CHECK(udev::loadable_schedulers(dir.string()) == std::vector<std::string>{"kyber"});
    }
}
