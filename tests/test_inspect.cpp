// SPDX-License-Identifier: MIT
// explain and audit on fake trees: golden outputs covering every finding.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kernel/rows.hpp"
#include "report/audit.hpp"
#include "support/fake_sysfs.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"

using namespace blkpolicy::test;
namespace kernel = blkpolicy::kernel;
namespace report = blkpolicy::report;
namespace policy = blkpolicy::policy;

namespace {

// The fleet plus what audit looks for: a real HDD, a SCSI disk whose queue
// says write back over a write-through cache, sda switched to write through
// over its volatile cache, loop0 under bfq with wbt off by default, one L3
// for all CPUs.
struct AuditTree {
    FakeSysfs t;
    AuditTree() {
        build_fleet(t);
        t.add_scsi_disk("sdb", "1:0:0:0", "ATA     ", "ST4000NM0035-1V4", "write back", true, 16);
        t.add_scsi_disk("sdc", "2:0:0:0", "ATA     ", "INTEL SSDSC2KB96", "write through", false, 32);
        t.file(t.devpath_of("sdc") + "/queue/write_cache", "write back");
        t.file(t.devpath_of("sda") + "/queue/write_cache", "write through");
        t.file(t.devpath_of("loop0") + "/queue/scheduler", "none mq-deadline kyber [bfq]");
        t.file(t.devpath_of("loop0") + "/queue/wbt_lat_usec", "0");
        t.set_wbt_state("loop0", 3);
        t.add_cpus(4, [](int) { return std::string("0-3"); });
    }
    RunResult run(std::vector<std::string> args) {
        args.insert(args.end(),
                    {"--sysfs-root", t.root().string(), "--udev-rules-dir", "udev", "--config-root", "writers-root",
                     // this boot's: a run the initramfs's runner stopped (tests/data/audit-state/boot-bound)
                     "--state-dir", "audit-state"});
        return run_blkpolicy(args, blkpolicy::test::test_data_dir());
    }
};

}  // namespace

TEST_CASE("golden: audit of the fleet without a policy") {
    AuditTree a;
    auto r = a.run({"audit", "--no-policy"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.empty());
    check_golden("audit-no-policy.txt", r.out);
    CHECK(r.out.find("stack-lower-only") == std::string::npos);  // needs a policy
    CHECK(run_blkpolicy({"audit", "--no-policy", "--policy", "x.toml"}).exit_code == 2);
    CHECK(run_blkpolicy({"plan", "--no-policy"}).exit_code == 2);
}

TEST_CASE("golden: audit of the fleet with a policy and udev rules") {
    AuditTree a;
    auto r = a.run({"audit", "--policy", "audit.toml"});
    CHECK(r.exit_code == 1);  // warnings and a critical finding
    CHECK(r.err.empty());
    check_golden("audit.txt", r.out);

    auto j = a.run({"audit", "--json", "--policy", "audit.toml"});
    auto doc = nlohmann::json::parse(j.out);
    std::set<std::string> codes;
    std::map<std::string, std::set<std::string>> by_device;
    for (const auto& f : doc["findings"]) {
        codes.insert(f["code"].get<std::string>());
        by_device[f["device"].get<std::string>()].insert(f["code"].get<std::string>());
    }
    // The golden tree shows every kind of finding in the registry, with the
    // registry's severity: a new finding needs a device here that has it.
    std::set<std::string> registered;
    for (const auto& k : report::finding_kinds()) registered.insert(std::string(k.code));
    CHECK(codes == registered);
    for (const auto& f : doc["findings"])
        for (const auto& k : report::finding_kinds())
            if (f["code"] == k.code) CHECK(f["severity"] == report::to_string(k.severity));
    // a real spinning drive is not called virtual
    CHECK(by_device["sdb"].count("rotational-claim-virtual") == 0);
    CHECK(by_device["sdb"].count("readahead-amplification") == 0);
    CHECK(by_device["sda"].count("write-through-volatile-cache") == 1);
    CHECK(by_device["sdc"].count("write-cache-mismatch") == 1);
    CHECK(by_device["vdb"].count("stack-lower-only") == 1);
    CHECK(by_device["vda"].count("udev-rule-conflict") == 1);
    for (const auto& f : doc["findings"])
        if (f["code"] == "udev-rule-conflict") CHECK(f["evidence"]["udev rule"] == "udev/60-block-tuning.rules:2");
}

TEST_CASE("audit: the exit status says whether anything at warning level was found") {
    FakeSysfs t;
    t.add_nvme("nvme0n1");
    auto r = run_blkpolicy({"audit", "--sysfs-root", t.root().string(), "--udev-rules-dir", t.root().string(),
                            "--policy", std::string(blkpolicy::test::test_data_dir()) + "/audit.toml"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "0 finding(s): 0 critical, 0 warning, 0 info\n");
}

TEST_CASE("golden: explain a virtio disk and a dm-crypt under LVM") {
    FakeSysfs t;
    build_fleet(t);
    t.set_wbt_state("vda", 1);
    auto r = run_blkpolicy({"explain", "vda", "dm-0", "--policy", "fleet.toml", "--kernel-release", "6.18.3",
                            "--sysfs-root", t.root().string()},
                           blkpolicy::test::test_data_dir());
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    check_golden("explain-vda-dm0.txt", r.out);

    auto j = run_blkpolicy({"explain", "vda", "dm-0", "--json", "--policy", "fleet.toml", "--kernel-release", "6.18.3",
                            "--sysfs-root", t.root().string()},
                           blkpolicy::test::test_data_dir());
    auto doc = nlohmann::json::parse(j.out);
    const auto& vda = doc["devices"][0];
    CHECK(vda["wbt"]["state"] == "on-default");
    for (const auto& a : vda["attributes"]) {
        if (a["attribute"] == "read_ahead_kb") {
            CHECK(a["kernel_default"] == "8192");
            CHECK(a["desired"] == "128");
            CHECK(a["rule"]["line"] == 2);
            CHECK(a["inputs"]["queue/max_sectors_kb"] == "4096");
        }
    }
    const auto& dm0 = doc["devices"][1];
    CHECK(dm0["stack"]["tops"] == nlohmann::json::array({"dm-1"}));
    CHECK(dm0["stack"]["lowers"] == nlohmann::json::array({"sda2"}));
}

TEST_CASE("explain: the readahead formula follows the kernel release") {
    FakeSysfs t;
    t.add_virtio_disk("vda", 1, "0000:00:02.0", 0);
    auto derive = [&](const std::string& release) {
        auto r =
            run_blkpolicy({"explain", "vda", "--json", "--kernel-release", release, "--sysfs-root", t.root().string(),
                           "--policy", std::string(blkpolicy::test::test_data_dir()) + "/fleet.toml"});
        REQUIRE(r.exit_code == 0);
        const auto doc = nlohmann::json::parse(r.out);
        for (const auto& a : doc["devices"][0]["attributes"])
            if (a["attribute"] == "read_ahead_kb") return a["kernel_default"].get<std::string>();
        return std::string();
    };
    CHECK(derive("6.18.0") == "8192");  // 2 x max_sectors_kb for a rotational queue
    CHECK(derive("6.12.9") == "128");   // max(2 x io_opt, 128)
    CHECK(derive("6.8.0") == "128");
    auto bad = run_blkpolicy({"explain", "vda", "--kernel-release", "six", "--sysfs-root", t.root().string()});
    CHECK(bad.exit_code == 2);
    auto none = run_blkpolicy({"explain", "--sysfs-root", t.root().string()});
    CHECK(none.exit_code == 2);
}

TEST_CASE("explain --kernel-rules: the rows that hold on a release, how each is known, where it was seen") {
    auto holding = [](const std::string& release) {
        auto r = run_blkpolicy({"explain", "--kernel-rules", "--json", "--kernel-release", release});
        REQUIRE(r.exit_code == 0);
        const auto doc = nlohmann::json::parse(r.out);
        CHECK(doc["kernel"] == release);
        CHECK(doc["rules"].size() == kernel::kernel_rows().size());
        std::set<std::string> ids;
        for (const auto& row : doc["rules"])
            if (row["holds"].get<bool>()) ids.insert(row["id"].get<std::string>());
        return ids;
    };
    const auto bookworm = holding("6.1.0-44-amd64");
    CHECK(bookworm.count("readahead-on-commit:untouched"));
    CHECK(bookworm.count("bfq-off-wbt-reads:latency"));
    CHECK(bookworm.count("loop-created-rotational:1"));
    CHECK_FALSE(bookworm.count("limits-commit:recomputes-read-ahead"));
    const auto trixie = holding("6.12.117+deb13-amd64");
    CHECK(trixie.count("readahead-on-commit:raise"));
    CHECK_FALSE(trixie.count("readahead-on-commit:reset"));
    CHECK(trixie.count("bfq-off-wbt-reads:0"));
    CHECK(trixie.count("loop-created-rotational:0"));
    CHECK(holding("6.12.30").count("readahead-on-commit:unknown"));

    auto text = run_blkpolicy({"explain", "--kernel-rules", "--kernel-release", "6.12.30"});
    CHECK(text.exit_code == 0);
    CHECK(text.out.find("What blkpolicy expects kernel 6.12.30 to do, and how it knows:") == 0);
    CHECK(text.out.find(
              "readahead-on-commit:unknown\n  a stable series that may or may not carry the 6.15 \"only raise\" "
              "rule back\n  known by: read-back (not known from the release: every write is read back") !=
          std::string::npos);
    CHECK(text.out.find("readahead-on-commit:raise") == std::string::npos);

    CHECK(run_blkpolicy({"explain", "--kernel-rules", "sda"}).exit_code == 2);
    CHECK(run_blkpolicy({"explain", "--kernel-rules", "--kernel-release", "six"}).exit_code == 2);
    auto misplaced = run_blkpolicy({"audit", "--kernel-rules"});
    CHECK(misplaced.exit_code == 2);
    CHECK(misplaced.err.find("--kernel-rules is for explain") != std::string::npos);
}

TEST_CASE("virtual identities") {
    blkpolicy::policy::DeviceFacts f;
    f.drivers = {"sd", "ahci"};
    f.vendor = "ATA";
    f.model = "ST4000NM0035-1V4";
    CHECK(blkpolicy::report::virtual_identity(f).empty());
    f.model = "Virtual disk";
    f.vendor = "VMware";
    CHECK(blkpolicy::report::virtual_identity(f) == "model VMware Virtual disk");
    f.vendor = "Msft";
    CHECK_FALSE(blkpolicy::report::virtual_identity(f).empty());
    f = {};
    f.model = "Amazon Elastic Block Store";
    CHECK_FALSE(blkpolicy::report::virtual_identity(f).empty());
    f = {};
    f.drivers = {"virtio_blk", "virtio-pci"};
    CHECK(blkpolicy::report::virtual_identity(f) == "driver virtio_blk");
}

TEST_CASE("audit: a value the policy chose is not a finding") {
    report::AuditDevice d;
    d.facts.name = "vda";
    d.facts.driver = "virtio_blk";
    d.facts.drivers = {"virtio_blk"};
    d.facts.has_queue = true;
    d.values = {{"rotational", "0"}, {"read_ahead_kb", "4096"}, {"wbt_lat_usec", "75000"}};
    report::AuditInput in;
    in.devices = {d};
    auto codes = [&] {
        std::set<std::string> out;
        for (const auto& f : report::audit(in)) out.insert(f.code);
        return out;
    };
    CHECK(codes().count("readahead-amplification"));
    CHECK(codes().count("wbt-rotational-default-virtual"));
    policy::DevicePlan plan;
    for (const char* attr : {"read_ahead_kb", "wbt_lat_usec"}) {
        policy::Action a;
        a.id = *policy::key_of(attr);
        a.attribute = attr;
        a.kind = policy::ActionKind::unchanged;
        plan.actions.push_back(a);
    }
    in.devices[0].plan = plan;
    in.with_policy = true;
    CHECK_FALSE(codes().count("readahead-amplification"));
    CHECK_FALSE(codes().count("wbt-rotational-default-virtual"));
}

TEST_CASE("audit: devices without a medium are left out unless --all; a host-wide finding is said once") {
    FakeSysfs t;
    t.add_virtio_disk("vda", 0, "0000:00:04.0", 0);
    t.add_loop("loop7", 7, "");
    t.file(t.devpath_of("loop7") + "/size", "0");  // unbound: no medium
    t.add_cpus(4, [](int) { return "0-3"; });      // one last-level cache
    TempDir rules;
    const std::vector<std::string> base = {"audit",           "--json",           "--no-policy",        "--sysfs-root",
                                           t.root().string(), "--udev-rules-dir", rules.path().string()};
    auto devices_in = [](const nlohmann::json& doc, const std::string& code) {
        std::set<std::string> out;
        for (const auto& f : doc["findings"]) {
            if (f["code"] != code) continue;
            if (f["device"] == "*") {
                std::istringstream in(f["evidence"]["devices"].get<std::string>());
                for (std::string d; in >> d;) out.insert(d);
            } else {
                out.insert(f["device"].get<std::string>());
            }
        }
        return out;
    };
    auto r = run_blkpolicy(base);
    auto doc = nlohmann::json::parse(r.out);
    int inert = 0;
    for (const auto& f : doc["findings"]) inert += f["code"] == "rq-affinity-inert";
    CHECK(inert == 1);
    CHECK(devices_in(doc, "rq-affinity-inert") == std::set<std::string>{"vda"});
    auto with_all = base;
    with_all.push_back("--all");
    auto all = nlohmann::json::parse(run_blkpolicy(with_all).out);
    CHECK(devices_in(all, "rq-affinity-inert") == std::set<std::string>{"loop7", "vda"});
    CHECK(run_blkpolicy({"plan", "--all"}).exit_code == 2);  // --all is audit's
}

TEST_CASE("audit reads the values as --kernel-release's kernel shows them; a tree's own kernel is not known") {
    // A disk under bfq whose wbt reads 0 and no debugfs to ask: on 6.1 sysfs
    // still shows the old latency when bfq turns wbt off, so a 0 there was
    // written by someone; from 6.2 it is bfq's doing. Without a release, the
    // tree's kernel is not the running one's (it was the host's before).
    AuditTree a;
    a.t.add_scsi_disk("sdd", "3:0:0:0", "ATA     ", "WDC WD40EFRX-68N", "write back", true, 16);
    a.t.file(a.t.devpath_of("sdd") + "/queue/scheduler", "none mq-deadline kyber [bfq]");
    a.t.file(a.t.devpath_of("sdd") + "/queue/wbt_lat_usec", "0");
    auto codes_of_sdd = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {"audit", "--no-policy", "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        auto r = a.run(args);
        INFO(r.err);
        REQUIRE(r.exit_code != 2);
        std::set<std::string> codes;
        const auto doc = nlohmann::json::parse(r.out);
        for (const auto& f : doc["findings"])
            if (f["device"] == "sdd") codes.insert(f["code"].get<std::string>());
        return codes;
    };
    CHECK_FALSE(codes_of_sdd({"--kernel-release", "6.1.0"}).count("bfq-disabled-wbt"));
    CHECK(codes_of_sdd({"--kernel-release", "6.12.0"}).count("bfq-disabled-wbt"));
    CHECK(codes_of_sdd({}).count("bfq-disabled-wbt"));
}
