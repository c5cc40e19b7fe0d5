// SPDX-License-Identifier: MIT
// The pass in early boot (apply --boot, as the initramfs runs it): its
// record, what status and audit make of it, and a policy that cannot be
// loaded. On a fake tree; the guests run it in a real initramfs.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/boot.hpp"
#include "kernel/audit.hpp"
#include "support/fake_sysfs.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"

using namespace blkpolicy::test;
namespace agent = blkpolicy::agent;
namespace kernel = blkpolicy::kernel;
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
    kernel::AuditInput in;
    in.with_policy = true;
    in.policy_digest = "1111111111111111";
    auto codes = [&] {
        std::vector<std::string> out;
        for (const auto& f : kernel::audit(in)) out.push_back(f.code + " " + f.device);
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
    const auto found = kernel::audit(in);
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
