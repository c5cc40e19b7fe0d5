// SPDX-License-Identifier: MIT
// udev's match patterns read as sets of strings, so that two conditions on
// the same value can be compared: whether one holds every string the other
// does, or none of them. A pattern is udev's: alternatives separated by `|`,
// each an fnmatch(3) glob (*, ?, [...], [!...], [^...], backslash escapes).
// Exact: each answer is worked out on the patterns' automata, never guessed;
// what it cannot read (POSIX classes such as [[:digit:]]) or what would take
// too long is `unknown`, and callers treat unknown as "not proven". Pure.
#pragma once

#include <string>
#include <vector>

namespace blkpolicy::writers {

// The strings `pattern` matches, or with `complement` every other string.
struct PatternSet {
    std::string pattern;
    bool complement = false;
    PatternSet negated() const { return {pattern, !complement}; }
};

enum class Proven { yes, no, unknown };

// Every string in `a` is in `b`.
Proven subset(const PatternSet& a, const PatternSet& b);
// No string is in both.
Proven disjoint(const PatternSet& a, const PatternSet& b);
// A udev pattern's alternatives ("sd*|vd*" -> "sd*", "vd*").
std::vector<std::string> split_alternatives(const std::string& pattern);

// Whether `value` is in the set (udev's own matching: alternatives, then fnmatch).
bool contains(const PatternSet& set, const std::string& value);

}  // namespace blkpolicy::writers
