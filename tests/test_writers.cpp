// SPDX-License-Identifier: MIT
// The other writers: TuneD, sysfsutils, tmpfiles.d, units and rc.local, read
// from their files (writers/parsers, writers/scan) and imported
// (writers/writer_import, blkpolicy import).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policy/loader.hpp"
#include "support/fake_sysfs.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"
#include "writers/parsers.hpp"
#include "writers/scan.hpp"
#include "writers/writer_import.hpp"

using namespace blkpolicy;
using writers::WriterAssignment;
using writers::WriterKind;
using V = std::vector<std::string>;
using test::run_blkpolicy;
namespace fs = std::filesystem;

namespace {

void put(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

std::optional<writers::TunedProfileFile> profile_of(const std::map<std::string, std::string>& profiles,
                                                    const std::string& name) {
    auto it = profiles.find(name);
    if (it == profiles.end()) return std::nullopt;
    return writers::parse_tuned_conf(name, "/usr/lib/tuned/" + name + "/tuned.conf", it->second);
}

writers::TunedResult tuned(const std::map<std::string, std::string>& profiles, const V& active) {
    return writers::resolve_tuned(active, [&](const std::string& n) { return profile_of(profiles, n); });
}

const WriterAssignment* find(const std::vector<WriterAssignment>& all, const std::string& attr,
                             const std::string& device) {
    return writers::find_writer(all, writers::UdevDevice::named(device), attr).writer;
}

}  // namespace

TEST_CASE("writers: sysfs paths name a device and a policy key, or nothing") {
    auto t = writers::sysfs_target("/sys/block/sda/queue/scheduler");
    REQUIRE(t);
    CHECK(t->device == "sda");
    CHECK(t->attribute == "scheduler");
    t = writers::sysfs_target("block/sd*/queue/iosched/fifo_batch");
    REQUIRE(t);
    CHECK(t->device == "sd*");
    CHECK(t->attribute == "iosched.fifo_batch");
    t = writers::sysfs_target("/sys/class/block/vdb/bdi/read_ahead_kb");
    REQUIRE(t);
    CHECK(t->attribute == "read_ahead_kb");
    t = writers::sysfs_target("/sys/devices/pci0000:00/0000:00:04.0/virtio2/block/vda/queue/nr_requests");
    REQUIRE(t);
    CHECK(t->device == "vda");
    CHECK(t->attribute == "nr_requests");
    t = writers::sysfs_target("/sys/block/sda/device/timeout");
    REQUIRE(t);
    CHECK(t->attribute == "device.timeout");
    CHECK_FALSE(writers::sysfs_target("/sys/kernel/mm/transparent_hugepage/enabled"));
    CHECK_FALSE(writers::sysfs_target("/sys/block/sda/size"));
    CHECK_FALSE(writers::sysfs_target("/sys/block/queue"));
}

TEST_CASE("writers: sysfsutils lines, as its loader reads them") {
    auto w = writers::parse_sysfs_conf("/etc/sysfs.conf",
                                       "# a comment: block/sda/queue/scheduler = bfq\n"
                                       "block/sda/queue/scheduler = mq-deadline\n"
                                       "mode block/sda/queue/scheduler = 0644\n"
                                       "owner block/sda/queue/scheduler = root:disk\n"
                                       "block/vd*/queue/read_ahead_kb=256   # trailing comment\n"
                                       "kernel/mm/ksm/run = 1\n"
                                       "block/sdb/queue/write_cache = write through\n");
    REQUIRE(w.size() == 2);
    CHECK(w[0].where() == "/etc/sysfs.conf:2");
    CHECK(w[0].kind == WriterKind::sysfsutils);
    CHECK(w[0].value == "mq-deadline");
    CHECK(w[0].kernel_patterns == V{"sda"});
    CHECK(w[1].where() == "/etc/sysfs.conf:5");
    CHECK(w[1].value == "256");
    CHECK(w[1].selects(writers::UdevDevice::named("vdc")).verdict == writers::Selects::yes);
    CHECK(w[1].selects(writers::UdevDevice::named("sda")).verdict == writers::Selects::no);
}

TEST_CASE("writers: tmpfiles.d w lines, their modifiers and what cannot be a value") {
    auto w = writers::parse_tmpfiles("/etc/tmpfiles.d/q.conf",
                                     "# Type Path Mode User Group Age Argument\n"
                                     "w /sys/block/sda/queue/read_ahead_kb - - - - 4096\n"
                                     "w- /sys/block/sdb/queue/write_cache - - - - write through\n"
                                     "w+ /sys/block/sdc/queue/scheduler - - - - bfq\n"
                                     "w /sys/block/sdd/queue/nr_requests - - - - %b\n"
                                     "w^ /sys/block/sde/queue/nr_requests - - - - cred\n"
                                     "d /run/x 0755 root root -\n"
                                     "w /proc/sys/vm/swappiness - - - - 10\n");
    REQUIRE(w.size() == 5);
    CHECK(w[0].value == "4096");
    CHECK(w[0].why_inexact.empty());
    CHECK(w[1].value == "write through");
    CHECK(w[1].attribute == "write_cache");
    CHECK(w[2].why_inexact == "w+ appends to the file");
    CHECK(w[3].value.empty());
    CHECK(w[3].why_inexact == "the value has % specifiers");
    CHECK(w[4].why_inexact == "the value comes from a credential");
}

TEST_CASE("writers: echo into /sys/block in units and rc.local") {
    auto w = writers::parse_shell_writes(
        "/etc/systemd/system/tune.service",
        "[Service]\n"
        "ExecStart=/bin/sh -c 'echo mq-deadline > /sys/block/sda/queue/scheduler'\n"
        "ExecStart=/bin/sh -c \"echo -n 'none' >/sys/block/nvme0n1/queue/scheduler; echo 2 > "
        "/sys/block/nvme0n1/queue/rq_affinity\"\n"
        "ExecStart=/bin/sh -c 'echo 4096 | tee /sys/block/sdb/queue/read_ahead_kb'\n"
        "ExecStart=/bin/sh -c 'echo $RA > /sys/block/sdc/queue/read_ahead_kb'\n"
        "ExecStart=/bin/sh -c 'cat /sys/block/sdd/queue/scheduler'\n"
        "ExecStart=/bin/sh -c 'printf 64 > /sys/block/sde/queue/nr_requests'\n",
        WriterKind::unit, "unit tune.service");
    REQUIRE(w.size() == 6);
    CHECK(w[0].value == "mq-deadline");
    CHECK(w[0].where() == "/etc/systemd/system/tune.service:2");
    CHECK(w[0].context == "unit tune.service");
    CHECK(w[1].value == "none");
    CHECK(w[1].kernel_patterns == V{"nvme0n1"});
    CHECK(w[2].attribute == "rq_affinity");
    CHECK(w[2].value == "2");
    CHECK(w[3].value == "4096");  // echo V | tee PATH
    CHECK(w[3].attribute == "read_ahead_kb");
    CHECK(w[4].value.empty());
    CHECK(w[4].why_inexact == "the value is a shell expansion");
    CHECK(w[5].value.empty());  // printf: named, without a value
    CHECK(w[5].attribute == "nr_requests");
}

TEST_CASE("writers: TuneD profiles merged as TuneD merges them") {
    const std::map<std::string, std::string> profiles = {
        {"base",
         "[main]\nsummary=base\n"
         "[variables]\nra=2048\n"
         "[disk]\nreadahead=${ra}\nelevator=bfq\n"
         "[sysfs]\n/sys/block/sdz/queue/nr_requests=64\n/sys/kernel/mm/ksm/run=0\n"
         "[old]\ntype=disk\nelevator=kyber\n"},
        {"site",
         "[main]\ninclude=base\n"
         "[disk]\ndevices=sd*, !sdb\nelevator=mq-deadline\n"
         "[old]\nreplace=1\ntype=sysfs\n"
         "[big]\ntype=disk\ndevices=nvme*\nreadahead=8192 s\n"
         "[cond]\ntype=disk\ndevices=vd*\nreadahead=>4096\nreadahead_multiply=2.0\n"
         "[off]\ntype=disk\nenabled=false\nelevator=none\n"},
    };
    auto r = tuned(profiles, {"site"});
    CHECK(r.chain == V{"base", "site"});
    CHECK(r.warnings.empty());
    // [disk]: base's readahead (a variable) and site's elevator, site's devices
    auto* el = find(r.assignments, "scheduler", "sda");
    REQUIRE(el);
    CHECK(el->value == "mq-deadline");
    CHECK(el->kind == WriterKind::tuned);
    CHECK(el->file == "/usr/lib/tuned/site/tuned.conf");
    CHECK(el->line == 5);
    CHECK(el->context == "profile site, unit [disk]");
    CHECK(el->non_removable_only);
    CHECK_FALSE(find(r.assignments, "scheduler", "sdb"));  // !sdb
    auto* ra = find(r.assignments, "read_ahead_kb", "sdc");
    REQUIRE(ra);
    CHECK(ra->value == "2048");
    CHECK(ra->file == "/usr/lib/tuned/base/tuned.conf");
    // [sysfs] queue paths only
    auto* nr = find(r.assignments, "nr_requests", "sdz");
    REQUIRE(nr);
    CHECK(nr->value == "64");
    CHECK_FALSE(nr->non_removable_only);
    // replace=1 dropped base's [old]: no kyber anywhere
    for (const auto& a : r.assignments) CHECK(a.value != "kyber");
    // sectors, conditions, multipliers, disabled units
    auto* big = find(r.assignments, "read_ahead_kb", "nvme0n1");
    REQUIRE(big);
    CHECK(big->value == "4096");
    int cond = 0;
    for (const auto& a : r.assignments) {
        if (a.kernel_patterns != V{"vd*"}) continue;
        ++cond;
        CHECK_FALSE(a.why_inexact.empty());
    }
    CHECK(cond == 2);
    for (const auto& a : r.assignments) CHECK(a.value != "none");
}

TEST_CASE("writers: TuneD's readahead, missing profiles and include loops") {
    CHECK(writers::parse_tuned_readahead("4096")->kib == 4096);
    CHECK(writers::parse_tuned_readahead("8192 s")->kib == 4096);
    CHECK(writers::parse_tuned_readahead(">4096")->condition == '>');
    CHECK_FALSE(writers::parse_tuned_readahead("lots"));
    CHECK_FALSE(writers::parse_tuned_readahead("4096 kb"));
    auto r = tuned({{"a", "[main]\ninclude=b\n[disk]\nelevator=none\n"}, {"b", "[main]\ninclude=a, gone\n"}}, {"a"});
    CHECK(r.chain == V{"b", "a"});
    REQUIRE(r.warnings.size() == 1);
    CHECK(r.warnings[0] == "TuneD profile gone is not installed; its settings are not known");
    auto bad = writers::parse_tuned_conf("x", "x/tuned.conf", "[disk\nelevator=none\n[disk]\nnonsense\n");
    CHECK(bad.errors == V{"x/tuned.conf:1: a section header without its ]",
                          "x/tuned.conf:2: an option outside any section", "x/tuned.conf:4: not key=value"});
}

TEST_CASE("writers: the writer whose value was found is the one named") {
    std::vector<WriterAssignment> w =
        writers::parse_sysfs_conf("/etc/sysfs.conf", "block/sda/queue/read_ahead_kb = 128\n");
    auto t = writers::parse_tmpfiles("/etc/tmpfiles.d/a.conf", "w /sys/block/sd*/queue/read_ahead_kb - - - - 4096\n");
    w.insert(w.end(), t.begin(), t.end());
    CHECK(writers::find_writer(w, writers::UdevDevice::named("sda"), "read_ahead_kb").writer->kind ==
          WriterKind::sysfsutils);
    CHECK(writers::find_writer(w, writers::UdevDevice::named("sda"), "read_ahead_kb", "4096").writer->kind ==
          WriterKind::tmpfiles);
    CHECK(writers::find_writer(w, writers::UdevDevice::named("sda"), "read_ahead_kb", "512").writer->kind ==
          WriterKind::sysfsutils);
    CHECK(writers::find_writer(w, writers::UdevDevice::named("sdb"), "read_ahead_kb").writer->kind ==
          WriterKind::tmpfiles);
    CHECK(writers::find_writer(w, writers::UdevDevice::named("vda"), "read_ahead_kb").writer == nullptr);
    CHECK(w[1].describe() == "tmpfiles.d /etc/tmpfiles.d/a.conf:1");
}

TEST_CASE("writers: a host's files, read the way each writer decides what takes effect") {
    test::TempDir root;
    const auto r = root.path();
    // tmpfiles.d: /etc hides /usr/lib's file of the same name; masked files are skipped
    put(r / "usr/lib/tmpfiles.d/ra.conf", "w /sys/block/sda/queue/read_ahead_kb - - - - 8192\n");
    put(r / "etc/tmpfiles.d/ra.conf",
        "w /sys/block/sda/queue/read_ahead_kb - - - - 2048\n"
        "w /sys/block/sda/queue/read_ahead_kb - - - - 16\n");
    put(r / "usr/lib/tmpfiles.d/nr.conf", "w /sys/block/sdb/queue/nr_requests - - - - 32\n");
    fs::create_directories(r / "etc/tmpfiles.d");
    fs::create_symlink("/dev/null", r / "etc/tmpfiles.d/nr.conf");
    // sysfsutils: sysfs.d is read after sysfs.conf
    put(r / "etc/sysfs.conf", "block/sdc/queue/scheduler = bfq\n");
    put(r / "etc/sysfs.d/50-sdc.conf", "block/sdc/queue/scheduler = kyber\n");
    // units: only enabled ones; rc.local only when executable
    put(r / "etc/systemd/system/on.service",
        "[Service]\nExecStart=/bin/sh -c 'echo 2 > /sys/block/sdd/queue/rq_affinity'\n");
    put(r / "etc/systemd/system/off.service",
        "[Service]\nExecStart=/bin/sh -c 'echo 1 > /sys/block/sdd/queue/nomerges'\n");
    put(r / "usr/lib/systemd/system/on.service.d/x.conf",
        "[Service]\nExecStartPost=/bin/sh -c 'echo 0 > /sys/block/sdd/queue/add_random'\n");
    fs::create_directories(r / "etc/systemd/system/multi-user.target.wants");
    fs::create_symlink("/etc/systemd/system/on.service", r / "etc/systemd/system/multi-user.target.wants/on.service");
    put(r / "etc/rc.local", "#!/bin/sh\necho 2 > /sys/block/sde/queue/nomerges\n");
    // TuneD: named only when tuned.service is enabled
    put(r / "etc/tuned/active_profile", "site\n");
    put(r / "usr/lib/tuned/profiles/site/tuned.conf", "[disk]\nelevator=none\n");

    std::vector<std::string> warnings;
    auto tmp = writers::scan_tmpfiles(r.string(), &warnings);
    REQUIRE(tmp.size() == 1);
    CHECK(tmp[0].value == "2048");
    CHECK(tmp[0].where() == (r / "etc/tmpfiles.d/ra.conf").string() + ":1");
    auto sysfs = writers::scan_sysfsutils(r.string(), &warnings);
    REQUIRE(sysfs.size() == 1);
    CHECK(sysfs[0].value == "kyber");
    auto units = writers::scan_units(r.string(), &warnings);
    REQUIRE(units.size() == 2);
    CHECK(units[0].attribute == "rq_affinity");
    CHECK(units[1].attribute == "add_random");
    CHECK(units[1].context == "unit on.service");
    CHECK(writers::scan_tuned(r.string(), &warnings).empty());
    ::chmod((r / "etc/rc.local").c_str(), 0755);
    fs::create_symlink("/usr/lib/systemd/system/tuned.service",
                       r / "etc/systemd/system/multi-user.target.wants/tuned.service");
    auto tuned_found = writers::scan_tuned(r.string(), &warnings);
    REQUIRE(tuned_found.size() == 1);
    CHECK(tuned_found[0].file == (r / "usr/lib/tuned/profiles/site/tuned.conf").string());
    auto all = writers::scan_writers({{}, r.string()}, &warnings);
    CHECK(all.size() == 6);
    CHECK(writers::find_writer(all, writers::UdevDevice::named("sde"), "nomerges").writer->kind ==
          WriterKind::rc_local);
    CHECK(writers::find_writer(all, writers::UdevDevice::named("sde"), "scheduler").writer->kind == WriterKind::tuned);
    CHECK(warnings.empty());
}

TEST_CASE("import: writers' settings become rules, exact or left out with the reason") {
    std::vector<WriterAssignment> w = writers::parse_sysfs_conf("/etc/sysfs.conf",
                                                                "block/sda/queue/scheduler = mq-deadline\n"
                                                                "block/sd*/queue/nr_requests = 64\n"
                                                                "block/sdb/queue/rq_affinity = 3\n");
    auto r = tuned({{"p", "[disk]\ndevices=!sdz\nelevator=none\n[disk2]\ntype=disk\nreadahead=4096\n"}}, {"p"});
    w.insert(w.end(), r.assignments.begin(), r.assignments.end());
    auto identity = [](const std::string& name) -> std::optional<writers::DeviceIdentity> {
        if (name == "sda") return writers::DeviceIdentity{"ATA", "ST4000NM0035", "ZC1234", "naa.5000c500a1b2c3d4"};
        return std::nullopt;
    };
    auto out = writers::import_writers(w, {"/etc/sysfs.conf", "p"}, identity);
    CHECK(out.tuning_rules == 5);
    CHECK(out.converted == 3);
    CHECK(out.left_out == 2);
    auto checked = policy::load_policy({{"import", out.toml}});
    CHECK(checked.ok());
    CHECK(checked.policy.rules.size() == 3);
    CHECK(out.toml.find("kernel = \"sda\"\n[rule.set]\nscheduler = \"mq-deadline\"") != std::string::npos);
    CHECK(out.toml.find("#   model = \"ST4000NM0035\"\n#   serial = \"ZC1234\"\n#   wwid = \"naa.5000c500a1b2c3d4\"") !=
          std::string::npos);
    CHECK(out.toml.find("kernel = \"sd*\"\n[rule.set]\nnr_requests = 64") != std::string::npos);
    CHECK(out.toml.find("removable = false") != std::string::npos);  // TuneD's disk plugin, no devices=
    const auto diags = [&] {
        std::string s;
        for (const auto& d : out.diagnostics) s += d + "\n";
        return s;
    }();
    CHECK(diags.find("/etc/sysfs.conf:3: left out: rq_affinity: ") != std::string::npos);
    CHECK(diags.find("left out: scheduler: it excludes devices (!sdz), which a policy cannot express") !=
          std::string::npos);
    CHECK(diags.find("/etc/sysfs.conf:1: note: sda is a kernel name") != std::string::npos);
}

TEST_CASE("import: io_timeout from sysfs.conf, tmpfiles.d and TuneD's [sysfs], as the clouds set it") {
    auto w = writers::parse_sysfs_conf("/etc/sysfs.conf", "block/nvme0n1/queue/io_timeout = 4294967295\n");
    auto t = writers::parse_tmpfiles("/etc/tmpfiles.d/t.conf", "w /sys/block/nvme1n1/queue/io_timeout - - - - 90000\n");
    w.insert(w.end(), t.begin(), t.end());
    auto r = tuned({{"p", "[sysfs]\n/sys/block/nvme2n1/queue/io_timeout=240000\n"}}, {"p"});
    w.insert(w.end(), r.assignments.begin(), r.assignments.end());
    auto zero = writers::parse_sysfs_conf("/etc/sysfs.d/z.conf", "block/sdb/queue/io_timeout = 0\n");
    w.insert(w.end(), zero.begin(), zero.end());
    auto out = writers::import_writers(w, {"/etc/sysfs.conf", "t.conf", "p", "z.conf"},
                                       [](const std::string&) { return std::nullopt; });
    CHECK(out.tuning_rules == 4);
    CHECK(out.converted == 3);
    CHECK(out.left_out == 1);  // 0: the kernel refuses it, and so does the policy
    CHECK(out.toml.find("kernel = \"nvme0n1\"\n[rule.set]\nio_timeout = 4294967295") != std::string::npos);
    CHECK(out.toml.find("kernel = \"nvme1n1\"\n[rule.set]\nio_timeout = 90000") != std::string::npos);
    CHECK(out.toml.find("kernel = \"nvme2n1\"\n[rule.set]\nio_timeout = 240000") != std::string::npos);
    CHECK(policy::load_policy({{"import", out.toml}}).ok());
}

TEST_CASE("import: each kind from its files, and exit 1 whenever something was left out") {
    test::TempDir d;
    const auto p = d.path();
    put(p / "tmpfiles.d/ra.conf", "w /sys/block/loop*/queue/read_ahead_kb - - - - 512\n");
    put(p / "sysfs.conf", "block/loop*/queue/nr_requests = 64\n");
    put(p / "prof/tuned.conf", "[main]\ninclude=missing-one\n[disk]\nelevator=mq-deadline\n");
    put(p / "bad.conf", "w+ /sys/block/loop0/queue/read_ahead_kb - - - - 512\n");

    auto t = run_blkpolicy({"import", (p / "tmpfiles.d").string(), (p / "sysfs.conf").string()});
    CHECK(t.exit_code == 0);
    CHECK(t.out.find("kernel = \"loop*\"\n[rule.set]\nread_ahead_kb = 512") != std::string::npos);
    CHECK(t.out.find("kernel = \"loop*\"\n[rule.set]\nnr_requests = 64") != std::string::npos);
    CHECK(t.err.find("2 of 2 tuning rule(s) and setting(s) converted\n") != std::string::npos);

    // A profile whose include is not installed: converted, but exit 1 and said.
    auto tu = run_blkpolicy({"import", "--config-root", p.string(), (p / "prof").string()});
    CHECK(tu.exit_code == 1);
    CHECK(tu.out.find("scheduler = \"mq-deadline\"") != std::string::npos);
    CHECK(tu.err.find("warning: TuneD profile missing-one is not installed") != std::string::npos);

    auto w = run_blkpolicy({"import", "--from", "tmpfiles", (p / "bad.conf").string()});
    CHECK(w.exit_code == 1);
    CHECK(w.err.find("bad.conf:1: left out: read_ahead_kb: w+ appends to the file") != std::string::npos);

    // A tmpfiles.d file read as udev rules: nothing it can read, and it says so with exit 1.
    auto u = run_blkpolicy({"import", "--from", "udev", (p / "tmpfiles.d/ra.conf").string()});
    CHECK(u.exit_code == 1);
    CHECK(u.out.empty());
    CHECK(u.err.find("cannot parse the rule") != std::string::npos);
    CHECK(u.err.find("1 line(s) or profile(s) could not be read") != std::string::npos);

    // Files of the same name from two writers, imported apart, sit side by
    // side in policy.d (found in a guest: both were named "60-x.conf:1").
    put(p / "sysfs.d/60-x.conf", "block/loop0/queue/nr_requests = 64\n");
    put(p / "tmpfiles2/tmpfiles.d/60-x.conf", "w /sys/block/loop1/queue/nr_requests - - - - 32\n");
    auto s1 = run_blkpolicy({"import", (p / "sysfs.d/60-x.conf").string()});
    auto s2 = run_blkpolicy({"import", (p / "tmpfiles2/tmpfiles.d/60-x.conf").string()});
    REQUIRE(s1.exit_code == 0);
    REQUIRE(s2.exit_code == 0);
    put(p / "policy.d/41.toml", s1.out);
    put(p / "policy.d/42.toml", s2.out);
    auto both = policy::load_policy({{"41.toml", s1.out}, {"42.toml", s2.out}});
    CHECK(both.ok());
    CHECK(both.policy.rules.size() == 2);

    CHECK(run_blkpolicy({"import", "--from", "nonsense", "x"}).exit_code == 2);
    CHECK(run_blkpolicy({"import", "no-such-profile"}).exit_code == 2);
}

TEST_CASE("explain: the other writers of each attribute, with file and line") {
    test::FakeSysfs t;
    test::build_fleet(t);
    auto r = run_blkpolicy({"explain", "--policy", "audit.toml", "--sysfs-root", t.root().string(), "--udev-rules-dir",
                            "udev", "--config-root", "writers-root", "vdc", "nvme0n1"},
                           blkpolicy::test::test_data_dir());
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.find("  written by udev rule udev/60-block-tuning.rules:2: 1024\n") != std::string::npos);
    CHECK(r.out.find("  written by sysfsutils writers-root/etc/sysfs.d/90-vdc.conf:1: 1024\n") != std::string::npos);
    CHECK(r.out.find("  written by unit writers-root/etc/systemd/system/disk-tune.service:6 (unit disk-tune.service): "
                     "64\n") != std::string::npos);
    CHECK(r.out.find("  written by TuneD profile writers-root/etc/tuned/fleet-nvme/tuned.conf:8 (profile fleet-nvme, "
                     "unit [disk]): mq-deadline\n") != std::string::npos);
    CHECK(r.out.find("  written by rc.local writers-root/etc/rc.local:2: none\n") != std::string::npos);
    // readahead=>4096 of the included profile, named with why it is not a plain value
    CHECK(r.out.find("(profile fleet-nvme, unit [disk]): 4096") != std::string::npos);

    auto j = run_blkpolicy({"explain", "--json", "--policy", "audit.toml", "--sysfs-root", t.root().string(),
                            "--udev-rules-dir", "udev", "--config-root", "writers-root", "nvme0n1"},
                           blkpolicy::test::test_data_dir());
    auto doc = nlohmann::json::parse(j.out);
    int named = 0;
    for (const auto& a : doc["devices"][0]["attributes"]) {
        if (a["attribute"] != "scheduler") continue;
        for (const auto& w : a["written_by"]) {
            ++named;
            CHECK((w["kind"] == "tuned" || w["kind"] == "rc.local"));
        }
    }
    CHECK(named == 2);
}
