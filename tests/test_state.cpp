// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST_CASE("the record is the JSON earlier releases wrote, and any JSON layout of it is read") {
    TempDir dir;
    agent::StateDir state(dir.path());
    auto f = device(true, "");  // no diskseq: the long identity, with strings to escape
    f.serial = "S\"N\\1\t\xc3\xa9";
    f.model = "QEMU HARDDISK";
    REQUIRE(state.save(f).ok());
    std::ifstream in(dir.path() / "facts/loop250.json");
    const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // What the release before the hand-written record produced (nlohmann's dump(2)).
    const nlohmann::json identity = {{"devnum", f.devnum},   {"diskseq", f.diskseq},
                                     {"driver", f.driver},   {"model", f.model},
                                     {"serial", f.serial},   {"wwid", f.wwid},
                                     {"dm_uuid", f.dm_uuid}, {"loop_backing_file", f.loop_backing_file}};
    const nlohmann::json before = {
        {"device", "loop250"}, {"identity", identity.dump()}, {"rotational", true}, {"removable", false}};
    CHECK(written == before.dump(2) + "\n");
    CHECK(agent::identity_of(f) == identity.dump());

    // Read back as written (the parser-free path) ...
    auto live = f;
    live.rotational = false;
    auto frozen = agent::freeze_facts(state, live, true, nullptr);
    CHECK(frozen.facts_frozen);
    CHECK(frozen.rotational);
    // ... and in another layout (compact, keys reordered by hand): the parser's path.
    const std::string compact = R"({"rotational":true,"removable":true,"identity":)" +
                                nlohmann::json(identity.dump()).dump() + R"(,"device":"loop250"})";
    std::ofstream(dir.path() / "facts/loop250.json", std::ios::trunc) << compact;
    frozen = agent::freeze_facts(state, live, true, nullptr);
    CHECK(frozen.facts_frozen);
    CHECK(frozen.rotational);
    CHECK(frozen.removable);
    // A record of this layout but another identity is not this device's.
    auto other = live;
    other.serial = "another";
    REQUIRE(state.save(f).ok());
    CHECK_FALSE(agent::freeze_facts(state, other, false, nullptr).facts_frozen);
    // A record cut short after the head is corrupt, not half-read.
    const auto cut = written.substr(0, written.find("\"rotational\""));
    std::ofstream(dir.path() / "facts/loop250.json", std::ios::trunc) << cut;
    std::string problem;
    CHECK_FALSE(state.load(live, &problem));
    CHECK(problem.find("ignoring corrupt state file") == 0);
}

TEST_CASE("a serial that is not UTF-8 is recorded and read back (nlohmann::json refused to write it)") {
    TempDir dir;
    agent::StateDir state(dir.path());
    auto f = device(true, "");
    f.serial = "\xff\xfe disk";
    REQUIRE(state.save(f).ok());
    auto live = f;
    live.rotational = false;
    CHECK(agent::freeze_facts(state, live, true, nullptr).rotational);
    CHECK_FALSE(nlohmann::json::parse(agent::identity_of(f), nullptr, false).is_discarded());
}

TEST_CASE("the record keeps write_cache as the device first had it, for measure's device cache") {
    TempDir dir;
    agent::StateDir state(dir.path());
    const auto f = device(true);
    REQUIRE(state.save(f, "write back").ok());
    std::ifstream in(dir.path() / "facts/loop250.json");
    const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // nlohmann's layout, the key sorted after "rotational".
    const nlohmann::json want = {{"device", "loop250"},
                                 {"identity", agent::identity_of(f)},
                                 {"removable", false},
                                 {"rotational", true},
                                 {"write_cache", "write back"}};
    CHECK(written == want.dump(2) + "\n");
    // Read back as written (no parser), and through the parser in another layout.
    CHECK(state.first_write_cache(f) == "write back");
    auto frozen = state.load(f);
    REQUIRE(frozen);
    CHECK(frozen->rotational);
    std::ofstream(dir.path() / "facts/loop250.json", std::ios::trunc) << want.dump();
    CHECK(state.first_write_cache(f) == "write back");
    // Another instance of the device: not its record.
    CHECK(state.first_write_cache(device(true, "13")).empty());
    // A record of an earlier release has none, and still freezes the facts.
    REQUIRE(state.save(f).ok());
    CHECK(state.first_write_cache(f).empty());
    CHECK(agent::freeze_facts(state, device(false), false, nullptr).facts_frozen);
    // A value that needs escaping goes through the parser's path, intact.
    REQUIRE(state.save(f, "write \"back\"").ok());
    CHECK(state.first_write_cache(f) == "write \"back\"");
}

TEST_CASE("disks recorded at once into a state directory nobody made yet: every record is written") {
    // The initramfs's udev rule runs one blkpolicy per disk at the same
    // moment, each the first to record facts. One that found no facts/
    // directory while another was making it gave up: its disk was written
    // unrecorded, and its rotational = true rules stopped matching after.
    int failed = 0, trials = 0;
    for (; trials < 200 && failed == 0; ++trials) {
        TempDir dir;
        const auto root = dir.path() / "state";
        int gate[2];
        REQUIRE(::pipe(gate) == 0);
        std::vector<pid_t> children;
        for (int i = 0; i < 4; ++i) {
            const pid_t pid = ::fork();
            REQUIRE(pid >= 0);
            if (pid == 0) {
                ::close(gate[1]);
                char c;
                (void)!::read(gate[0], &c, 1);  // all start when the gate closes
                auto f = device(true);
                f.name = "vd" + std::string(1, static_cast<char>('a' + i));
                f.devnum = "254:" + std::to_string(i * 16);
                ::_exit(agent::StateDir(root).save(f, "write back").ok() ? 0 : 1);
            }
            children.push_back(pid);
        }
        ::close(gate[0]);
        ::close(gate[1]);
        for (const pid_t pid : children) {
            int status = 0;
            REQUIRE(::waitpid(pid, &status, 0) == pid);
            failed += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
        }
        for (const char* name : {"vda", "vdb", "vdc", "vdd"})
            failed += std::filesystem::exists(root / "facts" / (std::string(name) + ".json")) ? 0 : 1;
    }
    CHECK_MESSAGE(failed == 0, "records missing after " << trials << " rounds");
}
