// SPDX-License-Identifier: MIT
// The other writers of queue attributes on a host, read from their files:
// udev rules (policy/udev_rules), TuneD profiles, sysfsutils, tmpfiles.d `w`
// lines, and units or rc.local that echo into /sys/block. Pure: text in,
// assignments out; udev/writer_files reads the files and decides which of
// them take effect.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace blkpolicy::policy {

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

// A sysfs path ("/sys/block/sda/queue/scheduler", "block/sd*/queue/nr_requests",
// "/sys/class/block/vdb/bdi/read_ahead_kb") -> device pattern and policy key;
// nullopt for anything that is not a block queue or device attribute.
struct SysfsTarget {
    std::string device;  // a kernel name, or a glob of them
    std::string attribute;
};
std::optional<SysfsTarget> sysfs_target(std::string path);

// sysfsutils: /etc/sysfs.conf and /etc/sysfs.d/*.conf lines "block/sda/queue/x = v"
// ("mode" and "owner" lines are not writes).
std::vector<WriterAssignment> parse_sysfs_conf(const std::string& file, const std::string& text);

// tmpfiles.d: "w /sys/block/sda/queue/read_ahead_kb - - - - 4096" (and w+).
// The paths it writes, in order, for the override rule that the first line
// for a path wins.
std::vector<WriterAssignment> parse_tmpfiles(const std::string& file, const std::string& text);

// A unit file or rc.local: "echo V > /sys/block/X/queue/Y" in any line
// (ExecStart=, a shell -c string, a script body); `tee` into such a path is
// named without a value.
std::vector<WriterAssignment> parse_shell_writes(const std::string& file, const std::string& text, WriterKind kind,
                                                 const std::string& context);

// TuneD: a profile's tuned.conf, parsed.
struct TunedOption {
    std::string key, value;
    int line = 0;
};
struct TunedUnit {
    std::string name;  // the section
    int line = 0;
    std::vector<TunedOption> options;  // in file order, type/devices/enabled/replace/drop included
};
struct TunedProfileFile {
    std::string name, file;
    std::vector<TunedOption> main;
    std::vector<TunedUnit> units;
    std::vector<std::string> errors;  // "file:line: ..."
};
TunedProfileFile parse_tuned_conf(const std::string& name, const std::string& file, const std::string& text);

// The active profiles (space separated in /etc/tuned/active_profile), each
// with the profiles it includes, merged the way TuneD merges them (later
// wins; replace=1 drops what came before; drop= removes options), and the
// disk plugin's elevator/readahead and the sysfs plugin's queue paths turned
// into assignments. `load` finds a profile by name (nullopt: not found).
struct TunedResult {
    std::vector<WriterAssignment> assignments;
    std::vector<std::string> chain;     // profile names in merge order
    std::vector<std::string> warnings;  // a profile not found, a parse error, an include loop
};
TunedResult resolve_tuned(const std::vector<std::string>& active,
                          const std::function<std::optional<TunedProfileFile>(const std::string&)>& load);

// TuneD's readahead option ("4096", "8192 s", ">4096") in KiB; nullopt when
// it is not one of those.
struct TunedReadahead {
    long long kib = 0;
    char condition = 0;  // '>' or '<': written only when it raises / lowers the value
};
std::optional<TunedReadahead> parse_tuned_readahead(const std::string& v);

}  // namespace blkpolicy::policy
