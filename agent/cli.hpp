// Command-line parsing and the exit codes (documented in the man page).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace blkpolicy::agent {

enum ExitCode : int {
    kExitOk = 0,         // success; check: the policy is valid; status: every value in policy
    kExitPartial = 1,    // apply: some attribute failed, did not stick or was refused; status: drift
    kExitUsage = 2,      // bad command line, unknown device
    kExitPolicy = 3,     // the policy is invalid or cannot be read
    kExitRuntime = 4,    // the system could not be read (no sysfs, ...)
};

struct Options {
    std::string command;
    std::vector<std::string> policies;
    std::string sysfs_root = "/sys";
    std::string state_dir = "/run/blkpolicy";
    bool json = false;
    bool help = false;
    bool version = false;
    std::vector<std::string> devices;
};

struct ParseResult {
    Options options;
    std::string error;  // non-empty: usage error
};

ParseResult parse_command_line(const std::vector<std::string>& args);

std::string usage_text();

}  // namespace blkpolicy::agent
