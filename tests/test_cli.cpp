// SPDX-License-Identifier: MIT
// The real binary: help, version, usage errors, exit codes, check output.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/fake_sysfs.hpp"
#include "support/run_binary.hpp"

using namespace blkpolicy::test;

namespace {
const std::string kData = blkpolicy::test::test_data_dir();
const std::string kExamples = std::string(blkpolicy::test::source_dir()) + "/examples";
}  // namespace

TEST_CASE("--help and --version") {
    auto h = run_blkpolicy({"--help"});
    CHECK(h.exit_code == 0);
    CHECK(h.out.rfind("Usage: blkpolicy COMMAND", 0) == 0);
    CHECK(h.out.find("Exit status:") != std::string::npos);
    auto v = run_blkpolicy({"--version"});
    CHECK(v.exit_code == 0);
    CHECK(v.out.rfind("blkpolicy ", 0) == 0);
}

TEST_CASE("usage errors exit 2 with a pointer to --help") {
    const std::vector<std::vector<std::string>> cases = {{},
                                                         {"frobnicate"},
                                                         {"plan", "--bogus"},
                                                         {"plan", "--policy"},
                                                         {"check", "sda"},
                                                         {"run", "sda"},
                                                         {"run", "--mode", "enforcing"},
                                                         {"run", "--log-target", "syslog"},
                                                         {"run", "--receive-buffer", "12"},
                                                         {"run", "--receive-buffer", "lots"}};
    for (const auto& args : cases) {
        auto r = run_blkpolicy(args);
        CAPTURE(r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.err.find("Try 'blkpolicy --help'.") != std::string::npos);
    }
    // measure's options, each with what it wants.
    const std::vector<std::pair<std::vector<std::string>, std::string>> measure = {
        {{"measure", "--for", "10"}, "--for wants a duration from 100ms to 24h such as 10s, 500ms or 5m, not \"10\""},
        {{"measure", "--for", "50ms"},
         "--for wants a duration from 100ms to 24h such as 10s, 500ms or 5m, not \"50ms\""},
        {{"measure", "--for", "25h"}, "--for wants a duration from 100ms to 24h such as 10s, 500ms or 5m, not \"25h\""},
        {{"measure", "--trace-buffer-kb", "3"}, "--trace-buffer-kb must be a number of KiB from 4 to 1048576, not 3"},
        {{"measure", "--trace-buffer-kb", "99999999999999999999"},
         "--trace-buffer-kb must be a number of KiB from 4 to 1048576, not 99999999999999999999"},
        {{"measure", "--sample", "101"}, "--sample must be a percentage from 0 to 100, not 101"},
        {{"measure", "--sample", "-1"}, "--sample must be a percentage from 0 to 100, not -1"},
        {{"measure", "--sample", "10%"}, "--sample must be a percentage from 0 to 100, not 10%"},
        {{"plan", "--for", "10s"}, "--for is for measure"},
        {{"measure", "--mode", "observe"}, "--mode is for run"},
    };
    for (const auto& [args, message] : measure) {
        auto r = run_blkpolicy(args);
        CAPTURE(r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.err.rfind("blkpolicy: " + message + "\n", 0) == 0);
    }
}

TEST_CASE("check: every example and test policy is valid, alone and together") {
    std::vector<std::string> paths = {kExamples, kData + "/fleet.toml", kData + "/audit.toml"};
    FakeSysfs scratch;  // a directory for the policy cloud-init's example writes
    for (const auto& e : std::filesystem::directory_iterator(kExamples)) {
        if (e.path().extension() == ".toml") {
            paths.push_back(e.path().string());
            continue;
        }
        // cloud-init user-data: the policy its write_files puts in place
        // (the block under "content: |", indented six spaces).
        REQUIRE(e.path().filename() == "cloud-init-user-data.yaml");
        std::ifstream in(e.path());
        std::string line, toml;
        bool inside = false;
        while (std::getline(in, line)) {
            if (line == "    content: |") {
                inside = true;
            } else if (inside && line.rfind("      ", 0) == 0) {
                toml += line.substr(6) + "\n";
            } else if (inside) {
                break;
            }
        }
        CHECK(toml.find("[[rule]]") != std::string::npos);
        const auto written = scratch.root() / "50-cloud-init.toml";
        std::ofstream(written) << toml;
        paths.push_back(written.string());
    }
    CHECK(paths.size() >= 9);  // cloud VMs, database, HDD archive, LVM/dm-crypt, NVMe, cloud-init
    for (const auto& p : paths) {
        auto r = run_blkpolicy({"check", "--policy", p});
        CAPTURE(p);
        CAPTURE(r.err);
        CHECK(r.exit_code == 0);
        CHECK(r.out.rfind("policy OK: ", 0) == 0);
    }
}

TEST_CASE("check: errors as file:line:col on stderr - exit 3 - --json carries the same") {
    FakeSysfs t;  // only for a scratch directory
    const auto path = (t.root() / "bad.toml").string();
    t.file("bad.toml", "[[rule]]\nname = \"x\"\n[rule.set]\nrq_affinity = 3");
    auto r = run_blkpolicy({"check", "--policy", path});
    CHECK(r.exit_code == 3);
    CHECK(r.out.empty());
    CHECK(r.err == path +
                       ":4:15: rq_affinity = 3 is out of range: must be 0..2 (the kernel accepts 3 without error "
                       "and ignores it)\n");
    auto j = run_blkpolicy({"check", "--json", "--policy", path});
    CHECK(j.exit_code == 3);
    auto doc = nlohmann::json::parse(j.out);
    CHECK(doc["valid"] == false);
    CHECK(doc["errors"][0]["line"] == 4);
    CHECK(doc["errors"][0]["column"] == 15);
}

TEST_CASE("check: a warning is file:line:col on stderr, the policy stays valid (exit 0), --json lists it") {
    FakeSysfs t;  // only for a scratch directory
    const auto path = (t.root() / "moved.toml").string();
    t.file("moved.toml", "[[rule]]\nname = \"x\"\n[rule.set]\niosched.async_depth = 16\n");
    auto r = run_blkpolicy({"check", "--policy", path});
    CHECK(r.exit_code == 0);
    CHECK(r.err.find(path + ":4:23: warning: iosched.async_depth: since kernel 7.0") == 0);
    auto j = run_blkpolicy({"check", "--json", "--policy", path});
    auto doc = nlohmann::json::parse(j.out);
    CHECK(doc["valid"] == true);
    CHECK(doc["warnings"][0]["line"] == 4);
}

TEST_CASE("plan/apply/status refuse to act on an invalid policy - writing nothing") {
    FakeSysfs t;
    build_fleet(t);
    t.file("bad.toml", "[[rule]]\nname = \"x\"\n[rule.set]\nread_ahead_kb = 1\nnomerges = 9\n");
    const auto before = t.read(t.devpath_of("vda") + "/queue/read_ahead_kb");
    auto r = run_blkpolicy({"apply", "--policy", (t.root() / "bad.toml").string(), "--sysfs-root", t.root().string(),
                            "--state-dir", (t.root() / "state").string()});
    CHECK(r.exit_code == 3);
    CHECK(r.err.find("nothing was done") != std::string::npos);
    CHECK(t.read(t.devpath_of("vda") + "/queue/read_ahead_kb") == before);
}

TEST_CASE("unknown devices and a missing sysfs are clear errors") {
    FakeSysfs t;
    build_fleet(t);
    const std::vector<std::string> common = {"--policy", kData + "/fleet.toml", "--sysfs-root", t.root().string()};
    auto args = common;
    args.insert(args.begin(), "plan");
    args.push_back("sdz");
    auto r = run_blkpolicy(args);
    CHECK(r.exit_code == 2);
    CHECK(r.err == "blkpolicy: no block device \"sdz\" under " + t.root().string() + "/block\n");
    args.back() = "sda1";  // a partition is not a block/ entry
    CHECK(run_blkpolicy(args).exit_code == 2);

    auto gone = run_blkpolicy({"status", "--policy", kData + "/fleet.toml", "--sysfs-root", "/nonexistent"});
    CHECK(gone.exit_code == 4);
    CHECK(gone.err == "blkpolicy: /nonexistent/block is not a directory: is sysfs mounted there?\n");
}

TEST_CASE("a named device that goes away between the check and the read is said so, exit 4") {
    // The moment in between is modelled by a device directory whose dev
    // file is gone: the check sees the device, reading its facts does not.
    FakeSysfs t;
    build_fleet(t);
    std::filesystem::remove(t.root() / (t.devpath_of("vdb") + "/dev"));
    const std::string want =
        "blkpolicy: block device \"vdb\" went away while it was being read (its dev file is gone)\n";
    for (const std::string cmd : {"explain", "plan", "status"}) {
        auto r = run_blkpolicy({cmd, "--policy", kData + "/fleet.toml", "--sysfs-root", t.root().string(),
                                "--state-dir", (t.root() / "state").string(), "vdb"});
        CAPTURE(cmd);
        CHECK(r.exit_code == 4);
        CHECK(r.err.find(want) != std::string::npos);
        CHECK(r.err.find("map::at") == std::string::npos);
    }
    // Listing every device, one that vanished is simply not there.
    auto all = run_blkpolicy({"plan", "--policy", kData + "/fleet.toml", "--sysfs-root", t.root().string(),
                              "--state-dir", (t.root() / "state").string()});
    CHECK(all.exit_code == 0);
    CHECK(all.err.find("went away") == std::string::npos);
}

TEST_CASE("run: an invalid policy is reported with its position and the daemon does not start") {
    FakeSysfs t;
    build_fleet(t);
    t.file("bad.toml", "[daemon]\nmode = \"watch\"\n");
    auto r = run_blkpolicy({"run", "--log-target", "console", "--policy", (t.root() / "bad.toml").string(),
                            "--sysfs-root", t.root().string(), "--state-dir", (t.root() / "state").string()});
    CHECK(r.exit_code == 3);
    CHECK(r.err.find((t.root() / "bad.toml").string() + ":2:8: daemon.mode must be \"enforce\" or \"observe\"") !=
          std::string::npos);
    CHECK(r.err.find("the policy is invalid; not starting") != std::string::npos);
}

TEST_CASE("import and audit: a huge or endless udev rules file is refused, never read to the end") {
    FakeSysfs t;
    build_fleet(t);
    const auto rules_dir = t.root() / "rules.d";
    std::filesystem::create_directories(rules_dir);
    const auto big = (rules_dir / "90-huge.rules").string();
    t.file("rules.d/90-huge.rules", std::string((1 << 20) + 10, '#'));
    auto r = run_blkpolicy({"import", big});
    CHECK(r.exit_code == 4);
    CHECK(r.err == "blkpolicy: " + big + ": the file is 1048587 bytes; a file to import may have at most 1 MiB\n");
    auto z = run_blkpolicy({"import", "--from", "udev", "/dev/zero"});
    CHECK(z.exit_code == 4);
    CHECK(z.err == "blkpolicy: /dev/zero: not a regular file: a file to import must be one\n");
    // audit scans the rules directory: the file is skipped with a warning, the audit goes on.
    auto a = run_blkpolicy(
        {"audit", "--no-policy", "--sysfs-root", t.root().string(), "--udev-rules-dir", rules_dir.string()});
    CHECK(a.err.find("blkpolicy: warning: " + big +
                     ": the file is 1048587 bytes; a udev rules file may have at most 1 MiB; its rules are not looked "
                     "at for conflicts") != std::string::npos);
    CHECK(a.out.find("rotational-claim-virtual") != std::string::npos);
}

TEST_CASE("no policy anywhere: says what is missing and where it looked, not that a policy is invalid") {
    if (std::filesystem::exists("/etc/blkpolicy") || std::filesystem::exists("/run/blkpolicy/policy.d") ||
        std::filesystem::exists("/usr/lib/blkpolicy/policy.d")) {
        MESSAGE("SKIPPED: this machine has a blkpolicy policy installed (the default paths are what is tested)");
        return;
    }
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    auto r = run_blkpolicy({"plan", "--sysfs-root", t.root().string()});
    CHECK(r.exit_code == 3);
    CHECK(r.err.find("no policy file: looked for /etc/blkpolicy/policy.toml") != std::string::npos);
    CHECK(r.err.find("invalid") == std::string::npos);
}

TEST_CASE("a policy named with --policy that is not there: said to be missing, not invalid, for every command") {
    FakeSysfs t;
    t.add_loop("loop0", 0, "/img");
    for (const char* command : {"check", "plan", "apply", "status"}) {
        CAPTURE(command);
        std::vector<std::string> args = {command, "--policy", "/no/such/policy.toml"};
        if (std::string(command) != "check") args.insert(args.end(), {"--sysfs-root", t.root().string()});
        auto r = run_blkpolicy(args);
        CHECK(r.exit_code == 3);
        CHECK(r.err == "/no/such/policy.toml: no such policy file or directory\n");
    }
}

TEST_CASE(
    "--kernel-release: plan, apply, status, explain, export and audit take it; a malformed one is a usage error") {
    auto bad = run_blkpolicy({"plan", "--kernel-release", "linux"});
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("--kernel-release wants a release such as 6.12.0, not \"linux\"") != std::string::npos);
    auto wrong = run_blkpolicy({"run", "--kernel-release", "9.0"});
    CHECK(wrong.exit_code == 2);
    CHECK(wrong.err.find("--kernel-release is for plan, apply, status, explain, export and audit") !=
          std::string::npos);
    auto rules = run_blkpolicy({"explain", "--kernel-rules", "--kernel-release", "9.0"});
    CHECK(rules.exit_code == 0);
    CHECK(rules.out.find("readahead-on-commit:raise  (not observed past 7.3: read back)") != std::string::npos);
    CHECK(rules.out.find("limits-commit:recomputes-read-ahead  (not observed past 7.3: probe)") != std::string::npos);
    auto now = run_blkpolicy({"explain", "--kernel-rules", "--kernel-release", "7.3.4"});
    CHECK(now.out.find("not observed past") == std::string::npos);
}

TEST_CASE("--help: every options block is set off by a blank line") {
    auto r = run_blkpolicy({"--help"});
    std::istringstream in(r.out);
    std::string line, prev = "";
    while (std::getline(in, line)) {
        if (line.rfind("Options", 0) == 0) {
            CAPTURE(line);
            CHECK(prev.empty());
        }
        prev = line;
    }
}

TEST_CASE("plan --detailed-exitcode: 5 when a write would change a value, 0 when none would; errors stay errors") {
    FakeSysfs t;
    build_fleet(t);
    const auto now = t.read(t.devpath_of("vdb") + "/queue/nomerges");
    const auto other = now == "0" ? "1" : "0";
    auto policy = [&](const std::string& value) {
        const auto path = (t.root() / "p.toml").string();
        t.file("p.toml",
               "[[rule]]\nname = \"vdb\"\n[rule.match]\nkernel = \"vdb\"\n[rule.set]\nnomerges = " + value + "\n");
        return path;
    };
    auto plan = [&](const std::string& value, bool json) {
        std::vector<std::string> args = {
            "plan",         "--detailed-exitcode", "--policy",    policy(value),
            "--sysfs-root", t.root().string(),     "--state-dir", (t.root() / "state").string()};
        if (json) args.push_back("--json");
        return run_blkpolicy(args);
    };
    auto pending = plan(other, false);
    CHECK(pending.exit_code == 5);
    CHECK(pending.out.find("1 write(s) planned") != std::string::npos);
    auto doc = nlohmann::json::parse(plan(other, true).out);
    CHECK(doc["writes"] == 1);
    auto none = plan(now, true);
    CHECK(none.exit_code == 0);
    CHECK(nlohmann::json::parse(none.out)["writes"] == 0);
    // Without the flag, pending writes are no failure.
    auto plain = run_blkpolicy({"plan", "--policy", policy(other), "--sysfs-root", t.root().string(), "--state-dir",
                                (t.root() / "state").string()});
    CHECK(plain.exit_code == 0);
    // An invalid policy is 3, as ever.
    t.file("bad.toml", "[[rule]]\nname = \"x\"\n[rule.set]\nrq_affinity = 3\n");
    auto bad = run_blkpolicy({"plan", "--detailed-exitcode", "--policy", (t.root() / "bad.toml").string(),
                              "--sysfs-root", t.root().string()});
    CHECK(bad.exit_code == 3);
    // Only plan takes it.
    CHECK(run_blkpolicy({"apply", "--detailed-exitcode"}).exit_code == 2);
}
