// SPDX-License-Identifier: MIT
// udev rules syntax, read the way udevd reads it: comments, backslash
// continuations, one rule per logical line, KEY{attr}OP"value" tokens
// separated by commas. Pure: writers/scan_udev reads the files.
#pragma once

#include <string>
#include <vector>

#include "writers/model.hpp"

namespace blkpolicy::writers {

enum class UdevOp { match, nomatch, assign, add, remove, assign_final };
const char* to_string(UdevOp op);
bool is_assignment(UdevOp op);

struct UdevToken {
    std::string key;   // ACTION, KERNEL, ATTR, ATTRS, ENV, ...
    std::string attr;  // what is in braces: queue/scheduler, ID_SERIAL, ...
    UdevOp op = UdevOp::match;
    std::string value;
};

struct UdevRule {
    std::string file;
    int line = 0;      // first physical line
    std::string text;  // the logical line, continuations joined
    std::vector<UdevToken> tokens;
    std::string error;  // non-empty: the line could not be parsed
    std::string where() const { return file + ":" + std::to_string(line); }
};

std::vector<UdevRule> parse_udev_rules_text(const std::string& file, const std::string& text);

// udev's pattern matching: `|` alternatives, then fnmatch (*, ?, [], [!], [^]).
bool udev_pattern_match(const std::string& pattern, const std::string& value);
std::vector<std::string> split_alternatives(const std::string& pattern);

// Every tuning assignment in one rules file's text.
std::vector<WriterAssignment> parse_udev_rules(const std::string& file, const std::string& text);

}  // namespace blkpolicy::writers
