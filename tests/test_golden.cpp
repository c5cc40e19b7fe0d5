// SPDX-License-Identifier: MIT
// Golden scenarios: the fake fleet + tests/data/fleet.toml, compared with
// tests/golden/*. Paths that differ per run are replaced by placeholders.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/cli/commands.hpp"
#include "agent/cli/parse.hpp"
#include "agent/cli/render/common.hpp"
#include "support/fake_sysfs.hpp"
#include "support/kernel_model.hpp"
#include "support/run_binary.hpp"

using namespace blkpolicy::test;

namespace {

// The policy is named relative to tests/data so that reports (and their
// column widths) do not depend on where the checkout is.
const std::string kPolicy = "fleet.toml";

// Runs a block with the working directory at tests/data.
struct InDataDir {
    std::filesystem::path old = std::filesystem::current_path();
    InDataDir() { std::filesystem::current_path(blkpolicy::test::test_data_dir()); }
    ~InDataDir() { std::filesystem::current_path(old); }
};

struct Scenario {
    FakeSysfs tree;
    Scenario() { build_fleet(tree); }
    // apply runs in-process on a sysfs that does what the kernel does on
    // writes (brackets the scheduler, resets nr_requests, ...): a fake
    // tree's plain files would not.
    // COMMAND with the fleet's policy, tree and state directory, then EXTRA.
    std::vector<std::string> args_for(const std::string& command, const std::vector<std::string>& extra) {
        std::vector<std::string> args = {command,
                                         "--policy",
                                         kPolicy,
                                         "--sysfs-root",
                                         tree.root().string(),
                                         "--state-dir",
                                         (tree.root() / "state").string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    }
    RunResult apply(std::vector<std::string> extra = {}) {
        const auto args = args_for("apply", extra);
        auto parsed = blkpolicy::agent::parse_command_line(args);
        REQUIRE(parsed.error.empty());
        KernelModelSysfs sysfs(tree.root());
        std::ostringstream out, err;
        RunResult r;
        {
            InDataDir here;
            r.exit_code = blkpolicy::agent::run_command(parsed.options, sysfs, out, err);
        }
        r.out = out.str();
        r.err = err.str();
        return r;
    }
    RunResult run(const std::string& command, std::vector<std::string> extra = {}) {
        return run_blkpolicy(args_for(command, extra), blkpolicy::test::test_data_dir());
    }
    std::string q(const std::string& dev, const std::string& attr) {
        return tree.read(tree.devpath_of(dev) + "/" + attr);
    }
};

}  // namespace

TEST_CASE("golden: plan of the fleet writes nothing") {
    Scenario s;
    auto r = s.run("plan");
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    check_golden("fleet-plan.txt", r.out);
    CHECK(s.q("vda", "queue/read_ahead_kb") == "8192");
    CHECK_FALSE(std::filesystem::exists(s.tree.root() / "state"));
}

TEST_CASE("golden: plan --json") {
    Scenario s;
    auto r = s.run("plan", {"--json"});
    CHECK(r.exit_code == 0);
    // The host facts name the tree they were read from: a new one each run.
    auto out = r.out;
    const auto root = s.tree.root().string();
    for (auto at = out.find(root); at != std::string::npos; at = out.find(root))
        out.replace(at, root.size(), "SYSFS_ROOT");
    check_golden("fleet-plan.json", out);
    auto doc = nlohmann::json::parse(r.out);
    CHECK(doc["format"] == 1);
}

TEST_CASE("golden: apply - then status - then apply again") {
    Scenario s;
    auto r = s.apply();
    // sda's write_cache is refused (its own cache is write back): partial, exit 1.
    CHECK(r.exit_code == 1);
    check_golden("fleet-apply.txt", r.out);
    CHECK(s.q("vda", "queue/rotational") == "0");
    CHECK(s.q("vda", "queue/read_ahead_kb") == "128");
    CHECK(s.q("vda", "queue/scheduler") == "none mq-deadline [kyber] bfq");
    CHECK(s.q("sda", "device/timeout") == "60");
    CHECK(s.q("sda", "queue/write_cache") == "write back");
    CHECK(s.q("dm-1", "queue/read_ahead_kb") == "1024");
    CHECK(s.q("md0", "queue/read_ahead_kb") == "4096");
    CHECK(s.q("zram0", "queue/read_ahead_kb") == "0");
    CHECK(std::filesystem::exists(s.tree.root() / "state/facts/vda.json"));

    auto st = s.run("status");
    check_golden("fleet-status-after-apply.txt", st.out);

    auto again = s.apply({"--json"});
    auto doc = nlohmann::json::parse(again.out);
    CHECK(doc["summary"]["applied"] == 0);
    CHECK(doc["summary"]["failed"] == 0);
    CHECK(doc["summary"]["refused"] == 1);
    // frozen facts: vda still matches "rotational = true" after its rotational became 0
    for (const auto& d : doc["devices"]) {
        if (d["device"] == "vda") {
            CHECK(d["facts"]["rotational"] == true);
            CHECK(d["facts"]["facts_frozen"] == true);
            CHECK(d["matched"].size() == 1);
        }
    }
}

TEST_CASE("status reports drift and exits 1 - device arguments limit it") {
    Scenario s;
    auto r = s.run("status", {"vda"});
    CHECK(r.exit_code == 1);
    check_golden("vda-status.txt", r.out);
    CHECK(s.apply({"vda"}).exit_code == 0);
    auto after = s.run("status", {"vda", "--json"});
    CHECK(after.exit_code == 0);
    auto doc = nlohmann::json::parse(after.out);
    REQUIRE(doc["devices"].size() == 1);
    CHECK(doc["devices"][0]["attributes"].size() == 4);
    for (const auto& a : doc["devices"][0]["attributes"]) CHECK(a["state"] == "ok");
    CHECK(s.q("sda", "queue/read_ahead_kb") == "8192");  // not named, not touched
}

TEST_CASE("a value this host cannot give: apply and status exit 1 and say unavailable; the rest is applied") {
    // The fleet is a kernel before 7.0: no queue/async_depth. A policy that
    // asks for it is not met here, and neither command may say otherwise.
    Scenario s;
    const auto policy = (s.tree.root() / "unavailable.toml").string();
    std::ofstream(policy) << "[[rule]]\nname = \"t\"\n[rule.match]\ndriver = \"virtio_blk\"\n"
                             "[rule.set]\nasync_depth = 16\nread_ahead_kb = 64\n";
    auto args = [&](const std::string& command, std::vector<std::string> extra) {
        std::vector<std::string> a = {command,
                                      "--policy",
                                      policy,
                                      "--sysfs-root",
                                      s.tree.root().string(),
                                      "--state-dir",
                                      (s.tree.root() / "state").string()};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    };
    auto applied = run_blkpolicy(args("apply", {"vda", "--json"}));
    CHECK(applied.exit_code == 1);
    auto doc = nlohmann::json::parse(applied.out);
    CHECK(doc["summary"]["unavailable"] == 1);
    CHECK(doc["summary"]["applied"] == 1);
    for (const auto& r : doc["devices"][0]["results"]) {
        if (r["attribute"] == "async_depth") {
            CHECK(r["outcome"] == "unavailable");
            CHECK(r["detail"].get<std::string>().find("this kernel has no queue/async_depth") == 0);
        }
    }
    CHECK(s.q("vda", "queue/read_ahead_kb") == "64");

    auto text = run_blkpolicy(args("apply", {"vda"}));
    CHECK(text.exit_code == 1);
    CHECK(text.out.find("async_depth") != std::string::npos);
    CHECK(text.out.find("unavailable") != std::string::npos);
    CHECK(text.out.find("0 applied, 1 unchanged, 0 skipped, 0 failed, 0 did not stick, 0 refused, 0 busy, "
                        "1 unavailable here") != std::string::npos);

    auto status = run_blkpolicy(args("status", {"vda"}));
    CHECK(status.exit_code == 1);  // not every managed value is as the policy says
    CHECK(status.out.find("1 in policy, 0 drifted, 0 skipped, 0 refused, 1 unavailable here") != std::string::npos);

    // Without the unavailable value the same device is in policy: exit 0.
    std::ofstream(policy) << "[[rule]]\nname = \"t\"\n[rule.match]\ndriver = \"virtio_blk\"\n"
                             "[rule.set]\nread_ahead_kb = 64\n";
    CHECK(run_blkpolicy(args("status", {"vda"})).exit_code == 0);
    CHECK(run_blkpolicy(args("apply", {"vda"})).exit_code == 0);
}

TEST_CASE("status: the daemon's last pass as a local time and an age") {
    setenv("TZ", "UTC", 1);
    tzset();
    CHECK(blkpolicy::agent::pass_time_text(1796069000.4, 1796069012) == "2026-11-30 20:03:20 (12 s ago)");
    CHECK(blkpolicy::agent::pass_time_text(1796069000, 1796069000 + 600) == "2026-11-30 20:03:20 (10 min ago)");
    CHECK(blkpolicy::agent::pass_time_text(1796069000, 1796069000 + 3 * 3600) == "2026-11-30 20:03:20 (3 h ago)");
    CHECK(blkpolicy::agent::pass_time_text(1796069000, 1796068000) ==
          "2026-11-30 20:03:20 (in the future: is the clock right?)");
}
