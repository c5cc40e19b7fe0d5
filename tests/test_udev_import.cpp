// SPDX-License-Identifier: MIT
// udev rule syntax and the conversion into policy.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "policy/loader.hpp"
#include "policy/match.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"
#include "writers/udev_import.hpp"
#include "writers/udev_rules.hpp"

using namespace blkpolicy::policy;
using namespace blkpolicy::writers;
using blkpolicy::test::matches_golden;
using blkpolicy::test::run_blkpolicy;

namespace {

// Whether one of the import's diagnostics starts with PREFIX.
bool says(const ImportResult& r, const std::string& prefix) {
    return std::any_of(r.diagnostics.begin(), r.diagnostics.end(),
                       [&](const std::string& d) { return d.rfind(prefix, 0) == 0; });
}

}  // namespace

TEST_CASE("udev tokens: operators, braces, quoting, continuations, comments") {
    auto rules =
        parse_udev_rules_text("f.rules",
                              "# comment\n"
                              "\n"
                              "ACTION==\"add|change\", KERNEL!=\"loop*\", ATTR{queue/scheduler}:=\"none\", \\\n"
                              "  ENV{X}+=\"a \\\"quoted\\\" b\", TAG-=\"t\",RUN=\"/bin/true\"\n"
                              "KERNEL==\"sda\" ATTR{queue/nomerges}=\"1\"\n");
    REQUIRE(rules.size() == 2);
    const auto& r = rules[0];
    CHECK(r.line == 3);
    CHECK(r.error.empty());
    REQUIRE(r.tokens.size() == 6);
    CHECK(r.tokens[0].key == "ACTION");
    CHECK(r.tokens[0].op == UdevOp::match);
    CHECK(r.tokens[1].op == UdevOp::nomatch);
    CHECK(r.tokens[2].attr == "queue/scheduler");
    CHECK(r.tokens[2].op == UdevOp::assign_final);
    CHECK(r.tokens[3].value == "a \"quoted\" b");
    CHECK(r.tokens[3].op == UdevOp::add);
    CHECK(r.tokens[4].op == UdevOp::remove);
    CHECK(r.tokens[5].op == UdevOp::assign);
    CHECK(rules[1].line == 5);
    CHECK(rules[1].tokens.size() == 2);  // separated by a blank only, as udev allows
}

TEST_CASE("udev tokens: malformed lines say what is wrong") {
    const struct {
        const char* text;
        const char* error;
    } cases[] = {
        {"KERNEL==sda", "expected a quoted value after KERNEL=="},
        {"KERNEL~\"sda\"", "expected an operator after KERNEL"},
        {"ATTR{queue/x=\"1\"", "unterminated { after ATTR"},
        {"KERNEL==\"sda", "unterminated value of KERNEL"},
        {"==\"x\"", "expected a key at column 1"},
    };
    for (const auto& c : cases) {
        auto r = parse_udev_rules_text("f", c.text);
        REQUIRE(r.size() == 1);
        CHECK(r[0].error == c.error);
    }
}

TEST_CASE("udev patterns: alternatives and classes") {
    CHECK(udev_pattern_match("sd[a-z]|vd*", "vdb"));
    CHECK(udev_pattern_match("sd[a-z]|vd*", "sdc"));
    CHECK_FALSE(udev_pattern_match("sd[a-z]|vd*", "sda1"));
    CHECK(udev_pattern_match("sd*[!0-9]", "sdab"));
    CHECK_FALSE(udev_pattern_match("sd*[!0-9]", "sda1"));
    CHECK(udev_pattern_match("nvme[^a]*", "nvme0n1"));
    CHECK(udev_pattern_match("sd?", "sdz"));
}

TEST_CASE("import: a converted rule never matches more than the original") {
    // Every condition no device fact decides leaves the rule out rather than drop it.
    const char* unexpressible[] = {
        "PROGRAM==\"/bin/x\"",
        "TEST==\"/sys/x\"",
        "RESULT==\"1\"",
        "SUBSYSTEMS!=\"scsi\"",
        "TAGS==\"systemd\"",
        "CONST{virt}==\"kvm\"",
        "IMPORT{builtin}==\"blkid\"",
        "KERNELS!=\"host*\"",
        "DEVPATH==\"/devices/virtual/*\"",
        "ATTRS{vendor}==\"ATA\", ATTRS{queue_depth}!=\"32\"",
        "ATTRS{vendor}==\"ATA\", ATTRS{vendor}==\"A*\"",
        "ATTRS{vendor}==\"ATA\", TAGS==\"systemd\"",
    };
    for (const char* cond : unexpressible) {
        CAPTURE(cond);
        auto rules = parse_udev_rules_text(
            "f.rules", std::string("ACTION==\"add|change\", ") + cond + ", ATTR{queue/read_ahead_kb}=\"128\"\n");
        auto r = import_udev_rules(rules, {"f.rules"});
        CHECK(r.converted == 0);
        CHECK(r.left_out == 1);
        auto loaded = load_policy({{"out", r.toml}});
        CHECK(loaded.ok());
        CHECK(loaded.policy.rules.empty());
    }
}

TEST_CASE("import: negations and sysfs attributes convert exactly, as udevd decides them") {
    const struct {
        const char* condition;
        const char* match;  // the converted rule's [rule.match] and [rule.unless] lines
    } cases[] = {
        {"KERNEL!=\"sda\"", "[rule.unless]\nkernel = \"sda\"\n"},
        {"ENV{ID_BUS}!=\"usb\"", "[rule.unless]\nenv.ID_BUS = \"usb\"\n"},
        // udevd starts its parent walk at the disk, which has no driver: DRIVERS!= holds there.
        {"DRIVERS!=\"sd\", KERNEL==\"sd*\"", "[rule.match]\nkernel = \"sd*\"\n"},
        {"ATTR{size}==\"0\"", "[rule.match]\nattr.size = \"0\"\n"},
        {"ATTR{queue/zoned}==\"host-managed\"", "[rule.match]\nattr.\"queue/zoned\" = \"host-managed\"\n"},
        {"ATTRS{queue_depth}==\"32\"", "[rule.match]\nattrs.queue_depth = \"32\"\n"},
        // Missing, the attribute fails != as well: present and not "x".
        {"ATTRS{nsid}!=\"1\"", "[rule.match]\nattrs.nsid = \"?*\"\n[rule.unless]\nattrs.nsid = \"1\"\n"},
        {"ATTRS{model}==\"QEMU HARDDISK   \"", "[rule.match]\nmodel = \"QEMU HARDDISK\"\n"},
        {"ATTR{queue/rotational}==\"0|1\", KERNEL==\"vd*\"", "[rule.match]\nkernel = \"vd*\"\n"},
        // Parent tests of one line hold on one device of the walk: a parent
        // table. Model, vendor and wwid alone stay the device's own facts.
        {"ATTRS{vendor}==\"ATA\", ATTRS{model}==\"WDC*\"", "[rule.match]\nvendor = \"ATA\"\nmodel = \"WDC*\"\n"},
        {"SUBSYSTEMS==\"usb\", ATTRS{idVendor}==\"0781\", ATTRS{idProduct}==\"5581|5583\"",
         "[rule.match]\nparent.subsystem = \"usb\"\nparent.attr.idVendor = \"0781\"\nparent.attr.idProduct = "
         "[\"5581\", \"5583\"]\n"},
        {"DRIVERS==\"ahci\", ATTRS{vendor}==\"ATA\"",
         "[rule.match]\nparent.driver = \"ahci\"\nparent.attr.vendor = \"ATA\"\n"},
        {"KERNELS==\"host6\"", "[rule.match]\nparent.kernel = \"host6\"\n"},
        {"SUBSYSTEMS==\"usb\"", "[rule.match]\nparent.subsystem = \"usb\"\n"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.condition);
        auto r = import_udev_rules(
            parse_udev_rules_text("f.rules", std::string(c.condition) + ", ATTR{queue/nomerges}=\"1\"\n"), {"f.rules"});
        CHECK(r.converted == 1);
        CHECK(r.toml.find(std::string(c.match) + "[rule.set]\nnomerges = 1\n") != std::string::npos);
        CHECK(load_policy({{"out", r.toml}}).ok());
    }
}

TEST_CASE("import: a line's parent tests on one device, a skipped line's as an unless table, two lines' refused") {
    // GOTO past the tuning line where the USB stick is found: no level of the
    // device may meet both tests.
    auto r =
        import_udev_rules(parse_udev_rules_text("f.rules",
                                                "ATTRS{idVendor}==\"0781\", ATTRS{idProduct}==\"5581\", GOTO=\"end\"\n"
                                                "KERNEL==\"sd*\", ATTR{queue/nomerges}=\"1\"\nLABEL=\"end\"\n"),
                          {"f.rules"});
    CHECK(r.converted == 1);
    CHECK(r.toml.find("[rule.unless]\nparent.attr.idVendor = \"0781\"\nparent.attr.idProduct = \"5581\"\n") !=
          std::string::npos);
    auto loaded = load_policy({{"out", r.toml}});
    REQUIRE(loaded.ok());
    REQUIRE(loaded.policy.rules.size() == 1);
    DeviceFacts stick, other;
    stick.name = other.name = "sdb";
    stick.levels = {{"sdb", "block", "", {}}, {"1-1", "usb", "usb", {{"idVendor", "0781"}, {"idProduct", "5581"}}}};
    other.levels = {{"sdb", "block", "", {}}, {"1-1", "usb", "usb", {{"idVendor", "0781"}, {"idProduct", "5530"}}}};
    CHECK_FALSE(rule_matches(loaded.policy.rules[0], stick));
    CHECK(rule_matches(loaded.policy.rules[0], other));

    // Two lines' parent tests: udevd meets each on a device of its own,
    // which one table (every test on one device) would narrow.
    auto two =
        import_udev_rules(parse_udev_rules_text("g.rules",
                                                "SUBSYSTEMS==\"usb\", GOTO=\"tune\"\nGOTO=\"end\"\nLABEL=\"tune\"\n"
                                                "ATTRS{idVendor}==\"0781\", ATTRS{idProduct}==\"5581\", "
                                                "ATTR{queue/nomerges}=\"1\"\nLABEL=\"end\"\n"),
                          {"g.rules"});
    CHECK(two.converted == 0);
    CHECK(two.left_out == 1);
    std::string diags;
    for (const auto& d : two.diagnostics) diags += d + "\n";
    CHECK(diags.find("a rule has one parent table") != std::string::npos);
}

TEST_CASE("import: values blkpolicy would reject are left out with the check's own message") {
    auto rules = parse_udev_rules_text("f.rules",
                                       "KERNEL==\"sd*\", ATTR{queue/write_cache}=\"write backwards\", "
                                       "ATTR{queue/read_ahead_kb}=\"-1\", ATTR{queue/nomerges}=\"2\"\n");
    auto r = import_udev_rules(rules, {"f.rules"});
    CHECK(r.converted == 1);
    CHECK(r.left_out == 0);
    CHECK(r.attributes_left_out == 2);
    REQUIRE(r.diagnostics.size() == 2);
    CHECK(r.diagnostics[0].find("write_cache = \"write backwards\" is not exactly one of") != std::string::npos);
    CHECK(r.diagnostics[1].find("read_ahead_kb = -1 is negative") != std::string::npos);
}

TEST_CASE("import: write through is carried over with the acknowledgement and a warning") {
    auto rules = parse_udev_rules_text("f.rules", "KERNEL==\"sdb\", ATTR{queue/write_cache}=\"write through\"\n");
    auto r = import_udev_rules(rules, {"f.rules"});
    CHECK(r.converted == 1);
    auto loaded = load_policy({{"out", r.toml}});
    REQUIRE(loaded.ok());
    CHECK(loaded.policy.rules[0].acknowledge.count(kAckWriteThrough) == 1);
    REQUIRE(r.diagnostics.size() == 1);
    CHECK(r.diagnostics[0].find("warning: the rule sets write_cache to write through") != std::string::npos);
}

TEST_CASE("golden: import of a udev rules file with every case") {
    auto r = run_blkpolicy({"import", "udev-import/60-block.rules"}, blkpolicy::test::test_data_dir());
    CHECK(r.exit_code == 1);  // some rules were left out
    std::string hint;
    bool same = matches_golden("import-60-block.toml", r.out, hint);
    CHECK_MESSAGE(same, hint);
    same = matches_golden("import-60-block.stderr", r.err, hint);
    CHECK_MESSAGE(same, hint);
    // what comes out passes check
    blkpolicy::test::TempDir tmp;
    const auto out = (tmp.path() / "converted.toml").string();
    std::ofstream(out) << r.out;
    auto check = run_blkpolicy({"check", "--policy", out});
    CHECK(check.exit_code == 0);
    CHECK(check.out == "policy OK: 7 rule(s) from 1 file(s)\n");
}

TEST_CASE("import of udev rules: a file without tuning converts to nothing, says so, exits 0") {
    auto r = run_blkpolicy({"import", "udev-import/99-no-tuning.rules"}, blkpolicy::test::test_data_dir());
    CHECK(r.exit_code == 0);
    CHECK(r.out.empty());
    CHECK(r.err ==
          "blkpolicy: nothing that tunes block queues (queue/, bdi/, md/ or device/ writes) in 1 source(s): "
          "nothing to convert\n");
    CHECK(run_blkpolicy({"import"}).exit_code == 2);
    CHECK(run_blkpolicy({"import", "/nonexistent.rules"}).exit_code == 2);
}

TEST_CASE("import-udev, deprecated in 0.2.0: says so on stderr, otherwise import --from udev to the byte") {
    const std::string note =
        "blkpolicy: note: 'import-udev' is deprecated since 0.2.0 and is removed in 0.3.0; 'blkpolicy import' "
        "converts udev rules the same way (see NEWS.md)\n";
    auto old_name = run_blkpolicy({"import-udev", "udev-import/60-block.rules"}, blkpolicy::test::test_data_dir());
    auto new_name =
        run_blkpolicy({"import", "--from", "udev", "udev-import/60-block.rules"}, blkpolicy::test::test_data_dir());
    CHECK(old_name.exit_code == new_name.exit_code);
    CHECK(old_name.out == new_name.out);
    CHECK(!new_name.out.empty());
    CHECK(old_name.err == note + new_name.err);
    // Usage errors are still usage errors, after the note.
    auto bare = run_blkpolicy({"import-udev"});
    CHECK(bare.exit_code == 2);
    CHECK(bare.err.rfind(note, 0) == 0);
}

TEST_CASE("import: env matches see uevent properties of the fake tree") {
    // ENV{MAJOR}=="252" converts to env.MAJOR, which facts read from the
    // uevent file; ENV{DEVTYPE}=="disk" only restates blkpolicy's scope.
    auto rules = parse_udev_rules_text(
        "f.rules", "ENV{DEVTYPE}==\"disk\", ENV{MAJOR}==\"252\", KERNEL==\"vda\", ATTR{queue/nomerges}=\"1\"\n");
    auto r = import_udev_rules(rules, {"f.rules"});
    auto loaded = load_policy({{"out", r.toml}});
    REQUIRE(loaded.ok());
    REQUIRE(loaded.policy.rules.size() == 1);
    REQUIRE(loaded.policy.rules[0].match.size() == 2);
    CHECK(loaded.policy.rules[0].match[0].key == MatchKey::env);
    CHECK(loaded.policy.rules[0].match[0].name == "MAJOR");
    CHECK(loaded.policy.rules[0].match[1].key == MatchKey::kernel);
}

TEST_CASE("import: bytes that are not UTF-8 never make the output invalid TOML (found by fuzz_udev)") {
    const std::string text =
        "KERNEL==\"sd\xff\", ATTR{queue/nomerges}=\"1\"\n# \xc3\x28 stray\nKERNEL==\"vda\", ATTR{queue/nomerges}=\"1\" "
        "\x01\n"
        "x \xf6\xbe\xbc\xab y\nKERNEL==\"\xed\xa0\x80\", ATTR{queue/nomerges}=\"1\"\nKERNEL==\"\xc0\xaf\", "
        "ATTR{queue/nomerges}=\"1\"\n";
    auto r = import_udev_rules(parse_udev_rules_text("f\xfe.rules", text), {"f\xfe.rules"});
    auto loaded = load_policy({{"out", r.toml}});
    for (const auto& e : loaded.errors) MESSAGE(e.str());
    CHECK(loaded.ok());
    for (const auto& d : r.diagnostics) CHECK(d.find("internal error") == std::string::npos);
    CHECK(r.left_out >= 1);
}

TEST_CASE("import: a key matched twice cannot become one policy key (found by fuzz_udev)") {
    auto twice = import_udev_rules(
        parse_udev_rules_text("f.rules", "KERNEL==\"sd*\", KERNEL==\"*a\", ATTR{queue/nomerges}=\"1\"\n"), {"f.rules"});
    CHECK(twice.converted == 0);
    CHECK(load_policy({{"out", twice.toml}}).ok());
    auto same = import_udev_rules(
        parse_udev_rules_text("f.rules", "KERNEL==\"sd*\", KERNEL==\"sd*\", ATTR{queue/nomerges}=\"1\"\n"),
        {"f.rules"});
    CHECK(same.converted == 1);
    CHECK(load_policy({{"out", same.toml}}).ok());
    auto odd_env = import_udev_rules(parse_udev_rules_text("f.rules", "ENV{A.B}==\"x\", ATTR{queue/nomerges}=\"1\"\n"),
                                     {"f.rules"});
    CHECK(odd_env.converted == 0);
    CHECK(load_policy({{"out", odd_env.toml}}).ok());
}

TEST_CASE("import: every udev key is a condition, an effect or control flow; no condition is ever dropped") {
    // KEY-part of a rule that also sets nr_requests on every nvme disk.
    struct Case {
        const char* token;
        const char* outcome;  // "converted", "noted" (converted, the token listed as not converted), "named"
                              // (converted, the token left out by name: exit 1), "left out"
        const char* why;      // a part of the reason, for what is left out
    };
    const Case cases[] = {
        // Conditions a policy can express.
        {"ACTION==\"add|change\"", "converted", ""},
        {"SUBSYSTEM==\"block\"", "converted", ""},
        {"ENV{DEVTYPE}==\"disk\"", "converted", ""},
        {"DRIVERS==\"nvme\"", "converted", ""},
        {"ATTRS{model}==\"Samsung*\"", "converted", ""},
        {"ATTR{queue/rotational}==\"0\"", "converted", ""},
        {"ENV{ID_BUS}==\"nvme\"", "converted", ""},
        {"ENV{ID_BUS}!=\"usb\"", "converted", ""},
        {"ATTR{size}==\"0\"", "converted", ""},
        {"KERNEL!=\"nvme0n1\"", "converted", ""},
        // Conditions it cannot express: the rule is left out, never widened.
        {"PROGRAM=\"/bin/false\"", "left out", "applies only where the program succeeds"},
        {"PROGRAM==\"/bin/true\"", "left out", "applies only where the program succeeds"},
        {"IMPORT{program}=\"/lib/udev/ata_id --export $devnode\"", "left out", "only where the import finds"},
        {"IMPORT{file}=\"/etc/fast-disks\"", "left out", "only where the import finds"},
        {"IMPORT{cmdline}=\"fastdisks\"", "left out", "only where the import finds"},
        {"IMPORT{db}=\"ID_FAST\"", "left out", "only where the import finds"},
        {"IMPORT{parent}=\"ID_*\"", "left out", "only where the import finds"},
        {"IMPORT{builtin}=\"path_id\"", "left out", "only where the import finds"},
        {"RESULT==\"fast\"", "left out", "program's output"},
        {"TEST==\"/sys/module/bfq\"", "left out", "tests a file"},
        {"KERNELS==\"0:0:0:0\"", "converted", ""},
        {"SUBSYSTEMS==\"scsi\"", "converted", ""},
        {"DEVPATH==\"/devices/pci*\"", "left out", "cannot be expressed"},
        {"TAGS==\"systemd\"", "left out", "cannot be expressed"},
        {"CONST{virt}==\"kvm\"", "left out", "cannot be expressed"},
        {"SYSCTL{kernel/x}==\"1\"", "left out", "cannot be expressed"},
        {"NAME==\"x\"", "left out", "cannot be expressed"},
        {"SYMLINK==\"disk/x\"", "left out", "cannot be expressed"},
        {"FOO==\"bar\"", "left out", "not a udev key"},
        // Effects blkpolicy does not have: noted, the rule converted.
        {"SYMLINK+=\"fast/%k\"", "noted", ""},
        {"NAME=\"x\"", "noted", ""},
        {"OWNER=\"root\"", "noted", ""},
        {"GROUP=\"disk\"", "noted", ""},
        {"MODE=\"0660\"", "noted", ""},
        // A program: blkpolicy runs none and cannot see what it sets.
        {"RUN+=\"/bin/logger tuned\"", "named", "a program run on the block device's event"},
        {"TAG+=\"fast\"", "noted", ""},
        {"ENV{FAST}=\"1\"", "noted", ""},
        {"OPTIONS+=\"last_rule\"", "noted", ""},
        {"SECLABEL{selinux}=\"x\"", "noted", ""},
        {"SYSCTL{vm/x}=\"1\"", "noted", ""},
    };
    for (const auto& c : cases) {
        CAPTURE(c.token);
        const std::string text = std::string("KERNEL==\"nvme*\", ") + c.token + ", ATTR{queue/nr_requests}=\"1024\"\n";
        auto r = import_udev_rules(parse_udev_rules_text("f.rules", text), {"f.rules"});
        std::string diags;
        for (const auto& d : r.diagnostics) diags += d + "\n";
        CAPTURE(diags);
        const std::string outcome = c.outcome;
        if (outcome == "left out") {
            CHECK(r.converted == 0);
            CHECK(r.left_out == 1);
            CHECK(diags.find(c.why) != std::string::npos);
            CHECK(load_policy({{"out", r.toml}}).policy.rules.empty());
        } else {
            CHECK(r.converted == 1);
            CHECK(r.left_out == 0);
            CHECK((diags.find("not converted: ") != std::string::npos) == (outcome == "noted"));
            CHECK((r.attributes_left_out == 1) == (outcome == "named"));
            if (outcome == "named")
                CHECK(diags.find(std::string("left out: ") + c.token + ": " + c.why) != std::string::npos);
        }
    }
}

TEST_CASE("emit_rule: the one shape of every rule blkpolicy writes, and check reads it back as written") {
    const RuleToml parts{"a \"quoted\" name",
                         {kAckWriteThrough},
                         "the original\nalready did this",
                         {{"kernel", toml_list({"sd*", "vd*"}), {}}, {"removable", "false", "not removable"}},
                         {{"write_cache", "\"write through\"", {}}, {"read_ahead_kb", "256", {}}}};
    const auto text = emit_rule(parts);
    CHECK(text ==
          "[[rule]]\n"
          "name = \"a \\\"quoted\\\" name\"\n"
          "acknowledge = [\"write-through-drops-flushes\"]  # the original?already did this\n"
          "[rule.match]\n"
          "kernel = [\"sd*\", \"vd*\"]\n"
          "removable = false  # not removable\n"
          "[rule.set]\n"
          "write_cache = \"write through\"\n"
          "read_ahead_kb = 256\n");
    const auto loaded = load_policy({{"emitted", text}});
    REQUIRE(loaded.ok());
    REQUIRE(loaded.policy.rules.size() == 1);
    CHECK(loaded.policy.rules[0].name == "a \"quoted\" name");
    // No match table: every device.
    CHECK(emit_rule({"all", {}, {}, {}, {{"rq_affinity", "2", {}}}}) ==
          "[[rule]]\nname = \"all\"\n[rule.set]\nrq_affinity = 2\n");
}

TEST_CASE("import: storage writes no policy key takes as written are named with file:line, never dropped (exit 1)") {
    auto r = run_blkpolicy({"import", "udev-import/70-storage-writes.rules"}, blkpolicy::test::test_data_dir());
    CHECK(r.exit_code == 1);
    CAPTURE(r.err);
    const char* named[] = {
        "70-storage-writes.rules:6: left out: ATTR{../queue/scheduler}=\"none\": it writes the parent disk's "
        "queue/scheduler from its child's event",
        "70-storage-writes.rules:9: left out: ATTR{eh_timeout}=\"30\": the SCSI device's own eh_timeout",
        "70-storage-writes.rules:12: left out: RUN+=\"/bin/sh -c 'echo 60 > /sys$DEVPATH/device/timeout'\": a program "
        "it runs writes sysfs",
        "70-storage-writes.rules:13: left out: RUN+=\"/sbin/blockdev --setra 4096 /dev/%k\": a program it runs tunes "
        "the device (blockdev)",
        "70-storage-writes.rules:16: left out: RUN+=\"/lib/udev/hdparm\": a program it runs tunes the device "
        "(hdparm)",
        "70-storage-writes.rules:19: left out: ATTR{md/group_thread_cnt}=\"4\": blkpolicy does not write "
        "md/group_thread_cnt",
    };
    for (const char* n : named) {
        CAPTURE(n);
        CHECK(r.err.find(n) != std::string::npos);
    }
    CHECK(r.err.find(":22:") == std::string::npos);  // the symlink tunes nothing
    CHECK(r.err.find("0 of 6 tuning rule(s) converted, 6 rule(s) left out") != std::string::npos);
    // Not a tool's name, only a word that holds one: nothing to name.
    CHECK(unconvertible_storage_write({"RUN", "", UdevOp::add, "/usr/bin/myblockdevice-helper %k"}).empty());
    // The output still says what was left out, line by line, and passes check.
    CHECK(r.out.find("# from ") != std::string::npos);
    CHECK(load_policy({{"out", r.out}}).ok());

    // Beside a tuning assignment, the same write is left out of the converted rule, by name.
    auto mixed = import_udev_rules(parse_udev_rules_text("f.rules",
                                                         "KERNEL==\"sd*[0-9]\", ATTR{queue/nomerges}=\"1\", "
                                                         "ATTR{../queue/scheduler}=\"none\"\n"),
                                   {"f.rules"});
    CHECK(mixed.converted == 1);
    CHECK(mixed.attributes_left_out == 1);
    REQUIRE(!mixed.diagnostics.empty());
    CHECK(mixed.diagnostics.front().find("f.rules:1: left out: ATTR{../queue/scheduler}=\"none\"") == 0);
}

TEST_CASE("import: a key excluded twice is one unless entry listing both (udevd: neither may match)") {
    auto r = import_udev_rules(parse_udev_rules_text("f.rules",
                                                     "KERNEL!=\"sr*\", KERNEL!=\"zram*\", "
                                                     "ATTR{queue/read_ahead_kb}=\"1024\"\n"),
                               {"f.rules"});
    CHECK(r.converted == 1);
    CHECK(r.toml.find("[rule.unless]\nkernel = [\"sr*\", \"zram*\"]\n") != std::string::npos);
    auto p = load_policy({{"out", r.toml}});
    REQUIRE(p.ok());
    // Matched twice with different patterns is still refused: both must hold.
    auto both = import_udev_rules(
        parse_udev_rules_text("f.rules", "KERNEL==\"sd*\", KERNEL==\"*a\", ATTR{queue/nomerges}=\"1\"\n"), {"f.rules"});
    CHECK(both.converted == 0);
}

TEST_CASE("import: scheduler names as the kernel takes them: deadline is mq-deadline, noop and cfq never had effect") {
    auto alias = import_udev_rules(
        parse_udev_rules_text("f.rules", "KERNEL==\"sd*\", ATTR{queue/scheduler}=\"deadline\"\n"), {"f.rules"});
    CHECK(alias.converted == 1);
    CHECK(alias.toml.find("scheduler = \"mq-deadline\"\n") != std::string::npos);
    // An out-of-tree scheduler (CachyOS's adios) is the user's choice: converted as written.
    auto adios = import_udev_rules(
        parse_udev_rules_text("f.rules", "KERNEL==\"nvme[0-9]*\", ATTR{queue/scheduler}=\"adios\"\n"), {"f.rules"});
    CHECK(adios.converted == 1);
    CHECK(adios.toml.find("scheduler = \"adios\"\n") != std::string::npos);
    for (const char* old : {"noop", "cfq"}) {
        CAPTURE(old);
        auto r = import_udev_rules(
            parse_udev_rules_text("f.rules", std::string("KERNEL==\"sd*\", ATTR{queue/scheduler}=\"") + old + "\"\n"),
            {"f.rules"});
        CHECK(r.converted == 0);
        CHECK(r.left_out == 1);
        REQUIRE(!r.diagnostics.empty());
        CHECK(r.diagnostics.front().find("never had an effect") != std::string::npos);
        CHECK(r.toml.find("scheduler =") == std::string::npos);
    }
}

TEST_CASE("import: a SCSI device's own timeout and queue depth, on its event, set the disks' device/ attributes") {
    // The shape of VMware's guest rule: udevd's walk starts at the scsi_device.
    auto r =
        import_udev_rules(parse_udev_rules_text("f.rules",
                                                "ACTION==\"add\", SUBSYSTEMS==\"scsi\", ENV{DEVTYPE}==\"scsi_device\", "
                                                "ATTRS{vendor}==\"VMware*\", ATTRS{model}==\"Virtual disk*\", "
                                                "ATTR{timeout}=\"180\"\n"
                                                "SUBSYSTEM==\"scsi\", ATTR{type}==\"0\", ATTR{queue_depth}=\"64\"\n"),
                          {"f.rules"});
    CAPTURE(r.toml);
    CHECK(r.converted == 2);
    CHECK(r.left_out == 0);
    CHECK(r.out_of_scope == 0);
    CHECK(r.toml.find("[rule.match]\nvendor = \"VMware*\"\nmodel = \"Virtual disk*\"\n[rule.set]\ndevice.timeout = "
                      "180\n") != std::string::npos);
    CHECK(r.toml.find("[rule.match]\nattr.\"device/type\" = \"0\"\n[rule.set]\ndevice.queue_depth = 64\n") !=
          std::string::npos);
    CHECK(r.toml.find("on the SCSI device's own event") != std::string::npos);
    CHECK(load_policy({{"out", r.toml}}).ok());

    // KERNEL there is the H:C:T:L address: named, not converted onto disk names.
    auto hctl = import_udev_rules(
        parse_udev_rules_text("f.rules", "SUBSYSTEM==\"scsi\", KERNEL==\"0:0:*\", ATTR{timeout}=\"60\"\n"),
        {"f.rules"});
    CHECK(hctl.converted == 0);
    CHECK(hctl.left_out == 1);
    // A SCSI device's attribute that is no tuning stays out of scope, counted (exit 1).
    auto other = import_udev_rules(parse_udev_rules_text("f.rules", "SUBSYSTEM==\"scsi\", ATTR{state}=\"running\"\n"),
                                   {"f.rules"});
    CHECK(other.out_of_scope == 1);
    // On a disk's own event, ATTR{timeout} is no attribute of the disk: still named.
    auto disk = import_udev_rules(
        parse_udev_rules_text("f.rules", "SUBSYSTEM==\"block\", KERNEL==\"sd*\", ATTR{timeout}=\"60\"\n"), {"f.rules"});
    CHECK(disk.converted == 0);
    CHECK(disk.left_out == 1);
}

TEST_CASE("import: a block device's attribute no policy key sets is named, never passed over") {
    // The disk's events_poll_msecs; zram's comp_algorithm and disksize on a
    // line whose comma is missing (udevd reads it all the same).
    auto r = import_udev_rules(
        parse_udev_rules_text("f.rules",
                              "SUBSYSTEM==\"block\", KERNEL==\"sd[a-z]\", ATTR{events_poll_msecs}=\"-1\"\n"
                              "KERNEL==\"zram0\", ATTR{comp_algorithm}=\"lz4\", ATTR{disksize}=\"2048M\" "
                              "RUN=\"/usr/bin/mkswap $env{DEVNAME}\"\n"
                              "KERNEL==\"sd[a-z]\", ATTR{queue/nomerges}=\"1\", ATTR{events_poll_msecs}=\"2000\"\n"),
        {"f.rules"});
    CAPTURE(r.diagnostics);
    CHECK(r.tuning_rules == 3);
    CHECK(r.left_out == 2);
    CHECK(r.converted == 1);
    CHECK(r.attributes_left_out == 1);
    const char* named[] = {
        "f.rules:1: left out: ATTR{events_poll_msecs}=\"-1\": blkpolicy does not manage the device's "
        "events_poll_msecs",
        "f.rules:2: left out: ATTR{comp_algorithm}=\"lz4\": blkpolicy does not manage the device's comp_algorithm "
        "(it sets queue/, bdi/, md/ and device/ attributes); ATTR{disksize}=\"2048M\"",
        "f.rules:3: left out: ATTR{events_poll_msecs}=\"2000\"",
    };
    for (const char* n : named) {
        CAPTURE(n);
        CHECK(says(r, n));
    }
    CHECK(r.toml.find("nomerges = 1") != std::string::npos);
    // Not storage: another subsystem's device, a write that asks for an event.
    for (const char* other : {"KERNEL==\"eth0\", ATTR{mtu}=\"9000\"\n",
                              "SUBSYSTEM==\"block\", KERNEL==\"sd[a-z]\", ATTR{uevent}=\"change\"\n"}) {
        CAPTURE(other);
        auto o = import_udev_rules(parse_udev_rules_text("g.rules", other), {"g.rules"});
        CHECK(o.tuning_rules == 0);
        CHECK(o.diagnostics.empty());
    }
    // A line that tunes a queue is a block device's line, whatever else it says.
    auto bare = import_udev_rules(
        parse_udev_rules_text("b.rules", "ATTR{queue/nomerges}=\"1\", ATTR{events_poll_msecs}=\"-1\"\n"), {"b.rules"});
    CHECK(bare.converted == 1);
    CHECK(bare.attributes_left_out == 1);
    CHECK(says(bare, "b.rules:1: left out: ATTR{events_poll_msecs}=\"-1\""));
    // The file's own filter says block: SUBSYSTEM!="block" jumping past it.
    auto filtered = import_udev_rules(parse_udev_rules_text("h.rules",
                                                            "SUBSYSTEM!=\"block\", GOTO=\"end\"\n"
                                                            "KERNEL==\"foo*\", ATTR{events_poll_msecs}=\"-1\"\n"
                                                            "LABEL=\"end\"\n"),
                                      {"h.rules"});
    CHECK(filtered.left_out == 1);
}

TEST_CASE("import: a program run on a block device's event is named, never passed over (it stops with the file)") {
    // Lustre's shape: a GOTO block keeps ext4 targets, and a program tunes
    // them; nothing in the line says what it writes.
    auto r =
        import_udev_rules(parse_udev_rules_text("l.rules",
                                                "ACTION!=\"add|change\", GOTO=\"end\"\n"
                                                "SUBSYSTEM!=\"block\", GOTO=\"end\"\n"
                                                "ENV{ID_FS_TYPE}!=\"ext4\", GOTO=\"end\"\n"
                                                "ENV{ID_FS_LABEL}==\"*-OST*\", RUN+=\"/usr/sbin/l_tunedisk /dev/%k\"\n"
                                                "LABEL=\"end\"\n"),
                          {"l.rules"});
    CAPTURE(r.diagnostics);
    CHECK(r.tuning_rules == 1);
    CHECK(r.left_out == 1);
    CHECK(says(r,
               "l.rules:4: left out: RUN+=\"/usr/sbin/l_tunedisk /dev/%k\": a program run on the block device's "
               "event, whose writes blkpolicy cannot see"));
    // Beside a converted write: that write converts, the program is named.
    auto both = import_udev_rules(
        parse_udev_rules_text("m.rules",
                              "SUBSYSTEM==\"block\", KERNEL==\"sd[a-z]\", ATTR{queue/nomerges}=\"1\", "
                              "RUN+=\"/usr/local/bin/tune %k\"\n"),
        {"m.rules"});
    CHECK(both.converted == 1);
    CHECK(both.attributes_left_out == 1);
    CHECK(says(both, "m.rules:1: left out: RUN+=\"/usr/local/bin/tune %k\""));
    // Not a block device's event, or udevd's own builtin: nothing to say.
    for (const char* other : {"SUBSYSTEM==\"net\", KERNEL==\"eth0\", RUN+=\"/usr/bin/ethtool -K eth0 tso off\"\n",
                              "SUBSYSTEM==\"block\", RUN{builtin}+=\"blkid\"\n"}) {
        CAPTURE(other);
        auto o = import_udev_rules(parse_udev_rules_text("g.rules", other), {"g.rules"});
        CHECK(o.tuning_rules == 0);
        CHECK(o.diagnostics.empty());
    }
}

TEST_CASE("import: a match on what an earlier line wrote reads the written value under udevd: left out by name") {
    // A flash drive made non-rotational, then the scheduler by rotation:
    // udevd gives it kyber; a policy matching the device's own claim would
    // give it bfq. Every line that reads rotational after the write is left
    // out, naming the write.
    const std::string flash =
        "ACTION==\"add\", KERNEL==\"sd[a-z]\", ATTRS{product}==\"*Flash Drive*\", ATTR{queue/rotational}=\"0\"\n"
        "KERNEL==\"sd[a-z]\", ATTR{queue/rotational}==\"0\", ATTR{queue/scheduler}=\"kyber\"\n"
        "KERNEL==\"sd[a-z]\", ATTR{queue/rotational}==\"1\", ATTR{queue/scheduler}=\"bfq\"\n"
        "KERNEL==\"nvme[0-9]n[0-9]\", ATTR{queue/rotational}==\"0\", ATTR{queue/scheduler}=\"none\"\n";
    auto r = import_udev_rules(parse_udev_rules_text("f.rules", flash), {"f.rules"});
    CAPTURE(r.diagnostics);
    CHECK(r.converted == 2);  // the write itself, and nvme's (no sd name can be one)
    CHECK(r.left_out == 2);
    for (const char* n : {"f.rules:2: left out: ATTR{queue/rotational}==\"0\": it reads queue/rotational, which "
                          "f.rules:1 writes (ATTR{queue/rotational}=\"0\") before it",
                          "f.rules:3: left out: ATTR{queue/rotational}==\"1\": it reads queue/rotational, which "
                          "f.rules:1 writes"}) {
        CAPTURE(n);
        CHECK(says(r, n));
    }
    // Across files, in udevd's order: the earlier file's write, the later file's read.
    auto a = parse_udev_rules_text("59-virt.rules", "KERNEL==\"sd*[!0-9]\", ATTR{queue/rotational}=\"0\"\n");
    auto b = parse_udev_rules_text(
        "60-sched.rules", "KERNEL==\"sd[a-z]\", ATTR{queue/rotational}==\"1\", ATTR{queue/scheduler}=\"bfq\"\n");
    a.insert(a.end(), b.begin(), b.end());
    auto across = import_udev_rules(a, {"59-virt.rules", "60-sched.rules"});
    CHECK(across.left_out == 1);
    CHECK(across.converted == 1);
    // A scheduler written, then a test for a file only some schedulers make.
    auto iosched = import_udev_rules(parse_udev_rules_text("f.rules",
                                                           "KERNEL==\"sd[a-z]\", ATTR{queue/scheduler}=\"bfq\"\n"
                                                           "KERNEL==\"sd[a-z]\", TEST==\"queue/iosched/low_latency\", "
                                                           "ATTR{queue/iosched/low_latency}=\"0\"\n"),
                                     {"f.rules"});
    CHECK(iosched.left_out == 1);
    CHECK(iosched.diagnostics.front().find("f.rules:2: left out: TEST==\"queue/iosched/low_latency\"") == 0);

    // Where the write cannot reach the read, nothing changes:
    const char* apart[] = {
        // kernel names no device has both of (s390's virtio rule beside an sd rule)
        "KERNEL==\"vd*[!0-9]\", ATTR{queue/rotational}=\"0\"\n"
        "KERNEL==\"sd[a-z]\", ATTR{queue/rotational}==\"0\", ATTR{queue/scheduler}=\"kyber\"\n",
        // the writing line jumps past the reading one
        "KERNEL==\"loop*\", ATTR{queue/scheduler}=\"none\", GOTO=\"end\"\n"
        "ATTR{queue/scheduler}==\"none\", GOTO=\"end\"\n"
        "KERNEL==\"sd*\", ATTR{queue/scheduler}==\"*none*\", ATTR{queue/nomerges}=\"1\"\n"
        "LABEL=\"end\"\n",
        // the read comes before the write (a filter at the top)
        "ATTR{queue/rotational}==\"1\", GOTO=\"end\"\n"
        "KERNEL==\"sd*\", ATTR{queue/rotational}=\"1\"\n"
        "KERNEL==\"sd*\", ATTR{queue/nomerges}=\"1\"\n"
        "LABEL=\"end\"\n",
        // a test of the file the line writes: a write makes no file
        "KERNEL==\"sd*\", ATTR{queue/scheduler}=\"none\"\n"
        "KERNEL==\"sd*\", TEST==\"queue/scheduler\", ATTR{queue/scheduler}=\"mq-deadline\"\n",
    };
    for (const char* text : apart) {
        CAPTURE(text);
        auto o = import_udev_rules(parse_udev_rules_text("f.rules", text), {"f.rules"});
        CAPTURE(o.diagnostics);
        CHECK(o.left_out == 0);
        CHECK(o.converted == o.tuning_rules);
    }
}

TEST_CASE("import: an md array's stripe cache and resync speeds, in the shape NAS and storage guides give them") {
    // The array's own files on its change event (its start): TEST of the
    // very file the line writes, as udevd writes it only where it is there.
    auto r = import_udev_rules(
        parse_udev_rules_text("md.rules",
                              "SUBSYSTEM==\"block\", KERNEL==\"md*\", ACTION==\"add|change\", "
                              "TEST==\"md/stripe_cache_size\", ATTR{md/stripe_cache_size}=\"16384\"\n"
                              "SUBSYSTEM==\"block\", KERNEL==\"md[0-9]*\", ATTR{md/sync_speed_min}=\"50000\", "
                              "ATTR{md/sync_speed_max}=\"500000\"\n"
                              "SUBSYSTEM==\"block\", KERNEL==\"md*\", ATTR{md/stripe_cache_size}=\"16\"\n"),
        {"md.rules"});
    CAPTURE(r.diagnostics);
    CAPTURE(r.toml);
    CHECK(r.converted == 2);
    CHECK(r.toml.find("md.stripe_cache_size = 16384") != std::string::npos);
    CHECK(r.toml.find("md.sync_speed_min = 50000") != std::string::npos);
    CHECK(r.toml.find("md.sync_speed_max = 500000") != std::string::npos);
    // A value the kernel refuses is left out with the range's own words.
    CHECK(std::any_of(r.diagnostics.begin(), r.diagnostics.end(), [](const std::string& d) {
        return d.rfind("md.rules:3: ", 0) == 0 &&
               d.find("md.stripe_cache_size = 16 is out of range: must be 17..32768") != std::string::npos;
    }));
    const auto loaded = load_policy({{"imported", r.toml}});
    CAPTURE(loaded.errors.size());
    CHECK(loaded.ok());
}
