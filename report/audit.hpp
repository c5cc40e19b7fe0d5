// SPDX-License-Identifier: MIT
// Read-only findings about how the kernel has set up the block devices, and
// how that fits the policy when there is one. Pure: agent/ gathers the inputs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernel/rows.hpp"
#include "policy/facts.hpp"
#include "policy/host.hpp"
#include "policy/plan.hpp"
#include "writers/model.hpp"

namespace blkpolicy::report {

enum class Severity { info, warning, critical };
const char* to_string(Severity s);

struct Finding {
    std::string device;
    std::string code;
    Severity severity = Severity::info;
    std::string message;
    std::vector<std::pair<std::string, std::string>> evidence;  // path or fact -> value
    std::string fix;                                            // a policy snippet that fixes it, when one does
};

struct AuditDevice {
    policy::DeviceFacts facts;  // live facts, as the kernel reports them now
    policy::Values values;
    std::optional<policy::DevicePlan> plan;  // with a policy
    std::optional<int> wbt_state;            // debugfs rqos/wbt/enabled
    bool has_medium = true;                  // size > 0: not an unbound loop, not an empty removable drive
    writers::UdevDevice udev;                // what decides which other writers select it
};

// The device of a finding that is a property of the host (evidence
// "devices" lists the devices it covers).
inline constexpr std::string_view kHostDevice = "*";

struct AuditInput {
    std::vector<AuditDevice> devices;
    bool with_policy = false;
    std::vector<writers::WriterAssignment> writers;  // udev rules and the other writers (writers/model)
    // Every CPU shares one last-level cache; nullopt when sysfs does not say.
    std::optional<bool> single_llc;
    // Devices without a medium are left out unless this is set (audit --all).
    bool include_empty = false;
    // The host (its kernel: 0.0 not known, for what its sysfs shows).
    policy::HostContext host;
    // Early boot (with a policy): the digest of the policy loaded now, of
    // the one the newest initramfs carries (as its hook noted it; empty:
    // no hook ran), and of the one this boot's initramfs pass ran (empty:
    // none ran).
    std::string policy_digest;
    std::string initramfs_digest;
    std::string boot_digest;
    // Each policy file (path, digest) now, and as the hook noted them when
    // it made the initramfs (empty: no hook, or one that noted no files).
    std::vector<std::pair<std::string, std::string>> policy_files;
    std::vector<std::pair<std::string, std::string>> initramfs_files;
    // What the runner in this boot's initramfs said of runs of blkpolicy it
    // stopped, or saw crash, fail or not start ("sdc crashed: killed by
    // signal 11"); empty: none.
    std::vector<std::string> boot_unfinished;
};

// Why a device's identity says it is virtual ("driver virtio_blk", "model QEMU
// HARDDISK"), or empty for what looks like a real drive.
std::string virtual_identity(const policy::DeviceFacts& f);

// Every kind of finding audit reports, from its one registry (report/audit.cpp:
// each kind is a small check function in a row of that table).
struct FindingKind {
    std::string_view code;
    Severity severity;
    std::string_view summary;
};
std::vector<FindingKind> finding_kinds();

// The fix for writes that drop their flushes over a volatile cache: a rule
// that sets this device's write_cache back to write back (audit's
// write-through finding and measure's flushes-dropped finding alike).
std::string keep_flushes_fix(const std::string& device);

// Findings in device order (a device's in registry order), then the
// host-wide ones.
std::vector<Finding> audit(const AuditInput& input);

}  // namespace blkpolicy::report
