// SPDX-License-Identifier: MIT
// apply on fresh loop devices of the running kernel, through the real binary.
// Each test first shows the kernel trap is real here (so a pass means
// blkpolicy handled it, not that the kernel stopped doing it), then applies a
// policy and reads the result from sysfs directly.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernel/loop_device.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"

using namespace blkpolicy::test;
using nlohmann::json;

namespace {

// A policy file and state dir in a scratch directory, removed afterwards.
struct Scratch {
    TempDir tmp{"blkpolicy-kernel"};
    const std::filesystem::path& dir = tmp.path();

    // Writes a one-rule policy matching exactly `dev` (and never anything else).
    std::string policy(const std::string& dev, const std::string& set, const std::string& match = "") {
        const auto path = (dir / "policy.toml").string();
        std::ofstream(path, std::ios::trunc) << "[[rule]]\nname = \"test\"\n[rule.match]\nkernel = \"" << dev << "\"\n"
                                             << match << "\n[rule.set]\n"
                                             << set << "\n";
        return path;
    }

    // Runs a command limited to `dev` and returns the parsed JSON.
    json run(const std::string& command, const std::string& policy_path, const std::string& dev,
             int* exit_code = nullptr) {
        auto r =
            run_blkpolicy({command, "--json", "--policy", policy_path, "--state-dir", (dir / "state").string(), dev});
        INFO("stderr: " << r.err);
        if (exit_code) *exit_code = r.exit_code;
        REQUIRE_FALSE(r.out.empty());
        return json::parse(r.out);
    }
};

std::map<std::string, json> results_of(const json& doc) {
    std::map<std::string, json> out;
    for (const auto& r : doc["devices"][0]["results"]) out[r["attribute"].get<std::string>()] = r;
    return out;
}

}  // namespace

TEST_CASE("kernel: read_ahead_kb survives a max_sectors_kb write in the same policy") {
    {
        LoopDevice trap;
        REQUIRE(trap.queue("rotational") == "1");
        trap.write_queue("read_ahead_kb", "128");
        trap.write_queue("max_sectors_kb", trap.queue("max_sectors_kb"));
        CHECK(trap.queue("read_ahead_kb") != "128");  // the kernel raised it again, silently
    }
    LoopDevice loop;
    Scratch s;
    int rc = -1;
    auto doc = s.run("apply", s.policy(loop.name(), "read_ahead_kb = 128\nmax_sectors_kb = 1024"), loop.name(), &rc);
    CHECK(rc == 0);
    auto r = results_of(doc);
    CHECK(r["max_sectors_kb"]["outcome"] == "applied");
    CHECK(r["read_ahead_kb"]["outcome"] == "applied");
    CHECK(loop.queue("max_sectors_kb") == "1024");
    CHECK(loop.queue("read_ahead_kb") == "128");
}

TEST_CASE("kernel: nr_requests survives the scheduler switch") {
    {
        LoopDevice trap;
        trap.write_queue("nr_requests", "64");
        trap.write_queue("scheduler", "mq-deadline");
        CHECK(trap.queue("nr_requests") != "64");  // reset by the switch
    }
    LoopDevice loop;
    Scratch s;
    int rc = -1;
    auto doc =
        s.run("apply", s.policy(loop.name(), "scheduler = \"mq-deadline\"\nnr_requests = 64\niosched.fifo_batch = 8"),
              loop.name(), &rc);
    CHECK(rc == 0);
    CHECK(loop.queue("scheduler").find("[mq-deadline]") != std::string::npos);
    CHECK(loop.queue("nr_requests") == "64");
    CHECK(loop.queue("iosched/fifo_batch") == "8");
    CHECK(results_of(doc)["nr_requests"]["outcome"] == "applied");
}

TEST_CASE("kernel: scheduler bfq with wbt_lat_usec 2000 ends at 2000 on a fresh device") {
    {
        LoopDevice trap;
        REQUIRE(trap.queue("wbt_lat_usec") == "2000");
        if (const auto skipped = switch_scheduler_or_reason(trap, "bfq"); !skipped.empty()) {
            MESSAGE(skipped);
            return;
        }
        CHECK(trap.queue("wbt_lat_usec") == "0");  // bfq turned the default wbt off
        trap.write_queue("wbt_lat_usec", "2000");
        CHECK(trap.queue("wbt_lat_usec") == "0");  // the retained value: a silent no-op
    }
    LoopDevice loop;
    Scratch s;
    int rc = -1;
    auto doc = s.run("apply", s.policy(loop.name(), "scheduler = \"bfq\"\nwbt_lat_usec = 2000"), loop.name(), &rc);
    CHECK(rc == 0);
    CHECK(loop.queue("scheduler").find("[bfq]") != std::string::npos);
    CHECK(loop.queue("wbt_lat_usec") == "2000");
    auto r = results_of(doc);
    CHECK(r["wbt_lat_usec"]["outcome"] == "applied");
    CHECK(r["wbt_lat_usec"]["before"] == "0");
}

TEST_CASE("kernel: a second apply is a no-op - and frozen facts keep the rule matching") {
    LoopDevice loop;
    Scratch s;
    // Matches rotational = true and sets rotational = 0: without frozen facts
    // the second run would no longer match and leave the device alone.
    const auto policy = s.policy(loop.name(),
                                 "rotational = 0\nread_ahead_kb = 128\nwbt_lat_usec = \"default\"\nscheduler = "
                                 "[\"kyber\", \"mq-deadline\"]\nnr_requests = 32\nrq_affinity = 2\nnomerges = 1",
                                 "rotational = true");
    int rc = -1;
    auto first = s.run("apply", policy, loop.name(), &rc);
    CHECK(rc == 0);
    CHECK(first["summary"]["applied"].get<int>() >= 6);
    CHECK(loop.queue("rotational") == "0");
    CHECK(loop.queue("wbt_lat_usec") == "2000");  // the non-rotational default, computed after rotational=0

    auto second = s.run("apply", policy, loop.name(), &rc);
    CHECK(rc == 0);
    CHECK(second["devices"][0]["matched"].size() == 1);
    CHECK(second["devices"][0]["facts"]["facts_frozen"] == true);
    CHECK(second["summary"]["applied"] == 0);
    CHECK(second["summary"]["unchanged"].get<int>() ==
          first["summary"]["applied"].get<int>() + first["summary"]["unchanged"].get<int>());
    auto status = s.run("status", policy, loop.name(), &rc);
    CHECK(rc == 0);
}

TEST_CASE("kernel: a parent table reads the device's levels as the running kernel lays them out") {
    LoopDevice loop;
    Scratch s;
    // The loop device is its own level: subsystem block, its loop/ attributes.
    const std::string own =
        "parent.subsystem = \"block\"\nparent.attr.\"loop/backing_file\" = \"" + loop.backing() + "\"";
    int rc = -1;
    auto hit = s.run("plan", s.policy(loop.name(), "nomerges = 2", own), loop.name(), &rc);
    CHECK(rc == 0);
    CHECK(hit["devices"][0]["matched"].size() == 1);
    // Every test on one level: no level of a loop device is in another subsystem.
    const std::string other = "parent.subsystem = \"virtual\"\nparent.attr.\"loop/backing_file\" = \"?*\"";
    auto miss = s.run("plan", s.policy(loop.name(), "nomerges = 2", other), loop.name(), &rc);
    CHECK(rc == 0);
    CHECK(miss["devices"][0]["matched"].empty());
}

TEST_CASE("kernel: read_ahead_kb is page-rounded and reported as applied - not as a failure") {
    LoopDevice loop;
    Scratch s;
    int rc = -1;
    auto doc = s.run("apply", s.policy(loop.name(), "read_ahead_kb = 130"), loop.name(), &rc);
    CHECK(rc == 0);
    CHECK(loop.queue("read_ahead_kb") == "128");
    CHECK(results_of(doc)["read_ahead_kb"]["expected"] == "128");
}

TEST_CASE("kernel: the kernel's lies that the policy validation exists for") {
    LoopDevice loop;
    loop.write_queue("write_cache", "write backwards");  // accepted: prefix match
    CHECK(loop.queue("write_cache") == "write back");
    loop.write_queue("rq_affinity", "3");  // accepted and ignored
    CHECK(loop.queue("rq_affinity") == "1");
    Scratch s;
    auto bad = run_blkpolicy({"check", "--policy", s.policy(loop.name(), "write_cache = \"write backwards\"")});
    CHECK(bad.exit_code == 3);
    auto bad2 = run_blkpolicy({"check", "--policy", s.policy(loop.name(), "rq_affinity = 3")});
    CHECK(bad2.exit_code == 3);
}

TEST_CASE("kernel: an attribute the kernel rejects fails alone - the rest applies") {
    LoopDevice loop;
    Scratch s;
    // iosched tunable of a scheduler switched to: exists; a bogus one does not
    int rc = -1;
    auto doc = s.run(
        "apply", s.policy(loop.name(), "scheduler = \"mq-deadline\"\niosched.no_such_tunable = 1\nread_ahead_kb = 64"),
        loop.name(), &rc);
    auto r = results_of(doc);
    CHECK(r["iosched.no_such_tunable"]["outcome"] == "skipped");
    CHECK(r["iosched.no_such_tunable"]["detail"] == "device has no queue/iosched/no_such_tunable");
    CHECK(r["read_ahead_kb"]["outcome"] == "applied");
    CHECK(rc == 0);  // skipped is not a failure

    // max_hw_sectors_kb is 1280 on loop: the plan refuses 4096 rather than let the kernel EINVAL it
    auto doc2 = s.run("apply", s.policy(loop.name(), "max_sectors_kb = 4096\nnomerges = 2"), loop.name(), &rc);
    CHECK(rc == 1);
    auto r2 = results_of(doc2);
    CHECK(r2["max_sectors_kb"]["outcome"] == "refused");
    CHECK(r2["nomerges"]["outcome"] == "applied");
    CHECK(loop.queue("nomerges") == "2");
}

TEST_CASE("kernel: a device's writeback limits (bdi): applied and read back; a min above the max refused") {
    // min_ratio is a share of one global budget (all devices' under 100):
    // whatever a failed check leaves is put back before the device goes.
    struct Reset {
        const LoopDevice& loop;
        ~Reset() {
            loop.try_write("bdi/min_ratio", "0");
            loop.try_write("bdi/max_ratio", "100");
        }
    };
    {
        LoopDevice trap;
        Reset reset{trap};
        REQUIRE(trap.read("bdi/max_ratio") == "100");  // the kernel's defaults (kernel row bdi-default)
        CHECK(trap.read("bdi/min_ratio") == "0");
        REQUIRE(trap.try_write("bdi/max_ratio", "5") == 0);
        CHECK(trap.try_write("bdi/min_ratio", "10") == EINVAL);  // above the max: refused
        REQUIRE(trap.try_write("bdi/min_ratio", "1") == 0);
        CHECK(trap.try_write("bdi/max_ratio", "0") == EINVAL);  // below the min: refused too
        CHECK(trap.read("bdi/max_ratio") == "5");
    }
    LoopDevice loop;
    Reset reset{loop};
    const bool strict = std::filesystem::exists("/sys/block/" + loop.name() + "/bdi/strict_limit");  // 6.2+
    Scratch s;
    int rc = -1;
    auto doc = s.run("apply",
                     s.policy(loop.name(), std::string("bdi.max_ratio = 1\nbdi.min_ratio = 1\n") +
                                               (strict ? "bdi.strict_limit = 1\n" : "")),
                     loop.name(), &rc);
    CHECK(rc == 0);
    auto r = results_of(doc);
    CHECK(r["bdi.max_ratio"]["outcome"] == "applied");
    CHECK(r["bdi.min_ratio"]["outcome"] == "applied");
    CHECK(loop.read("bdi/max_ratio") == "1");
    CHECK(loop.read("bdi/min_ratio") == "1");
    if (strict) CHECK(loop.read("bdi/strict_limit") == "1");
    // The plan refuses what the kernel would: nothing is written for it.
    auto refused = s.run("apply", s.policy(loop.name(), "bdi.min_ratio = 2"), loop.name(), &rc);
    CHECK(rc == 1);
    CHECK(results_of(refused)["bdi.min_ratio"]["outcome"] == "refused");
    CHECK(loop.read("bdi/min_ratio") == "1");
    // explain: the kernel's own values beside what is there now.
    // The test's own (empty) rules and config: never the host's.
    std::filesystem::create_directories(s.dir / "rules");
    auto x = run_blkpolicy({"explain", "--json", "--no-policy", "--udev-rules-dir", (s.dir / "rules").string(),
                            "--config-root", s.dir.string(), "--state-dir", (s.dir / "state").string(), loop.name()});
    REQUIRE(x.exit_code == 0);
    const auto xdoc = json::parse(x.out);
    std::map<std::string, json> attrs;
    for (const auto& a : xdoc["devices"][0]["attributes"]) attrs[a["attribute"].get<std::string>()] = a;
    CHECK(attrs["bdi.max_ratio"]["current"] == "1");
    CHECK(attrs["bdi.max_ratio"]["kernel_default"] == "100");
    CHECK(attrs["bdi.min_ratio"]["kernel_default"] == "0");
}

TEST_CASE("kernel: test loop devices are gone afterwards") {
    std::string name;
    {
        LoopDevice loop;
        name = loop.name();
        CHECK(std::filesystem::exists("/sys/block/" + name));
    }
    CHECK_FALSE(std::filesystem::exists("/sys/block/" + name));
}
