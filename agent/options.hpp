// SPDX-License-Identifier: MIT
// What a command was asked to do (the parsed command line), and the exit
// codes (documented in the man page). Parsing is agent/cli/parse.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "policy/policy.hpp"

namespace blkpolicy::agent {

enum ExitCode : int {
    kExitOk = 0,       // success; check: the policy is valid; status: every value in policy
    kExitPartial = 1,  // apply: some attribute failed, did not stick or was refused; status: drift
    kExitUsage = 2,    // bad command line, unknown device
    kExitPolicy = 3,   // the policy is invalid or cannot be read
    kExitRuntime = 4,  // the system could not be read (no sysfs, ...)
    kExitChanges = 5,  // plan --detailed-exitcode: writes are pending (configuration management's "changed")
};

struct Options {
    std::string command;
    std::vector<std::string> policies;
    bool no_policy = false;      // --no-policy (explain, audit): the kernel side only
    bool all = false;            // --all (audit): also devices without a medium
    bool kernel_rules = false;   // --kernel-rules (explain): the kernel rows instead of a device
    bool boot = false;           // --boot (apply): the initramfs's pass: bounded, recorded, said in the kernel log
    bool by_serial = false;      // --by-serial (export): every rule keyed by serial too
    bool detailed_exit = false;  // --detailed-exitcode (plan): 5 when a write would change a value
    std::string sysfs_root = "/sys";
    std::string state_dir = "/run/blkpolicy";
    bool json = false;
    bool help = false;
    bool version = false;
    std::vector<std::string> devices;
    // run only
    std::optional<policy::Mode> mode;               // --mode overrides the policy's daemon.mode
    std::string metrics_file;                       // --metrics-file
    std::string log_target = "auto";                // --log-target auto|journal|console
    std::vector<std::string> udev_rules_dirs;       // --udev-rules-dir (default: udev's own)
    std::string config_root = "/";                  // --config-root: other writers' files under it (run, audit, import)
    std::string import_from;                        // --from udev|tuned|sysfsutils|tmpfiles (import)
    int receive_buffer = 128 * 1024 * 1024;         // --receive-buffer BYTES for the uevent sockets
    std::string kernel_release;                     // --kernel-release (explain): default the running kernel
    std::string udev_db_dir;                        // --udev-db DIR
    long pid = 0;                                   // --pid PID (reload): default the pid in daemon.json
    std::chrono::milliseconds measure_for{10'000};  // --for DURATION (measure)
    unsigned trace_buffer_kb = 256;                 // --trace-buffer-kb N (measure): per CPU
    unsigned sample_percent = 100;                  // --sample PERCENT (measure): request tracepoints' share
    // udev's database for env.* matches: --udev-db, else /run/udev/data when
    // looking at the real /sys, else none (a fake tree has no udev records).
    std::string udev_db() const {
        if (!udev_db_dir.empty()) return udev_db_dir;
        return sysfs_root == "/sys" ? "/run/udev/data" : std::string();
    }
};

}  // namespace blkpolicy::agent
