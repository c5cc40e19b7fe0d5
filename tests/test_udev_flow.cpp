// SPDX-License-Identifier: MIT
// udev rules read the way udevd reads them: patterns as sets, the control
// flow of a file, and what follows for the devices a rule writes (the
// writer model) and for the policy it becomes (the importer), on rule files
// in the shapes the clouds ship (tests/data/udev-vendors).
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "policy/loader.hpp"
#include "policy/match.hpp"
#include "support/run_binary.hpp"
#include "writers/patterns.hpp"
#include "writers/udev_flow.hpp"
#include "writers/udev_import.hpp"
#include "writers/udev_rules.hpp"

using namespace blkpolicy::writers;
namespace policy = blkpolicy::policy;

namespace {

std::string vendor_file(const std::string& name) {
    return std::string(blkpolicy::test::test_data_dir()) + "/udev-vendors/" + name;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

ImportResult import_file(const std::string& name) {
    const auto path = vendor_file(name);
    return import_udev_rules(parse_udev_rules_text(name, read_text(path)), {name});
}

std::string diagnostics(const ImportResult& r) {
    std::string out;
    for (const auto& d : r.diagnostics) out += d + "\n";
    return out;
}

// A device as udevd would see it, in the three shapes of a real one: an
// NVMe namespace under its controller under a PCI function, a SCSI disk
// under its scsi_device, a virtio disk under its virtio device.
UdevDevice nvme(const std::string& name, const std::string& model, const std::string& nsid = "1") {
    UdevDevice d = UdevDevice::named(name);
    d.devpath = "/devices/pci0000:00/0000:00:04.0/nvme/nvme0/" + name;
    d.levels = {
        {name, "block", "", {{"nsid", nsid}, {"model", std::nullopt}, {"serial", std::nullopt}}},
        {"nvme0", "nvme", "", {{"nsid", std::nullopt}, {"model", model}, {"serial", "vol0123"}}},
        {"0000:00:04.0", "pci", "nvme", {{"nsid", std::nullopt}, {"model", std::nullopt}, {"serial", std::nullopt}}}};
    d.properties = {{"DEVTYPE", "disk"}, {"ID_MODEL", model}};
    d.properties_known = true;
    return d;
}

UdevDevice scsi(const std::string& name, const std::string& vendor, const std::string& model) {
    UdevDevice d = UdevDevice::named(name);
    d.devpath = "/devices/pci0000:00/0000:00:03.0/virtio2/host0/target0:0:0/0:0:0:0/block/" + name;
    d.levels = {{name, "block", "", {{"model", std::nullopt}}},
                {"0:0:0:0", "scsi", "sd", {{"model", model}}},
                {"target0:0:0", "scsi", "", {{"model", std::nullopt}}},
                {"host0", "scsi", "", {{"model", std::nullopt}}},
                {"virtio2", "virtio", "virtio_scsi", {{"model", std::nullopt}}}};
    d.properties = {{"DEVTYPE", "disk"}, {"ID_VENDOR", vendor}};
    d.properties_known = true;
    return d;
}

UdevDevice virtio(const std::string& name) {
    UdevDevice d = UdevDevice::named(name);
    d.devpath = "/devices/pci0000:00/0000:00:02.0/virtio1/block/" + name;
    d.levels = {{name, "block", "", {{"model", std::nullopt}}}, {"virtio1", "virtio", "virtio_blk", {}}};
    d.properties = {{"DEVTYPE", "disk"}};
    d.properties_known = true;
    return d;
}

// What each tuning assignment of the file does to the device.
std::vector<Selects> verdicts(const std::string& name, const UdevDevice& d) {
    std::vector<Selects> out;
    for (const auto& w : parse_udev_rules(name, read_text(vendor_file(name)))) out.push_back(w.selects(d).verdict);
    return out;
}

}  // namespace

TEST_CASE("udev patterns as sets: one holds all of another, or none of it") {
    const struct {
        const char* a;
        bool a_not;
        const char* b;
        bool b_not;
        Proven subset;
    } cases[] = {
        {"nvme*n*", false, "nvme*", false, Proven::yes},
        {"nvme*", false, "nvme*n*", false, Proven::no},
        {"nvme_card-pd", false, "nvme_card*", false, Proven::yes},
        {"sd*|vd*", false, "[sv]d*", false, Proven::yes},
        {"sd[a-z]", false, "sd?", false, Proven::yes},
        {"sd?", false, "sd[a-z]", false, Proven::no},
        {"nvme*n*", false, "sd*|vd*", true, Proven::yes},  // no nvme name is sd* or vd*
        {"Microsoft NVMe Direct Disk v2", false, "Microsoft NVMe Direct Disk", true, Proven::yes},
        {"*", false, "a*|[!a]*|", false, Proven::yes},  // every string, the empty one too
        {"add|change", false, "remove", true, Proven::yes},
        {"x[[:digit:]]", false, "x*", false, Proven::unknown},  // classes are not read
        {"a\\*", false, "a[*]", false, Proven::yes},            // an escaped star is a star
    };
    for (const auto& c : cases) {
        CAPTURE(c.a);
        CAPTURE(c.b);
        CHECK(subset({c.a, c.a_not}, {c.b, c.b_not}) == c.subset);
    }
    CHECK(disjoint({"nvme*"}, {"sd*|vd*"}) == Proven::yes);
    CHECK(disjoint({"nvme*"}, {"*n1"}) == Proven::no);
    CHECK(contains({"sd*", true}, "vda"));
    CHECK_FALSE(contains({"sd*|vd*"}, "nvme0n1"));
}

TEST_CASE("control flow: a GOTO taken skips to its LABEL; not taken, its tests' negation guards what follows") {
    auto rules = parse_udev_rules_text("f.rules",
                                       "KERNEL!=\"sd*\", GOTO=\"end\"\n"            // 1
                                       "ATTR{queue/nomerges}=\"1\"\n"               // 2: only sd*
                                       "LABEL=\"end\"\n"                            // 3
                                       "ATTR{queue/nomerges}=\"2\"\n"               // 4: everything
                                       "GOTO=\"missing\"\n"                         // 5: no such label: ignored
                                       "ATTR{queue/add_random}=\"0\"\n"             // 6: everything
                                       "KERNEL==\"vd*\", OPTIONS+=\"last_rule\"\n"  // 7: vd* stops here
                                       "ATTR{queue/iostats}=\"0\"\n"                // 8: not vd*
                                       "FOO==\"x\", ATTR{queue/iostats}=\"1\"\n"    // 9: udevd drops the line
    );
    auto w = parse_udev_rules("f.rules", [] {
        return std::string(
            "KERNEL!=\"sd*\", GOTO=\"end\"\nATTR{queue/nomerges}=\"1\"\nLABEL=\"end\"\nATTR{queue/nomerges}=\"2\"\n"
            "GOTO=\"missing\"\nATTR{queue/add_random}=\"0\"\nKERNEL==\"vd*\", OPTIONS+=\"last_rule\"\n"
            "ATTR{queue/iostats}=\"0\"\nFOO==\"x\", ATTR{queue/iostats}=\"1\"\n");
    }());
    REQUIRE(rules.size() == 9);
    REQUIRE(w.size() == 5);
    const auto sda = UdevDevice::named("sda"), vda = UdevDevice::named("vda");
    CHECK(w[0].line == 2);
    CHECK(w[0].selects(sda).verdict == Selects::yes);
    CHECK(w[0].selects(vda).verdict == Selects::no);
    CHECK(w[1].selects(vda).verdict == Selects::yes);  // past the label, every path joins again
    CHECK(w[2].selects(vda).verdict == Selects::yes);
    CHECK(w[3].line == 8);
    CHECK(w[3].selects(vda).verdict == Selects::no);
    CHECK(w[3].selects(sda).verdict == Selects::yes);
    CHECK(w[4].selects(sda).verdict == Selects::no);

    const auto conditions = line_conditions(rules);
    REQUIRE(conditions.size() == 9);
    CHECK(conditions[8].terms.empty());  // never applies
    REQUIRE(conditions[3].terms.size() == 1);
    CHECK(conditions[3].terms[0].literals.empty());  // line 4: always
}

TEST_CASE("conditions: each kind of test decided on the device, or named when nothing decides it") {
    const auto sda = scsi("sda", "Google", "PersistentDisk");
    const struct {
        const char* test;
        Selects on_sda;
        const char* because;  // for may
    } cases[] = {
        {"KERNEL==\"sd*\"", Selects::yes, ""},
        {"SUBSYSTEM==\"block\"", Selects::yes, ""},
        {"SUBSYSTEM==\"bdi\"", Selects::no, ""},
        {"ACTION==\"remove\"", Selects::no, ""},
        {"ACTION==\"add\"", Selects::yes, ""},
        {"DRIVER==\"sd\"", Selects::no, ""},  // the disk itself has no driver
        {"DRIVERS==\"sd\"", Selects::yes, ""},
        {"DRIVERS==\"nvme\"", Selects::no, ""},
        {"SUBSYSTEMS==\"scsi\"", Selects::yes, ""},
        {"KERNELS==\"0:0:0:0\"", Selects::yes, ""},
        {"ATTRS{model}==\"PersistentDisk\"", Selects::yes, ""},
        {"ATTRS{model}!=\"PersistentDisk\"", Selects::no, ""},  // the only level with a model has that one
        {"DRIVERS==\"sd\", ATTRS{model}==\"Persistent*\"", Selects::yes, ""},
        {"DRIVERS==\"virtio_scsi\", ATTRS{model}==\"Persistent*\"", Selects::no, ""},  // not on one level
        {"ENV{ID_VENDOR}==\"*Google*\"", Selects::yes, ""},
        {"ENV{ID_FS_TYPE}==\"btrfs\"", Selects::no, ""},  // not set reads as ""
        {"ENV{ID_FS_TYPE}!=\"btrfs\"", Selects::yes, ""},
        {"DEVPATH==\"/devices/pci0000:00/*\"", Selects::yes, ""},
        {"ATTR{queue/zoned}==\"host-managed\"", Selects::may, "ATTR{queue/zoned}==\"host-managed\""},  // not read
        {"PROGRAM==\"/bin/true\"", Selects::may, "PROGRAM at line 1"},
        {"TEST==\"/etc/x\"", Selects::may, "TEST==\"/etc/x\""},
        {"CONST{virt}==\"kvm\"", Selects::may, "CONST at line 1"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.test);
        auto w = parse_udev_rules("f.rules", std::string(c.test) + ", ATTR{queue/nr_requests}=\"64\"\n");
        REQUIRE(w.size() == 1);
        const auto s = w[0].selects(sda);
        CHECK(s.verdict == c.on_sda);
        CHECK(s.because == c.because);
    }
    // A device known by its name only: what the name decides, and nothing else.
    auto by_model = parse_udev_rules("f.rules", "KERNEL==\"sd*\", ATTRS{model}==\"x\", ATTR{queue/nomerges}=\"1\"\n");
    CHECK(by_model[0].selects(UdevDevice::named("vda")).verdict == Selects::no);
    CHECK(by_model[0].selects(UdevDevice::named("sda")).verdict == Selects::may);
}

TEST_CASE("a zoned-btrfs rule behind three GOTO guards names no disk its conditions exclude") {
    const auto file = std::string("64-zoned-btrfs.rules");
    auto plain = virtio("vda");
    CHECK(verdicts(file, plain) == std::vector<Selects>{Selects::no});  // no btrfs on it
    auto btrfs = virtio("vdb");
    btrfs.properties["ID_FS_TYPE"] = "btrfs";
    btrfs.levels[0].attributes["queue/zoned"] = "none";
    CHECK(verdicts(file, btrfs) == std::vector<Selects>{Selects::no});  // btrfs, not zoned
    btrfs.levels[0].attributes["queue/zoned"] = "host-managed";
    CHECK(verdicts(file, btrfs) == std::vector<Selects>{Selects::yes});
    auto unknown = UdevDevice::named("vdc");  // properties not read: it may, and says on what
    const auto w = parse_udev_rules(file, read_text(vendor_file(file)));
    REQUIRE(w.size() == 1);
    CHECK(w[0].line == 6);
    CHECK(w[0].selects(unknown).verdict == Selects::may);
    CHECK(w[0].selects(unknown).because == "ENV{ID_FS_TYPE}==\"btrfs\"");
}

TEST_CASE("the clouds' shapes, device by device: what udevd would write") {
    const auto ebs = nvme("nvme0n1", "Amazon Elastic Block Store");
    const auto local = nvme("nvme1n1", "Amazon EC2 NVMe Instance Storage");
    const auto other = nvme("nvme2n1", "QEMU NVMe Ctrl");
    // One io_timeout line per model.
    CHECK(verdicts("70-nvme-volumes.rules", ebs) == std::vector<Selects>{Selects::yes, Selects::no});
    CHECK(verdicts("70-nvme-volumes.rules", local) == std::vector<Selects>{Selects::no, Selects::yes});
    CHECK(verdicts("70-nvme-volumes.rules", other) == std::vector<Selects>{Selects::no, Selects::no});
    CHECK(verdicts("70-nvme-volumes.rules", virtio("vda")) == std::vector<Selects>{Selects::no, Selects::no});

    // Past a guard on a property a program imports, and a negated model guard.
    CHECK(verdicts("65-disk-names.rules", nvme("nvme0n1", "nvme_card-pd")) == std::vector<Selects>{Selects::yes});
    CHECK(verdicts("65-disk-names.rules", nvme("nvme0n1", "nvme_card")) == std::vector<Selects>{Selects::no});
    CHECK(verdicts("65-disk-names.rules", other) == std::vector<Selects>{Selects::no});
    CHECK(verdicts("65-disk-names.rules", scsi("sda", "Google", "PersistentDisk")) ==
          std::vector<Selects>{Selects::no});

    const auto gce_hdd = scsi("sdb", "Google", "PersistentDisk");
    auto spinning = gce_hdd;
    spinning.levels[0].attributes["queue/rotational"] = "1";
    CHECK(verdicts("99-spinning-vendor.rules", spinning) == std::vector<Selects>{Selects::yes});
    auto ssd = gce_hdd;
    ssd.levels[0].attributes["queue/rotational"] = "0";
    CHECK(verdicts("99-spinning-vendor.rules", ssd) == std::vector<Selects>{Selects::no});

    // Dispatched to labels: the three NVMe kinds reach io_timeout, SCSI and the rest do not.
    for (const char* model :
         {"Microsoft NVMe Direct Disk", "Microsoft NVMe Direct Disk v2", "MSFT NVMe Accelerator v1.0"}) {
        CAPTURE(model);
        CHECK(verdicts("80-nvme-dispatch.rules", nvme("nvme0n1", model)) == std::vector<Selects>{Selects::yes});
        CHECK(verdicts("80-nvme-dispatch.rules", nvme("nvme0n1", model, "2")) == std::vector<Selects>{Selects::yes});
    }
    auto msft_scsi = scsi("sda", "Msft", "Virtual Disk");
    msft_scsi.properties["ID_MODEL"] = "Virtual_Disk";
    CHECK(verdicts("80-nvme-dispatch.rules", msft_scsi) == std::vector<Selects>{Selects::no});
    CHECK(verdicts("80-nvme-dispatch.rules", other) == std::vector<Selects>{Selects::no});
}

TEST_CASE("import: the clouds' shapes convert, each to the devices udevd would write") {
    struct Case {
        const char* file;
        int converted;
        std::vector<std::string> in_toml;
    };
    const Case cases[] = {
        {"70-nvme-volumes.rules",
         2,
         {"# from 70-nvme-volumes.rules:11\n", "#   udev: line 3: its GOTO restates blkpolicy's scope",
          "[rule.match]\nkernel = \"nvme[0-9]*n[0-9]*\"\nmodel = \"Amazon Elastic Block "
          "Store\"\n[rule.set]\nio_timeout = "
          "4294967295\n",
          "[rule.match]\nkernel = \"nvme[0-9]*n[0-9]*\"\nmodel = \"Amazon EC2 NVMe Instance Storage\"\n[rule.set]\n"
          "io_timeout = 90000\n"}},
        {"65-disk-names.rules",
         1,
         {"#   udev: lines 3, 4: its GOTO restates blkpolicy's scope",
          "#   udev: lines 10, 11: its GOTO never skips this rule for a device it selects",
          "[rule.match]\nkernel = \"nvme*n*\"\nmodel = \"nvme_card-pd\"\n[rule.set]\nio_timeout = 4294967295\n"}},
        {"99-spinning-vendor.rules",
         1,
         {"[rule.match]\nenv.ID_VENDOR = \"*Google*\"\nrotational = true\n[rule.set]\nscheduler = \"none\"\n"}},
        {"80-nvme-dispatch.rules",
         1,
         {"#   udev: lines 5, 6, 7: its GOTO decides which devices reach this rule: part of the match",
          "[rule.match]\nkernel = \"nvme*\"\nenv.ID_MODEL = [\"Microsoft NVMe Direct Disk\", "
          "\"Microsoft NVMe Direct Disk v2\", \"MSFT NVMe Accelerator v1.0\"]\nattrs.nsid = \"?*\"\n[rule.set]\n"
          "io_timeout = 240000\n"}},
        {"64-zoned-btrfs.rules",
         1,
         {"[rule.match]\nenv.ID_FS_TYPE = \"btrfs\"\nattr.\"queue/zoned\" = \"host-managed\"\n[rule.set]\nscheduler = "
          "\"mq-deadline\"\n"}},
    };
    for (const auto& c : cases) {
        CAPTURE(c.file);
        const auto r = import_file(c.file);
        CAPTURE(r.toml);
        CAPTURE(diagnostics(r));
        CHECK(r.converted == c.converted);
        CHECK(r.tuning_rules == c.converted);
        CHECK(r.left_out == 0);
        CHECK(r.out_of_scope == 0);
        for (const auto& piece : c.in_toml) CHECK(r.toml.find(piece) != std::string::npos);
        const auto loaded = policy::load_policy({{c.file, r.toml}});
        CHECK(loaded.ok());
    }
}

TEST_CASE("import: the converted policy selects the devices udevd's reading selects, and no others") {
    // The dispatch file's one rule, matched by blkpolicy on the devices'
    // facts: the three NVMe models, not the SCSI disk nor another NVMe model.
    const auto r = import_file("80-nvme-dispatch.rules");
    const auto loaded = policy::load_policy({{"p", r.toml}});
    REQUIRE(loaded.ok());
    REQUIRE(loaded.policy.rules.size() == 1);
    auto facts = [](const std::string& name, const std::string& model) {
        policy::DeviceFacts f;
        f.name = name;
        f.properties = {{"DEVTYPE", "disk"}, {"ID_MODEL", model}};
        if (name.rfind("nvme", 0) == 0) f.parent_attributes["nsid"] = {"1"};
        return f;
    };
    const auto& rule = loaded.policy.rules[0];
    CHECK(policy::rule_matches(rule, facts("nvme0n1", "MSFT NVMe Accelerator v1.0")));
    CHECK(policy::rule_matches(rule, facts("nvme1n1", "Microsoft NVMe Direct Disk v2")));
    CHECK_FALSE(policy::rule_matches(rule, facts("nvme2n1", "QEMU NVMe Ctrl")));
    CHECK_FALSE(policy::rule_matches(rule, facts("sda", "Virtual_Disk")));
    auto no_nsid = facts("nvme3n1", "MSFT NVMe Accelerator v1.0");
    no_nsid.parent_attributes.clear();
    CHECK_FALSE(policy::rule_matches(rule, no_nsid));
}

TEST_CASE("import: a rule for something that is not a block device is named as out of scope, exit 1") {
    const auto r = import_file("53-nfs-readahead.rules");
    CHECK(r.tuning_rules == 0);
    CHECK(r.out_of_scope == 1);
    CHECK(
        diagnostics(r).find("53-nfs-readahead.rules:2: out of blkpolicy's scope: SUBSYSTEM==\"bdi\" writes attributes "
                            "of devices that are not block devices") != std::string::npos);
    auto cli = blkpolicy::test::run_blkpolicy({"import", vendor_file("53-nfs-readahead.rules")});
    CHECK(cli.exit_code == 1);
    CHECK(cli.err.find("1 rule(s) write attributes of devices that are not block devices (see above): out of "
                       "blkpolicy's scope, nothing converted") != std::string::npos);
    // The four tuning rules of the clouds' shapes, with it: all converted, exit 1 for the one out of scope.
    auto all = blkpolicy::test::run_blkpolicy(
        {"import", vendor_file("70-nvme-volumes.rules"), vendor_file("65-disk-names.rules"),
         vendor_file("99-spinning-vendor.rules"), vendor_file("80-nvme-dispatch.rules")});
    CHECK(all.exit_code == 0);
    CHECK(all.err.find("blkpolicy: 5 of 5 tuning rule(s) converted\n") != std::string::npos);
}
