// policy/kernel: the kernel's behaviour as rows. The rows themselves (well
// formed, every version answered), and each function that reads them, per
// kernel version. unit_main.cpp checks after a full run that every row was
// consulted by some test (BLKPOLICY_KERNEL_ROW_COVERAGE=1, its own ctest).
#include <doctest/doctest.h>

#include <set>

#include "policy/kernel.hpp"

using namespace blkpolicy::policy;

TEST_CASE("kernel releases parse with their stable number") {
    auto k = parse_kernel_release("6.12.117+deb13-amd64");
    REQUIRE(k);
    CHECK(k->major == 6);
    CHECK(k->minor == 12);
    CHECK(k->patch == 117);
    CHECK(parse_kernel_release("6.1.0-50-amd64")->patch == 0);
    CHECK(parse_kernel_release("6.18")->patch == 0);
    CHECK_FALSE(parse_kernel_release("linux"));
}

TEST_CASE("kernel rows: each says what, where it holds, how blkpolicy knows, and where it was seen or read") {
    std::set<std::string_view> ids;
    for (const auto& r : kernel_rows()) {
        CAPTURE(r.id);
        CHECK(ids.insert(r.id).second);
        CHECK(r.id.find(':') != std::string_view::npos);
        CHECK_FALSE(r.behaviour.empty());
        CHECK(std::string(to_string(r.known_by)) != "?");
        // Either observed on a kernel here, or named in the kernel source.
        CHECK((!r.observed.empty() || !r.source.empty()));
        // How it is known, unless it is the same on every kernel or is the
        // driver's own answer.
        if (r.known_by != KnownBy::always && r.id != "rotational-default:driver") CHECK_FALSE(r.how.empty());
        if (r.cause != WriteCause::none) CHECK_FALSE(r.disturbs.empty());
    }
}

// The rows of a version question do not overlap (readahead-default's 6.17
// row is the exception: it holds only for a rotational queue without
// optimal_io_size, and is asked only then).
TEST_CASE("kernel rows: every version question has exactly one answer for every release from 4.0 to 7.20") {
    std::set<std::string_view> questions = {"readahead-on-commit", "bfq-off-wbt-reads", "loop-created-rotational",
                                            "readahead-default"};
    for (int major = 4; major <= 7; ++major)
        for (int minor = 0; minor <= 20; ++minor)
            for (int patch : {0, 1, 116, 117, 300}) {
                const KernelVersion v{major, minor, patch};
                for (auto q : questions) {
                    int answers = 0;
                    for (const auto& r : kernel_rows())
                        if (r.question() == q && r.holds_on(v)) ++answers;
                    CAPTURE(q);
                    CAPTURE(major);
                    CAPTURE(minor);
                    // readahead-default has a row for every version plus the 6.17 one.
                    CHECK(answers == (q == "readahead-default" && v.at_least(6, 17) ? 2 : 1));
                    CHECK_NOTHROW(kernel_row_for(q, v));
                }
            }
}

TEST_CASE("read_ahead_kb on a queue-limits commit, per kernel (observed: 6.1.0, 6.12.117, 6.18.44)") {
    CHECK(readahead_on_commit({6, 1, 0}) == ReadaheadOnCommit::untouched);
    CHECK(readahead_on_commit({6, 8, 12}) == ReadaheadOnCommit::untouched);
    CHECK(readahead_on_commit({6, 9, 0}) == ReadaheadOnCommit::reset);
    CHECK(readahead_on_commit({6, 10, 0}) == ReadaheadOnCommit::reset);
    CHECK(readahead_on_commit({6, 13, 4}) == ReadaheadOnCommit::reset);
    CHECK(readahead_on_commit({6, 12, 117}) == ReadaheadOnCommit::raise);  // Debian 13: the 6.15 rule taken back
    CHECK(readahead_on_commit({6, 12, 200}) == ReadaheadOnCommit::raise);
    CHECK(readahead_on_commit({6, 12, 10}) == ReadaheadOnCommit::unknown);
    CHECK(readahead_on_commit({6, 14, 3}) == ReadaheadOnCommit::unknown);
    CHECK(readahead_on_commit({6, 15, 0}) == ReadaheadOnCommit::raise);
    CHECK(readahead_on_commit({6, 18, 44}) == ReadaheadOnCommit::raise);
    CHECK(kernel_row_for("readahead-on-commit", {6, 14, 3}).known_by == KnownBy::read_back);
}

TEST_CASE("the read_ahead_kb the kernel computes, per kernel") {
    // Before 6.9 a commit computes nothing; registration does, with the floor.
    CHECK_FALSE(kernel_readahead_kb({6, 1, 0}, true, 0, 1280));
    CHECK(registration_readahead_kb(0) == 128);
    CHECK(registration_readahead_kb(1024 * 1024) == 2048);
    // 6.9-6.16: 2 x optimal_io_size, 128 KiB floor, rotational or not.
    CHECK(kernel_readahead_kb({6, 12, 117}, true, 0, 1280) == 128);
    CHECK(kernel_readahead_kb({6, 12, 117}, false, 512 * 1024, 1280) == 1024);
    // 6.17+: rotational without optimal_io_size uses 2 x max_sectors_kb
    // (the host's 6.18 loop device reads 2560).
    CHECK(kernel_readahead_kb({6, 18, 44}, true, 0, 1280) == 2560);
    CHECK(kernel_readahead_kb({6, 18, 44}, false, 0, 1280) == 128);
    CHECK(kernel_readahead_kb({6, 18, 44}, true, 512 * 1024, 1280) == 1024);
}

TEST_CASE("read_ahead_kb reads back rounded down to whole pages") {
    const struct {
        std::int64_t kb, page, out;
    } cases[] = {
        {128, 4096, 128}, {99999999, 4096, 99999996}, {6, 4096, 4}, {3, 4096, 0}, {100, 16384, 96}, {7, 65536, 0},
    };
    for (const auto& c : cases) CHECK(readahead_readback(c.kb, c.page) == c.out);
}

TEST_CASE("wbt: the default latency from rotational; what a wbt bfq turned off reads as, per kernel") {
    CHECK(wbt_default_usec(true) == 75000);
    CHECK(wbt_default_usec(false) == 2000);
    CHECK_FALSE(bfq_off_wbt_reads_zero({6, 1, 0}));
    CHECK(bfq_off_wbt_reads_zero({6, 2, 0}));
    CHECK(bfq_off_wbt_reads_zero({6, 12, 117}));
}

TEST_CASE("a new loop device starts rotational before 6.11 only") {
    CHECK(loop_created_rotational({6, 1, 0}));
    CHECK(loop_created_rotational({6, 10, 9}));
    CHECK_FALSE(loop_created_rotational({6, 11, 0}));
    CHECK_FALSE(loop_created_rotational({6, 18, 44}));
}

TEST_CASE("nr_requests after a scheduler is attached, from the tag depth") {
    CHECK(nr_requests_default(128, true) == 128);
    CHECK(nr_requests_default(128, false) == 256);
    CHECK(nr_requests_default(1023, false) == 256);
    CHECK(nr_requests_default(32, false) == 64);
}

TEST_CASE("read-backs: write_cache's two words, rq_affinity above 2 ignored") {
    CHECK(write_cache_readback("write back") == "write back");
    CHECK(write_cache_readback("write backwards") == "write back");
    CHECK(write_cache_readback("none") == "write through");
    CHECK(write_cache_readback("nonetheless") == "write through");
    CHECK_FALSE(write_cache_readback("writeback"));
    CHECK(rq_affinity_write_ignored(3));
    CHECK_FALSE(rq_affinity_write_ignored(2));
}

TEST_CASE("which writes disturb which attribute, per kernel") {
    const KernelVersion unknown{};
    auto id = [](const KernelRow* r) { return r ? r->id : std::string_view("-"); };
    CHECK(id(disturbed_by(WriteCause::limits_commit, "read_ahead_kb", {6, 18, 44})) ==
          "limits-commit:recomputes-read-ahead");
    // 6.1 recomputes nothing on a commit; an unknown kernel may.
    CHECK_FALSE(disturbed_by(WriteCause::limits_commit, "read_ahead_kb", {6, 1, 0}));
    CHECK(disturbed_by(WriteCause::limits_commit, "read_ahead_kb", unknown));
    CHECK_FALSE(disturbed_by(WriteCause::limits_commit, "nr_requests", unknown));
    CHECK(id(disturbed_by(WriteCause::scheduler_switch, "nr_requests", unknown)) ==
          "scheduler-switch:resets-nr-requests");
    CHECK(id(disturbed_by(WriteCause::scheduler_switch, "iosched.fifo_batch", unknown)) ==
          "scheduler-switch:recreates-iosched");
    CHECK(id(disturbed_by(WriteCause::scheduler_switch, "wbt_lat_usec", {6, 1, 0})) ==
          "bfq-attach:turns-default-wbt-off");
    CHECK_FALSE(disturbed_by(WriteCause::scheduler_switch, "read_ahead_kb", unknown));
    CHECK_FALSE(disturbed_by(WriteCause::none, "read_ahead_kb", unknown));
}
