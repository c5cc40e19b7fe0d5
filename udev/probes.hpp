// SPDX-License-Identifier: MIT
// Kernel state beside the queue attributes, read for explain and audit:
// debugfs's wbt state, the hardware queues, the CPU cache topology.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "udev/sysfs.hpp"

namespace blkpolicy::udev {

// debugfs block/DEV/rqos/wbt/enabled (1 on-default, 2 on-manual, 3
// off-default, 4 off-manual); nullopt when debugfs is not mounted.
std::optional<int> read_wbt_state(const Sysfs& sysfs, const std::string& device);
// Hardware queues: the entries of block/DEV/mq (0 for a bio-based queue).
int count_hw_queues(const Sysfs& sysfs, const std::string& device);
// The devices directly above and below (holders/ and slaves/).
std::vector<std::string> stacked_neighbours(const Sysfs& sysfs, const std::string& device);
// Whether the device has a medium (size > 0): not an unbound loop device,
// not an empty removable drive. True when the size cannot be read.
bool has_medium(const Sysfs& sysfs, const std::string& device);
// Whether every CPU shares one last-level cache (rq_affinity 2 buys nothing
// then); nullopt when the topology is not shown.
std::optional<bool> single_last_level_cache(const Sysfs& sysfs);

// The kernel's tick rate (CONFIG_HZ) from its build configuration
// (/boot/config-RELEASE, which Debian, Ubuntu and Fedora install beside the
// kernel); nullopt when the file or the line is not there.
std::optional<int> kernel_hz(const std::string& config_path);

}  // namespace blkpolicy::udev
