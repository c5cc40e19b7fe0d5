// SPDX-License-Identifier: MIT
// The model of the other writers of queue attributes on a host (udev rules,
// TuneD profiles, sysfsutils, tmpfiles.d `w` lines, units and rc.local that
// echo into /sys/block): who writes which attribute of which devices, from
// which file and line. audit, explain and the reconciler include this and
// never a parser (writers/parsers, writers/udev_rules). Pure.
#pragma once

#include <string>
#include <vector>

namespace blkpolicy::writers {

enum class WriterKind { udev_rule, tuned, sysfsutils, tmpfiles, unit, rc_local };
const char* to_string(WriterKind k);  // "udev", "tuned", "sysfsutils", "tmpfiles", "unit", "rc.local"
const char* label(WriterKind k);      // "udev rule", "TuneD profile", ...

// One write of one attribute by another writer.
struct WriterAssignment {
    std::string file;
    int line = 0;
    std::string attribute;                     // policy key: read_ahead_kb, scheduler, device.timeout, ...
    std::string value;                         // in the policy's terms (read_ahead_kb in KiB); empty: not a fixed value
    std::vector<std::string> kernel_patterns;  // fnmatch, any of them; empty: any device
    std::vector<std::string> exclude_patterns;  // fnmatch, none of them (TuneD's "!sda")
    WriterKind kind = WriterKind::udev_rule;
    std::string context;              // "profile throughput-performance, unit [disk]", "unit tune-disks.service", ...
    bool non_removable_only = false;  // TuneD's disk plugin: disks that are not removable
    std::string why_inexact;          // non-empty: what the writer does cannot be a policy value as it stands
    std::string where() const { return file + ":" + std::to_string(line); }
    // "TuneD profile /etc/tuned/x/tuned.conf:4 (profile x, unit [disk])"
    std::string describe() const;
    bool applies_to(const std::string& device) const;
};

// The writer that writes `attribute` on `device`: the one whose value is
// `current` when there is one (it is the one that wrote last), else the first.
const WriterAssignment* find_writer(const std::vector<WriterAssignment>& writers, const std::string& device,
                                    const std::string& attribute, const std::string& current = {});

}  // namespace blkpolicy::writers
