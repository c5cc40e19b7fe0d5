// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>

#include "policy/loader.hpp"
#include "policy/plan.hpp"
#include "support/policies.hpp"

using namespace blkpolicy::policy;

namespace {

DeviceFacts loop_facts() {
    DeviceFacts f;
    f.name = "loop0";
    f.has_queue = true;
    f.request_based = true;
    f.rotational = true;
    f.stack = Stack::loop;
    f.schedulers = {"none", "mq-deadline", "kyber", "bfq"};
    f.scheduler = "none";
    return f;
}

Values loop_values() {
    return {{"rotational", "1"},        {"scheduler", "none"},         {"nr_requests", "128"},
            {"read_ahead_kb", "2560"},  {"max_sectors_kb", "1280"},    {"max_hw_sectors_kb", "1280"},
            {"wbt_lat_usec", "2000"},   {"write_cache", "write back"}, {"rq_affinity", "1"},
            {"nomerges", "0"},          {"add_random", "0"},           {"iostats", "1"},
            {"discard_max_bytes", "0"}, {"discard_granularity", "0"}};
}

std::vector<std::string> order(const DevicePlan& p) {
    std::vector<std::string> out;
    for (const auto& a : p.actions) out.push_back(a.attribute + ":" + to_string(a.kind));
    return out;
}

const Action& action(const DevicePlan& p, const std::string& attr) {
    for (const auto& a : p.actions)
        if (a.attribute == attr) return a;
    FAIL("no action for " << attr);
    throw;
}

}  // namespace

TEST_CASE("write order: limits - scheduler - requests - tunables - wbt - late - read_ahead_kb") {
    auto p = plan_device(blkpolicy::test::policy_from_toml(R"(
[[rule]]
name = "all"
[rule.set]
read_ahead_kb = 128
rq_affinity = 2
wbt_lat_usec = 5000
iosched.fifo_batch = 4
nr_requests = 64
scheduler = "mq-deadline"
add_random = 1
max_sectors_kb = 1024
rotational = 0
)"),
                         loop_facts(), loop_values(), {});
    CHECK(order(p) == std::vector<std::string>{"rotational:write", "max_sectors_kb:write", "add_random:write",
                                               "scheduler:write", "nr_requests:write", "iosched.fifo_batch:write",
                                               "wbt_lat_usec:write", "rq_affinity:write", "read_ahead_kb:write"});
}

TEST_CASE("a later rule wins per attribute - and the plan names both") {
    auto p = plan_device(blkpolicy::test::policy_from_toml(R"(
[[rule]]
name = "first"
[rule.set]
read_ahead_kb = 512
nomerges = 1
[[rule]]
name = "second"
[rule.match]
kernel = "loop*"
[rule.set]
read_ahead_kb = 256
)"),
                         loop_facts(), loop_values(), {});
    REQUIRE(p.matched.size() == 2);
    const auto& ra = action(p, "read_ahead_kb");
    CHECK(ra.expected == "256");
    CHECK(ra.rule.name == "second");
    CHECK(ra.rule.pos.file_line() == "p.toml:7");
    REQUIRE(ra.overridden.size() == 1);
    CHECK(ra.overridden[0].name == "first");
    CHECK(action(p, "nomerges").rule.name == "first");
}

TEST_CASE("values already in place are unchanged - nothing else disturbs them") {
    auto p = plan_device(
        blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\nread_ahead_kb = 2560\nnomerges = 0\n"),
        loop_facts(), loop_values(), {});
    CHECK(order(p) == std::vector<std::string>{"nomerges:unchanged", "read_ahead_kb:unchanged"});
}

TEST_CASE("side effects force later writes") {
    SUBCASE("a limits write re-checks read_ahead_kb even when it is in place now") {
        auto p = plan_device(blkpolicy::test::policy_from_toml(
                                 "[[rule]]\nname = \"r\"\n[rule.set]\nmax_sectors_kb = 1024\nread_ahead_kb = 2560\n"),
                             loop_facts(), loop_values(), {});
        CHECK(action(p, "read_ahead_kb").kind == ActionKind::write);
        CHECK(action(p, "read_ahead_kb").note.find("raise read_ahead_kb") != std::string::npos);
    }
    SUBCASE("a scheduler switch forces nr_requests") {
        auto p =
            plan_device(blkpolicy::test::policy_from_toml(
                            "[[rule]]\nname = \"r\"\n[rule.set]\nscheduler = \"mq-deadline\"\nnr_requests = 128\n"),
                        loop_facts(), loop_values(), {});
        CHECK(action(p, "nr_requests").kind == ActionKind::write);
        CHECK(action(p, "nr_requests").note == "the scheduler switch resets nr_requests");
    }
    SUBCASE("switching to bfq forces a non-zero wbt") {
        auto p = plan_device(blkpolicy::test::policy_from_toml(
                                 "[[rule]]\nname = \"r\"\n[rule.set]\nscheduler = \"bfq\"\nwbt_lat_usec = 2000\n"),
                             loop_facts(), loop_values(), {});
        CHECK(action(p, "wbt_lat_usec").kind == ActionKind::write);
        CHECK(action(p, "wbt_lat_usec").note == "switching to bfq turns default wbt off: written as 0, then the value");
    }
    SUBCASE("without a scheduler switch nothing is forced") {
        auto v = loop_values();
        v["scheduler"] = "mq-deadline";
        auto f = loop_facts();
        f.scheduler = "mq-deadline";
        auto p =
            plan_device(blkpolicy::test::policy_from_toml(
                            "[[rule]]\nname = \"r\"\n[rule.set]\nscheduler = \"mq-deadline\"\nnr_requests = 128\n"),
                        f, v, {});
        CHECK(order(p) == std::vector<std::string>{"scheduler:unchanged", "nr_requests:unchanged"});
    }
}

TEST_CASE("scheduler preference list: a name not loaded yet is tried, one the kernel cannot have is not") {
    auto f = loop_facts();
    f.schedulers = {"none", "mq-deadline"};  // a distribution kernel at boot: bfq and kyber are modules
    const auto list = blkpolicy::test::policy_from_toml(
        "[[rule]]\nname = \"r\"\n[rule.set]\nscheduler = [\"bfq\", \"mq-deadline\"]\n");

    SUBCASE("loadable modules unknown (the daemon's unit hides /lib/modules): tried, next ones kept") {
        auto p = plan_device(list, f, loop_values(), {});
        CHECK(action(p, "scheduler").kind == ActionKind::write);
        CHECK(action(p, "scheduler").value == "bfq");
        CHECK(action(p, "scheduler").alternatives == std::vector<std::string>{"mq-deadline"});
        CHECK(action(p, "scheduler").note ==
              "bfq is not loaded yet: writing it asks the kernel to load a module for it (if it refuses: mq-deadline)");
    }
    SUBCASE("bfq is a module of this kernel") {
        PlanContext ctx;
        ctx.loadable_schedulers = std::vector<std::string>{"bfq", "kyber", "mq-deadline"};
        auto p = plan_device(list, f, loop_values(), ctx);
        CHECK(action(p, "scheduler").value == "bfq");
        CHECK(action(p, "scheduler").note ==
              "bfq is not loaded yet: writing it makes the kernel load its module (if it refuses: mq-deadline)");
    }
    SUBCASE("this kernel has no bfq at all: the first one it has") {
        PlanContext ctx;
        ctx.loadable_schedulers = std::vector<std::string>{};
        auto p = plan_device(list, f, loop_values(), ctx);
        CHECK(action(p, "scheduler").value == "mq-deadline");
        CHECK(action(p, "scheduler").alternatives.empty());
        CHECK(action(p, "scheduler").note == "first available of bfq, mq-deadline");
    }
    SUBCASE("refused on this boot already: not tried again") {
        PlanContext ctx;
        ctx.refused_schedulers = {"bfq"};
        auto p = plan_device(list, f, loop_values(), ctx);
        CHECK(action(p, "scheduler").value == "mq-deadline");
    }
    SUBCASE("none of them possible: unavailable (the policy is not met), saying what the kernel has") {
        PlanContext ctx;
        ctx.loadable_schedulers = std::vector<std::string>{"mq-deadline"};
        ctx.refused_schedulers = {"bfq"};
        auto none = plan_device(
            blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\nscheduler = [\"bfq\", \"kyber\"]\n"),
            f, loop_values(), ctx);
        CHECK(action(none, "scheduler").kind == ActionKind::unavailable);
        CHECK(action(none, "scheduler").note ==
              "the kernel has none of bfq, kyber (loaded: none mq-deadline; loadable: mq-deadline; refused: bfq)");
        ctx.loadable_schedulers = std::vector<std::string>{};
        ctx.refused_schedulers.clear();
        none = plan_device(
            blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\nscheduler = \"kyber\"\n"), f,
            loop_values(), ctx);
        CHECK(action(none, "scheduler").note ==
              "the kernel has none of kyber (loaded: none mq-deadline; no scheduler modules)");
    }
    SUBCASE("an out-of-tree scheduler's name: taken as written, unavailable where this kernel lacks it") {
        PlanContext ctx;
        ctx.loadable_schedulers = std::vector<std::string>{"bfq", "kyber"};
        auto adios = blkpolicy::test::policy_from_toml(
            "[[rule]]\nname = \"r\"\n[rule.set]\nscheduler = [\"adios\", \"kyber\"]\n");
        auto p = plan_device(adios, f, loop_values(), ctx);
        CHECK(action(p, "scheduler").value == "kyber");                      // the first this kernel has
        ctx.loadable_schedulers = std::vector<std::string>{"adios", "bfq"};  // a kernel that ships it as a module
        p = plan_device(adios, f, loop_values(), ctx);
        CHECK(action(p, "scheduler").value == "adios");
        ctx.loadable_schedulers = std::vector<std::string>{"bfq"};
        auto alone = plan_device(
            blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\nscheduler = \"adios\"\n"), f,
            loop_values(), ctx);
        CHECK(action(alone, "scheduler").kind == ActionKind::unavailable);
        CHECK(action(alone, "scheduler").note.rfind("the kernel has none of adios (", 0) == 0);
    }
}

TEST_CASE("bio-based queues and missing attributes are skipped - never failures") {
    DeviceFacts f;
    f.name = "zram0";
    f.has_queue = true;
    f.request_based = false;
    Values v = {{"read_ahead_kb", "128"}, {"nomerges", "0"}};
    auto p = plan_device(
        blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\nscheduler = \"none\"\nwbt_lat_usec = "
                                          "2000\nread_ahead_kb = 64\ndevice.timeout = 30\n"),
        f, v, {});
    CHECK(order(p) == std::vector<std::string>{"scheduler:skip", "wbt_lat_usec:skip", "device.timeout:skip",
                                               "read_ahead_kb:write"});
    CHECK(action(p, "scheduler").note == "bio-based queue: no queue/scheduler");
    CHECK(action(p, "device.timeout").note == "device has no device/timeout");
}

TEST_CASE("a queue attribute this kernel lacks on a request-based queue is unavailable, not skipped") {
    auto f = loop_facts();
    auto v = loop_values();
    v.erase("wbt_lat_usec");  // a kernel built without CONFIG_BLK_WBT
    v.erase("async_depth");   // before 7.0
    auto p = plan_device(blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\nwbt_lat_usec = "
                                                           "2000\nasync_depth = 16\nread_ahead_kb = 64\n"),
                         f, v, {});
    CHECK(action(p, "wbt_lat_usec").kind == ActionKind::unavailable);
    CHECK(action(p, "wbt_lat_usec").note == "device has no queue/wbt_lat_usec");
    CHECK(action(p, "async_depth").kind == ActionKind::unavailable);
    CHECK(action(p, "read_ahead_kb").kind == ActionKind::write);
    CHECK(std::string(to_string(ActionKind::unavailable)) == "unavailable");
}

TEST_CASE("io_timeout: whole ticks, skipped where the driver has none, one timer with SCSI's device.timeout") {
    auto f = loop_facts();
    f.name = "sda";
    auto v = loop_values();
    const std::string head = "[[rule]]\nname = \"r\"\n[rule.set]\n";
    // loop and virtio-blk have no timeout handler: skipped, not unavailable.
    auto none = plan_device(blkpolicy::test::policy_from_toml(head + "io_timeout = 4294967295\n"), f, v, {});
    CHECK(action(none, "io_timeout").kind == ActionKind::skip);
    CHECK(action(none, "io_timeout").note == "device has no queue/io_timeout (its driver has no timeout handler)");

    v["io_timeout"] = "30000";
    v["device.timeout"] = "30";
    PlanContext ctx;
    ctx.hz = 250;
    ctx.hz_known = true;
    auto ebs = plan_device(blkpolicy::test::policy_from_toml(head + "io_timeout = 4294967295\n"), f, v, ctx);
    CHECK(action(ebs, "io_timeout").kind == ActionKind::write);
    CHECK(action(ebs, "io_timeout").value == "4294967295");
    CHECK(action(ebs, "io_timeout").expected == "4294967288");
    CHECK(action(ebs, "io_timeout").note ==
          "reads back as 4294967288 (the kernel keeps it in ticks of 250 Hz; 2^31 ms or more is the longest timer "
          "it has)");
    ctx.hz = 1000;
    CHECK(action(plan_device(blkpolicy::test::policy_from_toml(head + "io_timeout = 4294967295\n"), f, v, ctx),
                 "io_timeout")
              .expected == "4294967294");

    // The same timer in seconds and in milliseconds: the same time, or refused.
    auto same =
        plan_device(blkpolicy::test::policy_from_toml(head + "device.timeout = 90\nio_timeout = 90000\n"), f, v, ctx);
    CHECK(order(same) == std::vector<std::string>{"device.timeout:write", "io_timeout:write"});
    auto apart =
        plan_device(blkpolicy::test::policy_from_toml(head + "device.timeout = 60\nio_timeout = 90000\n"), f, v, ctx);
    CHECK(action(apart, "io_timeout").kind == ActionKind::refuse);
    CHECK(action(apart, "io_timeout").note ==
          "device.timeout = 60 (r) sets the same request timer to 60000 ms: set one of the two, or both to the "
          "same time");
    CHECK(action(apart, "device.timeout").kind == ActionKind::write);
}

TEST_CASE("a device without queue/ is not tuned at all") {
    DeviceFacts f;
    f.name = "sr0";
    auto p =
        plan_device(blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\nnomerges = 1\n"), f, {}, {});
    CHECK(p.actions.empty());
    CHECK(p.not_tuned == "no queue/ directory: nothing to tune");
}

TEST_CASE("read_ahead_kb expects whole pages - wbt default follows the final rotational") {
    PlanContext ctx;
    ctx.page_size = 16384;
    auto p = plan_device(
        blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\nread_ahead_kb = 100\nrotational = 0\n"
                                          "wbt_lat_usec = \"default\"\n"),
        loop_facts(), loop_values(), ctx);
    CHECK(action(p, "read_ahead_kb").value == "100");
    CHECK(action(p, "read_ahead_kb").expected == "96");
    CHECK(action(p, "wbt_lat_usec").value == "-1");
    CHECK(action(p, "wbt_lat_usec").expected == "2000");
    CHECK(action(p, "wbt_lat_usec").kind == ActionKind::unchanged);

    auto rot = plan_device(
        blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\nwbt_lat_usec = \"default\"\n"),
        loop_facts(), loop_values(), ctx);
    CHECK(action(rot, "wbt_lat_usec").expected == "75000");
    CHECK(action(rot, "wbt_lat_usec").kind == ActionKind::write);
}

TEST_CASE("write through is refused on a device whose own cache is write back - unless acknowledged") {
    auto f = loop_facts();
    f.cache_type = "write back";
    const std::string base = "[[rule]]\nname = \"r\"\nacknowledge = [\"write-through-drops-flushes\"";
    auto p = plan_device(blkpolicy::test::policy_from_toml(base + "]\n[rule.set]\nwrite_cache = \"write through\"\n"),
                         f, loop_values(), {});
    CHECK(action(p, "write_cache").kind == ActionKind::refuse);
    CHECK(action(p, "write_cache").note.find("volatile-cache-data-loss") != std::string::npos);

    auto ok = plan_device(blkpolicy::test::policy_from_toml(
                              base + ", \"volatile-cache-data-loss\"]\n[rule.set]\nwrite_cache = \"write through\"\n"),
                          f, loop_values(), {});
    CHECK(action(ok, "write_cache").kind == ActionKind::write);

    f.cache_type = "write through";
    auto no_cache =
        plan_device(blkpolicy::test::policy_from_toml(base + "]\n[rule.set]\nwrite_cache = \"write through\"\n"), f,
                    loop_values(), {});
    CHECK(action(no_cache, "write_cache").kind == ActionKind::write);
}

TEST_CASE("impossible values are refused with the reason") {
    auto v = loop_values();
    auto p =
        plan_device(blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\nmax_sectors_kb = 4096\n"),
                    loop_facts(), v, {});
    CHECK(action(p, "max_sectors_kb").kind == ActionKind::refuse);
    CHECK(action(p, "max_sectors_kb").note == "above max_hw_sectors_kb (1280): the kernel rejects it");

    auto d =
        plan_device(blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\ndiscard_max_bytes = 4096\n"),
                    loop_facts(), v, {});
    CHECK(action(d, "discard_max_bytes").kind == ActionKind::skip);
    v["discard_granularity"] = "4096";
    v["discard_max_bytes"] = "1073741824";
    auto g =
        plan_device(blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\ndiscard_max_bytes = 5000\n"),
                    loop_facts(), v, {});
    CHECK(action(g, "discard_max_bytes").kind == ActionKind::refuse);
    CHECK(action(g, "discard_max_bytes").note == "not a multiple of discard_granularity (4096)");
}

TEST_CASE("iosched tunables") {
    auto v = loop_values();
    SUBCASE("under scheduler none there are none") {
        auto p = plan_device(
            blkpolicy::test::policy_from_toml("[[rule]]\nname = \"r\"\n[rule.set]\niosched.fifo_batch = 4\n"),
            loop_facts(), v, {});
        CHECK(action(p, "iosched.fifo_batch").kind == ActionKind::skip);
        CHECK(action(p, "iosched.fifo_batch").note == "scheduler none has no tunables");
    }
    SUBCASE("a tunable the active scheduler lacks") {
        auto f = loop_facts();
        f.scheduler = "mq-deadline";
        v["scheduler"] = "mq-deadline";
        v["iosched.fifo_batch"] = "16";
        auto p =
            plan_device(blkpolicy::test::policy_from_toml(
                            "[[rule]]\nname = \"r\"\n[rule.set]\niosched.slice_idle = 0\niosched.fifo_batch = 16\n"),
                        f, v, {});
        CHECK(action(p, "iosched.slice_idle").kind == ActionKind::skip);
        CHECK(action(p, "iosched.slice_idle").note == "scheduler mq-deadline has no tunable slice_idle");
        CHECK(action(p, "iosched.fifo_batch").kind == ActionKind::unchanged);
    }
}

TEST_CASE("read_ahead_kb already as wanted is checked again after a limits write only where the kernel moves it") {
    const auto p = blkpolicy::test::policy_from_toml(
        "[[rule]]\nname = \"r\"\n[rule.set]\nmax_sectors_kb = 1024\nread_ahead_kb = 2560\n");
    PlanContext ctx;
    ctx.kernel = {6, 18, 44};
    CHECK(action(plan_device(p, loop_facts(), loop_values(), ctx), "read_ahead_kb").kind == ActionKind::write);
    ctx.kernel = {6, 12, 117};
    CHECK(action(plan_device(p, loop_facts(), loop_values(), ctx), "read_ahead_kb").kind == ActionKind::write);
    ctx.kernel = {6, 1, 0};  // limits commits leave read_ahead_kb alone before 6.9 (observed: Debian 12)
    CHECK(action(plan_device(p, loop_facts(), loop_values(), ctx), "read_ahead_kb").kind == ActionKind::unchanged);
}

TEST_CASE("the values a plan reads: the policy's keys, each row's inputs, rotational and the scheduler") {
    auto policy = blkpolicy::test::policy_from_toml(
        "[[rule]]\nname = \"t\"\n[rule.set]\nmax_sectors_kb = 512\ndiscard_max_bytes = 4096\nasync_depth = 8\n"
        "iosched.async_depth = 8\n");
    CHECK(value_keys_for(policy, loop_facts()) ==
          std::vector<std::string>{"async_depth", "discard_granularity", "discard_max_bytes", "iosched.async_depth",
                                   "max_hw_sectors_kb", "max_sectors_kb", "nr_requests", "rotational", "scheduler"});
    // A rule that matches nothing reads nothing.
    auto none = blkpolicy::test::policy_from_toml(
        "[[rule]]\nname = \"t\"\n[rule.match]\nkernel = \"sd*\"\n[rule.set]\nmax_sectors_kb = 512\n");
    CHECK(value_keys_for(none, loop_facts()).empty());
}

TEST_CASE("Key: writable keys in write order, each with its row; key_of reads policy keys and the iosched family") {
    // The enum lists the writable attributes in the order they are written
    // (a row's write rank is its place in it), so its order must keep the
    // phases in order: limits commits, the scheduler, requests, wbt, the
    // late ones, read_ahead_kb (iosched.NAME stands for its family).
    auto spec_of = [](Key k) { return k == Key::iosched ? *find_attribute("iosched.fifo_batch") : fixed_attribute(k); };
    Phase last_phase = Phase::limits;
    int last_rank = -1;
    std::size_t writable_keys = 0;
    for (const auto& row : kKeyNames) {
        CAPTURE(row.name);
        if (!writable(row.value)) {
            CHECK_FALSE(find_attribute(row.name));  // read-only values are never written
            continue;
        }
        ++writable_keys;
        const AttributeSpec spec = spec_of(row.value);
        CHECK(spec.id == row.value);
        if (row.value != Key::iosched) CHECK(spec.key == row.name);
        CHECK(spec.phase >= last_phase);
        last_phase = spec.phase;
        CHECK(write_rank(spec) > last_rank);
        last_rank = write_rank(spec);
    }
    // Every row of the table has its Key, and every writable Key a row.
    const auto keys = fixed_attribute_keys();
    CHECK(keys.size() + 1 == writable_keys);
    for (const auto& k : keys) {
        CAPTURE(k);
        REQUIRE(key_of(k));
        CHECK(fixed_attribute(k)->id == *key_of(k));
    }
    CHECK(key_of("iosched.fifo_batch") == Key::iosched);
    CHECK(key_of("device.timeout") == Key::device_timeout);
    CHECK(key_of("max_hw_sectors_kb") == Key::max_hw_sectors_kb);
    CHECK_FALSE(key_of("iosched"));
    CHECK_FALSE(key_of("read_ahead"));
    CHECK(key_text(Key::device_queue_depth) == "device.queue_depth");
}

TEST_CASE("the loader's settings and the plan's actions carry their attribute's Key") {
    const auto pol = blkpolicy::test::policy_from_toml(R"(
[[rule]]
name = "some"
[rule.set]
read_ahead_kb = 128
iosched.fifo_batch = 4
scheduler = "mq-deadline"
device.timeout = 30
)");
    for (const auto& s : pol.rules.front().set) {
        CAPTURE(s.attribute);
        CHECK(key_of(s.attribute) == s.id);
    }
    const auto p = plan_device(pol, loop_facts(), loop_values(), {});
    REQUIRE(p.actions.size() == 4);
    for (const auto& a : p.actions) {
        CAPTURE(a.attribute);
        CHECK(key_of(a.attribute) == a.id);
    }
    CHECK(action(p, "iosched.fifo_batch").id == Key::iosched);
    CHECK(action(p, "device.timeout").id == Key::device_timeout);
}

TEST_CASE("bdi writeback limits: each ratio planned against the other as it will be; strict_limit before 6.2") {
    auto v = loop_values();
    v["bdi.max_ratio"] = "100";
    v["bdi.min_ratio"] = "0";
    v["bdi.strict_limit"] = "0";
    const auto plan = [&](const std::string& set, const Values& values) {
        return plan_device(blkpolicy::test::policy_from_toml("[[rule]]\nname = \"usb\"\n[rule.set]\n" + set),
                           loop_facts(), values, PlanContext{});
    };
    SUBCASE("the classic fix for a slow USB stick: written after the queue, before read_ahead_kb") {
        auto p = plan("read_ahead_kb = 128\nbdi.strict_limit = 1\nbdi.max_ratio = 1\nnomerges = 1\n", v);
        CHECK(order(p) == std::vector<std::string>{"nomerges:write", "bdi.max_ratio:write", "bdi.strict_limit:write",
                                                   "read_ahead_kb:write"});
        CHECK(action(p, "bdi.max_ratio").path == "bdi/max_ratio");
    }
    SUBCASE("a min_ratio above the max_ratio, the policy's or the device's, is refused (EINVAL)") {
        auto p = plan("bdi.max_ratio = 5\nbdi.min_ratio = 10\n", v);
        CHECK(action(p, "bdi.max_ratio").kind == ActionKind::write);
        CHECK(action(p, "bdi.min_ratio").kind == ActionKind::refuse);
        CHECK(action(p, "bdi.min_ratio").note == "above bdi.max_ratio (5 (usb)): the kernel refuses it (EINVAL)");
        auto low = v;
        low["bdi.max_ratio"] = "20";
        CHECK(action(plan("bdi.min_ratio = 30\n", low), "bdi.min_ratio").note ==
              "above bdi.max_ratio (20 on this device): the kernel refuses it (EINVAL)");
        CHECK(action(plan("bdi.min_ratio = 20\n", low), "bdi.min_ratio").kind == ActionKind::write);
    }
    SUBCASE("a max_ratio below the device's min_ratio waits for the min the plan lowers") {
        auto held = v;
        held["bdi.min_ratio"] = "40";
        auto p = plan("bdi.max_ratio = 30\nbdi.min_ratio = 10\n", held);
        CHECK(action(p, "bdi.max_ratio").kind == ActionKind::refuse);
        CHECK(action(p, "bdi.max_ratio").note ==
              "below bdi.min_ratio (40 on this device): the kernel refuses it (EINVAL); this plan lowers "
              "bdi.min_ratio to 10 (usb), after which the next pass (or apply again) writes it");
        CHECK(action(p, "bdi.min_ratio").kind == ActionKind::write);
        held["bdi.min_ratio"] = "10";  // the next pass
        CHECK(action(plan("bdi.max_ratio = 30\nbdi.min_ratio = 10\n", held), "bdi.max_ratio").kind ==
              ActionKind::write);
    }
    SUBCASE("no strict_limit file: a kernel before 6.2 cannot give it") {
        auto old = v;
        old.erase("bdi.strict_limit");
        const auto p = plan("bdi.strict_limit = 1\n", old);
        const auto& a = action(p, "bdi.strict_limit");
        CHECK(a.kind == ActionKind::unavailable);
        CHECK(a.note == "this kernel has no bdi/strict_limit (6.2 and later have it)");
    }
    SUBCASE("out of range, at file:line:col") {
        auto r = load_policy({{"p.toml", "[[rule]]\nname = \"x\"\n[rule.set]\nbdi.max_ratio = 101\n"}});
        REQUIRE(r.errors.size() == 1);
        CHECK(r.errors[0].str().rfind("p.toml:4:17: bdi.max_ratio = 101 is out of range: must be 0..100", 0) == 0);
    }
}

TEST_CASE("md array tunables: on the array alone, each where its level has it; read back as the kernel shows them") {
    const auto array = [](const std::string& level) {
        DeviceFacts f;
        f.name = "md127";
        f.has_queue = true;
        f.stack = Stack::md;
        f.md_level = level;
        return f;
    };
    Values raid5 = {{"read_ahead_kb", "128"},
                    {"md.stripe_cache_size", "256"},
                    {"md.sync_speed_min", "system"},
                    {"md.sync_speed_max", "system"}};
    const auto plan = [&](const std::string& set, const DeviceFacts& facts, const Values& values) {
        return plan_device(blkpolicy::test::policy_from_toml("[[rule]]\nname = \"raid\"\n[rule.set]\n" + set), facts,
                           values, PlanContext{});
    };
    const std::string set = "md.stripe_cache_size = 8192\nmd.sync_speed_min = 50000\nmd.sync_speed_max = 400000\n";
    SUBCASE("a raid5 array takes all three, after the queue's values and before read_ahead_kb") {
        auto p = plan("read_ahead_kb = 4096\n" + set, array("raid5"), raid5);
        CHECK(order(p) == std::vector<std::string>{"md.stripe_cache_size:write", "md.sync_speed_min:write",
                                                   "md.sync_speed_max:write", "read_ahead_kb:write"});
        CHECK(action(p, "md.stripe_cache_size").path == "md/stripe_cache_size");
        CHECK(action(p, "md.sync_speed_min").current == "system");
        CHECK(action(p, "md.sync_speed_min").expected == "50000");
    }
    SUBCASE("a raid1 array has no stripe cache; a raid0 array never resyncs") {
        auto raid1 = raid5;
        raid1.erase("md.stripe_cache_size");
        auto p = plan(set, array("raid1"), raid1);
        CHECK(action(p, "md.stripe_cache_size").kind == ActionKind::skip);
        CHECK(action(p, "md.stripe_cache_size").note ==
              "an md raid1 array has no stripe cache (raid4, raid5 and raid6 have one)");
        CHECK(action(p, "md.sync_speed_min").kind == ActionKind::write);
        auto q = plan(set, array("raid0"), {{"read_ahead_kb", "128"}});
        for (const auto& a : q.actions) {
            CAPTURE(a.attribute);
            CHECK(a.kind == ActionKind::skip);
        }
        CHECK(action(q, "md.sync_speed_max").note == "an md raid0 array never resyncs: it has no sync speed");
    }
    SUBCASE("any other device is not an array: skipped, never unavailable") {
        auto p = plan(set, loop_facts(), loop_values());
        for (const auto& a : p.actions) {
            CAPTURE(a.attribute);
            CHECK(a.kind == ActionKind::skip);
            CHECK(a.note == "not an md array: md/ tunables are the array's own (its members have none)");
        }
    }
    SUBCASE("an array of the level that is not running yet has no file: skipped until its start") {
        auto p = plan("md.stripe_cache_size = 8192\n", array("raid5"), {{"read_ahead_kb", "128"}});
        const auto& a = action(p, "md.stripe_cache_size");
        CHECK(a.kind == ActionKind::skip);
        CHECK(a.note == "the array has no md/stripe_cache_size now (its level has one once the array runs)");
    }
    SUBCASE("already as wanted: unchanged") {
        auto set_ = raid5;
        set_["md.sync_speed_min"] = "50000";
        CHECK(action(plan("md.sync_speed_min = 50000\n", array("raid6"), set_), "md.sync_speed_min").kind ==
              ActionKind::unchanged);
    }
    SUBCASE("the kernel's ranges, at file:line:col") {
        auto r = load_policy({{"p.toml", "[[rule]]\nname = \"x\"\n[rule.set]\nmd.stripe_cache_size = 16\n"}});
        REQUIRE(r.errors.size() == 1);
        CHECK(r.errors[0].str().rfind("p.toml:4:24: md.stripe_cache_size = 16 is out of range: must be 17..32768", 0) ==
              0);
        r = load_policy({{"p.toml", "[[rule]]\nname = \"x\"\n[rule.set]\nmd.sync_speed_min = 0\n"}});
        REQUIRE(r.errors.size() == 1);
        CHECK(r.errors[0].str().rfind("p.toml:4:21: md.sync_speed_min = 0 is out of range: must be 1..2147483647", 0) ==
              0);
    }
}

TEST_CASE("md resync speeds: a min above the max is taken by the kernel, and said on either") {
    DeviceFacts f;
    f.name = "md127";
    f.has_queue = true;
    f.stack = Stack::md;
    f.md_level = "raid1";
    const Values v = {{"md.sync_speed_min", "system"}, {"md.sync_speed_max", "20000 (local)"}};
    auto values = v;
    values["md.sync_speed_max"] = "20000";
    const auto plan = [&](const std::string& set) {
        return plan_device(blkpolicy::test::policy_from_toml("[[rule]]\nname = \"raid\"\n[rule.set]\n" + set), f,
                           values, PlanContext{});
    };
    auto p = plan("md.sync_speed_min = 50000\n");
    CHECK(action(p, "md.sync_speed_min").kind == ActionKind::write);
    CHECK(action(p, "md.sync_speed_min").note ==
          "above md.sync_speed_max (20000 on this device): the kernel takes it, and the max holds no resync back "
          "below this");
    p = plan("md.sync_speed_min = 50000\nmd.sync_speed_max = 10000\n");
    CHECK(action(p, "md.sync_speed_max").kind == ActionKind::write);
    CHECK(action(p, "md.sync_speed_max").note ==
          "below md.sync_speed_min (50000 (raid)): the kernel takes it, and a resync still goes at least that fast");
    // In order, or against the sysctl's ("system", a number not read): nothing to say.
    CHECK(action(plan("md.sync_speed_min = 5000\n"), "md.sync_speed_min").note.empty());
    CHECK(action(plan("md.sync_speed_max = 10\n"), "md.sync_speed_max").note.empty());
}
