// SPDX-License-Identifier: MIT
// systemd/alerts: the journal fields of an alert.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "systemd/alerts.hpp"

using namespace blkpolicy;
using Fields = std::vector<std::string>;

TEST_CASE("journal fields of an alert") {
    systemd::Alert a;
    a.kind = systemd::AlertKind::reverted;
    a.device = "loop240";
    a.attribute = "read_ahead_kb";
    a.expected = "128";
    a.actual = "2560";
    a.rule = "r (p.toml:1)";
    a.message = "m";
    CHECK(systemd::journal_fields(a) == Fields{"MESSAGE=m", "MESSAGE_ID=7c0ba1f3a4d94f0e9b6c2d8e51a0f303", "PRIORITY=4",
                                               "SYSLOG_IDENTIFIER=blkpolicy", "BLKPOLICY_EVENT=reverted",
                                               "BLKPOLICY_DEVICE=loop240", "BLKPOLICY_ATTRIBUTE=read_ahead_kb",
                                               "BLKPOLICY_EXPECTED=128", "BLKPOLICY_ACTUAL=2560",
                                               "BLKPOLICY_RULE=r (p.toml:1)"});
}

TEST_CASE("a measured alert carries its counts as more BLKPOLICY_ fields, at priority crit") {
    systemd::Alert a;
    a.kind = systemd::AlertKind::at_risk;
    a.device = "sdb";
    a.attribute = "write_cache";
    a.expected = "write back";
    a.actual = "write through";
    a.message = "m";
    a.fields = {{"WRITES", "200"}, {"FLUSHES", "0"}};
    CHECK(systemd::journal_fields(a) == Fields{"MESSAGE=m", "MESSAGE_ID=7c0ba1f3a4d94f0e9b6c2d8e51a0f307", "PRIORITY=2",
                                               "SYSLOG_IDENTIFIER=blkpolicy", "BLKPOLICY_EVENT=at-risk",
                                               "BLKPOLICY_DEVICE=sdb", "BLKPOLICY_ATTRIBUTE=write_cache",
                                               "BLKPOLICY_EXPECTED=write back", "BLKPOLICY_ACTUAL=write through",
                                               "BLKPOLICY_RULE=", "BLKPOLICY_WRITES=200", "BLKPOLICY_FLUSHES=0"});
}
