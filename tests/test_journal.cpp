// SPDX-License-Identifier: MIT
// systemd/journal: entries to a real unix datagram socket that stops
// reading, as a frozen or busy journald does: nothing waits, nothing kept
// is lost or reordered, and the outage is reported once it ends.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "support/fake_sysfs.hpp"
#include "systemd/alerts.hpp"
#include "systemd/journal.hpp"
#include "util/fd.hpp"

using namespace blkpolicy;

namespace {

// A bound datagram socket standing in for journald's: reads only when told.
struct Receiver {
    std::string path;
    util::Fd fd{::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
    explicit Receiver(std::string p) : path(std::move(p)) {
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
        REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    }
    ~Receiver() { ::unlink(path.c_str()); }
    // Every datagram waiting, each parsed into its fields (newline-free
    // values only, as the tests send, plus the binary form's name).
    std::vector<std::map<std::string, std::string>> read_all() {
        std::vector<std::map<std::string, std::string>> out;
        char buf[65536];
        for (;;) {
            const ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
            if (n < 0) break;
            std::map<std::string, std::string> entry;
            std::string text(buf, static_cast<std::size_t>(n));
            std::size_t at = 0;
            while (at < text.size()) {
                const auto nl = text.find('\n', at);
                const auto line = text.substr(at, nl - at);
                const auto eq = line.find('=');
                if (eq != std::string::npos) entry[line.substr(0, eq)] = line.substr(eq + 1);
                at = nl + 1;
            }
            out.push_back(std::move(entry));
        }
        return out;
    }
};

std::vector<std::string> entry(int i) {
    return {"MESSAGE=entry " + std::to_string(i), "PRIORITY=6", "SYSLOG_IDENTIFIER=blkpolicy"};
}

}  // namespace

TEST_CASE("the native protocol: plain fields as lines, a value with a newline with its length") {
    CHECK(systemd::JournalSocket::serialise({"MESSAGE=a b", "PRIORITY=6"}) == "MESSAGE=a b\nPRIORITY=6\n");
    const std::string two = systemd::JournalSocket::serialise({"MESSAGE=one\ntwo", "not a field"});
    CHECK(two == std::string("MESSAGE\n\x07\0\0\0\0\0\0\0one\ntwo\n", 24));
}

TEST_CASE("journal entries: a receiver that stops reading never makes the sender wait, and kept ones go in order") {
    test::FakeSysfs scratch;
    Receiver journald((scratch.root() / "socket").string());
    systemd::JournalQueue q{systemd::JournalSocket(journald.path)};

    q.submit(entry(0));
    auto got = journald.read_all();
    REQUIRE(got.size() == 1);
    CHECK(got[0]["MESSAGE"] == "entry 0");
    CHECK(got[0].count("BLKPOLICY_QUEUED_USEC") == 0);  // sent at once

    // Nobody reads: the socket's queue fills (net.unix.max_dgram_qlen), and
    // every later entry is kept. Each submit returns (a blocking send would
    // hang this test).
    constexpr int kEntries = 1000;  // more than the socket holds, fewer than the queue keeps (1024)
    for (int i = 1; i <= kEntries; ++i) q.submit(entry(i));
    const auto kept = q.delivery().queued;
    CHECK(kept > 0);
    CHECK(kept < static_cast<std::size_t>(kEntries));
    CHECK(q.delivery().lost == 0);
    q.retry();  // still not read: nothing moves
    CHECK(q.delivery().queued == kept);

    // journald reads again: what it had, then the kept ones (in order,
    // each with when it was made), then the report of the outage.
    std::vector<std::map<std::string, std::string>> all = journald.read_all();
    for (int round = 0; round < 1000 && q.delivery().queued > 0; ++round) {
        q.retry();
        auto more = journald.read_all();
        all.insert(all.end(), more.begin(), more.end());
    }
    q.retry();
    auto last = journald.read_all();
    all.insert(all.end(), last.begin(), last.end());
    CHECK(q.delivery().queued == 0);
    CHECK(q.delivery().sent_late == kept);
    REQUIRE(all.size() == static_cast<std::size_t>(kEntries) + 1);
    for (int i = 1; i <= kEntries; ++i) {
        CHECK(all[static_cast<std::size_t>(i - 1)]["MESSAGE"] == "entry " + std::to_string(i));
        CHECK(all[static_cast<std::size_t>(i - 1)].count("BLKPOLICY_QUEUED_USEC") ==
              (i > kEntries - static_cast<int>(kept) ? 1u : 0u));
    }
    auto& report = all.back();
    CHECK(report["BLKPOLICY_JOURNAL_SENT_LATE"] == std::to_string(kept));
    CHECK(report["BLKPOLICY_JOURNAL_LOST"] == "0");
    CHECK(report["PRIORITY"] == "5");
    CHECK(report["MESSAGE"].find("the journal took no entries for ") == 0);
    CHECK(report["MESSAGE"].find("journald's queue was full") != std::string::npos);

    // Back to normal: sent at once, no second report.
    q.submit(entry(9999));
    got = journald.read_all();
    REQUIRE(got.size() == 1);
    CHECK(got[0]["MESSAGE"] == "entry 9999");
}

TEST_CASE("journal entries: no journald at all, a bounded queue, the overflow counted and reported") {
    test::FakeSysfs scratch;
    const auto path = (scratch.root() / "socket").string();
    systemd::JournalQueue q{systemd::JournalSocket(path), 5};
    for (int i = 0; i < 8; ++i) q.submit(entry(i));  // ENOENT: nothing listens
    CHECK(q.delivery().queued == 5);
    CHECK(q.delivery().lost == 3);

    Receiver journald(path);  // journald starts
    q.retry();
    auto got = journald.read_all();
    REQUIRE(got.size() == 6);
    for (int i = 0; i < 5; ++i) CHECK(got[static_cast<std::size_t>(i)]["MESSAGE"] == "entry " + std::to_string(i));
    CHECK(got[5]["BLKPOLICY_JOURNAL_LOST"] == "3");
    CHECK(got[5]["PRIORITY"] == "4");
    CHECK(got[5]["MESSAGE"].find("No such file or directory") != std::string::npos);
    CHECK(q.delivery().sent_late == 5);
}

TEST_CASE("the daemon's journal log goes through the queue: alerts and lines alike, and what it kept") {
    test::FakeSysfs scratch;
    const auto path = (scratch.root() / "socket").string();
    auto log = systemd::make_journal_log(systemd::JournalSocket(path));
    systemd::Alert a;
    a.kind = systemd::AlertKind::drift;
    a.device = "loop250";
    a.message = "m";
    log->alert(a);
    log->log(6, "a line");
    CHECK(log->delivery().queued == 2);
    Receiver journald(path);
    log->retry();
    auto got = journald.read_all();
    REQUIRE(got.size() == 3);
    CHECK(got[0]["BLKPOLICY_EVENT"] == "drift");
    CHECK(got[0]["MESSAGE_ID"] == systemd::message_id(systemd::AlertKind::drift));
    CHECK(got[1]["MESSAGE"] == "a line");
    CHECK(log->delivery().sent_late == 2);
}
