// SPDX-License-Identifier: MIT
// The commands, defined once: the table below gives each its name, what it
// takes, its line in --help and the function that runs it. Parsing, usage,
// dispatch and the checks of the bash completion and the man page all read
// it. Each command returns the process exit code.
#pragma once

#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/options.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

enum class Operands {
    none,     // nothing after the options
    devices,  // optional DEVICE names that limit it
    files,    // FILE|DIR|PROFILE... (import)
};

struct Command {
    std::string_view name;
    std::string_view operands_text;  // after the name in --help ("FILE|DIR..."), or ""
    std::string_view help;           // its paragraph in --help, lines separated by '\n'
    Operands operands;
    int (*run)(const Options& options, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);
};

// Every command, in the order --help lists them.
std::span<const Command> commands();
const Command* find_command(std::string_view name);

// Options that belong to some commands only: "--pid" -> "reload".
struct OptionScope {
    std::string_view option;
    std::string_view commands;  // space-separated command names
    std::vector<std::string_view> names() const;
    bool allows(std::string_view command) const;
};
std::span<const OptionScope> option_scopes();

// sysfs is mounted at the root given and every named device exists there;
// otherwise the error is printed and the exit code returned (0 when fine).
int check_sysfs_and_devices(const Options& options, const udev::Sysfs& sysfs, std::ostream& err);

// A device named on the command line that existed when it was checked but
// could not be read a moment later (removed, or its dev file unreadable):
// prints why and returns kExitRuntime.
int device_went_away(const std::string& name, std::ostream& err);

// Runs on the sysfs at options.sysfs_root.
int run_command(const Options& options, std::ostream& out, std::ostream& err);
// Runs on the given sysfs (tests pass one that models the kernel).
int run_command(const Options& options, udev::Sysfs& sysfs, std::ostream& out, std::ostream& err);

}  // namespace blkpolicy::agent
