// SPDX-License-Identifier: MIT
// Another writer on the same queue, on the real kernel. Since 7.0 (and in
// the 6.18.y series this host runs) a scheduler or nr_requests write that
// meets another one returns EBUSY instead of waiting. Each test first counts
// the EBUSY answers plain writes get beside the contending writer (so a pass
// means blkpolicy handled contention, not that there was none), then runs
// blkpolicy beside it.
//
// Also here: a kernel newer than any blkpolicy's rows were observed on
// (--kernel-release 9.0), against real loop devices.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "kernel/daemon_process.hpp"
#include "kernel/loop_device.hpp"
#include "support/run_binary.hpp"
#include "support/temp_dir.hpp"

using namespace blkpolicy::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// A child process that writes VALUE to a sysfs file in a loop, as fast as
// it can, until the destructor stops it (SIGKILL, by its pid) and reaps it.
class Contender {
public:
    Contender(const std::string& path, const std::string& value) {
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            for (;;) {
                int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
                if (fd >= 0) {
                    [[maybe_unused]] auto n = ::write(fd, value.data(), value.size());
                    ::close(fd);
                }
            }
        }
    }
    ~Contender() {
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
    }
    Contender(const Contender&) = delete;
    Contender& operator=(const Contender&) = delete;

private:
    pid_t pid_ = -1;
};

// How many of `tries` scheduler switches (none <-> mq-deadline) the kernel
// refused with EBUSY: the contention a plain writer meets right now.
int busy_switches(const LoopDevice& loop, int tries) {
    int busy = 0;
    for (int i = 0; i < tries; ++i)
        if (loop.try_write_queue("scheduler", i % 2 ? "none" : "mq-deadline") == EBUSY) ++busy;
    return busy;
}

// Writes a value as a patient admin would: again while EBUSY.
void write_patiently(const LoopDevice& loop, const std::string& attr, const std::string& value) {
    for (int i = 0; i < 2000; ++i) {
        const int err = loop.try_write_queue(attr, value);
        if (err != EBUSY) {
            REQUIRE(err == 0);
            return;
        }
        std::this_thread::sleep_for(1ms);
    }
    FAIL("the kernel answered EBUSY for 2 s to a write of " << attr);
}

std::string policy_file(const std::filesystem::path& dir, const std::string& dev, const std::string& set,
                        const std::string& daemon = "") {
    const auto path = (dir / "policy.toml").string();
    std::ofstream(path, std::ios::trunc) << daemon << "[[rule]]\nname = \"test\"\n[rule.match]\nkernel = \"" << dev
                                         << "\"\n[rule.set]\n"
                                         << set << "\n";
    return path;
}

}  // namespace

TEST_CASE("kernel: apply beside a writer contending for the queue: EBUSY is retried and every value applied") {
    LoopDevice loop;
    TempDir tmp{"blkpolicy-contention"};
    const auto policy = policy_file(tmp.path(), loop.name(), "scheduler = \"mq-deadline\"\nnr_requests = 32");
    Contender other("/sys/block/" + loop.name() + "/queue/nr_requests", "32");
    const int plain = busy_switches(loop, 100);
    MESSAGE(plain << " of 100 plain scheduler writes answered EBUSY beside the contending writer");
    int retried = 0;
    // Ten applies, and more (up to 60) while none of blkpolicy's writes has
    // met EBUSY yet where plain ones did: its writes are few and short, and
    // a slow build (ASan, a loaded host) can miss the contender's window
    // ten times running (0 of 10 in the sanitizer pass of a cold CI run,
    // 2026-12-07, beside 82 of 100 plain writes).
    int round = 0;
    for (; round < 10 || (plain > 0 && retried == 0 && round < 60); ++round) {
        CAPTURE(round);
        write_patiently(loop, "scheduler", "none");
        auto r = run_blkpolicy(
            {"apply", "--json", "--policy", policy, "--state-dir", (tmp.path() / "state").string(), loop.name()});
        INFO("stdout: " << r.out << "\nstderr: " << r.err);
        REQUIRE(r.exit_code == 0);
        const auto doc = json::parse(r.out);
        CHECK(doc["busy_retry"]["max_attempts"] == 40);
        for (const auto& res : doc["devices"][0]["results"]) {
            CHECK((res["outcome"] == "applied" || res["outcome"] == "unchanged"));
            retried += res["busy"].get<int>();
        }
        CHECK(loop.queue("scheduler").find("[mq-deadline]") != std::string::npos);
        CHECK(loop.queue("nr_requests") == "32");
    }
    MESSAGE(retried << " writes of blkpolicy's answered EBUSY and were made again, in " << round << " applies");
    // On a kernel whose contended writes wait there is nothing to retry;
    // where plain writes met EBUSY, blkpolicy's did too.
    if (plain > 0) CHECK(retried > 0);
}

TEST_CASE("kernel: the daemon's pass beside a contending writer: re-applied, no failed alert") {
    REQUIRE_MESSAGE(journald_available(),
                    "journald is not running: scripts/test.sh starts /lib/systemd/systemd-journald when it is not");
    LoopDevice loop;
    TempDir tmp{"blkpolicy-contention"};
    const auto policy = policy_file(tmp.path(), loop.name(), "scheduler = \"mq-deadline\"\nnr_requests = 32",
                                    "[daemon]\nverify_interval = \"500ms\"\n");
    DaemonProcess d({"--policy", policy, "--state-dir", (tmp.path() / "state").string(), "--log-target", "journal"});
    REQUIRE(d.wait_notification("READY=1", 10s));
    REQUIRE(eventually([&] { return loop.queue("scheduler").find("[mq-deadline]") != std::string::npos; }, 5s));
    int plain = 0;
    {
        Contender other("/sys/block/" + loop.name() + "/queue/nr_requests", "32");
        for (int round = 0; round < 5; ++round) {
            CAPTURE(round);
            // Someone switches the scheduler away while the other writer runs.
            write_patiently(loop, "scheduler", "kyber");
            plain += busy_switches(loop, 10);
            write_patiently(loop, "scheduler", "kyber");
            CHECK(eventually(
                [&] {
                    return loop.queue("scheduler").find("[mq-deadline]") != std::string::npos &&
                           loop.queue("nr_requests") == "32";
                },
                10s));
        }
    }
    MESSAGE(plain << " of 50 plain scheduler writes answered EBUSY while the daemon re-applied");
    for (const auto& e : d.alerts(loop.name())) {
        CAPTURE(e.at("MESSAGE"));
        CHECK(e.at("BLKPOLICY_EVENT") != "failed");
    }
    CHECK(d.alive());
}

TEST_CASE("kernel: on a kernel newer than any row was seen on (9.0), plan reads back and apply holds") {
    LoopDevice loop;
    TempDir tmp{"blkpolicy-beyond"};
    REQUIRE(loop.queue("rotational") == "1");
    const auto policy = policy_file(tmp.path(), loop.name(), "max_sectors_kb = 1024\nread_ahead_kb = 128");
    write_patiently(loop, "read_ahead_kb", "128");  // as the policy says, before any limits write
    const std::vector<std::string> common = {"--json", "--policy", policy, "--state-dir",
                                             (tmp.path() / "state").string()};
    auto plan_on = [&](const std::string& release) {
        std::vector<std::string> args = {"plan", "--kernel-release", release};
        args.insert(args.end(), common.begin(), common.end());
        args.push_back(loop.name());
        auto r = run_blkpolicy(args);
        REQUIRE(r.exit_code == 0);
        const auto doc = json::parse(r.out);
        for (const auto& a : doc["devices"][0]["actions"])
            if (a["attribute"] == "read_ahead_kb") return a;
        FAIL("no read_ahead_kb action");
        return json();
    };
    // 6.1 recomputes nothing on a limits commit: read_ahead_kb is left as it is.
    CHECK(plan_on("6.1.0")["action"] == "unchanged");
    // 9.0: whatever any kernel's limits write moved is checked again.
    const auto beyond = plan_on("9.0");
    CHECK(beyond["action"] == "write");
    CHECK(beyond["note"] == "checked again after the limits writes: the kernel can raise read_ahead_kb");

    std::vector<std::string> apply = {"apply", "--kernel-release", "9.0"};
    apply.insert(apply.end(), common.begin(), common.end());
    apply.push_back(loop.name());
    auto r = run_blkpolicy(apply);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(loop.queue("max_sectors_kb") == "1024");
    CHECK(loop.queue("read_ahead_kb") == "128");  // this kernel raised it on the commit; blkpolicy put it back

    auto rules = run_blkpolicy({"explain", "--kernel-rules", "--json", "--kernel-release", "9.0"});
    REQUIRE(rules.exit_code == 0);
    std::map<std::string, std::string> standing;
    const auto rows = json::parse(rules.out);
    for (const auto& row : rows["rules"]) standing[row["id"].get<std::string>()] = row["standing"].get<std::string>();
    CHECK(standing["readahead-on-commit:raise"] == "not observed past 7.3: read back");
    CHECK(standing["bfq-off-wbt-reads:0"] == "not observed past 7.3: probe");
    CHECK(standing["wbt-default:rotational-at-init"] == "holds");
    std::filesystem::create_directories(tmp.path() / "rules");  // the test's own (empty) rules, never the host's
    auto x = run_blkpolicy({"explain", "--json", "--no-policy", "--kernel-release", "9.0", "--udev-rules-dir",
                            (tmp.path() / "rules").string(), "--config-root", tmp.path().string(), "--state-dir",
                            (tmp.path() / "state").string(), loop.name()});
    REQUIRE(x.exit_code == 0);
    const auto explained = json::parse(x.out);
    for (const auto& a : explained["devices"][0]["attributes"])
        if (a["attribute"] == "read_ahead_kb") CHECK(a["kernel_rule_standing"] == "not observed past 7.3: read back");
}
