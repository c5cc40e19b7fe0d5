// SPDX-License-Identifier: MIT
#include <doctest/doctest.h>

#include "udev/sysfs_text.hpp"
#include "util/text.hpp"

using namespace blkpolicy::policy;
using namespace blkpolicy::udev;
using namespace blkpolicy::util;

TEST_CASE("trim strips SCSI padding and newlines") {
    const struct {
        const char* in;
        const char* out;
    } cases[] = {
        {"QEMU HARDDISK   \n", "QEMU HARDDISK"}, {"  x ", "x"}, {"\n", ""}, {"", ""}, {"write back\n", "write back"},
    };
    for (const auto& c : cases) CHECK(trim(c.in) == c.out);
}

TEST_CASE("parse_int accepts whole decimal numbers only") {
    CHECK(parse_int("128\n") == 128);
    CHECK(parse_int("-1") == -1);
    CHECK(parse_int("+5") == 5);
    CHECK_FALSE(parse_int("12k").has_value());
    CHECK_FALSE(parse_int("").has_value());
    CHECK_FALSE(parse_int("write back").has_value());
    CHECK_FALSE(parse_int("99999999999999999999999").has_value());
}

TEST_CASE("scheduler lines: offered names and the bracketed active one") {
    auto l = parse_scheduler_line("none [mq-deadline] kyber bfq \n");
    CHECK(l.active == "mq-deadline");
    CHECK(l.offered == std::vector<std::string>{"none", "mq-deadline", "kyber", "bfq"});
    auto none = parse_scheduler_line("[none] \n");
    CHECK(none.active == "none");
    CHECK(parse_scheduler_line("none").active.empty());
}

TEST_CASE("normalise_readback") {
    CHECK(normalise_readback("scheduler", "[none] mq-deadline\n") == "none");
    CHECK(normalise_readback("write_cache", "write through\n") == "write through");
    // md's resync speeds: a number written reads "N (local)"; the sysctl's
    // "N (system)", which is kept as "system" (a restore writes it back).
    CHECK(normalise_readback("md.sync_speed_min", "50000 (local)\n") == "50000");
    CHECK(normalise_readback("md.sync_speed_max", "200000 (system)\n") == "system");
    CHECK(normalise_readback("md.sync_speed_min", "1000") == "1000");
    CHECK(normalise_readback("md.stripe_cache_size", "256\n") == "256");
    CHECK(normalise_readback("read_ahead_kb", "2560\n") == "2560");
}
