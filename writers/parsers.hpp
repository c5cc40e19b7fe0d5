// SPDX-License-Identifier: MIT
// The other writers' files read as each tool reads them: sysfsutils,
// tmpfiles.d `w` lines, units and rc.local that echo into /sys/block, and
// TuneD profiles (udev rules: writers/udev_rules). Pure: text in,
// assignments out; writers/scan reads the files from the host and decides
// which of them take effect.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "writers/model.hpp"

namespace blkpolicy::writers {

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

}  // namespace blkpolicy::writers
