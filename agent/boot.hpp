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

namespace blkpolicy::report {
struct AuditInput;
}
namespace blkpolicy::policy {
struct Policy;
}

namespace blkpolicy::agent {

// How long the pass may take before it leaves the devices not looked at
// yet alone: it must never hold a boot back. (The runner in the
// initramfs, /usr/lib/blkpolicy/early-boot, bounds every run of blkpolicy
// there by the boot's budget, 5 s unless the kernel command line says
// otherwise, and kills what outlasts it.)
inline constexpr std::chrono::seconds kBootPassBudget{10};

// A run of blkpolicy in the initramfs that its runner did not see end
// well: one line of STATE-DIR/boot-bound.
struct BootBound {
    std::string what;     // "pass", or the disk of a udev add event's run
    std::string outcome;  // stopped, crashed, failed, skipped, missing
    std::string detail;   // the runner's words
    double uptime = 0;    // when, seconds since the kernel started
};

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
    std::string when;              // the realtime clock, ISO 8601 (the initramfs's clock may not be set yet)
    std::vector<BootBound> bound;  // what the runner said (read beside the record)
};

nlohmann::json boot_json(const BootRecord& r);
// The line said in the kernel log: "initramfs pass: 3 devices, 5 values
// applied, 2 unchanged, 0 failed in 0.12 s (policy 1a2b3c4d...)".
std::string boot_line(const BootRecord& r);

// A record read back (missing fields as their defaults).
BootRecord boot_record_from(const nlohmann::json& doc);

util::Status write_boot_record(const std::string& state_dir, const BootRecord& r);
// STATE-DIR/boot.json with the runner's lines (STATE-DIR/boot-bound) as
// "bound"; where the pass left no record but the runner said something
// (the pass was stopped, crashed, skipped), a record that is not ok and
// says so. nullopt when nothing of blkpolicy ran in this boot's initramfs.
std::optional<nlohmann::json> read_boot_record(const std::string& state_dir);

// The runner's lines: "WHAT\tOUTCOME\tDETAIL\tUPTIME" each; a line not of
// that shape is kept whole as the detail (outcome "unreadable").
std::vector<BootBound> parse_boot_bound(const std::string& text);
// "sdc crashed: killed by signal 11"
std::string bound_text(const BootBound& b);

// What audit takes from this boot's record: the digest of the policy the
// pass ran, and the runner's lines.
void boot_audit_input(const BootRecord& r, report::AuditInput& in);

// One line in the kernel log (/dev/kmsg) at `level` (syslog's numbers),
// prefixed "blkpolicy: "; false when the log cannot be written.
bool kernel_log(int level, const std::string& line);

// Where the initramfs hook notes the digest of the policy it packed
// (under ROOT): the policy's digest on the first line, then "DIGEST PATH"
// for each file. The digest; empty when no hook ran.
std::string initramfs_digest_path(const std::string& root);
std::string read_initramfs_digest(const std::string& root);

// What audit compares for initramfs-policy-stale: the policy loaded now and
// the one the hook noted under ROOT, as a whole and per file.
void initramfs_audit_input(const policy::Policy& pol, const std::string& root, report::AuditInput& in);

}  // namespace blkpolicy::agent
