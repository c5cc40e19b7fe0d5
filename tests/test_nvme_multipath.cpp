// SPDX-License-Identifier: MIT
// NVMe multipath: one namespace behind two controllers, as Debian's 6.12
// and 7.3 show it (read in QEMU guests with nvme-subsys; the guest test
// proves the same on the real kernels): the head as a stack over its
// hidden paths, each tuned for what it has, the subsystem's iopolicy, and
// nvme-cli's NetApp rule converted.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "policy/loader.hpp"
#include "support/fake_sysfs.hpp"
#include "support/run_binary.hpp"
#include "udev/discovery.hpp"
#include "writers/udev_import.hpp"
#include "writers/udev_rules.hpp"

using namespace blkpolicy;
using namespace blkpolicy::test;

namespace {

void build_multipath(FakeSysfs& t, const std::string& model = "QEMU NVMe Ctrl") {
    t.add_virtio_disk("vda", 0, "0000:00:01.0", 0);
    t.add_nvme_multipath(0, 1, {0, 1}, model, "bpmp");
}

const nlohmann::json& device(const nlohmann::json& doc, const std::string& name) {
    for (const auto& d : doc["devices"])
        if (d["device"] == name) return d;
    FAIL("no device " << name);
    static const nlohmann::json none;
    return none;
}

const nlohmann::json& action(const nlohmann::json& dev, const std::string& attribute) {
    for (const auto& a : dev["actions"])
        if (a["attribute"] == attribute) return a;
    FAIL("no action " << attribute << " on " << dev["device"]);
    static const nlohmann::json none;
    return none;
}

std::vector<std::string> matched(const nlohmann::json& dev) {
    std::vector<std::string> out;
    for (const auto& r : dev["matched"]) out.push_back(r["name"]);
    return out;
}

}  // namespace

TEST_CASE("NVMe multipath facts: the head is a stack with its subsystem's identity, the paths are hidden disks") {
    FakeSysfs t;
    build_multipath(t);
    udev::Sysfs s(t.root());
    CHECK(udev::list_block_devices(s) == std::vector<std::string>{"nvme0c0n1", "nvme0c1n1", "nvme0n1", "vda"});

    auto head = udev::read_facts(s, "nvme0n1");
    REQUIRE(head);
    CHECK(head->stack == policy::Stack::nvme_multipath);
    CHECK(head->model == "QEMU NVMe Ctrl");  // the subsystem's, padding trimmed
    CHECK(head->serial == "bpmp");
    CHECK(head->wwid == "nvme.1b36-62706d70-51454d55204e564d65204374726c-00000001");
    CHECK(head->driver.empty());  // as udev's DRIVERS== walks it: the subsystem has no driver
    CHECK_FALSE(head->request_based);
    CHECK_FALSE(head->hidden);
    CHECK(head->slaves == std::vector<std::string>{"nvme0c0n1", "nvme0c1n1"});
    CHECK(head->holders.empty());

    auto path = udev::read_facts(s, "nvme0c1n1");
    REQUIRE(path);  // no dev file, and still a device
    CHECK(path->hidden);
    CHECK(path->devnum.empty());
    CHECK(path->stack == policy::Stack::none);
    CHECK(path->driver == "nvme");
    CHECK(path->model == "QEMU NVMe Ctrl");  // its controller's
    CHECK(path->serial == "bpmp");
    CHECK(path->request_based);
    CHECK(path->holders == std::vector<std::string>{"nvme0n1"});
    // The kernel's uevent properties; no udev database entry is looked for without a devnum.
    CHECK(path->properties.at("DISKSEQ") == "3");
    CHECK_FALSE(path->properties.count("ID_SERIAL"));

    CHECK(udev::nvme_paths_of(s, "nvme0n1") == std::vector<std::string>{"nvme0c0n1", "nvme0c1n1"});
    CHECK(udev::nvme_head_of(s, "nvme0c0n1") == std::optional<std::string>("nvme0n1"));
    CHECK_FALSE(udev::nvme_head_of(s, "nvme0n1"));
    CHECK_FALSE(udev::nvme_head_of(s, "vda"));
    CHECK(udev::nvme_paths_of(s, "vda").empty());
    // The head's members' queues, as measure and explain read them.
    CHECK(udev::lowers_queue(s, "nvme0n1", "write_cache") ==
          std::vector<std::pair<std::string, std::string>>{{"nvme0c0n1", "write back"}, {"nvme0c1n1", "write back"}});

    // A path that went (its controller removed) is gone; one that is not
    // hidden and has no dev is gone too.
    std::filesystem::remove_all(t.root() / t.devpath_of("nvme0c1n1"));
    std::filesystem::remove(t.root() / "block/nvme0c1n1");
    CHECK_FALSE(udev::read_facts(s, "nvme0c1n1"));
    CHECK(udev::read_facts(s, "nvme0n1")->slaves == std::vector<std::string>{"nvme0c0n1"});
    std::filesystem::remove(t.root() / t.devpath_of("nvme0c0n1") / "hidden");
    CHECK_FALSE(udev::read_facts(s, "nvme0c0n1"));
}

TEST_CASE("NVMe multipath plan: one rule by model tunes the head, both paths and the subsystem's iopolicy") {
    FakeSysfs t;
    build_multipath(t);
    const auto policy = (t.root() / "policy.toml").string();
    t.file("policy.toml", R"([[rule]]
name = "QEMU NVMe"
[rule.match]
model = "QEMU NVMe Ctrl"
[rule.set]
scheduler = "mq-deadline"
io_timeout = 60000
device.iopolicy = "round-robin"
read_ahead_kb = 1024

[[rule]]
name = "multipath heads"
[rule.match]
stack = "nvme-multipath"
[rule.set]
max_sectors_kb = 256
)");
    const std::vector<std::string> common = {"--policy",        policy,        "--sysfs-root",
                                             t.root().string(), "--state-dir", (t.root() / "state").string()};
    auto args = [&](std::vector<std::string> a) {
        a.insert(a.end(), common.begin(), common.end());
        return a;
    };
    auto r = run_blkpolicy(args({"plan", "--json"}));
    REQUIRE(r.exit_code == 0);
    const auto doc = nlohmann::json::parse(r.out);

    const auto& head = device(doc, "nvme0n1");
    CHECK(matched(head) == std::vector<std::string>{"QEMU NVMe", "multipath heads"});
    CHECK(head["facts"]["stack"] == "nvme-multipath");
    CHECK(head["facts"]["hidden"] == false);
    CHECK(device(doc, "nvme0c0n1")["facts"]["hidden"] == true);
    CHECK(action(head, "scheduler")["action"] == "skip");  // bio-based
    CHECK(action(head, "io_timeout")["action"] == "skip");
    CHECK(action(head, "device.iopolicy")["action"] == "write");
    CHECK(action(head, "device.iopolicy")["current"] == "numa");
    CHECK(action(head, "read_ahead_kb")["action"] == "write");
    CHECK(action(head, "max_sectors_kb")["action"] == "write");

    for (const char* name : {"nvme0c0n1", "nvme0c1n1"}) {
        CAPTURE(name);
        const auto& p = device(doc, name);
        CHECK(matched(p) == std::vector<std::string>{"QEMU NVMe"});
        CHECK(action(p, "scheduler")["action"] == "write");
        CHECK(action(p, "io_timeout")["action"] == "write");
        const auto& ra = action(p, "read_ahead_kb");
        CHECK(ra["action"] == "skip");
        CHECK(ra["note"] ==
              "hidden NVMe multipath path: reads come through its head (nvme0n1), whose read_ahead_kb is the one used");
        // The controller has no iopolicy: that is the subsystem's, set through the head.
        CHECK(action(p, "device.iopolicy")["action"] == "skip");
    }
    CHECK(matched(device(doc, "vda")).empty());

    // apply writes the subsystem's iopolicy through the head and reads it
    // back. (A fake tree's scheduler file does not answer as the kernel's
    // does, so this policy leaves the scheduler out.)
    t.file("policy.toml", R"([[rule]]
name = "QEMU NVMe"
[rule.match]
model = "QEMU NVMe Ctrl"
[rule.set]
io_timeout = 60000
device.iopolicy = "round-robin"
read_ahead_kb = 1024
)");
    auto a = run_blkpolicy(args({"apply", "--json"}));
    INFO(a.out, a.err);
    CHECK(a.exit_code == 0);
    CHECK(t.read("devices/virtual/nvme-subsystem/nvme-subsys0/iopolicy") == "round-robin");
    CHECK(t.read(t.devpath_of("nvme0n1") + "/queue/read_ahead_kb") == "1024");
    CHECK(t.read(t.devpath_of("nvme0c0n1") + "/queue/read_ahead_kb") == "128");  // left alone
    CHECK(t.read(t.devpath_of("nvme0c1n1") + "/queue/io_timeout") == "60000");
}

TEST_CASE("NVMe multipath: a bad iopolicy is refused with file:line:col") {
    auto loaded =
        policy::load_policy({{"p.toml", "[[rule]]\nname = \"x\"\n[rule.set]\ndevice.iopolicy = \"fastest\"\n"}});
    REQUIRE_FALSE(loaded.ok());
    CHECK(loaded.errors.front().str().rfind("p.toml:4:", 0) == 0);
    CHECK(loaded.errors.front().str().find("\"numa\", \"round-robin\", \"queue-depth\"") != std::string::npos);
}

// The shape of nvme-cli's 71-nvmf-iopolicy-netapp.rules: a rule udevd runs
// on the NVMe subsystem, keyed on its model, setting its iopolicy.
constexpr const char* kSubsystemRules = R"(# blkpolicy's test: round-robin for two array models, set on the subsystem
ACTION=="add", SUBSYSTEM=="nvme-subsystem", ATTR{model}=="NetApp ONTAP Controller", ATTR{iopolicy}="round-robin"
ACTION=="add", SUBSYSTEM=="nvme-subsystem", ATTR{model}=="NetApp E-Series", ATTR{iopolicy}="round-robin"
)";

TEST_CASE("import: a udev rule on the NVMe subsystem becomes a rule on its multipath heads") {
    auto r = writers::import_udev_rules(writers::parse_udev_rules_text("71-iopolicy.rules", kSubsystemRules),
                                        {"71-iopolicy.rules"});
    INFO(r.toml);
    CHECK(r.converted == 2);
    CHECK(r.left_out == 0);
    CHECK(r.out_of_scope == 0);
    CHECK(r.toml.find("[rule.match]\nattr.\"device/model\" = \"NetApp ONTAP Controller\"\nstack = \"nvme-multipath\"\n"
                      "[rule.set]\ndevice.iopolicy = \"round-robin\"\n") != std::string::npos);
    CHECK(r.toml.find("attr.\"device/model\" = \"NetApp E-Series\"") != std::string::npos);
    // The comment keeps the line as written.
    CHECK(r.toml.find("#   ACTION==\"add\", SUBSYSTEM==\"nvme-subsystem\", ATTR{model}==\"NetApp ONTAP Controller\"") !=
          std::string::npos);
    REQUIRE(policy::load_policy({{"out", r.toml}}).ok());

    // The converted policy on a NetApp multipath host: the head takes it,
    // the paths and the other disks do not.
    FakeSysfs t;
    build_multipath(t, "NetApp ONTAP Controller");
    t.file("imported.toml", r.toml);
    auto plan = run_blkpolicy({"plan", "--json", "--policy", (t.root() / "imported.toml").string(), "--sysfs-root",
                               t.root().string(), "--state-dir", (t.root() / "state").string()});
    REQUIRE(plan.exit_code == 0);
    const auto doc = nlohmann::json::parse(plan.out);
    CHECK(matched(device(doc, "nvme0n1")) == std::vector<std::string>{"71-iopolicy.rules:2"});
    CHECK(action(device(doc, "nvme0n1"), "device.iopolicy")["action"] == "write");
    CHECK(matched(device(doc, "nvme0c0n1")).empty());
    CHECK(matched(device(doc, "vda")).empty());

    // A rule that tests the subsystem twice is left as udevd reads it: not
    // a block device's rule, and said so.
    auto odd = writers::import_udev_rules(
        writers::parse_udev_rules_text(
            "x.rules", "SUBSYSTEM==\"nvme-subsystem\", SUBSYSTEM!=\"block\", ATTR{iopolicy}=\"round-robin\"\n"),
        {"x.rules"});
    CHECK(odd.converted == 0);
}
