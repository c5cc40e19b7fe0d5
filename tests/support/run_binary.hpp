// SPDX-License-Identifier: MIT
// Runs the real blkpolicy binary and captures what it prints.
#pragma once

#include <string>
#include <vector>

namespace blkpolicy::test {

struct RunResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

// `cwd`, when given, is the child's working directory.
RunResult run_blkpolicy(const std::vector<std::string>& args, const std::string& cwd = {});

// Replaces every occurrence of `from` with `to`.
std::string replace_all(std::string s, const std::string& from, const std::string& to);

// Compares `actual` with tests/golden/NAME; BLKPOLICY_UPDATE_GOLDEN=1 rewrites it.
bool matches_golden(const std::string& name, const std::string& actual, std::string& diff_hint);
// The same as a doctest check, with the hint as its message.
void check_golden(const std::string& name, const std::string& actual);

}  // namespace blkpolicy::test
