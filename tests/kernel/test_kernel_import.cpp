// SPDX-License-Identifier: MIT
// import's promise for udev rules, on the real kernel under a real udevd: the values
// the original rules write equal the values blkpolicy writes from the
// converted policy.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "kernel/loop_device.hpp"
#include "kernel/udevd.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"

using namespace blkpolicy::test;

TEST_CASE("kernel: udev rules and the policy converted from them write the same values") {
    const std::string rules =
        "# tuning the old way\n"
        "ACTION==\"add|change\", SUBSYSTEM==\"block\", KERNEL==\"loop2[4-9][0-9]\", \\\n"
        "  ATTR{queue/scheduler}=\"mq-deadline\", ATTR{queue/nr_requests}=\"64\", \\\n"
        "  ATTR{queue/iosched/fifo_batch}=\"8\", ATTR{queue/read_ahead_kb}=\"256\", \\\n"
        "  ATTR{queue/rq_affinity}=\"2\", ATTR{queue/nomerges}=\"1\"\n";
    const char* attrs[] = {"scheduler",     "nr_requests", "iosched/fifo_batch",
                           "read_ahead_kb", "rq_affinity", "nomerges"};

    std::map<std::string, std::string> by_udev;
    {
        StandaloneUdevd udevd("99-blkpolicy-equivalence.rules", rules);
        REQUIRE(udevd.running());
        LoopDevice a;
        StandaloneUdevd::settle();
        for (const char* at : attrs) by_udev[at] = a.queue(at);
    }
    CHECK(by_udev["scheduler"].find("[mq-deadline]") != std::string::npos);  // udev really ran the rule
    CHECK(by_udev["nr_requests"] == "64");

    TempDir tmp;
    std::ofstream(tmp.path() / "60-tuning.rules") << rules;
    auto conv = run_blkpolicy({"import", (tmp.path() / "60-tuning.rules").string()});
    INFO(conv.err);
    REQUIRE(conv.exit_code == 0);
    std::ofstream(tmp.path() / "converted.toml") << conv.out;

    LoopDevice b;
    auto applied = run_blkpolicy({"apply", "--policy", (tmp.path() / "converted.toml").string(), "--state-dir",
                                  (tmp.path() / "state").string(), b.name()});
    INFO(applied.out << applied.err);
    CHECK(applied.exit_code == 0);
    for (const char* at : attrs) {
        CAPTURE(at);
        CHECK(b.queue(at) == by_udev[at]);
    }
}

TEST_CASE("kernel: rules gated on a program: what udev applies where the program fails, the conversion never does") {
    // Two rules on the same devices, each gated on a helper: the one whose
    // helper fails must not tune anything, under udevd or after conversion.
    TempDir tmp;
    const auto ok = (tmp.path() / "is-fast").string(), no = (tmp.path() / "is-slow").string();
    std::ofstream(ok) << "#!/bin/sh\nexit 0\n";
    std::ofstream(no) << "#!/bin/sh\nexit 1\n";
    std::filesystem::permissions(ok, std::filesystem::perms::owner_all);
    std::filesystem::permissions(no, std::filesystem::perms::owner_all);
    const std::string rules = "ACTION==\"add|change\", SUBSYSTEM==\"block\", KERNEL==\"loop2[4-9][0-9]\", PROGRAM=\"" +
                              no +
                              "\", ATTR{queue/nr_requests}=\"32\"\n"
                              "ACTION==\"add|change\", SUBSYSTEM==\"block\", KERNEL==\"loop2[4-9][0-9]\", PROGRAM=\"" +
                              ok + "\", ATTR{queue/read_ahead_kb}=\"512\"\n";

    std::map<std::string, std::string> by_udev;
    {
        StandaloneUdevd udevd("99-blkpolicy-gated.rules", rules);
        REQUIRE(udevd.running());
        LoopDevice a;
        StandaloneUdevd::settle();
        by_udev["nr_requests"] = a.queue("nr_requests");
        by_udev["read_ahead_kb"] = a.queue("read_ahead_kb");
    }
    CHECK(by_udev["read_ahead_kb"] == "512");  // the helper that succeeds gated a rule that ran
    CHECK(by_udev["nr_requests"] != "32");     // the one that fails kept its rule from running

    std::ofstream(tmp.path() / "60-gated.rules") << rules;
    auto conv = run_blkpolicy({"import", (tmp.path() / "60-gated.rules").string()});
    CHECK(conv.exit_code == 1);  // both left out: a policy cannot run a program
    std::ofstream(tmp.path() / "converted.toml") << conv.out;
    LoopDevice b;
    const auto before = b.queue("nr_requests");
    run_blkpolicy({"apply", "--policy", (tmp.path() / "converted.toml").string(), "--state-dir",
                   (tmp.path() / "state").string(), b.name()});
    CHECK(b.queue("nr_requests") == before);  // never widened into a rule for every loop device
    CHECK(conv.err.find("the rule applies only where the program succeeds") != std::string::npos);
}

TEST_CASE(
    "kernel: a file's GOTOs under a real udevd: the values each loop device gets, the import's, and the writers "
    "named") {
    // Two loop devices, one backed by a "fast" file; the rules reach each
    // through guards and a GOTO dispatch on a sysfs attribute, the way the
    // clouds' rule files do. Installed after the devices exist, then a
    // change event: what udevd writes does not depend on earlier events.
    const std::string rules =
        "SUBSYSTEM!=\"block\", GOTO=\"bp_flow_end\"\n"
        "ACTION!=\"add|change\", GOTO=\"bp_flow_end\"\n"
        "KERNEL!=\"loop2[4-9][0-9]\", GOTO=\"bp_flow_end\"\n"
        "ATTR{loop/backing_file}==\"*-fast-*\", GOTO=\"bp_flow_fast\"\n"
        "ATTR{queue/nomerges}=\"1\"\n"
        "GOTO=\"bp_flow_end\"\n"
        "LABEL=\"bp_flow_fast\"\n"
        "ENV{DEVTYPE}==\"disk\", ATTR{queue/nr_requests}=\"64\"\n"
        "ATTR{queue/read_ahead_kb}=\"512\"\n"
        "LABEL=\"bp_flow_end\"\n";
    const char* attrs[] = {"nomerges", "nr_requests", "read_ahead_kb"};
    const std::string fast_prefix = std::string(kLoopBackingPrefix) + "fast-";

    std::map<std::string, std::string> by_udev_fast, by_udev_slow;
    std::map<std::string, std::string> untouched;
    {
        LoopDevice fast(true, fast_prefix), slow;
        for (const char* at : attrs) untouched[at] = slow.queue(at);
        StandaloneUdevd udevd("99-blkpolicy-flow.rules", rules);
        REQUIRE(udevd.running());
        REQUIRE(std::system(("udevadm trigger --action=change /sys/block/" + fast.name() + " /sys/block/" + slow.name())
                                .c_str()) == 0);
        StandaloneUdevd::settle();
        for (const char* at : attrs) {
            by_udev_fast[at] = fast.queue(at);
            by_udev_slow[at] = slow.queue(at);
        }
    }
    // udevd really took each path: the dispatch to the label, the fall-through past it.
    CHECK(by_udev_fast["nr_requests"] == "64");
    CHECK(by_udev_fast["read_ahead_kb"] == "512");
    CHECK(by_udev_fast["nomerges"] == untouched["nomerges"]);
    CHECK(by_udev_slow["nomerges"] == "1");
    CHECK(by_udev_slow["nr_requests"] == untouched["nr_requests"]);
    CHECK(by_udev_slow["read_ahead_kb"] == untouched["read_ahead_kb"]);

    TempDir tmp;
    const auto rules_dir = tmp.path() / "rules.d";
    std::filesystem::create_directories(rules_dir);
    std::ofstream(rules_dir / "60-flow.rules") << rules;
    auto conv = run_blkpolicy({"import", (rules_dir / "60-flow.rules").string()});
    INFO(conv.out << conv.err);
    REQUIRE(conv.exit_code == 0);
    CHECK(conv.err.find("3 of 3 tuning rule(s) converted") != std::string::npos);
    CHECK(conv.out.find("[rule.unless]\nattr.\"loop/backing_file\" = \"*-fast-*\"\n") != std::string::npos);
    std::ofstream(tmp.path() / "converted.toml") << conv.out;

    // Fresh devices, the converted policy applied by blkpolicy: the same values.
    LoopDevice fast(true, fast_prefix), slow;
    auto applied = run_blkpolicy({"apply", "--policy", (tmp.path() / "converted.toml").string(), "--state-dir",
                                  (tmp.path() / "state").string(), fast.name(), slow.name()});
    INFO(applied.out << applied.err);
    CHECK(applied.exit_code == 0);
    for (const char* at : attrs) {
        CAPTURE(at);
        CHECK(fast.queue(at) == by_udev_fast[at]);
        CHECK(slow.queue(at) == by_udev_slow[at]);
    }

    // The writer model names the rule for the device it selects, and only for it.
    auto written_by = [&](const std::string& dev) {
        auto x = run_blkpolicy({"explain", "--json", "--no-policy", "--udev-rules-dir", rules_dir.string(), dev});
        REQUIRE(x.exit_code == 0);
        std::string out;  // "attribute=file:line" per writer, "(may)" after an uncertain one
        const auto doc = nlohmann::json::parse(x.out);
        for (const auto& a : doc["devices"][0]["attributes"])
            for (const auto& w : a["written_by"])
                out += a["attribute"].get<std::string>() + "=" + w["writer"].get<std::string>() +
                       (w["certain"].get<bool>() ? "" : " (may)") + "\n";
        return out;
    };
    const auto file = (rules_dir / "60-flow.rules").string();
    CHECK(written_by(fast.name()) == "nr_requests=" + file + ":8\nread_ahead_kb=" + file + ":9\n");
    CHECK(written_by(slow.name()) == "nomerges=" + file + ":5\n");

    // audit with a policy that sets nomerges on both: the rule fights it on
    // the device it selects only.
    std::ofstream(tmp.path() / "nomerges.toml")
        << "[[rule]]\nname = \"merges\"\n[rule.match]\nkernel = \"loop2[4-9][0-9]\"\n[rule.set]\nnomerges = 0\n";
    auto audit = run_blkpolicy({"audit", "--json", "--policy", (tmp.path() / "nomerges.toml").string(),
                                "--udev-rules-dir", rules_dir.string(), fast.name(), slow.name()});
    INFO(audit.err);
    std::string conflicts;
    const auto findings = nlohmann::json::parse(audit.out);
    for (const auto& f : findings["findings"])
        if (f["code"] == "udev-rule-conflict") conflicts += f["device"].get<std::string>() + " ";
    CHECK(conflicts == slow.name() + " ");
}
