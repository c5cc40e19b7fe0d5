// SPDX-License-Identifier: MIT
// The pass in early boot (apply --boot, as the initramfs runs it): its
// record, what status and audit make of it, and a policy that cannot be
// loaded. On a fake tree; the guests run it in a real initramfs.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "agent/boot.hpp"
#include "policy/loader.hpp"
#include "report/audit.hpp"
#include "support/fake_sysfs.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"

using namespace blkpolicy::test;
namespace agent = blkpolicy::agent;
namespace report = blkpolicy::report;
using nlohmann::json;

namespace {

struct BootTree {
    FakeSysfs t;
    TempDir dir;
    BootTree() {
        build_fleet(t);
        std::ofstream(dir.path() / "p.toml")
            << "[[rule]]\nname = \"virtio\"\n[rule.match]\ndriver = \"virtio_blk\"\n[rule.set]\nread_ahead_kb = 128\n";
        std::ofstream(dir.path() / "bad.toml") << "[[rule]]\nname = \"x\"\n[rule.set]\nread_ahead = 1\n";
    }
    std::string state() const { return (dir.path() / "state").string(); }
    RunResult run(const std::vector<std::string>& args) {
        std::vector<std::string> all = args;
        all.insert(all.end(), {"--sysfs-root", t.root().string(), "--state-dir", state()});
        return run_blkpolicy(all);
    }
    json record() const {
        std::ifstream in(dir.path() / "state" / "boot.json");
        return json::parse(in);
    }
};

}  // namespace

TEST_CASE("apply --boot: the pass is recorded, facts first, and status says it") {
    BootTree b;
    const auto policy = (b.dir.path() / "p.toml").string();
    auto r = b.run({"apply", "--boot", "--policy", policy});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    const auto rec = b.record();
    CHECK(rec["ok"] == true);
    CHECK(rec["exit"] == 0);
    CHECK(rec["devices"].get<int>() > 3);
    CHECK(rec["devices_left"] == 0);
    CHECK(rec["outcomes"]["applied"].get<int>() == 3);  // the fleet's three virtio disks
    CHECK(rec["policy"]["files"] == json::array({policy}));
    auto check = run_blkpolicy({"check", "--json", "--policy", policy});
    CHECK(rec["policy"]["digest"] == json::parse(check.out)["digest"]);
    // The facts as the kernel reported them, recorded before the writes.
    CHECK(std::filesystem::exists(b.dir.path() / "state" / "facts" / "vda.json"));

    // A second look: everything in place, and status names this boot's pass.
    auto st = b.run({"status", "--policy", policy});
    CHECK(st.exit_code == 0);
    CHECK(st.out.find("this boot's initramfs pass: ") != std::string::npos);
    CHECK(st.out.find(" 3 applied, 0 failed in ") != std::string::npos);
    auto js = b.run({"status", "--json", "--policy", policy});
    CHECK(json::parse(js.out)["initramfs"]["outcomes"]["applied"] == 3);
}

TEST_CASE("apply --boot with a policy that cannot be loaded: nothing set, the record says why, exit 3") {
    BootTree b;
    const auto before = b.t.read(b.t.devpath_of("vda") + "/queue/read_ahead_kb");
    auto r = b.run({"apply", "--boot", "--policy", (b.dir.path() / "bad.toml").string()});
    CHECK(r.exit_code == 3);
    const auto rec = b.record();
    CHECK(rec["ok"] == false);
    CHECK(rec["error"].get<std::string>().rfind("the policy is invalid: ", 0) == 0);
    CHECK(rec["error"].get<std::string>().find("bad.toml:4:1: unknown attribute \"read_ahead\"") != std::string::npos);
    CHECK(b.t.read(b.t.devpath_of("vda") + "/queue/read_ahead_kb") == before);
    CHECK(
        agent::boot_line(agent::boot_record_from(rec)).rfind("initramfs pass: nothing set: the policy is invalid", 0) ==
        0);
}

TEST_CASE("--boot is apply's only") {
    auto r = run_blkpolicy({"plan", "--boot"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--boot is for apply") != std::string::npos);
}

TEST_CASE("audit: the policy in the initramfs differs from /etc/blkpolicy, by the hook's digest or this boot's") {
    report::AuditInput in;
    in.with_policy = true;
    in.policy_digest = "1111111111111111";
    auto codes = [&] {
        std::vector<std::string> out;
        for (const auto& f : report::audit(in)) out.push_back(f.code + " " + f.device);
        return out;
    };
    CHECK(codes().empty());  // no initramfs pass, no hook: nothing to compare
    in.boot_digest = "1111111111111111";
    CHECK(codes().empty());
    in.boot_digest = "2222222222222222";  // this boot ran another policy, and no hook noted a newer one
    CHECK(codes() == std::vector<std::string>{"initramfs-policy-stale *"});
    in.initramfs_digest = "1111111111111111";  // the initramfs was made again since: the next boot is right
    CHECK(codes().empty());
    in.initramfs_digest = "invalid";  // the hook packed a policy that does not load
    const auto found = report::audit(in);
    REQUIRE(found.size() == 1);
    CHECK(found[0].message.find("update-initramfs -u, or dracut -f") != std::string::npos);
    in.with_policy = false;
    CHECK(codes().empty());
}

TEST_CASE("the initramfs hook's digest is read under the config root") {
    TempDir root;
    CHECK(agent::read_initramfs_digest(root.path().string()).empty());
    std::filesystem::create_directories(root.path() / "var/lib/blkpolicy");
    std::ofstream(root.path() / "var/lib/blkpolicy/initramfs-policy.digest") << "0123456789abcdef\n";
    CHECK(agent::read_initramfs_digest(root.path().string()) == "0123456789abcdef");
    CHECK(agent::initramfs_digest_path("/") == "/var/lib/blkpolicy/initramfs-policy.digest");
}

TEST_CASE("the initramfs hook's notes per file: audit names the policy file edited, added or removed since") {
    TempDir root;
    std::filesystem::create_directories(root.path() / "var/lib/blkpolicy");
    const std::string a = "[[rule]]\nname = \"a\"\n[rule.set]\nread_ahead_kb = 128\n";
    const std::string b = "[[rule]]\nname = \"b\"\n[rule.set]\nread_ahead_kb = 256\n";
    auto then =
        blkpolicy::policy::load_policy({{"/etc/blkpolicy/policy.toml", a}, {"/etc/blkpolicy/policy.d/b.toml", b}});
    REQUIRE(then.ok());
    REQUIRE(then.policy.file_digests.size() == 2);
    // One file alone: its own digest is the policy's.
    CHECK(blkpolicy::policy::load_policy({{"/etc/blkpolicy/policy.toml", a}}).policy.digest ==
          then.policy.file_digests[0]);
    {
        std::ofstream f(root.path() / "var/lib/blkpolicy/initramfs-policy.digest");
        f << then.policy.digest << '\n';
        for (std::size_t i = 0; i < 2; ++i) f << then.policy.file_digests[i] << ' ' << then.policy.files[i] << '\n';
    }
    CHECK(agent::read_initramfs_digest(root.path().string()) == then.policy.digest);
    auto audit_of = [&](const blkpolicy::policy::Policy& now) {
        report::AuditInput in;
        in.with_policy = true;
        agent::initramfs_audit_input(now, root.path().string(), in);
        return report::audit(in);
    };
    CHECK(audit_of(then.policy).empty());  // right after the hook: nothing stale

    // policy.toml edited, b.toml removed, c.toml added.
    auto now = blkpolicy::policy::load_policy(
        {{"/etc/blkpolicy/policy.toml", a + "# edited\n"}, {"/etc/blkpolicy/policy.d/c.toml", b}});
    REQUIRE(now.ok());
    const auto found = audit_of(now.policy);
    REQUIRE(found.size() == 1);
    CHECK(found[0].code == "initramfs-policy-stale");
    CHECK(found[0].message.find("(edited since: /etc/blkpolicy/policy.toml; added since: "
                                "/etc/blkpolicy/policy.d/c.toml; removed since: /etc/blkpolicy/policy.d/b.toml)") !=
          std::string::npos);
    std::map<std::string, std::string> ev;
    for (const auto& [k, v] : found[0].evidence) ev[k] += v;
    CHECK(ev["edited since the initramfs was made"] == "/etc/blkpolicy/policy.toml");

    // A digest file of an older hook (one line): stale all the same, no file named.
    std::ofstream(root.path() / "var/lib/blkpolicy/initramfs-policy.digest") << then.policy.digest << '\n';
    const auto older = audit_of(now.policy);
    REQUIRE(older.size() == 1);
    CHECK(older[0].message.find("since") == std::string::npos);
}

TEST_CASE("check --json gives each policy file's digest, as the initramfs hook notes them") {
    TempDir dir;
    std::ofstream(dir.path() / "p.toml") << "[[rule]]\nname = \"x\"\n[rule.set]\nread_ahead_kb = 128\n";
    auto r = run_blkpolicy({"check", "--json", "--policy", (dir.path() / "p.toml").string()});
    REQUIRE(r.exit_code == 0);
    const auto doc = json::parse(r.out);
    REQUIRE(doc["file_digests"].size() == 1);
    CHECK(doc["file_digests"][(dir.path() / "p.toml").string()] == doc["digest"]);
}

TEST_CASE("the runner's lines in the initramfs: parsed, merged into the record, said by status and audit") {
    const auto bound = agent::parse_boot_bound(
        "sdc\tcrashed\tkilled by signal 11\t3.41\n"
        "pass\tstopped\tstill running when the boot's budget of 5 s ran out, waiting in the kernel "
        "(blk_mq_freeze_queue_wait): killed, not waited for\t8.02\n"
        "\n"
        "half a line\n");
    REQUIRE(bound.size() == 3);
    CHECK(agent::bound_text(bound[0]) == "sdc crashed: killed by signal 11");
    CHECK(bound[0].uptime == doctest::Approx(3.41));
    CHECK(bound[1].what == "pass");
    CHECK(bound[1].outcome == "stopped");
    CHECK(bound[2].outcome == "unreadable");
    CHECK(bound[2].detail == "half a line");

    BootTree b;
    std::filesystem::create_directories(b.state());
    // Only the runner's lines: the pass was stopped before it wrote its record.
    std::ofstream(b.state() + "/boot-bound") << "pass\tstopped\tstill running when the boot's budget of 5 s ran out, "
                                                "state S: killed, not waited for\t6.10\n";
    auto doc = agent::read_boot_record(b.state());
    REQUIRE(doc);
    auto rec = agent::boot_record_from(*doc);
    CHECK_FALSE(rec.ok);
    CHECK(rec.error.rfind("the pass stopped: still running when the boot's budget of 5 s ran out", 0) == 0);
    REQUIRE(rec.bound.size() == 1);
    auto st = b.run({"status", "--policy", (b.dir.path() / "p.toml").string()});
    INFO(st.out << st.err);
    CHECK(st.out.find("this boot's initramfs pass: nothing set: the pass stopped: ") != std::string::npos);
    CHECK(st.out.find("[in the initramfs: pass stopped: still running") != std::string::npos);

    // A record of the pass and a disk's run that crashed: both said.
    auto r = b.run({"apply", "--boot", "--policy", (b.dir.path() / "p.toml").string()});
    REQUIRE(r.exit_code == 0);
    std::ofstream(b.state() + "/boot-bound") << "sdc\tcrashed\tkilled by signal 11\t3.41\n";
    doc = agent::read_boot_record(b.state());
    REQUIRE(doc);
    rec = agent::boot_record_from(*doc);
    CHECK(rec.ok);
    REQUIRE(rec.bound.size() == 1);
    CHECK(agent::boot_line(rec).find("(policy ") != std::string::npos);
    CHECK(agent::boot_line(rec).find(") [in the initramfs: sdc crashed: killed by signal 11]") != std::string::npos);
    auto js = b.run({"status", "--json", "--policy", (b.dir.path() / "p.toml").string()});
    REQUIRE(js.exit_code == 0);
    CHECK(json::parse(js.out)["initramfs"]["bound"][0]["outcome"] == "crashed");

    report::AuditInput in;
    agent::boot_audit_input(rec, in);
    const auto found = report::audit(in);
    REQUIRE(found.size() == 1);
    CHECK(found[0].code == "initramfs-pass-unfinished");
    CHECK(found[0].device == "*");
    CHECK(found[0].message.find("(sdc crashed: killed by signal 11)") != std::string::npos);
}
