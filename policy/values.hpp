// SPDX-License-Identifier: MIT
// Parsing and normalising the text the kernel shows in sysfs attributes.
// Pure functions: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace blkpolicy::policy {

// Strips leading and trailing whitespace (SCSI strings are space padded,
// sysfs values end in a newline).
std::string trim(std::string_view s);

// A whole decimal integer, optionally signed; nothing else on the line.
std::optional<std::int64_t> parse_int(std::string_view s);

// "none [mq-deadline] kyber bfq" -> the offered names and the active one.
struct SchedulerLine {
    std::vector<std::string> offered;
    std::string active;  // empty when no name is bracketed
};
SchedulerLine parse_scheduler_line(std::string_view line);

// The value of an attribute as it reads back, in the form the policy compares:
// the bracketed scheduler name, trimmed text otherwise.
std::string normalise_readback(std::string_view attribute, std::string_view raw);

// Joins with a separator.
std::string join(const std::vector<std::string>& parts, std::string_view sep);

// "name", quoted as error messages show a name.
std::string in_quotes(std::string_view s);
// "a", "b", "c": each quoted, for "one of ..." messages.
std::string quoted_list(const std::vector<std::string>& names);

}  // namespace blkpolicy::policy
