// SPDX-License-Identifier: MIT
// Reads the host's udev rules files from their directories (the parsing is
// pure, in writers/udev_rules).
#pragma once

#include <string>
#include <vector>

#include "writers/udev_rules.hpp"

namespace blkpolicy::writers {

// Every assignment to a queue/, bdi/read_ahead_kb or device/ attribute in the
// *.rules files of `dirs` (file names deduplicated, earlier dirs win, as udev does).
// A file that cannot be read (over kMaxUdevRulesBytes, not a regular file)
// is skipped with a line in `warnings`.
std::vector<writers::WriterAssignment> scan_udev_rules(const std::vector<std::string>& dirs,
                                                       std::vector<std::string>* warnings = nullptr);

// The largest udev rules file blkpolicy reads (the biggest shipped with
// systemd is some tens of KiB).
inline constexpr std::size_t kMaxUdevRulesBytes = 1 << 20;

}  // namespace blkpolicy::writers
