// SPDX-License-Identifier: MIT
// Putting back what blkpolicy changed: the state directory's record, the
// order and the cases of restore_values, and `blkpolicy restore` on a tree
// whose sysfs behaves like the kernel.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/cli/commands.hpp"
#include "agent/cli/parse.hpp"
#include "agent/restore.hpp"
#include "agent/state.hpp"
#include "support/fake_sysfs.hpp"
#include "support/kernel_model.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"
#include "udev/discovery.hpp"

using namespace blkpolicy;
using namespace blkpolicy::test;
using agent::Restored;
using agent::WrittenValue;
using agent::WrittenValues;

namespace {

struct Tree {
    FakeSysfs tree;
    KernelModelSysfs sysfs{init()};
    agent::StateDir state{tree.root() / "state"};
    std::filesystem::path init() {
        tree.add_loop("loop0", 0, "/img");
        return tree.root();
    }
    policy::DeviceFacts facts() { return *udev::read_facts(sysfs, "loop0"); }
    std::string q(const std::string& attr) { return tree.read(tree.devpath_of("loop0") + "/queue/" + attr); }
    void set(const std::string& attr, const std::string& v) {
        REQUIRE(sysfs.write("block/loop0/queue/" + attr, v) == 0);
    }
    // `blkpolicy COMMAND --sysfs-root TREE --state-dir TREE/state ARGS...`, in process.
    RunResult run(std::vector<std::string> args) {
        args.insert(args.begin() + 1,
                    {"--sysfs-root", tree.root().string(), "--state-dir", (tree.root() / "state").string()});
        auto parsed = agent::parse_command_line(args);
        REQUIRE(parsed.error.empty());
        std::ostringstream out, err;
        RunResult r;
        r.exit_code = agent::run_command(parsed.options, sysfs, out, err);
        r.out = out.str();
        r.err = err.str();
        return r;
    }
};

}  // namespace

TEST_CASE("written values: kept per device instance, a corrupt record said, an empty one removed") {
    Tree t;
    const auto f = t.facts();
    REQUIRE(t.state.save_written(f, {{"read_ahead_kb", {"128", "4096"}}}).ok());
    CHECK(t.state.load_written(f) == WrittenValues{{"read_ahead_kb", {"128", "4096"}}});
    CHECK(t.state.devices_written() == std::vector<std::string>{"loop0"});
    auto other = f;  // the same name, another device (a re-bound loop, a replaced disk)
    other.diskseq = f.diskseq.empty() ? "99" : f.diskseq + "9";
    other.devnum = "7:99";
    CHECK(t.state.load_written(other).empty());

    std::ofstream(t.tree.root() / "state" / "written" / "loop0.json") << "{\"identity\": 3}";
    std::string problem;
    CHECK(t.state.load_written(f, &problem).empty());
    CHECK(problem.find("ignoring corrupt state file") == 0);
    CHECK(problem.find("will not be put back") != std::string::npos);

    REQUIRE(t.state.save_written(f, {}).ok());
    CHECK_FALSE(std::filesystem::exists(t.tree.root() / "state" / "written" / "loop0.json"));
}

TEST_CASE("restore_values: in write order, each case as it is") {
    Tree t;
    const auto ra = t.q("read_ahead_kb");
    t.set("scheduler", "mq-deadline");
    t.set("iosched/fifo_batch", "4");
    t.set("max_sectors_kb", "64");
    t.set("read_ahead_kb", "1024");
    t.set("nomerges", "2");
    WrittenValues v = {
        {"scheduler", {"none", "mq-deadline"}},
        {"iosched.fifo_batch", {"16", "4"}},
        {"max_sectors_kb", {"1280", "64"}},
        {"read_ahead_kb", {ra, "1024"}},
        {"nomerges", {"0", "1"}},          // someone set 2 since
        {"rq_affinity", {"1", "2"}},       // back at 1 already
        {"device.timeout", {"30", "60"}},  // a loop device has none
    };
    t.sysfs.writes.clear();
    const auto out = agent::restore_values(t.sysfs, "loop0", v, {"nomerges_kept_by_nobody"});
    auto result = [&](const std::string& attr) {
        for (const auto& r : out)
            if (r.attribute == attr) return std::string(agent::to_string(r.result));
        return std::string("missing");
    };
    CHECK(result("scheduler") == "restored");
    CHECK(result("iosched.fifo_batch") == "dropped");  // goes with the scheduler
    CHECK(result("max_sectors_kb") == "restored");
    CHECK(result("read_ahead_kb") == "restored");
    CHECK(result("nomerges") == "left");
    CHECK(result("rq_affinity") == "already");
    CHECK(result("device.timeout") == "dropped");
    CHECK(v.empty());
    CHECK(t.q("scheduler").find("[none]") != std::string::npos);
    CHECK(t.q("max_sectors_kb") == "1280");
    // read_ahead_kb after max_sectors_kb (whose limits commit raises it): in write order.
    CHECK(t.q("read_ahead_kb") == ra);
    CHECK(t.q("nomerges") == "2");
    std::vector<std::string> order;
    for (const auto& w : t.sysfs.writes) order.push_back(w.path);
    std::string joined;
    for (const auto& o : order) joined += o + " ";
    CAPTURE(joined);
    // The limits write came first, and its commit recomputed read_ahead_kb
    // to what it was: the executor found it in place and wrote nothing.
    CHECK(order == std::vector<std::string>{"queue/max_sectors_kb", "queue/scheduler"});

    SUBCASE("what is kept is not touched") {
        WrittenValues kept = {{"nomerges", {"0", "2"}}};
        CHECK(agent::restore_values(t.sysfs, "loop0", kept, {"nomerges"}).empty());
        CHECK(kept.size() == 1);
        CHECK(t.q("nomerges") == "2");
    }
}

TEST_CASE("blkpolicy restore: apply records what it changed, restore puts it back, once") {
    Tree t;
    TempDir dir;
    const auto policy = (dir.path() / "p.toml").string();
    std::ofstream(policy) << "[[rule]]\nname = \"loops\"\n[rule.match]\nkernel = \"loop*\"\n[rule.set]\n"
                             "read_ahead_kb = 4096\nnomerges = 1\nrq_affinity = 2\n";
    const auto ra = t.q("read_ahead_kb");
    auto applied = t.run({"apply", "--policy", policy});
    INFO(applied.err);
    REQUIRE(applied.exit_code == 0);
    REQUIRE(t.q("read_ahead_kb") == "4096");
    t.set("rq_affinity", "0");  // someone else, after blkpolicy

    auto r = t.run({"restore"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("2 value(s) put back, 1 left as someone else set them") != std::string::npos);
    CHECK(r.out.find("rq_affinity: it is now 0, not the 2 blkpolicy wrote: someone else set it since") !=
          std::string::npos);
    CHECK(t.q("read_ahead_kb") == ra);
    CHECK(t.q("nomerges") == "0");
    CHECK(t.q("rq_affinity") == "0");

    auto again = t.run({"restore", "loop0"});
    CHECK(again.exit_code == 0);
    CHECK(again.out ==
          "nothing to put back: blkpolicy has changed no value of the devices named since they appeared\n");

    SUBCASE("--json, and a write the kernel refuses: exit 1") {
        REQUIRE(t.run({"apply", "--policy", policy}).exit_code == 0);
        t.sysfs.fail["queue/nomerges"] = EINVAL;
        auto j = t.run({"restore", "--json"});
        CHECK(j.exit_code == 1);
        const auto doc = nlohmann::json::parse(j.out);
        std::map<std::string, std::string> results;
        for (const auto& x : doc["devices"][0]["values"]) results[x["attribute"]] = x["result"];
        CHECK(results == std::map<std::string, std::string>{
                             {"nomerges", "failed"}, {"read_ahead_kb", "restored"}, {"rq_affinity", "restored"}});
        CHECK(doc["daemon_running"] == false);
    }
}
