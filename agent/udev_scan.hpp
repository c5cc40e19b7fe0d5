// Reads udev rules files from their directories (the parsing is pure, in
// policy/udev_rules).
#pragma once

#include <string>
#include <vector>

#include "policy/udev_rules.hpp"

namespace blkpolicy::agent {

// Every assignment to a queue/, bdi/read_ahead_kb or device/ attribute in the
// *.rules files of `dirs` (file names deduplicated, earlier dirs win, as udev does).
std::vector<policy::UdevAssignment> scan_udev_rules(const std::vector<std::string>& dirs);

}  // namespace blkpolicy::agent
