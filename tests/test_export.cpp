// SPDX-License-Identifier: MIT
// `blkpolicy export`'s policy, in process: what is exported (a value apart
// from the kernel's default), what is not (the default, the kernel's own
// doing, a value with no default known), how devices are keyed, and that
// the text is a policy `check` accepts whose plan writes nothing. The same
// on real loop devices: tests/kernel/test_kernel_inspect.cpp.
#include <doctest/doctest.h>

#include <algorithm>

#include "policy/loader.hpp"
#include "policy/match.hpp"
#include "report/export.hpp"

using namespace blkpolicy;
using namespace blkpolicy::policy;
using namespace blkpolicy::kernel;
using namespace blkpolicy::report;

namespace {

DeviceFacts virtio(const std::string& name, const std::string& serial, bool rotational = true) {
    DeviceFacts f;
    f.name = name;
    f.driver = "virtio_blk";
    f.drivers = {"virtio_blk"};
    f.serial = serial;
    f.rotational = rotational;
    f.has_queue = true;
    f.request_based = true;
    return f;
}

// A stacked device (no driver of its own) of that stack.
DeviceFacts stacked(const std::string& name, Stack stack) {
    auto f = virtio(name, "");
    f.driver.clear();
    f.drivers.clear();
    f.stack = stack;
    return f;
}

ExportInput device(DeviceFacts f, Values v) {
    ExplainContext ctx;
    ctx.kernel = KernelVersion{6, 12, 0};
    ctx.hw_queues = 1;
    ctx.hw_tags = 256;
    return {explain_device(f, v, DevicePlan{}, ctx, StackView{}), v};
}

// What the kernel gives a spinning virtio disk with one queue on 6.12.
Values defaults() {
    return {{"rotational", "1"},       {"scheduler", "mq-deadline"},  {"nr_requests", "256"},
            {"wbt_lat_usec", "75000"}, {"read_ahead_kb", "128"},      {"nomerges", "0"},
            {"rq_affinity", "1"},      {"max_hw_sectors_kb", "2560"}, {"max_sectors_kb", "1280"}};
}

Values with(Values v, const std::string& key, const std::string& value) {
    v[key] = value;
    return v;
}

std::string toml(const std::vector<ExportInput>& in, ExportOptions o = {}) {
    return export_toml(export_policy(in, o), {"test"});
}

Policy load_text(const std::string& text) {
    auto loaded = load_policy({{"export.toml", text}});
    std::string errors;
    for (const auto& e : loaded.errors) errors += e.str() + "\n";
    INFO(text);
    INFO(errors);
    REQUIRE(loaded.ok());
    return loaded.policy;
}

}  // namespace

TEST_CASE("export: a value apart from the kernel's default is exported, with what the default is") {
    auto v = with(with(defaults(), "read_ahead_kb", "4096"), "scheduler", "bfq");
    // 256: bfq's own default on 256 tags (2 x min(256, 128)), as mq-deadline's: not exported
    const auto out = export_policy({device(virtio("vda", "S1"), v)}, {});
    REQUIRE(out.rules.size() == 1);
    const auto& r = out.rules.front();
    CHECK(r.devices == std::vector<std::string>{"vda"});
    REQUIRE(r.set.size() == 2);
    CHECK(r.set[0].attribute == "scheduler");  // write order
    CHECK(r.set[0].toml_value == "\"bfq\"");
    CHECK(r.set[0].why.find("the kernel's default here is mq-deadline: one hardware queue") == 0);
    CHECK(r.set[1].attribute == "read_ahead_kb");
    CHECK(r.set[1].toml_value == "4096");
    CHECK(r.set[1].why.find("the kernel's default here is 128") == 0);
    CHECK(r.match ==
          std::vector<std::pair<std::string, std::string>>{{"driver", "\"virtio_blk\""}, {"rotational", "true"}});
    // max_sectors_kb has no default blkpolicy derives: shown, not exported.
    CHECK(std::find(r.not_compared.begin(), r.not_compared.end(), "max_sectors_kb = 1280") != r.not_compared.end());
}

TEST_CASE("export: nothing apart from the defaults, nothing exported; the kernel's own doing is not a choice") {
    CHECK(export_policy({device(virtio("vda", "S1"), defaults())}, {}).rules.empty());
    const auto text = toml({device(virtio("vda", "S1"), defaults())});
    CHECK(text.find("# Nothing differs from the kernel's own defaults on the 1 device(s) read.") != std::string::npos);
    CHECK(load_text(text).rules.empty());

    // bfq turns a default wbt off and it reads 0 (6.12): bfq is exported, the 0 is not.
    auto bfq = with(with(defaults(), "scheduler", "bfq"), "wbt_lat_usec", "0");
    auto r = export_policy({device(virtio("vda", "S1"), bfq)}, {});
    REQUIRE(r.rules.size() == 1);
    REQUIRE(r.rules[0].set.size() == 1);
    CHECK(r.rules[0].set[0].attribute == "scheduler");
    // wbt 0 under mq-deadline is someone's choice.
    auto off = export_policy({device(virtio("vda", "S1"), with(defaults(), "wbt_lat_usec", "0"))}, {});
    REQUIRE(off.rules.size() == 1);
    CHECK(off.rules[0].set[0].attribute == "wbt_lat_usec");
    CHECK(off.rules[0].set[0].toml_value == "0");
}

TEST_CASE("export: devices alike share a rule; where one key would select different values, each is keyed apart") {
    const auto tuned = with(defaults(), "read_ahead_kb", "1024");
    SUBCASE("alike: one rule, read on both, no serial") {
        const auto out = export_policy({device(virtio("vda", "S1"), tuned), device(virtio("vdb", "S2"), tuned)}, {});
        REQUIRE(out.rules.size() == 1);
        CHECK(out.rules[0].devices == std::vector<std::string>{"vda", "vdb"});
        CHECK(out.rules[0].keyed_note.empty());
        CHECK(out.notes.empty());
    }
    SUBCASE("different: the tuned one by serial; the untouched one has no rule") {
        const auto out =
            export_policy({device(virtio("vda", "S1"), tuned), device(virtio("vdb", "S2"), defaults())}, {});
        REQUIRE(out.rules.size() == 1);
        CHECK(out.rules[0].match.back() == std::pair<std::string, std::string>{"serial", "\"S1\""});
        CHECK(out.rules[0].keyed_note.find("keyed by serial") == 0);
    }
    SUBCASE("no serial tells them apart: the kernel name, said on stderr") {
        const auto out = export_policy({device(virtio("vda", ""), tuned), device(virtio("vdb", ""), defaults())}, {});
        REQUIRE(out.rules.size() == 1);
        CHECK(out.rules[0].match.back() == std::pair<std::string, std::string>{"kernel", "\"vda\""});
        REQUIRE(out.notes.size() == 1);
        CHECK(out.notes[0].find("vda: keyed by its kernel name") == 0);
    }
    SUBCASE("loop devices by their backing file, dm by its name") {
        auto a = stacked("loop7", Stack::loop);
        a.loop_backing_file = "/srv/a[1].img";
        auto b = stacked("loop8", Stack::loop);
        b.loop_backing_file = "/srv/b.img";
        // The loop driver asks for no scheduler, and on 6.12 makes its
        // queue non-rotational, so wbt starts at 2000.
        const auto loop_defaults = with(with(defaults(), "scheduler", "none"), "wbt_lat_usec", "2000");
        const auto out =
            export_policy({device(a, with(loop_defaults, "read_ahead_kb", "1024")), device(b, loop_defaults)}, {});
        REQUIRE(out.rules.size() == 1);
        CHECK(out.rules[0].match.front() == std::pair<std::string, std::string>{"stack", "\"loop\""});
        // fnmatch's [ taken literally
        CHECK(out.rules[0].match.back() ==
              std::pair<std::string, std::string>{"attr.\"loop/backing_file\"", "\"/srv/a\\\\[1].img\""});
        auto d = stacked("dm-3", Stack::dm);
        d.dm_name = "vg-data";
        auto e = stacked("dm-4", Stack::dm);
        e.dm_name = "vg-logs";
        const auto dm = export_policy({device(d, defaults()), device(e, tuned)}, {});
        REQUIRE(dm.rules.size() == 1);
        CHECK(dm.rules[0].match.back() == std::pair<std::string, std::string>{"dm_name", "\"vg-logs\""});
    }
    SUBCASE("--by-serial: every rule by serial") {
        const auto out = export_policy({device(virtio("vda", "S1"), tuned), device(virtio("vdb", "S2"), tuned)},
                                       {.by_serial = true});
        REQUIRE(out.rules.size() == 2);
        CHECK(out.rules[0].match.back() == std::pair<std::string, std::string>{"serial", "\"S1\""});
        CHECK(out.rules[1].match.back() == std::pair<std::string, std::string>{"serial", "\"S2\""});
    }
}

TEST_CASE("export: the text is a policy check accepts, whose rules select what was read and set what it had") {
    auto rot = virtio("vda", "S1");
    auto ssd = virtio("vdb", "S2", false);
    ssd.model = "Fast*Disk";
    const auto a = with(with(defaults(), "nomerges", "2"), "rq_affinity", "2");
    auto b = with(with(defaults(), "rotational", "0"), "read_ahead_kb", "512");
    b["wbt_lat_usec"] = "2000";
    const std::vector<ExportInput> in = {device(rot, a), device(ssd, b), device(virtio("vdc", "S3"), a)};
    const auto text = toml(in);
    const auto policy = load_text(text);
    REQUIRE(policy.rules.size() == 2);
    for (const auto& read : {std::pair{rot, a}, std::pair{ssd, b}}) {
        // Not a structured binding: clang 14 cannot capture one in INFO's lambda.
        const auto& facts = read.first;
        const auto& values = read.second;
        std::vector<const Rule*> matched;
        for (const auto& r : policy.rules)
            if (rule_matches(r, facts)) matched.push_back(&r);
        INFO(facts.name);
        REQUIRE(matched.size() == 1);
        CHECK(!matched.front()->set.empty());
        for (const auto& s : matched.front()->set) {
            INFO(s.attribute);
            CHECK(s.values == std::vector<std::string>{values.at(s.attribute)});
        }
    }
    CHECK(text.find("model = \"Fast\\\\*Disk\"") != std::string::npos);
    CHECK(text.find("nomerges = 2  # the kernel's default here is 0") != std::string::npos);
}
