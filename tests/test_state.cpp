// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/state.hpp"
#include "support/temp_dir.hpp"

using namespace blkpolicy;

namespace {
using test::TempDir;

policy::DeviceFacts device(bool rotational, const std::string& diskseq = "12") {
    policy::DeviceFacts f;
    f.name = "loop250";
    f.devnum = "7:250";
    f.diskseq = diskseq;
    f.loop_backing_file = "/tmp/x.img";
    f.rotational = rotational;
    return f;
}
}  // namespace

TEST_CASE("facts are frozen at first sight and survive the device's own change") {
    TempDir dir;
    agent::StateDir state(dir.path() / "state");
    std::string warning;
    auto first = agent::freeze_facts(state, device(true), true, &warning);
    CHECK(warning.empty());
    CHECK(first.rotational);
    CHECK_FALSE(first.facts_frozen);
    CHECK(std::filesystem::exists(dir.path() / "state/facts/loop250.json"));

    // blkpolicy wrote rotational=0; the live read now says 0, the match fact stays 1.
    auto later = agent::freeze_facts(state, device(false), true, &warning);
    CHECK(later.rotational);
    CHECK(later.facts_frozen);
}

TEST_CASE("a device with another identity under the same name gets fresh facts") {
    TempDir dir;
    agent::StateDir state(dir.path());
    agent::freeze_facts(state, device(true, "12"), true, nullptr);
    auto rebound = agent::freeze_facts(state, device(false, "13"), true, nullptr);
    CHECK_FALSE(rebound.rotational);
    CHECK_FALSE(rebound.facts_frozen);
    // and the new identity is what is frozen from now on
    auto again = agent::freeze_facts(state, device(true, "13"), true, nullptr);
    CHECK_FALSE(again.rotational);
    CHECK(again.facts_frozen);
}

TEST_CASE("without recording nothing is written") {
    TempDir dir;
    agent::StateDir state(dir.path() / "state");
    agent::freeze_facts(state, device(true), false, nullptr);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "state"));
}

TEST_CASE("a corrupt state file is ignored with a warning and rebuilt") {
    TempDir dir;
    agent::StateDir state(dir.path());
    std::filesystem::create_directories(dir.path() / "facts");
    std::ofstream(dir.path() / "facts/loop250.json") << "{ not json";
    std::string warning;
    auto f = agent::freeze_facts(state, device(true), true, &warning);
    CHECK(warning == "ignoring corrupt state file " + (dir.path() / "facts/loop250.json").string());
    CHECK_FALSE(f.facts_frozen);
    auto again = agent::freeze_facts(state, device(false), true, &warning);
    CHECK(again.rotational);
    CHECK(again.facts_frozen);
}

TEST_CASE("an unwritable state directory is a warning that says what it costs") {
    TempDir dir;
    std::ofstream(dir.path() / "file") << "x";
    agent::StateDir state(dir.path() / "file/state");  // a path under a regular file cannot be created
    std::string warning;
    auto f = agent::freeze_facts(state, device(true), true, &warning);
    CHECK(f.rotational);
    CHECK(warning.find("cannot create") == 0);
    CHECK(warning.find("rules matching rotational may stop matching") != std::string::npos);
}

TEST_CASE("facts frozen by an older blkpolicy (long identity) are kept for the same devnum and diskseq") {
    TempDir dir;
    agent::StateDir state(dir.path());
    std::filesystem::create_directories(dir.path() / "facts");
    // What the previous release wrote: the long identity, rotational frozen at 1.
    const std::string old_identity =
        R"({"devnum":"7:250","diskseq":"12","dm_uuid":"","driver":"","loop_backing_file":"/tmp/x.img","model":"","serial":"","wwid":""})";
    nlohmann::json record = {
        {"device", "loop250"}, {"identity", old_identity}, {"rotational", true}, {"removable", false}};
    std::ofstream(dir.path() / "facts/loop250.json") << record.dump();

    // blkpolicy had written rotational=0: the record, not the live value, counts.
    auto same = agent::freeze_facts(state, device(false, "12"), true, nullptr);
    CHECK(same.facts_frozen);
    CHECK(same.rotational);

    // Another instance (a new diskseq) gets fresh facts.
    std::ofstream(dir.path() / "facts/loop250.json", std::ios::trunc) << record.dump();
    auto other = agent::freeze_facts(state, device(false, "13"), true, nullptr);
    CHECK_FALSE(other.facts_frozen);
    CHECK_FALSE(other.rotational);
}
