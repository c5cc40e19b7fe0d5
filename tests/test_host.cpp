// SPDX-License-Identifier: MIT
// host.* match keys: the kernel comparisons, the virtualization as
// systemd-detect-virt names it, the facts of a fake tree, and one fleet
// policy planned on two machines.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "policy/loader.hpp"
#include "policy/match.hpp"
#include "support/fake_sysfs.hpp"
#include "support/run_binary.hpp"
#include "udev/host.hpp"

using namespace blkpolicy;
using namespace blkpolicy::test;

namespace {

policy::Policy policy_of(const std::string& text) {
    auto r = policy::load_policy({{"f.toml", text}});
    REQUIRE_MESSAGE(r.ok(), (r.errors.empty() ? "" : r.errors.front().str()));
    return r.policy;
}

const std::string kExamples = std::string(blkpolicy::test::source_dir()) + "/examples";

}  // namespace

TEST_CASE("host.kernel: comparisons look at the numbers they give, globs at the whole release") {
    const struct {
        const char* pattern;
        const char* release;
        bool matches;
    } cases[] = {
        {">= 6.17", "6.17.0-rc1", true},
        {">= 6.17", "6.16.12+deb13-amd64", false},
        {">= 6.17", "7.0.3", true},
        {"> 6.12", "6.12.74+deb13-amd64", false},  // two numbers: 6.13 and later
        {"> 6.12", "6.13.1", true},
        {"== 6.12", "6.12.74+deb13-amd64", true},  // every 6.12.x
        {"!= 6.12", "6.12.1", false},
        {">= 6.12.58", "6.12.57", false},
        {">= 6.12.58", "6.12.58-cloud-amd64", true},
        {"< 7.0", "7.0", false},
        {"<= 7.0", "7.0.9", true},
        {">= 6.1, < 6.2", "6.1.158-1", true},
        {">= 6.1, < 6.2", "6.2.0", false},
        {">=6.1,<6.2", "6.1.0", true},
        {"6.12.*", "6.12.74+deb13-amd64", true},
        {"6.12.*", "6.1.0-40-amd64", false},
        {"*-cloud-amd64", "6.1.0-40-cloud-amd64", true},
        {">= 6.1", "", false},  // not known: no comparison holds
        {"!= 6.1", "", false},
        {">= 6.1", "weird", false},
    };
    for (const auto& c : cases) {
        CAPTURE(c.pattern);
        CAPTURE(c.release);
        CHECK(policy::invalid_host_pattern("kernel", c.pattern).empty());
        CHECK(policy::host_pattern_matches("kernel", c.pattern, c.release) == c.matches);
    }
    // Not kernels: a comparison is a glob like any other there.
    CHECK(policy::host_pattern_matches("hostname", ">= 6", ">= 6"));
    CHECK(policy::host_pattern_matches("product_name", "i3.*", "i3.xlarge"));
    CHECK_FALSE(policy::host_pattern_matches("product_name", "i3.*", ""));
    CHECK(policy::host_pattern_matches("product_name", "", ""));
}

TEST_CASE("host.* in a policy file: every mistake at its file:line:col") {
    const struct {
        const char* match;
        const char* error;
    } cases[] = {
        {"host.kernel = \">= six\"",
         "f.toml:4:15: match.host.kernel: \">= six\" is not a kernel comparison such as \">= 6.17\" or \">= 6.12.58, "
         "< 7.0\" (operators <, <=, >, >=, ==, !=; a version of two or three numbers)"},
        {"host.kernel = \">= 6\"", "f.toml:4:15: match.host.kernel: \">= 6\" is not a kernel comparison"},
        {"host.kernel = \">= 6.1,\"", "f.toml:4:15: match.host.kernel: \">= 6.1,\" is not a kernel comparison"},
        {"host.kernel = \"=> 6.1\"", "f.toml:4:15: match.host.kernel: \"=> 6.1\" is not a kernel comparison"},
        {"host.kernel = \">= 6.1.2.3\"", "f.toml:4:15: match.host.kernel: \">= 6.1.2.3\" is not a kernel comparison"},
        {"host.cpu = \"x\"",
         "f.toml:4:6: match.host.cpu: not a host fact (known: kernel, virtualization, sys_vendor, product_name, "
         "hostname)"},
        {"host = \"kvm\"",
         "f.toml:4:1: match.host must be a table of host facts (kernel, virtualization, sys_vendor, product_name, "
         "hostname), e.g. host.kernel = \">= 6.17\""},
        {"host.virtualization = 3", "f.toml:4:23: match.host.virtualization must be"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.match);
        auto r = policy::load_policy({{"f.toml", std::string("[[rule]]\nname = \"r\"\n[rule.match]\n") + c.match +
                                                     "\n[rule.set]\nnomerges = 1\n"}});
        REQUIRE(r.errors.size() == 1);
        CHECK(r.errors.front().str().rfind(c.error, 0) == 0);
        CAPTURE(r.errors.front().str());
    }
}

TEST_CASE("host clauses are decided once for the host, and never before") {
    auto p = policy_of(R"(
[[rule]]
name = "new kernels in KVM"
[rule.match]
host.kernel = ">= 6.17"
host.virtualization = ["kvm", "qemu"]
driver = "virtio_blk"
[rule.set]
read_ahead_kb = 128

[[rule]]
name = "not on bare metal"
[rule.unless]
host.virtualization = "none"
[rule.set]
nomerges = 1

[[rule]]
name = "everywhere"
[rule.set]
rq_affinity = 2
)");
    policy::DeviceFacts vda;
    vda.name = "vda";
    vda.driver = "virtio_blk";
    vda.drivers = {"virtio_blk"};
    // Not bound yet: a rule with host clauses matches nothing.
    CHECK_FALSE(policy::rule_matches(p.rules[0], vda));
    CHECK_FALSE(policy::rule_matches(p.rules[1], vda));
    CHECK(policy::rule_matches(p.rules[2], vda));
    CHECK(p.rules[0].host_why == "the host's facts were not read");

    policy::HostFacts guest;
    guest.kernel = "7.0.3+deb13-amd64";
    guest.virtualization = "qemu";
    auto bound = p;
    policy::bind_host(bound, guest);
    CHECK(bound.host_bound);
    CHECK(policy::rule_matches(bound.rules[0], vda));
    CHECK(policy::rule_matches(bound.rules[1], vda));
    policy::DeviceFacts sda = vda;
    sda.drivers = {"sd"};
    CHECK_FALSE(policy::rule_matches(bound.rules[0], sda));  // the device's clauses still count

    policy::HostFacts old_metal;
    old_metal.kernel = "6.12.74+deb13-amd64";
    old_metal.virtualization = "none";
    policy::bind_host(bound, old_metal);  // a reload on another host: decided again
    CHECK_FALSE(policy::rule_matches(bound.rules[0], vda));
    CHECK(bound.rules[0].host_why ==
          "match.host.kernel \">= 6.17\" does not hold here: host.kernel is \"6.12.74+deb13-amd64\" (f.toml:5)");
    CHECK_FALSE(policy::rule_matches(bound.rules[1], vda));
    CHECK(bound.rules[1].host_why ==
          "unless.host.virtualization \"none\" holds here: host.virtualization is \"none\" (f.toml:14)");
    CHECK(policy::rule_matches(bound.rules[2], vda));
    CHECK(bound.rules[2].host_why.empty());
}

TEST_CASE("virtualization: the names and the order systemd-detect-virt --vm uses") {
    using udev::VirtualizationSigns;
    auto signs = [](std::string sys_vendor, std::string product, bool hv, std::string sig) {
        VirtualizationSigns s;
        s.sys_vendor = std::move(sys_vendor);
        s.product_name = std::move(product);
        s.cpuid_hypervisor = hv;
        s.cpuid_signature = std::move(sig);
        return s;
    };
    // QEMU under TCG (this project's guests) and under KVM: CPUID decides.
    CHECK(udev::virtualization_from(signs("QEMU", "Standard PC (Q35 + ICH9, 2009)", true, "TCGTCGTCGTCG")) == "qemu");
    CHECK(udev::virtualization_from(signs("QEMU", "Standard PC (i440FX + PIIX, 1996)", true, "KVMKVMKVM")) == "kvm");
    // Clouds on KVM that name themselves in DMI: DMI decides.
    CHECK(udev::virtualization_from(signs("Amazon EC2", "i3.xlarge", true, "KVMKVMKVM")) == "amazon");
    CHECK(udev::virtualization_from(signs("Google", "Google Compute Engine", true, "KVMKVMKVM")) == "google");
    CHECK(udev::virtualization_from(signs("innotek GmbH", "VirtualBox", true, "KVMKVMKVM")) == "oracle");
    // Azure: DMI says only "Microsoft Corporation"; CPUID names Hyper-V.
    CHECK(udev::virtualization_from(signs("Microsoft Corporation", "Virtual Machine", true, "Microsoft Hv")) ==
          "microsoft");
    CHECK(udev::virtualization_from(signs("VMware, Inc.", "VMware7,1", true, "VMwareVMware")) == "vmware");
    // No CPUID to go by (another architecture, or a fake tree): DMI.
    CHECK(udev::virtualization_from(signs("QEMU", "KVM Virtual Machine", false, "")) == "kvm");
    CHECK(udev::virtualization_from(signs("QEMU", "Standard PC", false, "")) == "qemu");
    // A hypervisor nobody names, and bare metal.
    CHECK(udev::virtualization_from(signs("Dell Inc.", "PowerEdge R650", true, "NoSuchVMM")) == "vm-other");
    CHECK(udev::virtualization_from(signs("Dell Inc.", "PowerEdge R650", false, "")) == "none");
    VirtualizationSigns xen_pv;
    xen_pv.hypervisor_type = "xen";
    CHECK(udev::virtualization_from(xen_pv) == "xen");
}

TEST_CASE("host facts of a fake tree come from the tree alone") {
    FakeSysfs tree;
    tree.file("class/dmi/id/sys_vendor", "Amazon EC2\n");
    tree.file("class/dmi/id/product_name", "i3.xlarge\n");
    udev::Sysfs sysfs(tree.root());
    auto h = udev::read_host_facts(sysfs, false, "6.1.0-40-cloud-amd64");
    CHECK(h.sys_vendor == "Amazon EC2");
    CHECK(h.product_name == "i3.xlarge");
    CHECK(h.virtualization == "amazon");
    CHECK(h.kernel == "6.1.0-40-cloud-amd64");
    CHECK(h.hostname.empty());  // the running system's is not the tree's
    CHECK(h.source == tree.root().string());
    auto bare = udev::read_host_facts(sysfs, false);
    CHECK(bare.kernel.empty());

    FakeSysfs metal;  // no DMI, no hypervisor/: nothing says it is a guest
    udev::Sysfs metal_sysfs(metal.root());
    CHECK(udev::read_host_facts(metal_sysfs, false).virtualization == "none");
}

TEST_CASE("the host context of a fake tree: read once, from the tree and the release given alone") {
    FakeSysfs tree;
    tree.file("class/dmi/id/sys_vendor", "QEMU\n");
    tree.file("module/nvme_core/parameters/io_timeout", "4294967295\n");
    udev::Sysfs sysfs(tree.root());
    const auto h = udev::read_host_context(sysfs, "6.12.74+deb13-amd64");
    CHECK(h.kernel_release == "6.12.74+deb13-amd64");
    CHECK(h.kernel == kernel::KernelVersion{6, 12, 74});
    CHECK(h.facts.kernel == h.kernel_release);
    CHECK(h.facts.sys_vendor == "QEMU");
    CHECK(h.nvme_io_timeout_s == 4294967295);
    // The running kernel's modules and config are not the tree's.
    CHECK_FALSE(h.loadable_schedulers);
    CHECK_FALSE(h.hz_known);
    CHECK(h.page_size > 0);
    FakeSysfs empty;
    const auto bare = udev::read_host_context(udev::Sysfs(empty.root()));
    CHECK(bare.kernel_release.empty());
    CHECK(bare.kernel == kernel::KernelVersion{});
    CHECK_FALSE(bare.nvme_io_timeout_s);  // nvme_core not loaded
}

TEST_CASE("one fleet policy, two machines: each takes its own rules (examples/fleet.toml)") {
    const std::string policy = kExamples + "/fleet.toml";
    struct Machine {
        const char* vendor;
        const char* product;
        const char* kernel;
    };
    auto plan = [&](const Machine& m) {
        FakeSysfs tree;
        build_fleet(tree);
        tree.file("class/dmi/id/sys_vendor", std::string(m.vendor) + "\n");
        tree.file("class/dmi/id/product_name", std::string(m.product) + "\n");
        auto r = run_blkpolicy({"plan", "--json", "--policy", policy, "--sysfs-root", tree.root().string(),
                                "--state-dir", (tree.root() / "state").string(), "--kernel-release", m.kernel});
        REQUIRE(r.exit_code == 0);
        return nlohmann::json::parse(r.out);
    };
    auto matched = [](const nlohmann::json& doc, const std::string& dev) {
        std::vector<std::string> out;
        for (const auto& d : doc["devices"])
            if (d["device"] == dev)
                for (const auto& r : d["matched"]) out.push_back(r["name"]);
        return out;
    };
    const auto qemu = plan({"QEMU", "Standard PC (Q35 + ICH9, 2009)", "7.0.3+deb13-amd64"});
    CHECK(qemu["host"]["virtualization"] == "qemu");
    CHECK(qemu["host"]["kernel"] == "7.0.3+deb13-amd64");
    CHECK(qemu["host"]["hostname"].is_null());
    CHECK(matched(qemu, "vda") ==
          std::vector<std::string>{"guests: virtual disks do not spin",
                                   "6.17 and later: readahead back to 128 KiB on virtual disks"});
    {
        // explain and the text reports say the same.
        FakeSysfs tree;
        build_fleet(tree);
        tree.file("class/dmi/id/sys_vendor", "QEMU\n");
        const std::vector<std::string> common = {"--policy",           policy,        "--sysfs-root",
                                                 tree.root().string(), "--state-dir", (tree.root() / "state").string(),
                                                 "--kernel-release",   "6.12.74"};
        auto args = [&](std::vector<std::string> a) {
            a.insert(a.end(), common.begin(), common.end());
            return a;
        };
        auto x = run_blkpolicy(args({"explain", "--json", "vda"}));
        REQUIRE(x.exit_code == 0);
        const auto doc = nlohmann::json::parse(x.out);
        CHECK(doc["host"]["virtualization"] == "qemu");
        CHECK(doc["host"]["kernel"] == "6.12.74");
        auto text = run_blkpolicy(args({"plan"}));
        CHECK(text.out.find("host: kernel=\"6.12.74\" virtualization=\"qemu\" sys_vendor=\"QEMU\" product_name=- "
                            "hostname=-\n") != std::string::npos);
        CHECK(text.out.find("  not for this host: 6.17 and later: readahead back to 128 KiB on virtual disks (") !=
              std::string::npos);
        CHECK(text.out.find("match.host.kernel \">= 6.17\" does not hold here: host.kernel is \"6.12.74\"") !=
              std::string::npos);
    }
    const auto old_kernel = plan({"QEMU", "Standard PC (Q35 + ICH9, 2009)", "6.12.74+deb13-amd64"});
    CHECK(matched(old_kernel, "vda") == std::vector<std::string>{"guests: virtual disks do not spin"});

    const auto metal = plan({"Dell Inc.", "PowerEdge R650", "6.12.74+deb13-amd64"});
    CHECK(metal["host"]["virtualization"] == "none");
    // The virtio rules are for guests; a disk that spins takes bfq there.
    CHECK(matched(metal, "vda") == std::vector<std::string>{"bare-metal hard disks: bfq"});
    CHECK(matched(metal, "sda") == std::vector<std::string>{"bare-metal hard disks: bfq"});
    std::vector<std::string> left_out;
    for (const auto& r : metal["host"]["rules_not_for_this_host"]) left_out.push_back(r["name"]);
    CHECK(left_out == std::vector<std::string>{"guests: virtual disks do not spin",
                                               "6.17 and later: readahead back to 128 KiB on virtual disks",
                                               "i3 and i4i instances: deep readahead on instance storage",
                                               "build hosts: no writeback throttling"});
}
