// SPDX-License-Identifier: MIT
// The pass in early boot (`apply --boot`, run by the initramfs before the
// root filesystem is mounted): what it did, kept in STATE-DIR/boot.json
// (the real root keeps /run, so the daemon, status and audit read it), and
// the one line it says in the kernel log (there is no journald yet).
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/status.hpp"

namespace blkpolicy::agent {

// How long the pass may take before it leaves the devices not looked at
// yet alone: it must never hold a boot back.
inline constexpr std::chrono::seconds kBootPassBudget{10};

struct BootRecord {
    bool ok = true;             // false: nothing was set (the policy could not be loaded)
    std::string error;          // why not
    std::string kernel;         // uname -r
    std::string policy_digest;  // of the policy the initramfs carried
    std::vector<std::string> policy_files;
    int devices = 0;                      // looked at
    int devices_left = 0;                 // not looked at: the budget ran out
    std::map<std::string, int> outcomes;  // applied, unchanged, failed, ... -> attributes
    double seconds = 0;
    int exit_code = 0;
    std::string when;  // the realtime clock, ISO 8601 (the initramfs's clock may not be set yet)
};

nlohmann::json boot_json(const BootRecord& r);
// The line said in the kernel log: "initramfs pass: 3 devices, 5 values
// applied, 2 unchanged, 0 failed in 0.12 s (policy 1a2b3c4d...)".
std::string boot_line(const BootRecord& r);

// A record read back (missing fields as their defaults).
BootRecord boot_record_from(const nlohmann::json& doc);

util::Status write_boot_record(const std::string& state_dir, const BootRecord& r);
// STATE-DIR/boot.json, or nullopt when no pass ran on this boot (or it
// cannot be read).
std::optional<nlohmann::json> read_boot_record(const std::string& state_dir);

// One line in the kernel log (/dev/kmsg) at `level` (syslog's numbers),
// prefixed "blkpolicy: "; false when the log cannot be written.
bool kernel_log(int level, const std::string& line);

// Where the initramfs hook notes the digest of the policy it packed
// (under ROOT), and that digest; empty when no hook ran.
std::string initramfs_digest_path(const std::string& root);
std::string read_initramfs_digest(const std::string& root);

}  // namespace blkpolicy::agent
