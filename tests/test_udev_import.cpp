// SPDX-License-Identifier: MIT
// udev rule syntax and the conversion into policy.
#include <doctest/doctest.h>

#include <fstream>

#include "policy/loader.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"
#include "writers/udev_import.hpp"
#include "writers/udev_rules.hpp"

using namespace blkpolicy::policy;
using namespace blkpolicy::writers;
using blkpolicy::test::matches_golden;
using blkpolicy::test::run_blkpolicy;

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
        "SUBSYSTEMS==\"scsi\"",
        "TAGS==\"systemd\"",
        "CONST{virt}==\"kvm\"",
        "IMPORT{builtin}==\"blkid\"",
        "KERNELS!=\"host*\"",
        "DEVPATH==\"/devices/virtual/*\"",
        "ATTRS{vendor}==\"ATA\", ATTRS{queue_depth}==\"32\"",
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
          "blkpolicy: nothing that tunes block queues (queue/, bdi/read_ahead_kb or device/ writes) in 1 source(s): "
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
        const char* outcome;  // "converted", "noted" (converted, the token listed as not converted), "left out"
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
        {"KERNELS==\"0:0:0:0\"", "left out", "cannot be expressed"},
        {"SUBSYSTEMS==\"scsi\"", "left out", "cannot be expressed"},
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
        {"RUN+=\"/bin/logger tuned\"", "noted", ""},
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
