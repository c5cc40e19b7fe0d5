// SPDX-License-Identifier: MIT
// measure/stat: /sys/block/DEV/stat as each kernel generation writes it.
#include <doctest/doctest.h>

#include "measure/stat.hpp"

using namespace blkpolicy::measure;

TEST_CASE("stat: 17 fields (5.5+), 15 (4.18+) and 11 (older) are read; anything else is not") {
    const auto s17 = parse_stat(
        "     100        2     800      40     200      3    1600     80        1      90     120 "
        "       0        0        0        0      50       7\n");
    REQUIRE(s17);
    CHECK(s17->fields == 17);
    CHECK((*s17)[StatField::reads] == 100);
    CHECK((*s17)[StatField::sectors_read] == 800);
    CHECK((*s17)[StatField::writes] == 200);
    CHECK((*s17)[StatField::flushes] == 50);
    CHECK((*s17)[StatField::flush_ms] == 7);
    CHECK(s17->has(StatField::flush_ms));

    const auto s15 = parse_stat("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n");
    REQUIRE(s15);
    CHECK(s15->fields == 15);
    CHECK_FALSE(s15->has(StatField::flushes));
    CHECK((*s15)[StatField::discards] == 12);

    const auto s11 = parse_stat("1 2 3 4 5 6 7 8 9 10 11");
    REQUIRE(s11);
    CHECK(s11->fields == 11);
    CHECK_FALSE(s11->has(StatField::discards));

    // A later kernel's extra fields are tolerated and ignored.
    const auto s19 = parse_stat("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19\n");
    REQUIRE(s19);
    CHECK(s19->fields == 17);

    CHECK_FALSE(parse_stat("1 2 3 4 5 6 7 8 9 10"));  // too few
    CHECK_FALSE(parse_stat("1 2 3 4 5 6 7 8 9 10 x"));
    CHECK_FALSE(parse_stat("1 2 3 4 5 6 7 8 9 10 -11"));
    CHECK_FALSE(parse_stat(""));
}

TEST_CASE("stat: deltas count up, millisecond fields wrap at 32 bits, in_flight is a level") {
    auto before = *parse_stat("10 0 80 4294967290 20 0 160 5 3 0 0 0 0 0 0 5 4294967295");
    auto after = *parse_stat("15 0 120 4 26 0 200 9 1 0 0 0 0 0 0 5 3");
    const auto d = stat_delta(before, after);
    REQUIRE(d);
    CHECK((*d)[StatField::reads] == 5);
    CHECK((*d)[StatField::sectors_read] == 40);
    CHECK((*d)[StatField::read_ms] == 10);  // 4294967290 -> 4 across the wrap
    CHECK((*d)[StatField::writes] == 6);
    CHECK((*d)[StatField::in_flight] == 1);
    CHECK((*d)[StatField::flushes] == 0);
    CHECK((*d)[StatField::flush_ms] == 4);
    // A counter going backwards: another device under the same name.
    CHECK_FALSE(stat_delta(after, before));
    // Fields both ends have.
    auto old = *parse_stat("1 0 3 0 5 0 7 0 0 0 0");
    const auto d11 = stat_delta(old, after);
    REQUIRE(d11);
    CHECK(d11->fields == 11);
    CHECK((*d11)[StatField::reads] == 14);
}
