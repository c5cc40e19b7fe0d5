// SPDX-License-Identifier: MIT
// A string written as a quoted JSON or TOML string without building a
// document: the one escaper for the per-device hot path (the frozen-facts
// record and its identity, JSON) and for the policy TOML blkpolicy writes
// (import, audit's and measure's fixes). For JSON the bytes are the ones
// nlohmann::json's dump() gives for valid UTF-8 (tests/test_util_files.cpp
// compares the two), so records written by either read back the same. Pure
// (bp_text).
#pragma once

#include <string>
#include <string_view>

namespace blkpolicy::util {

enum class Quoting {
    json,  // RFC 8259: " and \ escaped, control characters below 0x20
    toml,  // a TOML basic string: the same, and DEL (0x7f) too
};

// Appends `s` quoted, quotes included: " and \ escaped, control characters
// as \b \f \n \r \t or \u00XX, valid UTF-8 as it is. A byte that is not part
// of valid UTF-8 is written as \u00XX (nlohmann::json would refuse the whole
// string; TOML must be valid UTF-8), so any bytes give a valid string.
void append_quoted(std::string& out, std::string_view s, Quoting q);

inline void append_json_string(std::string& out, std::string_view s) { append_quoted(out, s, Quoting::json); }

}  // namespace blkpolicy::util
