// SPDX-License-Identifier: MIT
// Small text helpers every layer uses (the policy model included): trimming,
// whole integers, joining and quoting names for messages. Pure; a library of
// its own below everything (bp_text, with util/names and util/utf8).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace blkpolicy::util {

// Strips leading and trailing whitespace (SCSI strings are space padded,
// sysfs values end in a newline).
std::string trim(std::string_view s);

// A whole decimal integer, optionally signed; nothing else on the line.
std::optional<std::int64_t> parse_int(std::string_view s);

// Joins with a separator.
std::string join(const std::vector<std::string>& parts, std::string_view sep);

// "name", quoted as error messages show a name.
std::string in_quotes(std::string_view s);
// "a", "b", "c": each quoted, for "one of ..." messages.
std::string quoted_list(const std::vector<std::string>& names);

}  // namespace blkpolicy::util
