// SPDX-License-Identifier: MIT
// import's promise for udev rules, on the real kernel under a real udevd: the values
// the original rules write equal the values blkpolicy writes from the
// converted policy.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

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
