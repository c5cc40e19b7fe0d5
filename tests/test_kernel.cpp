// SPDX-License-Identifier: MIT
// kernel/rows: the kernel's behaviour as rows. The rows themselves (well
// formed, every version answered), and each function that reads them, per
// kernel version. unit_main.cpp checks after a full run that every row was
// consulted by some test (BLKPOLICY_KERNEL_ROW_COVERAGE=1, its own ctest).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "kernel/rows.hpp"

using namespace blkpolicy::kernel;

namespace {
std::string_view id_of(const KernelRow* r) { return r ? r->id : std::string_view("-"); }
}  // namespace

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
        if (r.cause != WriteCause::none) CHECK(r.disturbs.has_value());
    }
}

// The rows of a version question do not overlap (readahead-default's 6.17
// row is the exception: it holds only for a rotational queue without
// optimal_io_size, and is asked only then).
TEST_CASE("kernel rows: every version question has exactly one answer for every release from 4.0 to 7.20") {
    const std::map<std::string_view, KQuestion> questions = {
        {"readahead-on-commit", KQuestion::readahead_on_commit},
        {"bfq-off-wbt-reads", KQuestion::bfq_off_wbt_reads},
        {"loop-created-rotational", KQuestion::loop_created_rotational},
        {"readahead-default", KQuestion::readahead_default},
        {"write-contended", KQuestion::write_contended},
        {"async-depth", KQuestion::async_depth},
        {"wbt-store", KQuestion::wbt_store}};
    for (int major = 4; major <= 7; ++major)
        for (int minor = 0; minor <= 20; ++minor)
            for (int patch : {0, 1, 116, 117, 300}) {
                const KernelVersion v{major, minor, patch};
                for (const auto& entry : questions) {
                    const std::string_view q = entry.first;
                    const KQuestion question = entry.second;
                    int answers = 0;
                    for (const auto& r : kernel_rows())
                        if (r.question() == q && r.holds_on(v)) ++answers;
                    CAPTURE(q);
                    CAPTURE(major);
                    CAPTURE(minor);
                    // readahead-default has a row for every version plus the 6.17 one.
                    CHECK(answers == (q == "readahead-default" && v.at_least(6, 17) ? 2 : 1));
                    CHECK(kernel_row_for(question, v).question() == q);
                    CHECK(kernel_row_for(question, v).holds_on(v));
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
    CHECK(kernel_row_for(KQuestion::readahead_on_commit, {6, 14, 3}).known_by == KnownBy::read_back);
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

TEST_CASE("io_timeout reads back in whole ticks; 2^31 ms or more is the longest timer, in 32 bits") {
    const struct {
        std::int64_t ms;
        int hz;
        std::int64_t out;
    } cases[] = {
        {90000, 250, 90000},            // EC2 instance storage: a whole number of 4 ms ticks
        {240000, 250, 240000},          // Azure's remote NVMe
        {30000, 1000, 30000},           // sd's default
        {1001, 250, 1004},              // rounded up to the next tick
        {1, 100, 10},                   // a tick is 10 ms at 100 Hz
        {1000, 300, 1000},              // 300 Hz: 300 ticks
        {1001, 300, 1004},              // 301 ticks shown as ceil(301 x 10 / 3)
        {2147483647, 250, 2147483648},  // the last value that is not the longest timer
        {2147483648, 250, 4294967288},  // 0xFFFFFFFE ticks x 4 ms, cut to 32 bits
        {4294967295, 250, 4294967288},  // what the clouds' rules write
        {4294967295, 1000, 4294967294},
        {4294967295, 100, 4294967276},
    };
    for (const auto& c : cases) {
        CAPTURE(c.ms);
        CAPTURE(c.hz);
        CHECK(io_timeout_readback(c.ms, c.hz) == c.out);
    }
}

TEST_CASE("io_timeout's default per driver: nvme_core.io_timeout for NVMe, 30 s for sd, none elsewhere") {
    CHECK(io_timeout_default_ms("nvme", std::nullopt) == 30000);
    CHECK(io_timeout_default_ms("nvme", 4294967) == 4294967000);
    CHECK(io_timeout_default_ms("sd", 255) == 30000);
    CHECK_FALSE(io_timeout_default_ms("virtio_blk", std::nullopt));
    CHECK_FALSE(io_timeout_default_ms("loop", std::nullopt));
}

TEST_CASE("which writes disturb which attribute, per kernel") {
    const KernelVersion unknown{};
    auto id = [](const KernelRow* r) { return r ? r->id : std::string_view("-"); };
    CHECK(id(disturbed_by(WriteCause::limits_commit, Key::read_ahead_kb, {6, 18, 44})) ==
          "limits-commit:recomputes-read-ahead");
    // 6.1 recomputes nothing on a commit; an unknown kernel may.
    CHECK_FALSE(disturbed_by(WriteCause::limits_commit, Key::read_ahead_kb, {6, 1, 0}));
    CHECK(disturbed_by(WriteCause::limits_commit, Key::read_ahead_kb, unknown));
    CHECK_FALSE(disturbed_by(WriteCause::limits_commit, Key::nr_requests, unknown));
    CHECK(id(disturbed_by(WriteCause::scheduler_switch, Key::nr_requests, unknown)) ==
          "scheduler-switch:resets-nr-requests");
    CHECK(id(disturbed_by(WriteCause::scheduler_switch, Key::iosched, unknown)) ==
          "scheduler-switch:recreates-iosched");
    CHECK(id(disturbed_by(WriteCause::scheduler_switch, Key::wbt_lat_usec, {6, 1, 0})) ==
          "bfq-attach:turns-default-wbt-off");
    CHECK_FALSE(disturbed_by(WriteCause::scheduler_switch, Key::read_ahead_kb, unknown));
    CHECK_FALSE(disturbed_by(WriteCause::none, Key::read_ahead_kb, unknown));
}

TEST_CASE("kernel rows keyed on the version say the newest kernel they were observed on, and name it") {
    for (const auto& r : kernel_rows()) {
        CAPTURE(r.id);
        const bool by_version = r.known_by == KnownBy::version || r.known_by == KnownBy::version_and_probe;
        const bool open_ended = std::any_of(r.versions.begin(), r.versions.end(),
                                            [](const VersionRange& v) { return v.used && v.until.major == 0; }) &&
                                !(r.versions[0].from == KernelVersion{});  // a row for every version is not keyed on it
        if (!by_version || !open_ended || r.observed.empty()) continue;
        REQUIRE(r.newest_seen.major != 0);
        const std::string release = std::to_string(r.newest_seen.major) + "." + std::to_string(r.newest_seen.minor) +
                                    "." + std::to_string(r.newest_seen.patch);
        CHECK(r.observed.find(release) != std::string_view::npos);
    }
}

TEST_CASE("where the model ends: past the newest kernel a row was seen on, blkpolicy reads back or probes") {
    const auto& raise = kernel_row(KRow::readahead_on_commit_raise);
    CHECK_FALSE(raise.beyond_observed({7, 3, 4}));
    CHECK_FALSE(raise.beyond_observed({7, 3, 99}));  // a later stable release of a series seen here
    CHECK(raise.beyond_observed({7, 4, 0}));
    CHECK(raise.beyond_observed({9, 0, 0}));
    CHECK_FALSE(raise.beyond_observed({6, 15, 0}));
    // Not keyed on the version: the same everywhere, or only a probe knows.
    CHECK_FALSE(kernel_row(KRow::wbt_default_rotational_at_init).beyond_observed({9, 0, 0}));
    CHECK_FALSE(kernel_row(KRow::write_contended_ebusy).beyond_observed({9, 0, 0}));
    // A closed range ends before the question can arise.
    CHECK_FALSE(kernel_row(KRow::readahead_on_commit_untouched).beyond_observed({6, 1, 0}));

    // The behaviour: on 9.0 the only-raise rule is not taken on the version's word.
    CHECK(readahead_on_commit({9, 0, 0}) == ReadaheadOnCommit::unknown);
    CHECK(readahead_on_commit({7, 3, 4}) == ReadaheadOnCommit::raise);
    CHECK(standing_on(raise, {9, 0, 0}) == "not observed past 7.3: read back");
    CHECK(standing_on(kernel_row(KRow::limits_commit_recomputes_read_ahead), {9, 0, 0}) ==
          "not observed past 7.3: probe");
    CHECK(standing_on(raise, {7, 3, 4}) == "holds");
    CHECK(standing_on(raise, {6, 1, 0}) == "does not hold");
}

TEST_CASE("contended writes: EBUSY from 7.0 and the 6.18 series it was seen on; unknown between; waits before") {
    CHECK(kernel_row_for(KQuestion::write_contended, {6, 1, 0}).id == "write-contended:waits");
    CHECK(kernel_row_for(KQuestion::write_contended, {6, 12, 117}).id == "write-contended:waits");
    CHECK(kernel_row_for(KQuestion::write_contended, {6, 18, 10}).id == "write-contended:unknown");
    CHECK(kernel_row_for(KQuestion::write_contended, {6, 18, 44}).id == "write-contended:ebusy");
    CHECK(kernel_row_for(KQuestion::write_contended, {6, 19, 3}).id == "write-contended:unknown");
    CHECK(kernel_row_for(KQuestion::write_contended, {7, 3, 4}).id == "write-contended:ebusy");
}

TEST_CASE("async_depth (7.0+): the default per scheduler, rescaling by nr_requests, read-back and refusals") {
    CHECK(kernel_row_for(KQuestion::async_depth, {7, 3, 4}).id == "async-depth:queue-attribute");
    CHECK(kernel_row_for(KQuestion::async_depth, {6, 18, 44}).id == "async-depth:iosched-tunable");
    // Measured on 7.3.4: 256 under none and mq-deadline, 192 under kyber and bfq.
    CHECK(async_depth_default(256, "none") == 256);
    CHECK(async_depth_default(256, "mq-deadline") == 256);
    CHECK(async_depth_default(256, "kyber") == 192);
    CHECK(async_depth_default(256, "bfq") == 192);
    // 64 of 256, nr_requests 128: 32; then 512: 128; bfq 100 of 256, 64: 25.
    CHECK(async_depth_rescaled(64, 256, 128) == 32);
    CHECK(async_depth_rescaled(32, 128, 512) == 128);
    CHECK(async_depth_rescaled(100, 256, 64) == 25);
    CHECK(async_depth_rescaled(1, 256, 4) == 1);
    CHECK(async_depth_readback(1000, 512, "mq-deadline") == 512);
    CHECK(async_depth_readback(64, 512, "bfq") == 64);
    CHECK_FALSE(async_depth_readback(0, 512, "mq-deadline"));
    CHECK_FALSE(async_depth_readback(64, 256, "none"));
    CHECK(id_of(disturbed_by(WriteCause::nr_requests_write, Key::async_depth, {7, 3, 4})) ==
          "nr-requests-write:rescales-async-depth");
    CHECK(id_of(disturbed_by(WriteCause::scheduler_switch, Key::async_depth, {7, 3, 4})) ==
          "scheduler-switch:resets-async-depth");
    CHECK_FALSE(disturbed_by(WriteCause::scheduler_switch, Key::async_depth, {6, 18, 44}));
    CHECK_FALSE(disturbed_by(WriteCause::nr_requests_write, Key::read_ahead_kb, {7, 3, 4}));
}

TEST_CASE("wbt: writing the retained latency turns a wbt bfq turned off back on only from 7.3 (observed 7.3.4)") {
    CHECK(kernel_row_for(KQuestion::wbt_store, {6, 1, 0}).id == "wbt-store:retained-value-noop");
    CHECK(kernel_row_for(KQuestion::wbt_store, {6, 18, 44}).id == "wbt-store:retained-value-noop");
    CHECK(kernel_row_for(KQuestion::wbt_store, {7, 0, 0}).id == "wbt-store:unknown");
    CHECK(kernel_row_for(KQuestion::wbt_store, {7, 3, 4}).id == "wbt-store:off-retained-applies");
}
