// SPDX-License-Identifier: MIT
// report/audit in process: the finding registry, and each check on the
// smallest input that shows it (the goldens in test_inspect.cpp show them
// all together through the binary).
#include <doctest/doctest.h>

#include <fstream>
#include <set>

#include "report/audit.hpp"
#include "support/paths.hpp"

using namespace blkpolicy::policy;
using namespace blkpolicy::kernel;
using namespace blkpolicy::report;

namespace {

AuditDevice device(const std::string& name, const std::string& driver, Values values) {
    AuditDevice d;
    d.facts.name = name;
    d.facts.driver = driver;
    d.facts.drivers = {driver};
    d.facts.has_queue = true;
    d.facts.request_based = true;
    d.values = std::move(values);
    return d;
}

std::vector<std::string> codes_of(const std::vector<Finding>& found, const std::string& device) {
    std::vector<std::string> out;
    for (const auto& f : found)
        if (f.device == device) out.push_back(f.code);
    return out;
}

}  // namespace

TEST_CASE("finding registry: unique codes, each with a summary") {
    std::set<std::string_view> codes;
    for (const auto& k : finding_kinds()) {
        CAPTURE(k.code);
        CHECK(codes.insert(k.code).second);
        CHECK_FALSE(k.summary.empty());
    }
    CHECK(codes.size() == 13);
}

TEST_CASE("audit: a virtual disk that claims to spin gets the three virtual findings, in registry order") {
    AuditInput in;
    in.devices.push_back(
        device("vda", "virtio_blk", {{"rotational", "1"}, {"read_ahead_kb", "4096"}, {"wbt_lat_usec", "75000"}}));
    in.devices.push_back(device("nvme0n1", "nvme", {{"rotational", "0"}, {"read_ahead_kb", "4096"}}));
    const auto found = audit(in);
    CHECK(codes_of(found, "vda") == std::vector<std::string>{"rotational-claim-virtual", "readahead-amplification",
                                                             "wbt-rotational-default-virtual"});
    CHECK(codes_of(found, "nvme0n1").empty());  // a real drive reading ahead 4 MiB is its owner's choice
    CHECK(found[0].severity == Severity::warning);
    CHECK(found[0].fix.find("rotational = 0") != std::string::npos);
}

TEST_CASE("audit: write cache against the device's own cache mode") {
    AuditInput in;
    auto sda = device("sda", "sd", {{"write_cache", "write through"}});
    sda.facts.cache_type = "write back";
    auto sdb = device("sdb", "sd", {{"write_cache", "write back"}});
    sdb.facts.cache_type = "write through";
    auto sdc = device("sdc", "sd", {{"write_cache", "write back"}});
    sdc.facts.cache_type = "write back, no read (daft)";
    in.devices = {sda, sdb, sdc};
    const auto found = audit(in);
    CHECK(codes_of(found, "sda") == std::vector<std::string>{"write-through-volatile-cache"});
    CHECK(found[0].severity == Severity::critical);
    CHECK(codes_of(found, "sdb") == std::vector<std::string>{"write-cache-mismatch"});
    CHECK(codes_of(found, "sdc").empty());
}

TEST_CASE("audit: bfq's disabled wbt on 6.1, where sysfs still shows the latency: debugfs tells") {
    AuditInput in;
    in.host.kernel = {6, 1, 0};
    auto with_debugfs = device("sda", "sd", {{"scheduler", "bfq"}, {"wbt_lat_usec", "75000"}});
    with_debugfs.wbt_state = 3;
    auto without = device("sdb", "sd", {{"scheduler", "bfq"}, {"wbt_lat_usec", "75000"}});
    auto written_zero = device("sdc", "sd", {{"scheduler", "bfq"}, {"wbt_lat_usec", "0"}});  // 0 on 6.1: written
    in.devices = {with_debugfs, without, written_zero};
    const auto found = audit(in);
    CHECK(codes_of(found, "sda") == std::vector<std::string>{"bfq-disabled-wbt"});
    CHECK(found[0].evidence[1] == std::pair<std::string, std::string>{"queue/wbt_lat_usec", "75000"});
    CHECK(codes_of(found, "sdb").empty());
    CHECK(codes_of(found, "sdc").empty());
    in.host.kernel = {6, 12, 117};  // 6.2+: a wbt bfq turned off reads 0
    CHECK(codes_of(audit(in), "sdc") == std::vector<std::string>{"bfq-disabled-wbt"});
}

TEST_CASE("audit: bfq's disabled wbt, unless debugfs says wbt is on") {
    AuditInput in;
    auto off = device("sda", "sd", {{"scheduler", "bfq"}, {"wbt_lat_usec", "0"}});
    auto manual_off = device("sdb", "sd", {{"scheduler", "bfq"}, {"wbt_lat_usec", "0"}});
    manual_off.wbt_state = 4;  // off by a write of 0: someone's choice
    in.devices = {off, manual_off};
    const auto found = audit(in);
    CHECK(codes_of(found, "sda") == std::vector<std::string>{"bfq-disabled-wbt"});
    CHECK(codes_of(found, "sdb").empty());
}

TEST_CASE("audit: rq_affinity=1 on one last-level cache is one host finding after the devices") {
    AuditInput in;
    in.single_llc = true;
    in.devices = {device("sda", "sd", {{"rq_affinity", "1"}}), device("sdb", "sd", {{"rq_affinity", "1"}}),
                  device("sdc", "sd", {{"rq_affinity", "2"}})};
    const auto found = audit(in);
    REQUIRE(found.size() == 1);
    CHECK(found[0].device == std::string(kHostDevice));
    CHECK(found[0].code == "rq-affinity-inert");
    CHECK(found[0].severity == Severity::info);
    CHECK(found[0].evidence[0] == std::pair<std::string, std::string>{"devices", "sda sdb"});
    in.single_llc = false;
    CHECK(audit(in).empty());
}

TEST_CASE("audit: devices without a medium are left out unless asked for") {
    AuditInput in;
    auto empty = device("loop7", "", {{"rotational", "1"}, {"wbt_lat_usec", "75000"}});
    empty.facts.drivers = {"virtio_blk"};  // would be called virtual
    empty.has_medium = false;
    in.devices = {empty};
    CHECK(audit(in).empty());
    in.include_empty = true;
    CHECK_FALSE(audit(in).empty());
}

TEST_CASE("every finding code is described in blkpolicy(8) and the README") {
    for (const char* doc : {"/docs/blkpolicy.8.scd", "/README.md"}) {
        std::ifstream in(std::string(blkpolicy::test::source_dir()) + doc);
        REQUIRE(in);
        const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        for (const auto& k : finding_kinds()) CHECK_MESSAGE(text.find(k.code) != std::string::npos, doc, ": ", k.code);
    }
}
