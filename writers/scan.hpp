// SPDX-License-Identifier: MIT
// Finds the host's other writers of queue attributes in their files, and
// reads them the way each of them does (the parsing is pure, in
// writers/parsers). Nothing here runs them.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "writers/parsers.hpp"

namespace blkpolicy::writers {

struct WriterSources {
    std::vector<std::string> udev_rules_dirs;
    // The other writers' files are read under ROOT (ROOT/etc/tuned,
    // ROOT/etc/sysfs.conf, ROOT/usr/lib/tmpfiles.d, ...): "/" on a host, a
    // mounted image or a test tree otherwise.
    std::string root = "/";
};

// Every writer that takes effect, in the order each one decides: udev rules,
// then TuneD's active profiles (when tuned.service is enabled), sysfsutils
// (the file read last wins, so its lines come first), tmpfiles.d (the first
// line for a path wins), enabled units that echo into /sys/block, and an
// executable /etc/rc.local. Files that cannot be read are named in
// `warnings` and skipped.
std::vector<writers::WriterAssignment> scan_writers(const WriterSources& src,
                                                    std::vector<std::string>* warnings = nullptr);

// The parts, for `blkpolicy import` and the tests.
std::vector<writers::WriterAssignment> scan_tuned(const std::string& root, std::vector<std::string>* warnings,
                                                  bool only_when_enabled = true);
std::vector<writers::WriterAssignment> scan_sysfsutils(const std::string& root, std::vector<std::string>* warnings);
std::vector<writers::WriterAssignment> scan_tmpfiles(const std::string& root, std::vector<std::string>* warnings);
std::vector<writers::WriterAssignment> scan_units(const std::string& root, std::vector<std::string>* warnings);

// A TuneD profile by name, from ROOT/etc/tuned and ROOT/usr/lib/tuned (both
// layouts: NAME/tuned.conf and profiles/NAME/tuned.conf; /etc wins).
std::optional<writers::TunedProfileFile> load_tuned_profile(const std::string& root, const std::string& name);

// The files named *SUFFIX in `dirs`, one per name (the earliest directory
// wins, as systemd and udev decide), in name order: name -> path.
std::map<std::string, std::string> files_by_name(const std::vector<std::string>& dirs, const std::string& suffix);

// The largest file of another writer that blkpolicy reads.
inline constexpr std::size_t kMaxWriterFileBytes = 1 << 20;

}  // namespace blkpolicy::writers
