// The commands behind the CLI. Each returns the process exit code.
#pragma once

#include <ostream>
#include <string>

#include "agent/options.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

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
