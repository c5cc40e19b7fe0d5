// SPDX-License-Identifier: MIT
// explain and audit against the real kernel, for the findings a loop device
// can produce.
#include <doctest/doctest.h>
#include <sys/mount.h>
#include <sys/utsname.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "kernel/loop_device.hpp"
#include "kernel/mounts.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"

using namespace blkpolicy::test;
using nlohmann::json;

namespace {

// debugfs on /sys/kernel/debug for the test's life.
struct Debugfs : KernelFsMount {
    Debugfs() : KernelFsMount("debugfs", "/sys/kernel/debug") {}
};

json findings_for(const std::vector<std::string>& args, const std::string& device) {
    auto r = run_blkpolicy(args);
    INFO(r.err);
    REQUIRE_FALSE(r.out.empty());
    json out = json::array();
    const auto doc = json::parse(r.out);
    for (const auto& f : doc["findings"])
        if (f["device"] == device) out.push_back(f);
    return out;
}

const json* find_code(const json& findings, const std::string& code) {
    for (const auto& f : findings)
        if (f["code"] == code) return &f;
    return nullptr;
}

}  // namespace

TEST_CASE("kernel: audit finds bfq-disabled-wbt, with the debugfs state as evidence") {
    Debugfs dbg;
    LoopDevice loop;
    TempDir tmp;
    auto before = findings_for({"audit", "--json", "--no-policy", "--udev-rules-dir", tmp.path().string(), loop.name()},
                               loop.name());
    CHECK(find_code(before, "bfq-disabled-wbt") == nullptr);
    if (const auto skipped = switch_scheduler_or_reason(loop, "bfq"); !skipped.empty()) {
        MESSAGE(skipped);
        return;
    }
    auto after = findings_for({"audit", "--json", "--no-policy", "--udev-rules-dir", tmp.path().string(), loop.name()},
                              loop.name());
    const auto* f = find_code(after, "bfq-disabled-wbt");
    REQUIRE(f != nullptr);
    CHECK((*f)["severity"] == "warning");
    if (dbg.mounted_here() || std::ifstream("/sys/kernel/debug/block/" + loop.name() + "/rqos/wbt/enabled")) {
        CHECK((*f)["evidence"]["debugfs rqos/wbt/enabled"] == "3 (off-default)");
        auto x = run_blkpolicy({"explain", "--json", "--no-policy", loop.name()});
        CHECK(json::parse(x.out)["devices"][0]["wbt"]["state"] == "off-default");
    }
}

TEST_CASE("kernel: explain derives read_ahead_kb after a limits write from the real inputs") {
    LoopDevice loop;
    REQUIRE(loop.queue("rotational") == "1");
    loop.write_queue("read_ahead_kb", "128");
    loop.write_queue("max_sectors_kb", loop.queue("max_sectors_kb"));
    auto r = run_blkpolicy({"explain", "--json", "--no-policy", loop.name()});
    REQUIRE(r.exit_code == 0);
    const auto doc = json::parse(r.out);
    bool seen = false;
    for (const auto& a : doc["devices"][0]["attributes"]) {
        if (a["attribute"] != "read_ahead_kb") continue;
        seen = true;
        const auto twice = std::to_string(2 * std::stoi(loop.queue("max_sectors_kb")));
        CHECK(a["current"] == loop.queue("read_ahead_kb"));
        CHECK(a["kernel_default"] == twice);  // the kernel put back exactly what explain derives
        CHECK(a["current"] == twice);
        CHECK(a["derivation"].get<std::string>().find("2 x max_sectors_kb") != std::string::npos);
    }
    CHECK(seen);
}

TEST_CASE("kernel: audit names a real udev rules file that writes what the policy manages") {
    LoopDevice loop;
    TempDir tmp;
    std::ofstream(tmp.path() / "61-loop-ra.rules") << "# hand tuning\nACTION==\"add|change\", KERNEL==\"" << loop.name()
                                                   << "\", ATTR{queue/read_ahead_kb}=\"512\"\n";
    std::ofstream(tmp.path() / "policy.toml") << "[[rule]]\nname = \"test\"\n[rule.match]\nkernel = \"" << loop.name()
                                              << "\"\n[rule.set]\nread_ahead_kb = 128\n";
    auto found = findings_for({"audit", "--json", "--policy", (tmp.path() / "policy.toml").string(), "--udev-rules-dir",
                               tmp.path().string(), loop.name()},
                              loop.name());
    const auto* f = find_code(found, "udev-rule-conflict");
    REQUIRE(f != nullptr);
    CHECK((*f)["evidence"]["udev rule"] == (tmp.path() / "61-loop-ra.rules").string() + ":2");
    CHECK((*f)["evidence"]["policy rule"] == (tmp.path() / "policy.toml").string() + ":1");
}

TEST_CASE("kernel: explain derives what this kernel set on a fresh loop device before anything wrote it") {
    LoopDevice loop;  // bound to a sparse file under /tmp
    auto r = run_blkpolicy({"explain", "--json", "--no-policy", loop.name()});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto doc = json::parse(r.out);
    std::map<std::string, json> attrs;
    for (const auto& a : doc["devices"][0]["attributes"]) attrs[a["attribute"].get<std::string>()] = a;
    for (const char* attr :
         {"read_ahead_kb", "wbt_lat_usec", "rotational", "nr_requests", "scheduler", "nomerges", "rq_affinity"}) {
        INFO(attr << ": " << attrs[attr].dump());
        REQUIRE(attrs.count(attr));
        auto now = loop.queue(attr);
        if (now.find('[') != std::string::npos) now = now.substr(now.find('[') + 1, now.find(']') - now.find('[') - 1);
        CHECK(attrs[attr]["kernel_default"] == now);
    }
}

TEST_CASE("kernel: explain takes a loop device's rotational flag from its backing store (tmpfs: none)") {
    auto rotational_of = [](const LoopDevice& loop) {
        auto r = run_blkpolicy({"explain", "--json", "--no-policy", loop.name()});
        REQUIRE(r.exit_code == 0);
        const auto doc = json::parse(r.out);
        for (const auto& a : doc["devices"][0]["attributes"])
            if (a["attribute"] == "rotational") return a;
        FAIL("no rotational in explain");
        return json();
    };
    LoopDevice on_tmpfs(true, "/dev/shm/blkpolicy-test-");
    auto e = rotational_of(on_tmpfs);
    CHECK(on_tmpfs.queue("rotational") == "0");
    CHECK(e["kernel_default"] == "0");
    CHECK(e["derivation"].get<std::string>().find("tmpfs, which has no block device") != std::string::npos);

    LoopDevice on_disk;  // under /tmp: on this machine's root disk
    e = rotational_of(on_disk);
    CHECK(e["kernel_default"] == on_disk.queue("rotational"));
    CHECK(e["derivation"].get<std::string>().find("the loop driver takes it from the backing file's device") !=
          std::string::npos);
}

TEST_CASE("kernel: the kernel rules for this kernel hold here (an unbound loop device; rows that name this kernel)") {
    auto r = run_blkpolicy({"explain", "--kernel-rules", "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto doc = json::parse(r.out);
    const std::string release = doc["kernel"];
    const std::string version = release.substr(0, release.find_first_of("-+"));
    std::map<std::string, bool> holds;
    for (const auto& row : doc["rules"]) {
        holds[row["id"]] = row["holds"];
        // A row that says it was observed on this kernel holds on it.
        if (row["observed"].get<std::string>().find(version) != std::string::npos)
            CHECK_MESSAGE(row["holds"], row["id"]);
    }
    LoopDevice unbound(false);
    const auto rotational = unbound.queue("rotational");
    INFO("unbound " << unbound.name() << " reads rotational " << rotational);
    CHECK(holds.at("loop-created-rotational:" + rotational));
}

TEST_CASE("kernel: host facts of this machine are what uname and systemd-detect-virt --vm say") {
    // systemd-detect-virt is systemd's own, installed with it (scripts/install-deps.sh).
    auto virt = Running({"systemd-detect-virt", "--vm"}).wait();  // exits 1 and prints "none" on bare metal
    auto virt_name = virt.out.substr(0, virt.out.find('\n'));
    REQUIRE_FALSE(virt_name.empty());
    utsname u{};
    REQUIRE(::uname(&u) == 0);
    LoopDevice loop;
    TempDir tmp;
    std::ofstream(tmp.path() / "policy.toml")
        << "[[rule]]\nname = \"this host\"\n[rule.match]\nkernel = \"" << loop.name() << "\"\nhost.virtualization = \""
        << virt_name << "\"\nhost.kernel = \">= 4.0\"\n"
        << "[rule.set]\nread_ahead_kb = 128\n"
        << "[[rule]]\nname = \"another host\"\n[rule.match]\nkernel = \"" << loop.name()
        << "\"\n[rule.unless]\nhost.hostname = \"" << u.nodename << "\"\n[rule.set]\nnomerges = 1\n";
    auto r = run_blkpolicy({"plan", "--json", "--policy", (tmp.path() / "policy.toml").string(), loop.name()});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto doc = json::parse(r.out);
    CHECK(doc["host"]["virtualization"] == virt_name);
    CHECK(doc["host"]["kernel"] == u.release);
    CHECK(doc["host"]["hostname"] == u.nodename);
    CHECK(doc["host"]["source"] == "this host");
    const auto& matched = doc["devices"][0]["matched"];
    REQUIRE(matched.size() == 1);
    CHECK(matched[0]["name"] == "this host");
    REQUIRE(doc["host"]["rules_not_for_this_host"].size() == 1);
    CHECK(doc["host"]["rules_not_for_this_host"][0]["name"] == "another host");
}

TEST_CASE("kernel: export writes what was set by hand on a loop device as a policy whose plan writes nothing") {
    TempDir tmp;
    const auto state = (tmp.path() / "state").string();
    LoopDevice tuned, untouched;
    // As an admin's script would: echo into sysfs.
    tuned.write_queue("read_ahead_kb", "1024");
    tuned.write_queue("rq_affinity", "2");
    tuned.write_queue("nomerges", "1");
    auto r = run_blkpolicy({"export", "--state-dir", state, tuned.name(), untouched.name()});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    INFO(r.out);
    // The untouched one shares the tuned one's match (a loop, its rotational
    // claim): the rule names the tuned one's backing file.
    CHECK(r.out.find("# read on " + tuned.name() + "\n") != std::string::npos);
    CHECK(r.out.find("read on " + untouched.name()) == std::string::npos);
    CHECK(r.out.find("attr.\"loop/backing_file\" = \"" + tuned.backing() + "\"") != std::string::npos);
    CHECK(r.out.find("read_ahead_kb = 1024  # the kernel's default here is ") != std::string::npos);
    CHECK(r.out.find("rq_affinity = 2  # the kernel's default here is 1") != std::string::npos);
    CHECK(r.out.find("nomerges = 1  # the kernel's default here is 0") != std::string::npos);
    const auto file = (tmp.path() / "exported.toml").string();
    std::ofstream(file) << r.out;

    auto check = run_blkpolicy({"check", "-p", file});
    CHECK(check.exit_code == 0);
    // export then plan on the same devices: nothing to write (exit 0, not 5).
    auto plan = run_blkpolicy(
        {"plan", "--detailed-exitcode", "-p", file, "--state-dir", state, tuned.name(), untouched.name()});
    INFO(plan.out << plan.err);
    CHECK(plan.exit_code == 0);
    CHECK(plan.out.find("0 write(s) planned") != std::string::npos);
    CHECK(plan.out.find("no rule matches: " + untouched.name()) != std::string::npos);

    // Moved away by hand again: the plan would put the exported value back.
    tuned.write_queue("read_ahead_kb", "256");
    plan = run_blkpolicy({"plan", "--detailed-exitcode", "-p", file, "--state-dir", state, tuned.name()});
    CHECK(plan.exit_code == 5);

    // A device that is gone is named, nothing printed on stdout.
    std::string gone;
    {
        LoopDevice brief;
        gone = brief.name();
    }
    auto vanished = run_blkpolicy({"export", "--state-dir", state, gone});
    CHECK(vanished.exit_code == 2);
    CHECK(vanished.out.empty());
    CHECK(vanished.err == "blkpolicy: no block device \"" + gone + "\" under /sys/block\n");
}
