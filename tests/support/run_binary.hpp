// SPDX-License-Identifier: MIT
// Runs the real blkpolicy binary and captures what it prints.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "support/paths.hpp"

namespace blkpolicy::test {

struct RunResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

// A child process whose stdout and stderr go to files, read when it ends.
// The destructor kills (SIGKILL) and reaps a child not waited for.
class Running {
public:
    // argv[0] is looked up in PATH; `cwd`, when given, is the child's working directory.
    explicit Running(const std::vector<std::string>& argv, const std::string& cwd = {});
    ~Running();
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;
    pid_t pid() const { return pid_; }
    void signal(int sig) const;
    RunResult wait();

private:
    pid_t pid_ = -1;
    std::string out_path_;
    std::string err_path_;
};

// `args` with --udev-rules-dir and --config-root naming an empty directory
// of the build, for the commands that read other writers' files (run,
// audit, explain), unless the test gives its own: no test reads the host's
// udev rules or /etc.
std::vector<std::string> hermetic(std::vector<std::string> args);

// {blkpolicy_binary(), hermetic(args)...}
std::vector<std::string> blkpolicy_argv(const std::vector<std::string>& args);

// `cwd`, when given, is the child's working directory.
RunResult run_blkpolicy(const std::vector<std::string>& args, const std::string& cwd = {});

// Replaces every occurrence of `from` with `to`.
std::string replace_all(std::string s, const std::string& from, const std::string& to);

// Compares `actual` with tests/golden/NAME; BLKPOLICY_UPDATE_GOLDEN=1 rewrites it.
bool matches_golden(const std::string& name, const std::string& actual, std::string& diff_hint);
// The same as a doctest check, with the hint as its message.
void check_golden(const std::string& name, const std::string& actual);

}  // namespace blkpolicy::test
