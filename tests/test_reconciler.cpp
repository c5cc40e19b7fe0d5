// SPDX-License-Identifier: MIT
// Golden daemon scenarios without a loop: a fake tree whose sysfs behaves
// like the kernel, a script of triggers, and the alerts that must come out.
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "agent/daemon/reconciler.hpp"
#include "policy/loader.hpp"
#include "support/fake_sysfs.hpp"
#include "support/kernel_model.hpp"
#include "support/policies.hpp"
#include "support/reconciler_world.hpp"
#include "udev/discovery.hpp"
#include "util/text.hpp"
#include "writers/parsers.hpp"
#include "writers/udev_rules.hpp"

using namespace blkpolicy;
using agent::Trigger;

namespace {
using Texts = std::vector<std::string>;
using test::loops_policy;
using test::World;
}  // namespace

TEST_CASE("a value below the policy's that equals the kernel's computed one: reverted only where the kernel lowers") {
    // The policy asks for more than a limits commit computes (2560 KiB on
    // this rotational loop); someone writes exactly the computed value.
    for (const auto& [kernel, want] : std::vector<std::pair<kernel::KernelVersion, std::string>>{
             {{6, 10, 0}, "reverted"},    // 6.9-6.14 as released reset the value on a commit
             {{6, 18, 0}, "drift"},       // 6.15+ only raise it: the kernel cannot have done this
             {{6, 12, 117}, "drift"}}) {  // Debian 13's 6.12 took the raise rule back
        World w;
        agent::Reconciler rec{w.sysfs, w.state, w.log, host_on(kernel)};
        rec.set_policy(loops_policy("read_ahead_kb = 4096\n"));
        rec.reconcile("loop0", Trigger::verify);
        REQUIRE(w.log.take() == Texts{"applied loop0 read_ahead_kb 4096 4096"});
        w.poke("read_ahead_kb", "2560");
        rec.reconcile("loop0", Trigger::verify);
        const int minor = kernel.minor;  // (named again: clang 14 captures no structured binding)
        CAPTURE(minor);
        CHECK(w.log.take() == Texts{want + " loop0 read_ahead_kb 4096 2560"});
        CHECK(w.q("read_ahead_kb") == "4096");
    }
}

TEST_CASE("daemon scenario: enforce mode") {
    World w;
    w.rec.set_policy(loops_policy("read_ahead_kb = 128\nscheduler = \"mq-deadline\"\nnr_requests = 64\n"));

    w.rec.reconcile("loop0", Trigger::verify);  // found at start
    CHECK(w.log.take() == Texts{"applied loop0 scheduler mq-deadline mq-deadline", "applied loop0 nr_requests 64 64",
                                "applied loop0 read_ahead_kb 128 128"});
    CHECK(w.log.full[0].message == "set scheduler of loop0 to mq-deadline (was none)");
    CHECK(w.log.full[0].rule == "loops (p.toml:1)");

    SUBCASE("quiet: nothing changed, nothing said, nothing written") {
        w.sysfs.writes.clear();
        for (int i = 0; i < 3; ++i) w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take().empty());
        CHECK(w.sysfs.writes.empty());
    }
    SUBCASE("a limits write raises read_ahead_kb: reverted, re-applied") {
        w.poke("max_sectors_kb", "1280");
        REQUIRE(w.q("read_ahead_kb") == "2560");
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"reverted loop0 read_ahead_kb 128 2560"});
        CHECK(w.log.full.back().message ==
              "read_ahead_kb of loop0 went back to the kernel's own value 2560 (policy says 128); re-applied");
        CHECK(w.q("read_ahead_kb") == "128");
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take().empty());
    }
    SUBCASE("a person writes a value: drift, re-applied") {
        w.poke("read_ahead_kb", "512");
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"drift loop0 read_ahead_kb 128 512"});
        CHECK(w.q("read_ahead_kb") == "128");
    }
    SUBCASE("a scheduler switch behind the daemon's back: both values come back") {
        w.poke("scheduler", "kyber");
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"drift loop0 scheduler mq-deadline kyber", "drift loop0 nr_requests 64 256"});
        CHECK(w.q("nr_requests") == "64");
    }
    SUBCASE("a new policy switches the scheduler and keeps nr_requests: the kernel's reset is part of applying") {
        w.rec.set_policy(loops_policy("read_ahead_kb = 128\nscheduler = \"none\"\nnr_requests = 64\n"));
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"applied loop0 scheduler none none"});
        CHECK(w.q("nr_requests") == "64");
        CHECK(w.rec.summary().drifted == 0);
    }
    SUBCASE("a failing write alerts once, then resolves") {
        w.poke("read_ahead_kb", "512");
        w.sysfs.fail["queue/read_ahead_kb"] = EIO;
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"failed loop0 read_ahead_kb 128 512"});
        CHECK(w.log.full.back().message ==
              "cannot set read_ahead_kb of loop0 to 128: write 128: Input/output error (EIO)");
        w.rec.reconcile("loop0", Trigger::verify);
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take().empty());
        CHECK(w.rec.summary().failed == 1);
        w.sysfs.fail.clear();
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"resolved loop0 read_ahead_kb 128 128"});
        CHECK(w.rec.summary().failed == 0);
    }
    SUBCASE("a udev rule that writes the attribute is named") {
        w.rec.set_writers(writers::parse_udev_rules(
            "/etc/udev/rules.d/60-ra.rules",
            "# tuning\nACTION==\"add|change\", KERNEL==\"loop[0-9]*\", \\\n  ATTR{queue/read_ahead_kb}=\"512\"\n"));
        w.poke("read_ahead_kb", "512");
        w.rec.reconcile("loop0", Trigger::udev_processed);
        CHECK(w.log.take() == Texts{"conflict loop0 read_ahead_kb 128 512"});
        CHECK(w.log.full.back().writer == "/etc/udev/rules.d/60-ra.rules:2");
        CHECK(w.log.full.back().writer_kind == "udev");
        CHECK(w.log.full.back().message ==
              "udev rule /etc/udev/rules.d/60-ra.rules:2 set read_ahead_kb of loop0 to 512 (policy says 128); "
              "re-applied");
    }
    SUBCASE("a tmpfiles.d line that writes the value found is named, with its file and line") {
        w.rec.set_writers(writers::parse_tmpfiles("/etc/tmpfiles.d/ra.conf",
                                                  "# readahead\nw /sys/block/loop0/queue/read_ahead_kb - - - - 512\n"));
        w.poke("read_ahead_kb", "512");
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"conflict loop0 read_ahead_kb 128 512"});
        CHECK(w.log.full.back().writer == "/etc/tmpfiles.d/ra.conf:2");
        CHECK(w.log.full.back().writer_kind == "tmpfiles");
        CHECK(w.log.full.back().message ==
              "tmpfiles.d /etc/tmpfiles.d/ra.conf:2 set read_ahead_kb of loop0 to 512 (policy says 128); re-applied");
    }
    SUBCASE("another writer whose value is not the one found is not blamed: drift") {
        w.rec.set_writers(writers::parse_sysfs_conf("/etc/sysfs.conf", "block/loop0/queue/read_ahead_kb = 1024\n"));
        w.poke("read_ahead_kb", "512");
        w.rec.reconcile("loop0", Trigger::udev_processed);
        CHECK(w.log.take() == Texts{"drift loop0 read_ahead_kb 128 512"});
        CHECK(w.log.full.back().writer.empty());
    }
    SUBCASE("a writer that writes while the pass switches the scheduler is named, not written over unsaid") {
        // TuneD restarted beside the daemon: its elevator is seen at a
        // verify pass, and its readahead lands while blkpolicy's scheduler
        // switch (a queue freeze) is under way, after the pass read 128.
        w.rec.set_writers(writers::parse_sysfs_conf("/etc/sysfs.conf", "block/loop0/queue/read_ahead_kb = 1024\n"));
        w.poke("scheduler", "kyber");
        w.sysfs.before_write["queue/scheduler"] = [&] { w.poke("read_ahead_kb", "1024"); };
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"drift loop0 scheduler mq-deadline kyber", "drift loop0 nr_requests 64 256",
                                    "conflict loop0 read_ahead_kb 128 1024"});
        CHECK(w.log.full.back().writer == "/etc/sysfs.conf:1");
        CHECK(w.log.full.back().message ==
              "sysfsutils /etc/sysfs.conf:1 set read_ahead_kb of loop0 to 1024 (policy says 128); re-applied");
        CHECK(w.q("read_ahead_kb") == "128");
        CHECK(w.q("scheduler") == "none [mq-deadline] kyber bfq");
        w.sysfs.before_write.clear();
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take().empty());
    }
    SUBCASE("a value out of policy when the pass read it, then another writer's before it was written back") {
        // A tool that puts the device's old value back when it stops and
        // its own when it starts: the pass read the old value; the new one
        // landed during the scheduler switch. The writer is named, and the
        // pass writes over the value it found just before its write.
        w.rec.set_writers(writers::parse_sysfs_conf("/etc/sysfs.conf", "block/loop0/queue/read_ahead_kb = 1024\n"));
        w.poke("scheduler", "kyber");
        w.poke("read_ahead_kb", "512");
        w.sysfs.before_write["queue/scheduler"] = [&] { w.poke("read_ahead_kb", "1024"); };
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"drift loop0 scheduler mq-deadline kyber", "drift loop0 nr_requests 64 256",
                                    "conflict loop0 read_ahead_kb 128 1024"});
        CHECK(w.log.full.back().writer == "/etc/sysfs.conf:1");
        CHECK(w.q("read_ahead_kb") == "128");
    }
    SUBCASE("a changed policy is applied, not called drift") {
        w.rec.set_policy(loops_policy("read_ahead_kb = 256\nscheduler = \"mq-deadline\"\nnr_requests = 64\n"));
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"applied loop0 read_ahead_kb 256 256"});
    }
    SUBCASE("the same name with another identity is a new device") {
        w.tree.file(w.tree.devpath_of("loop0") + "/diskseq", "999");
        w.poke("read_ahead_kb", "2560");
        w.rec.reconcile("loop0", Trigger::changed);
        CHECK(w.log.take() == Texts{"applied loop0 read_ahead_kb 128 128"});
    }
    SUBCASE("a vanished device is forgotten") {
        std::filesystem::remove(w.tree.root() / "block/loop0");
        CHECK_FALSE(w.rec.reconcile("loop0", Trigger::verify));
        CHECK(w.rec.devices().empty());
    }
}

TEST_CASE("daemon scenario: observe mode alerts once per change and writes nothing") {
    World w;
    w.rec.set_mode(policy::Mode::observe);
    w.rec.set_policy(loops_policy("read_ahead_kb = 128\n"));
    w.rec.reconcile("loop0", Trigger::added);
    CHECK(w.log.take() == Texts{"drift loop0 read_ahead_kb 128 2560"});
    CHECK(w.log.full.back().message == "read_ahead_kb of loop0 is 2560, policy says 128; observe mode: left as it is");
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(w.log.take().empty());
    w.poke("read_ahead_kb", "4096");
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(w.log.take() == Texts{"drift loop0 read_ahead_kb 128 4096"});
    CHECK(w.rec.summary().drifted == 1);
    w.poke("read_ahead_kb", "128");
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(w.log.take() == Texts{"resolved loop0 read_ahead_kb 128 128"});
    CHECK(w.sysfs.writes.size() == 2);  // only the test's own pokes
}

TEST_CASE("daemon scenario: a scheduler the kernel refuses is not tried on every pass") {
    World w;
    w.tree.file(w.tree.devpath_of("loop0") + "/queue/scheduler", "[none] mq-deadline");  // no bfq module either
    w.rec.set_policy(loops_policy("scheduler = [\"bfq\", \"mq-deadline\"]\n"));
    w.rec.reconcile("loop0", Trigger::added);
    CHECK(w.log.take() == Texts{"applied loop0 scheduler mq-deadline mq-deadline"});
    CHECK(w.q("scheduler") == "none [mq-deadline]");
    CHECK(w.sysfs.writes.size() == 2);  // bfq (refused), then mq-deadline

    w.sysfs.writes.clear();
    for (int i = 0; i < 3; ++i) w.rec.reconcile("loop0", Trigger::verify);
    CHECK(w.sysfs.writes.empty());
    CHECK(w.log.take().empty());

    // A reload forgets the refusals (the module may be installed now): bfq
    // is tried once more, quietly, since nothing moved.
    w.rec.forget_refused_schedulers();
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(w.sysfs.writes.size() == 2);
    CHECK(w.log.take().empty());
    w.sysfs.writes.clear();
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(w.sysfs.writes.empty());
}

TEST_CASE("daemon scenario: a value this host cannot give is one failed alert, not one a pass, and resolves") {
    World w;  // loop0 as a kernel before 7.0 makes it: no queue/async_depth
    w.rec.set_policy(loops_policy("scheduler = \"mq-deadline\"\nasync_depth = 16\nread_ahead_kb = 256\n"));
    w.rec.reconcile("loop0", Trigger::added);
    auto said = w.log.take();
    CHECK(std::count(said.begin(), said.end(), "failed loop0 async_depth 16 ") == 1);
    CHECK(std::count(said.begin(), said.end(), "applied loop0 read_ahead_kb 256 256") == 1);
    CHECK(w.rec.summary().failed == 1);
    for (int i = 0; i < 3; ++i) w.rec.reconcile("loop0", Trigger::verify);
    CHECK(w.log.take().empty());
    CHECK(w.rec.summary().failed == 1);
    // The attribute appears (the same device under a kernel that has it):
    // applied at the next pass, and the failure said to be over.
    w.tree.file(w.tree.devpath_of("loop0") + "/queue/async_depth", "64");
    w.rec.reconcile("loop0", Trigger::verify);
    const auto back = w.log.take();
    INFO(util::join(back, " / "));
    CHECK(back == Texts{"resolved loop0 async_depth 16 16"});
    CHECK(w.q("async_depth") == "16");
    CHECK(w.rec.summary().failed == 0);
}

TEST_CASE("daemon scenario: facts that cannot be recorded (a full /run) are said once, enforced all the same") {
    World w;
    std::filesystem::create_directories(w.tree.root() / "state");
    std::ofstream(w.tree.root() / "state/facts") << "";  // a file where the directory goes: every save fails
    w.rec.set_policy(loops_policy("read_ahead_kb = 256\n"));
    w.rec.reconcile("loop0", Trigger::added);
    for (int i = 0; i < 3; ++i) {
        w.poke("read_ahead_kb", "4096");
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.q("read_ahead_kb") == "256");  // still enforced
    }
    auto said = [&](const std::string& what) {
        return std::count_if(w.log.lines.begin(), w.log.lines.end(),
                             [&](const std::string& l) { return l.find(what) != std::string::npos; });
    };
    CHECK(said("tried again at every pass") == 1);
    CHECK(said("recorded the facts of loop0") == 0);
    std::filesystem::remove(w.tree.root() / "state/facts");
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(said("recorded the facts of loop0") == 1);
    CHECK(std::filesystem::exists(w.tree.root() / "state/facts/loop0.json"));
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(said("tried again at every pass") == 1);
    CHECK(said("recorded the facts of loop0") == 1);
}

TEST_CASE("daemon scenario: a driver putting a value back during its setup is part of applying, not a warning") {
    World w;
    w.rec.set_policy(loops_policy("read_ahead_kb = 128\n"));
    w.rec.reconcile("loop0", Trigger::added);  // the kernel's add uevent
    CHECK(w.log.take() == Texts{"applied loop0 read_ahead_kb 128 128"});

    // The driver finishes its setup after the add uevent (sd revalidates,
    // NVMe scans its namespaces): a limits update raises read_ahead_kb.
    w.poke("max_sectors_kb", "1280");
    w.rec.reconcile("loop0", Trigger::udev_processed);
    CHECK(w.log.take() == Texts{"applied loop0 read_ahead_kb 128 128"});
    CHECK(w.log.full.back().message ==
          "set read_ahead_kb of loop0 to 128 again: the kernel put back 2560 while the device was still being set "
          "up; re-applied");
    CHECK(w.q("read_ahead_kb") == "128");
    CHECK(w.rec.devices().at("loop0").attrs.at("read_ahead_kb").drifts == 0);

    // Two verify passes later the device is settled: the same revert is one.
    w.rec.reconcile("loop0", Trigger::verify);
    w.poke("max_sectors_kb", "1280");
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(w.log.take() == Texts{"applied loop0 read_ahead_kb 128 128"});  // still within the second pass
    w.poke("max_sectors_kb", "1280");
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(w.log.take() == Texts{"reverted loop0 read_ahead_kb 128 2560"});

    // A new add (the same device re-added) settles again.
    w.rec.reconcile("loop0", Trigger::added);
    w.poke("max_sectors_kb", "1280");
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(w.log.take() == Texts{"applied loop0 read_ahead_kb 128 128"});
}

TEST_CASE("fault injection: the daemon keeps going through failing reads and writes") {
    // (A write refused with EBUSY is contention: "another writer holds the queue" below.)
    for (int err : {EINVAL, EIO, ENODEV, EACCES, EROFS}) {
        CAPTURE(err);
        World w;
        w.rec.set_policy(loops_policy("read_ahead_kb = 128\nnomerges = 1\n"));
        w.sysfs.fail["queue/nomerges"] = err;
        CHECK(w.rec.reconcile("loop0", Trigger::added));
        CHECK(w.log.take() == Texts{"failed loop0 nomerges 1 0", "applied loop0 read_ahead_kb 128 128"});
        w.sysfs.read_fail["queue/read_ahead_kb"] = err;
        CHECK(w.rec.reconcile("loop0", Trigger::verify));  // still running, one alert per change of state
        w.sysfs.read_fail.clear();
        w.sysfs.fail.clear();
        CHECK(w.rec.reconcile("loop0", Trigger::verify));
        auto after = w.log.take();
        CHECK(std::find(after.begin(), after.end(), "resolved loop0 nomerges 1 1") != after.end());
        CHECK(w.q("nomerges") == "1");
    }
}

TEST_CASE("fault injection: a device pulled while its queue is being written is information, not a failure") {
    // The whole disk gone; its queue directory first, the disk's own a
    // moment later (7.x); or caught mid-way, the queue directory still
    // there and its files going (6.1).
    enum class Gone { whole, queue_dir, queue_files };
    for (const Gone gone : {Gone::whole, Gone::queue_dir, Gone::queue_files}) {
        CAPTURE(static_cast<int>(gone));
        const bool whole = gone == Gone::whole;
        World w;
        w.rec.set_policy(loops_policy("read_ahead_kb = 128\nscheduler = \"mq-deadline\"\nnr_requests = 64\n"));
        // The scheduler switch went through; the disk is going before nr_requests.
        w.sysfs.before_write["queue/nr_requests"] = [&] {
            const auto dir = w.tree.root() / w.tree.devpath_of("loop0");
            if (whole) {
                std::filesystem::remove_all(dir);
                std::filesystem::remove(w.tree.root() / "block/loop0");
            } else if (gone == Gone::queue_dir) {
                std::filesystem::remove_all(dir / "queue");
            } else {
                std::filesystem::remove(dir / "queue/nr_requests");
                std::filesystem::remove(dir / "queue/read_ahead_kb");
            }
        };
        CHECK_FALSE(w.rec.reconcile("loop0", Trigger::added));
        CHECK(w.log.take().empty());  // no failed alert
        CHECK(std::count(w.log.lines.begin(), w.log.lines.end(),
                         "loop0 went away while its queue was being written; forgetting it") == 1);
        CHECK(w.rec.devices().empty());
        CHECK(w.rec.summary().failed == 0);
        CHECK_FALSE(std::filesystem::exists(w.tree.root() / "state/facts/loop0.json"));
        if (!whole) continue;

        // The same disk back under the same name: a new device, applied whole.
        w.sysfs.before_write.clear();
        w.tree.add_loop("loop0", 0, "/img");
        CHECK(w.rec.reconcile("loop0", Trigger::added));
        CHECK(w.log.take() == Texts{"applied loop0 scheduler mq-deadline mq-deadline",
                                    "applied loop0 nr_requests 64 64", "applied loop0 read_ahead_kb 128 128"});
    }
}

TEST_CASE("the daemon reads only the facts its policy matches on, and records facts after writing") {
    World w;
    w.rec.set_policy(loops_policy("read_ahead_kb = 256\n"));
    REQUIRE(w.rec.reconcile("loop0", Trigger::added));
    CHECK(w.q("read_ahead_kb") == "256");
    for (const auto& path : w.sysfs.reads) {
        INFO(path);
        // kernel = "loop*" needs no identity strings, cache mode or properties.
        CHECK(path.find("serial") == std::string::npos);
        CHECK(path.find("wwid") == std::string::npos);
        CHECK(path.find("cache_type") == std::string::npos);
        CHECK(path.find("uevent") == std::string::npos);
        CHECK(path.find("/device/") == std::string::npos);
    }
    // The facts were still frozen, after the writes.
    CHECK(std::filesystem::exists(w.tree.root() / "state/facts/loop0.json"));

    // A policy matching on the serial reads it.
    w.sysfs.reads.clear();
    auto r = policy::load_policy(
        {{"m.toml", "[[rule]]\nname = \"m\"\n[rule.match]\nserial = \"X*\"\n[rule.set]\nnomerges = 1\n"}});
    REQUIRE(r.ok());
    w.rec.set_policy(r.policy);
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(std::find(w.sysfs.reads.begin(), w.sysfs.reads.end(), "block/loop0/serial") != w.sysfs.reads.end());
}

TEST_CASE("daemon scenario: another writer holds the queue (EBUSY): quiet at the first pass, applied at the next") {
    World w;
    agent::BusyRetry quick;
    quick.max_attempts = 3;
    quick.pause = [](std::chrono::microseconds) {};
    w.rec.set_busy_retry(quick);
    w.rec.set_policy(loops_policy("nr_requests = 64\nread_ahead_kb = 128\n"));
    w.sysfs.busy["queue/nr_requests"] = 5;  // more than one pass's three writes
    w.rec.reconcile("loop0", Trigger::verify);
    CHECK(w.log.take() == Texts{"applied loop0 read_ahead_kb 128 128"});
    CHECK(w.rec.devices().at("loop0").attrs.at("nr_requests").status == agent::AttrStatus::busy);
    CHECK(w.rec.summary().busy == 1);
    CHECK(std::any_of(w.log.lines.begin(), w.log.lines.end(), [](const std::string& l) {
        return l.find("cannot set nr_requests of loop0 to 64 yet: the kernel answered EBUSY 3 of 3 times") == 0;
    }));

    SUBCASE("the writer lets go before the next pass: applied, with the reason") {
        w.rec.reconcile("loop0", Trigger::verify);  // two more EBUSY, then taken
        CHECK(w.log.take() == Texts{"applied loop0 nr_requests 64 64"});
        CHECK(w.log.full.back().message ==
              "set nr_requests of loop0 to 64 (was 128; another writer held the queue at the pass before)");
        CHECK(w.q("nr_requests") == "64");
        CHECK(w.rec.summary().busy == 0);
    }
    SUBCASE("still busy at the next pass: one failed alert, then quiet until it goes through") {
        w.sysfs.busy["queue/nr_requests"] = 100;
        w.rec.reconcile("loop0", Trigger::verify);
        const auto alerts = w.log.take();
        REQUIRE(alerts == Texts{"failed loop0 nr_requests 64 128"});
        CHECK(w.log.full.back().message.find("cannot set nr_requests of loop0 to 64: still busy at a second pass") ==
              0);
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take().empty());
        w.sysfs.busy["queue/nr_requests"] = 0;
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"resolved loop0 nr_requests 64 64"});
    }
}

TEST_CASE("daemon scenario: a value the policy stops declaring goes back to what the device had") {
    World w;
    const auto ra_before = w.q("read_ahead_kb");
    const auto sched_before = w.q("scheduler");
    w.rec.set_policy(loops_policy("read_ahead_kb = 4096\nscheduler = \"mq-deadline\"\nnomerges = 1\n"));
    w.rec.reconcile("loop0", Trigger::verify);
    REQUIRE(w.q("read_ahead_kb") == "4096");
    w.log.take();
    const auto n0 = w.log.full.size();  // the alerts from here on
    // The record survives the process: what a restarted daemon reads.
    const auto recorded = w.state.load_written(*udev::read_facts(w.sysfs, "loop0"));
    REQUIRE(recorded.size() == 3);
    CHECK(recorded.at("read_ahead_kb") == agent::WrittenValue{ra_before, "4096"});
    CHECK(recorded.at("nomerges") == agent::WrittenValue{"0", "1"});

    SUBCASE("a rule's values dropped at a reload: each put back, one restored entry each") {
        w.rec.set_policy(loops_policy("scheduler = \"mq-deadline\"\n"));
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() ==
              Texts{"restored loop0 nomerges 0 0", "restored loop0 read_ahead_kb " + ra_before + " " + ra_before});
        CHECK(w.q("read_ahead_kb") == ra_before);
        CHECK(w.q("nomerges") == "0");
        CHECK(w.q("scheduler").find("[mq-deadline]") != std::string::npos);  // still declared: kept
        CHECK(w.log.full[n0].message ==
              "put nomerges of loop0 back to 0, what it was before blkpolicy set 1: the policy no longer sets it");
        const auto fields = w.log.full[n0].fields;
        CHECK(fields == std::vector<std::pair<std::string, std::string>>{{"RESTORE", "restored"}, {"WRITTEN", "1"}});
        // Once: the next passes say nothing and write nothing.
        w.sysfs.writes.clear();
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take().empty());
        CHECK(w.sysfs.writes.empty());
        CHECK(w.state.load_written(*udev::read_facts(w.sysfs, "loop0")).size() == 1);  // scheduler only
    }
    SUBCASE("no rule at all: the scheduler too, and nothing is left recorded") {
        w.rec.set_policy(blkpolicy::test::one_rule_policy("nomerges = 1\n", "other", "kernel = \"sd*\"\n"));
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take().size() == 3);
        CHECK(w.q("scheduler") == sched_before);
        CHECK(w.state.load_written(*udev::read_facts(w.sysfs, "loop0")).empty());
        CHECK_FALSE(std::filesystem::exists(w.tree.root() / "state" / "written" / "loop0.json"));
    }
    SUBCASE("someone else set it since: left as it is, and said so") {
        w.poke("read_ahead_kb", "512");
        w.rec.set_policy(loops_policy("scheduler = \"mq-deadline\"\nnomerges = 1\n"));
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take() == Texts{"restored loop0 read_ahead_kb " + ra_before + " 512"});
        CHECK(w.log.full[n0].fields.front() == std::pair<std::string, std::string>{"RESTORE", "left"});
        CHECK(w.log.full[n0].message ==
              "left read_ahead_kb of loop0 as it is: it is now 512, not the 4096 blkpolicy "
              "wrote: someone else set it since");
        CHECK(w.q("read_ahead_kb") == "512");
    }
    SUBCASE("a restart with the same policy puts nothing back") {
        agent::Reconciler again{w.sysfs, w.state, w.log, host_on({6, 18})};
        again.set_policy(loops_policy("read_ahead_kb = 4096\nscheduler = \"mq-deadline\"\nnomerges = 1\n"));
        w.sysfs.writes.clear();
        again.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take().empty());
        CHECK(w.sysfs.writes.empty());
        // The restarted daemon knows the originals all the same.
        again.set_policy(loops_policy("scheduler = \"mq-deadline\"\n"));
        again.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take().size() == 2);
        CHECK(w.q("read_ahead_kb") == ra_before);
    }
    SUBCASE("on_removal = keep, and observe mode: nothing goes back") {
        auto keep = loops_policy("scheduler = \"mq-deadline\"\n");
        keep.daemon.restore_on_removal = false;
        w.rec.set_policy(keep);
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take().empty());
        CHECK(w.q("read_ahead_kb") == "4096");
        auto observe = loops_policy("scheduler = \"mq-deadline\"\n");
        w.rec.set_policy(observe);
        w.rec.set_mode(policy::Mode::observe);
        w.rec.reconcile("loop0", Trigger::verify);
        CHECK(w.log.take().empty());
        CHECK(w.q("read_ahead_kb") == "4096");
    }
    SUBCASE("the device goes away: its record goes with it") {
        w.rec.forget("loop0");
        CHECK_FALSE(std::filesystem::exists(w.tree.root() / "state" / "written" / "loop0.json"));
    }
}
