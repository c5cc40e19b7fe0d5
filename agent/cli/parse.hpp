// SPDX-License-Identifier: MIT
// The command line: options in, Options or a usage error out; the --help text.
#pragma once

#include <string>
#include <vector>

#include "agent/options.hpp"

namespace blkpolicy::agent {

struct ParseResult {
    Options options;
    std::string error;  // non-empty: usage error
};

ParseResult parse_command_line(const std::vector<std::string>& args);

std::string usage_text();

}  // namespace blkpolicy::agent
