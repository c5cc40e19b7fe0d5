// import-udev's promise, on the real kernel under a real udevd: the values
// the original rules write equal the values blkpolicy writes from the
// converted policy.
#include <doctest/doctest.h>

#include <fstream>

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
    const char* attrs[] = {"scheduler", "nr_requests", "iosched/fifo_batch", "read_ahead_kb", "rq_affinity", "nomerges"};

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
    auto conv = run_blkpolicy({"import-udev", (tmp.path() / "60-tuning.rules").string()});
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
