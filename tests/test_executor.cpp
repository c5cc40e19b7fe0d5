// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>

#include <cerrno>

#include "agent/executor.hpp"
#include "policy/loader.hpp"
#include "support/fake_sysfs.hpp"
#include "support/kernel_model.hpp"
#include "support/policies.hpp"
#include "udev/discovery.hpp"
#include "util/files.hpp"

using namespace blkpolicy;
using test::FakeSysfs;
using test::KernelModelSysfs;

namespace {

policy::DevicePlan plan_for(const udev::Sysfs& s, const std::string& dev, const policy::Policy& p) {
    auto facts = udev::read_facts(s, dev);
    REQUIRE(facts);
    return policy::plan_device(p, *facts, udev::read_values(s, dev), {});
}

std::map<std::string, agent::AttributeResult> by_attr(const agent::DeviceResult& r) {
    std::map<std::string, agent::AttributeResult> m;
    for (const auto& a : r.results) m[a.attribute] = a;
    return m;
}

std::vector<std::string> writes_of(const KernelModelSysfs& s) {
    std::vector<std::string> out;
    for (const auto& w : s.writes) out.push_back(w.path + "=" + w.value);
    return out;
}

}  // namespace

TEST_CASE("the kernel model reproduces the traps the write order avoids") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    KernelModelSysfs s(t.root());
    REQUIRE(s.write("block/loop0/queue/read_ahead_kb", "128") == 0);
    REQUIRE(s.write("block/loop0/queue/max_sectors_kb", "1024") == 0);
    CHECK(t.read(t.devpath_of("loop0") + "/queue/read_ahead_kb") == "2048");  // raised again
    REQUIRE(s.write("block/loop0/queue/nr_requests", "64") == 0);
    REQUIRE(s.write("block/loop0/queue/scheduler", "bfq") == 0);
    CHECK(t.read(t.devpath_of("loop0") + "/queue/nr_requests") == "256");
    CHECK(t.read(t.devpath_of("loop0") + "/queue/wbt_lat_usec") == "0");
    REQUIRE(s.write("block/loop0/queue/wbt_lat_usec", "2000") == 0);
    CHECK(t.read(t.devpath_of("loop0") + "/queue/wbt_lat_usec") == "0");  // silent no-op
}

TEST_CASE("the kernel model commits limits where the product's table says, as each kernel version does") {
    // Every attribute the table marks as a limits commit (write_cache too)
    // recomputes read_ahead_kb; the rule is the one kernel/rows gives the
    // modelled version. The loop is rotational with max_sectors_kb 1280 and
    // no optimal I/O size.
    const std::vector<std::pair<std::string, std::string>> commits = {
        {"rotational", "1"},           {"max_sectors_kb", "1280"},
        {"discard_max_bytes", "4096"}, {"write_cache", "write through"},
        {"add_random", "0"},           {"iostats", "1"}};
    for (const auto& [attr, value] : commits) {
        for (const auto& [kernel, after_big, after_small] :
             std::vector<std::tuple<kernel::KernelVersion, std::string, std::string>>{
                 {{6, 1, 0}, "8192", "64"},        // computed once at registration
                 {{6, 10, 0}, "128", "128"},       // reset: 2 x optimal_io_size (none here), 128 KiB floor
                 {{6, 18, 0}, "8192", "2560"}}) {  // only raised; 6.17+: 2 x max_sectors_kb when rotational
            FakeSysfs t;
            t.add_loop("loop0", 0, "/img");
            t.file(t.devpath_of("loop0") + "/queue/rotational", "1");
            t.file(t.devpath_of("loop0") + "/queue/max_sectors_kb", "1280");
            KernelModelSysfs s(t.root());
            s.kernel = kernel;
            const std::string& attribute = attr;  // (named again: clang 14 captures no structured binding)
            const int minor = kernel.minor;
            CAPTURE(attribute);
            CAPTURE(minor);
            REQUIRE(s.write("block/loop0/queue/read_ahead_kb", "8192") == 0);
            REQUIRE(s.write("block/loop0/queue/" + attr, value) == 0);
            CHECK(t.read(t.devpath_of("loop0") + "/queue/read_ahead_kb") == after_big);
            REQUIRE(s.write("block/loop0/queue/read_ahead_kb", "64") == 0);
            REQUIRE(s.write("block/loop0/queue/" + attr, value) == 0);
            CHECK(t.read(t.devpath_of("loop0") + "/queue/read_ahead_kb") == after_small);
        }
    }
    // Not a commit: read_ahead_kb stays.
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    KernelModelSysfs s(t.root());
    REQUIRE(s.write("block/loop0/queue/read_ahead_kb", "64") == 0);
    REQUIRE(s.write("block/loop0/queue/nomerges", "1") == 0);
    CHECK(t.read(t.devpath_of("loop0") + "/queue/read_ahead_kb") == "64");
}

TEST_CASE("apply in write order: every trap handled - every value read back") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    KernelModelSysfs s(t.root());
    auto p = test::one_rule_policy(
        "read_ahead_kb = 128\nmax_sectors_kb = 1024\nscheduler = \"bfq\"\nnr_requests = 64\nwbt_lat_usec = 2000\n"
        "iosched.slice_idle = 0\nrotational = 0\n");
    auto result = agent::execute(s, plan_for(s, "loop0", p));
    CHECK(writes_of(s) == std::vector<std::string>{"queue/rotational=0", "queue/max_sectors_kb=1024",
                                                   "queue/scheduler=bfq", "queue/nr_requests=64",
                                                   "queue/iosched/slice_idle=0", "queue/wbt_lat_usec=0",
                                                   "queue/wbt_lat_usec=2000", "queue/read_ahead_kb=128"});
    auto r = by_attr(result);
    for (const auto& [attr, res] : r) {
        const auto& attribute = attr;  // (named again: clang 14 captures no structured binding)
        CAPTURE(attribute);
        CHECK(res.outcome == agent::Outcome::applied);
        CHECK(res.after == res.expected);
    }
    CHECK(r["wbt_lat_usec"].before == "0");  // read after the bfq switch, not at plan time
    CHECK(t.read(t.devpath_of("loop0") + "/queue/read_ahead_kb") == "128");
    CHECK(t.read(t.devpath_of("loop0") + "/queue/nr_requests") == "64");
    CHECK(t.read(t.devpath_of("loop0") + "/queue/wbt_lat_usec") == "2000");

    SUBCASE("a second apply is a no-op") {
        s.writes.clear();
        auto again = agent::execute(s, plan_for(s, "loop0", p));
        CHECK(s.writes.empty());
        for (const auto& res : again.results) CHECK(res.outcome == agent::Outcome::unchanged);
    }
}

TEST_CASE("one failing attribute does not stop the rest") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    KernelModelSysfs s(t.root());
    s.fail["queue/nomerges"] = EINVAL;
    auto result = agent::execute(
        s, plan_for(s, "loop0", test::one_rule_policy("nomerges = 2\nrq_affinity = 2\nread_ahead_kb = 64\n")));
    auto r = by_attr(result);
    CHECK(r["nomerges"].outcome == agent::Outcome::failed);
    CHECK(r["nomerges"].detail == "write 2: Invalid argument (EINVAL)");
    CHECK(r["rq_affinity"].outcome == agent::Outcome::applied);
    CHECK(r["read_ahead_kb"].outcome == agent::Outcome::applied);
}

namespace {
// Accepts writes to nomerges without changing anything, like rq_affinity=3.
struct SwallowingSysfs : KernelModelSysfs {
    using KernelModelSysfs::KernelModelSysfs;
    int write(const std::string& rel, std::string_view value) override {
        if (rel.ends_with("/queue/nomerges")) return 0;
        return KernelModelSysfs::write(rel, value);
    }
};
// Writing read_ahead_kb resets another attribute (nomerges unless told):
// something a later write undoes.
struct UndoingSysfs : KernelModelSysfs {
    using KernelModelSysfs::KernelModelSysfs;
    int write(const std::string& rel, std::string_view value) override {
        int err = KernelModelSysfs::write(rel, value);
        if (rel.ends_with("/queue/read_ahead_kb") && !undone) {
            undone = true;
            udev::Sysfs::write("block/loop0/queue/" + undo.first, undo.second);
        }
        return err;
    }
    std::pair<std::string, std::string> undo{"nomerges", "0"};
    bool undone = false;
};
// The device disappears after the first write.
struct VanishingSysfs : KernelModelSysfs {
    using KernelModelSysfs::KernelModelSysfs;
    int write(const std::string& rel, std::string_view value) override {
        int err = KernelModelSysfs::write(rel, value);
        std::filesystem::remove(root() / "block/loop0");
        return err;
    }
};
}  // namespace

TEST_CASE("a write that does not stick is reported with what reads back") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    SwallowingSysfs s(t.root());
    auto r = by_attr(agent::execute(s, plan_for(s, "loop0", test::one_rule_policy("nomerges = 1\n"))));
    CHECK(r["nomerges"].outcome == agent::Outcome::not_stuck);
    CHECK(r["nomerges"].detail == "wrote 1, reads back 0");
    CHECK(s.writes.size() == 0);  // swallowed before the model saw them
}

TEST_CASE("what moved during the pass is re-applied once, and said to be another writer's unless a row explains it") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    SUBCASE("no kernel row links a read_ahead_kb write to nomerges: moved outside blkpolicy") {
        UndoingSysfs s(t.root());
        auto r = by_attr(
            agent::execute(s, plan_for(s, "loop0", test::one_rule_policy("nomerges = 1\nread_ahead_kb = 64\n"))));
        CHECK(r["nomerges"].outcome == agent::Outcome::applied);
        CHECK(r["nomerges"].moved_outside == "0");
        CHECK(r["nomerges"].detail == "re-applied: changed to 0 outside blkpolicy while it was being written");
        CHECK(t.read(t.devpath_of("loop0") + "/queue/nomerges") == "1");
        CHECK(writes_of(s) ==
              std::vector<std::string>{"queue/nomerges=1", "queue/read_ahead_kb=64", "queue/nomerges=1"});
    }
    SUBCASE("a scheduler switch of this pass can move nr_requests: blkpolicy's own doing") {
        UndoingSysfs s(t.root());
        s.undo = {"nr_requests", "32"};
        auto r = by_attr(agent::execute(
            s, plan_for(s, "loop0",
                        test::one_rule_policy("scheduler = \"mq-deadline\"\nnr_requests = 64\nread_ahead_kb = 64\n"))));
        CHECK(r["nr_requests"].outcome == agent::Outcome::applied);
        CHECK(r["nr_requests"].moved_outside.empty());
        CHECK(r["nr_requests"].detail == "re-applied: a later write had changed it to 32");
        CHECK(t.read(t.devpath_of("loop0") + "/queue/nr_requests") == "64");
    }
}

TEST_CASE("a device vanishing mid-apply: the rest is skipped - not failed") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    VanishingSysfs s(t.root());
    auto result = agent::execute(
        s, plan_for(s, "loop0", test::one_rule_policy("nomerges = 1\nrq_affinity = 2\nread_ahead_kb = 64\n")));
    auto r = by_attr(result);
    CHECK(r["rq_affinity"].outcome == agent::Outcome::skipped);
    CHECK(r["rq_affinity"].detail == "device vanished");
    CHECK(r["read_ahead_kb"].outcome == agent::Outcome::skipped);
    CHECK(r["nomerges"].outcome == agent::Outcome::skipped);
}

TEST_CASE("a disk pulled mid-apply, whichever part of it goes first: skipped as vanished, nothing failed") {
    // The whole disk; its queue directory first (7.x); or the queue's files
    // going while the directory is still there (6.1).
    enum class Gone { whole, queue_dir, queue_files };
    for (const Gone gone : {Gone::whole, Gone::queue_dir, Gone::queue_files}) {
        CAPTURE(static_cast<int>(gone));
        FakeSysfs t;
        t.add_loop("loop0", 0, "/img");
        KernelModelSysfs s(t.root());
        s.before_write["queue/nr_requests"] = [&] {
            const auto dir = t.root() / t.devpath_of("loop0");
            if (gone == Gone::whole) {
                std::filesystem::remove_all(dir);
                std::filesystem::remove(t.root() / "block/loop0");
            } else if (gone == Gone::queue_dir) {
                std::filesystem::remove_all(dir / "queue");
            } else {
                std::filesystem::remove(dir / "queue/nr_requests");
                std::filesystem::remove(dir / "queue/read_ahead_kb");
            }
        };
        auto r = by_attr(agent::execute(
            s, plan_for(s, "loop0",
                        test::one_rule_policy("scheduler = \"mq-deadline\"\nnr_requests = 64\nread_ahead_kb = 64\n"))));
        // The switch went through; read back, the scheduler is gone too,
        // unless only the queue's other files went.
        CHECK(r["scheduler"].outcome ==
              (gone == Gone::queue_files ? agent::Outcome::applied : agent::Outcome::skipped));
        for (const char* attr : {"nr_requests", "read_ahead_kb"}) {
            CAPTURE(attr);
            CHECK(r[attr].outcome == agent::Outcome::skipped);
            CHECK(r[attr].detail == "device vanished");
        }
    }
}

TEST_CASE("an attribute missing on a live queue is not taken for the device going") {
    // Only iosched/ files come and go on a live queue; a plan's attribute the
    // device never had is unavailable, and the device is not called vanished.
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    KernelModelSysfs s(t.root());
    std::filesystem::remove(t.root() / t.devpath_of("loop0") / "queue/nomerges");
    auto r =
        by_attr(agent::execute(s, plan_for(s, "loop0", test::one_rule_policy("nomerges = 1\nread_ahead_kb = 64\n"))));
    CHECK(r["nomerges"].outcome == agent::Outcome::unavailable);
    CHECK(r["nomerges"].detail.find("vanished") == std::string::npos);
    CHECK(r["read_ahead_kb"].outcome == agent::Outcome::applied);
}

TEST_CASE("refused and skipped actions write nothing") {
    FakeSysfs t;
    test::build_fleet(t);
    KernelModelSysfs s(t.root());
    auto p = policy::load_policy({{"p.toml",
                                   "[[rule]]\nname = \"r\"\nacknowledge = [\"write-through-drops-flushes\"]\n"
                                   "[rule.set]\nwrite_cache = \"write through\"\nscheduler = \"kyber\"\n"}});
    REQUIRE(p.ok());
    auto r = by_attr(agent::execute(s, plan_for(s, "sda", p.policy)));
    CHECK(r["write_cache"].outcome == agent::Outcome::refused);
    CHECK(r["scheduler"].outcome == agent::Outcome::applied);
    auto z = by_attr(agent::execute(s, plan_for(s, "zram0", p.policy)));
    CHECK(z["scheduler"].outcome == agent::Outcome::skipped);
    CHECK(z["write_cache"].outcome == agent::Outcome::unchanged);  // zram already writes through
    CHECK(writes_of(s) == std::vector<std::string>{"queue/scheduler=kyber"});
}

TEST_CASE("fault injection: every kind of failing write is reported on its attribute alone") {
    // (EBUSY is contention, retried: its own tests below.)
    for (int err : {EINVAL, EIO, ENODEV, EACCES, EROFS}) {
        CAPTURE(err);
        FakeSysfs t;
        t.add_loop("loop0", 0, "/img");
        KernelModelSysfs s(t.root());
        s.fail["queue/nomerges"] = err;
        auto r = by_attr(agent::execute(
            s, plan_for(s, "loop0", test::one_rule_policy("nomerges = 1\nrq_affinity = 2\nread_ahead_kb = 64\n"))));
        CHECK(r["nomerges"].outcome == agent::Outcome::failed);
        CHECK(r["nomerges"].detail == "write 1: " + util::errno_text(err));
        CHECK(r["rq_affinity"].outcome == agent::Outcome::applied);
        CHECK(r["read_ahead_kb"].outcome == agent::Outcome::applied);
    }
}

TEST_CASE("fault injection: failing reads, short reads and files vanishing between listing and open") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    KernelModelSysfs s(t.root());
    const auto policy = test::one_rule_policy("nomerges = 1\nrq_affinity = 2\nread_ahead_kb = 64\nadd_random = 1\n");
    const auto plan = plan_for(s, "loop0", policy);  // planned before the faults start
    s.read_fail["queue/rq_affinity"] = EIO;
    s.short_read.insert("queue/read_ahead_kb");
    s.vanish.insert("queue/add_random");
    auto r = by_attr(agent::execute(s, plan));
    CHECK(r["rq_affinity"].outcome == agent::Outcome::failed);
    CHECK(r["rq_affinity"].detail == "cannot read queue/rq_affinity: Input/output error (EIO)");
    CHECK(r["read_ahead_kb"].outcome == agent::Outcome::not_stuck);  // "64" reads back as "6"
    CHECK(r["read_ahead_kb"].detail == "wrote 64, reads back 6");
    // A queue file the plan read, gone a moment later: on a real kernel only
    // a device being removed does that (iosched/ files aside).
    CHECK(r["add_random"].outcome == agent::Outcome::skipped);
    CHECK(r["add_random"].detail == "device vanished");
    CHECK(r["nomerges"].outcome == agent::Outcome::applied);
}

TEST_CASE("a scheduler the device does not list yet: the kernel loads it, or the next name is taken") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    t.file(t.devpath_of("loop0") + "/queue/scheduler", "[none] mq-deadline");  // bfq, kyber: modules, not loaded
    KernelModelSysfs s(t.root());

    SUBCASE("bfq is a module: writing the name loads it") {
        s.loadable_schedulers = {"bfq"};
        auto r = by_attr(agent::execute(s, plan_for(s, "loop0", test::one_rule_policy("scheduler = \"bfq\"\n"))));
        CHECK(r["scheduler"].outcome == agent::Outcome::applied);
        CHECK(r["scheduler"].after == "bfq");
        CHECK(r["scheduler"].refused.empty());
    }
    SUBCASE("no bfq in this kernel: refused, and the next one of the list is written") {
        auto r = by_attr(
            agent::execute(s, plan_for(s, "loop0", test::one_rule_policy("scheduler = [\"bfq\", \"mq-deadline\"]\n"))));
        CHECK(writes_of(s) == std::vector<std::string>{"queue/scheduler=bfq", "queue/scheduler=mq-deadline"});
        CHECK(r["scheduler"].outcome == agent::Outcome::applied);
        CHECK(r["scheduler"].expected == "mq-deadline");
        CHECK(r["scheduler"].after == "mq-deadline");
        CHECK(r["scheduler"].refused == std::vector<std::string>{"bfq"});
        CHECK(r["scheduler"].detail ==
              "the kernel refused bfq (no such scheduler, built in or as a module); mq-deadline accepted");
    }
    SUBCASE("none of the list exists: failed, naming every refused name") {
        auto r = by_attr(
            agent::execute(s, plan_for(s, "loop0", test::one_rule_policy("scheduler = [\"bfq\", \"kyber\"]\n"))));
        CHECK(r["scheduler"].outcome == agent::Outcome::failed);
        CHECK(r["scheduler"].detail == "the kernel refused bfq, kyber (no such scheduler, built in or as a module)");
        CHECK(r["scheduler"].after == "none");
    }
}

TEST_CASE("Linux 6.1: bfq turns a default wbt off while sysfs still shows the latency") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    t.file(t.devpath_of("loop0") + "/queue/wbt_lat_usec", "75000");  // a spinning disk's default
    KernelModelSysfs s(t.root());
    s.kernel = {6, 1, 0};
    const auto policy = test::one_rule_policy("scheduler = \"bfq\"\nwbt_lat_usec = 75000\n");

    SUBCASE("the trap: the latency reads as wanted, writing it is a no-op, wbt stays off") {
        REQUIRE(s.write("block/loop0/queue/scheduler", "bfq") == 0);
        CHECK(t.read(t.devpath_of("loop0") + "/queue/wbt_lat_usec") == "75000");
        CHECK(s.wbt_state("loop0") == 3);
        REQUIRE(s.write("block/loop0/queue/wbt_lat_usec", "75000") == 0);
        CHECK(s.wbt_state("loop0") == 3);
    }
    SUBCASE("without debugfs: the plan knows the switch, writes 0 then the value") {
        auto r = by_attr(agent::execute(s, plan_for(s, "loop0", policy)));
        CHECK(s.wbt_state("loop0") == 2);
        CHECK(r["wbt_lat_usec"].outcome == agent::Outcome::applied);
        CHECK(writes_of(s) ==
              std::vector<std::string>{"queue/scheduler=bfq", "queue/wbt_lat_usec=0", "queue/wbt_lat_usec=75000"});
    }
    SUBCASE("with debugfs: a wbt someone else's bfq switch turned off reads as 0, and is turned on again") {
        s.debugfs = true;
        REQUIRE(s.write("block/loop0/queue/scheduler", "bfq") == 0);  // not blkpolicy's doing
        CHECK(udev::read_value(s, "loop0", "wbt_lat_usec").value == "0");
        s.writes.clear();
        auto r = by_attr(agent::execute(s, plan_for(s, "loop0", policy)));
        CHECK(r["scheduler"].outcome == agent::Outcome::unchanged);
        CHECK(r["wbt_lat_usec"].before == "0");
        CHECK(r["wbt_lat_usec"].after == "75000");
        CHECK(s.wbt_state("loop0") == 2);
        CHECK(writes_of(s) == std::vector<std::string>{"queue/wbt_lat_usec=0", "queue/wbt_lat_usec=75000"});
    }
}

TEST_CASE("a value that reads back otherwise than written keeps the read-back as what is expected") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    KernelModelSysfs s(t.root());
    auto r = by_attr(agent::execute(s, plan_for(s, "loop0", test::one_rule_policy("read_ahead_kb = 130\n"))));
    CHECK(r["read_ahead_kb"].outcome == agent::Outcome::applied);
    CHECK(r["read_ahead_kb"].expected == "128");
    CHECK(r["read_ahead_kb"].after == "128");
}

namespace {
// The retry bound with its pauses recorded instead of slept.
struct CountedRetry {
    agent::BusyRetry bound;
    std::vector<long> pauses_us;
    CountedRetry() {
        bound.pause = [this](std::chrono::microseconds d) { pauses_us.push_back(static_cast<long>(d.count())); };
    }
};
}  // namespace

TEST_CASE("EBUSY is contention: the write is made again after doubling pauses until the kernel takes it") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    KernelModelSysfs s(t.root());
    s.busy["queue/scheduler"] = 3;    // another writer holds the queue for three tries
    s.busy["queue/nr_requests"] = 1;  // and once more for nr_requests
    CountedRetry retry;
    auto r = by_attr(agent::execute(
        s, plan_for(s, "loop0", test::one_rule_policy("scheduler = \"mq-deadline\"\nnr_requests = 32\n")),
        retry.bound));
    CHECK(r["scheduler"].outcome == agent::Outcome::applied);
    CHECK(r["scheduler"].attempts == 4);
    CHECK(r["scheduler"].busy == 3);
    CHECK(r["nr_requests"].outcome == agent::Outcome::applied);
    CHECK(r["nr_requests"].attempts == 2);
    CHECK(r["nr_requests"].after == "32");
    CHECK(retry.pauses_us == std::vector<long>{1000, 2000, 4000, 1000});
    CHECK(r["scheduler"].busy_waited == std::chrono::microseconds(7000));
    CHECK(writes_of(s) == std::vector<std::string>{"queue/scheduler=mq-deadline", "queue/scheduler=mq-deadline",
                                                   "queue/scheduler=mq-deadline", "queue/scheduler=mq-deadline",
                                                   "queue/nr_requests=32", "queue/nr_requests=32"});
}

TEST_CASE("EBUSY past the bound is reported as busy, not failed, and the rest still applies") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    KernelModelSysfs s(t.root());
    s.busy["queue/nr_requests"] = 1'000'000;  // a writer that never lets go
    CountedRetry retry;
    retry.bound.max_attempts = 40;
    retry.bound.budget = std::chrono::milliseconds(100);
    auto r = by_attr(agent::execute(
        s, plan_for(s, "loop0", test::one_rule_policy("nr_requests = 32\nread_ahead_kb = 64\n")), retry.bound));
    CHECK(r["nr_requests"].outcome == agent::Outcome::busy);
    CHECK(agent::is_failure(agent::Outcome::busy));
    // 1 + 2 + 4 + 8 + 16 + 32 + 32 (the cap) = 95 ms; one more pause would pass 100.
    CHECK(retry.pauses_us == std::vector<long>{1000, 2000, 4000, 8000, 16000, 32000, 32000});
    CHECK(r["nr_requests"].attempts == 8);
    CHECK(r["nr_requests"].detail ==
          "the kernel answered EBUSY 8 of 8 times in 95 ms: another writer held the queue's update lock throughout");
    CHECK(r["nr_requests"].after == r["nr_requests"].before);
    CHECK(r["read_ahead_kb"].outcome == agent::Outcome::applied);

    SUBCASE("the attempt count bounds it too") {
        s.writes.clear();
        retry.pauses_us.clear();
        retry.bound.max_attempts = 3;
        retry.bound.budget = std::chrono::milliseconds(10'000);
        auto again =
            by_attr(agent::execute(s, plan_for(s, "loop0", test::one_rule_policy("nr_requests = 32\n")), retry.bound));
        CHECK(again["nr_requests"].outcome == agent::Outcome::busy);
        CHECK(again["nr_requests"].attempts == 3);
        CHECK(retry.pauses_us.size() == 2);
    }
}

TEST_CASE("requests in flight that complete none: no queue write freezes the queue behind them; busy, said why") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    const auto dir = t.devpath_of("loop0");
    // a write the device holds: one in flight (the ninth field), none completing
    t.file(dir + "/stat",
           "     120        0     960       4       30        0     240      12        1       20      16\n");
    KernelModelSysfs s(t.root());
    CountedRetry retry;
    auto r = by_attr(agent::execute(
        s, plan_for(s, "loop0", test::one_rule_policy("scheduler = \"mq-deadline\"\nread_ahead_kb = 64\n")),
        retry.bound));
    CHECK(r["scheduler"].outcome == agent::Outcome::busy);
    CHECK(r["scheduler"].detail ==
          "1 request(s) in flight completed none in 200 ms: a queue write would freeze the queue behind them, and "
          "every reader of the disk with it");
    CHECK(r["read_ahead_kb"].outcome == agent::Outcome::busy);
    CHECK(writes_of(s).empty());
    CHECK(retry.pauses_us.size() == 20);  // looked every 10 ms for 200 ms, once for the device

    SUBCASE("nothing in flight: written at once") {
        t.file(dir + "/stat",
               "     120        0     960       4       30        0     240      12        0       20      16\n");
        retry.pauses_us.clear();
        auto ok = by_attr(agent::execute(
            s, plan_for(s, "loop0", test::one_rule_policy("scheduler = \"mq-deadline\"\n")), retry.bound));
        CHECK(ok["scheduler"].outcome == agent::Outcome::applied);
        CHECK(retry.pauses_us.empty());
    }
}

TEST_CASE("the default bound: at most 40 writes and one second of pauses, real sleeps") {
    const auto& b = agent::default_busy_retry();
    CHECK(b.max_attempts == 40);
    CHECK(b.budget == std::chrono::milliseconds(1000));
    CHECK(b.first_pause == std::chrono::microseconds(1000));
    CHECK(b.max_pause == std::chrono::microseconds(32000));
    CHECK(static_cast<bool>(b.pause));
}

namespace {
// A 7.0+ loop queue: queue/async_depth beside nr_requests.
void add_async_depth(FakeSysfs& t, const std::string& name, const std::string& value) {
    t.file(t.devpath_of(name) + "/queue/async_depth", value);
}
}  // namespace

TEST_CASE("async_depth (7.0+): written after the scheduler switch and nr_requests that move it, read back") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    add_async_depth(t, "loop0", "128");
    KernelModelSysfs s(t.root());
    s.kernel = {7, 3, 4};
    auto plan =
        plan_for(s, "loop0", test::one_rule_policy("scheduler = \"kyber\"\nnr_requests = 64\nasync_depth = 16\n"));
    auto result = agent::execute(s, plan);
    CHECK(writes_of(s) ==
          std::vector<std::string>{"queue/scheduler=kyber", "queue/nr_requests=64", "queue/async_depth=16"});
    auto r = by_attr(result);
    CHECK(r["async_depth"].outcome == agent::Outcome::applied);
    CHECK(r["async_depth"].before == "48");  // kyber's default for 64 requests, 3/4, read after the writes
    CHECK(t.read(t.devpath_of("loop0") + "/queue/async_depth") == "16");

    SUBCASE("an nr_requests write alone rescales it: async_depth is written again") {
        s.writes.clear();
        auto p2 = test::one_rule_policy("scheduler = \"kyber\"\nnr_requests = 128\nasync_depth = 16\n");
        auto plan2 = plan_for(s, "loop0", p2);
        auto again = by_attr(agent::execute(s, plan2));
        CHECK(again["async_depth"].before == "32");  // 16 of 64 scaled to 128
        CHECK(again["async_depth"].outcome == agent::Outcome::applied);
        CHECK(t.read(t.devpath_of("loop0") + "/queue/async_depth") == "16");
    }
}

TEST_CASE("async_depth: skipped under none, unavailable on kernels without it, refused above nr_requests") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    t.add_loop("loop1", 1, "/img1");
    add_async_depth(t, "loop0", "128");
    KernelModelSysfs s(t.root());
    auto none = by_attr(agent::execute(s, plan_for(s, "loop0", test::one_rule_policy("async_depth = 16\n"))));
    CHECK(none["async_depth"].outcome == agent::Outcome::skipped);
    CHECK(none["async_depth"].detail ==
          "under scheduler none the kernel refuses async_depth (EINVAL): it follows nr_requests");
    auto old = by_attr(agent::execute(
        s, plan_for(s, "loop1", test::one_rule_policy("scheduler = \"mq-deadline\"\nasync_depth = 16\n"))));
    CHECK(old["async_depth"].outcome == agent::Outcome::unavailable);
    CHECK(agent::is_failure(old["async_depth"].outcome));  // the policy is not met: apply exits 1
    CHECK(old["async_depth"].detail ==
          "this kernel has no queue/async_depth (7.0 and later have it; before, mq-deadline has iosched.async_depth)");
    auto big = by_attr(agent::execute(
        s, plan_for(s, "loop0",
                    test::one_rule_policy("scheduler = \"mq-deadline\"\nnr_requests = 64\nasync_depth = 100\n"))));
    CHECK(big["async_depth"].outcome == agent::Outcome::refused);
    CHECK(big["async_depth"].detail == "above nr_requests (64): the kernel would cap it at that");
    CHECK(big["nr_requests"].outcome == agent::Outcome::applied);
}

TEST_CASE("iosched.async_depth under mq-deadline: moved to async_depth where the kernel has queue/async_depth") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    t.add_loop("loop1", 1, "/img1");
    add_async_depth(t, "loop0", "128");
    KernelModelSysfs s(t.root());
    const auto p = test::one_rule_policy("scheduler = \"mq-deadline\"\niosched.async_depth = 16\n");
    auto moved = by_attr(agent::execute(s, plan_for(s, "loop0", p)));
    CHECK(moved["iosched.async_depth"].outcome == agent::Outcome::unavailable);
    CHECK(moved["iosched.async_depth"].detail ==
          "moved: since 7.0 mq-deadline has no iosched/async_depth; set async_depth instead");
    auto plan_old = plan_for(s, "loop1", p);
    for (const auto& a : plan_old.actions)
        if (a.attribute == "iosched.async_depth") CHECK(a.kind == policy::ActionKind::write);
}
