// SPDX-License-Identifier: MIT
// The write cache of a SCSI or SATA drive as the drive itself reports it:
// its caching mode page (08h), read with MODE SENSE(10) through SG_IO on the
// disk's node. Writing "temporary write through" to the disk's cache_type
// changes only the kernel's view (sd stops sending flushes and says write
// through in cache_type and queue/write_cache) while the drive keeps its
// cache on; only the drive's own page tells the two apart.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>

namespace blkpolicy::measure {

struct DriveCache {
    bool asked = false;  // a probe was made (false: not a SCSI disk, or not on the real /sys)
    bool read = false;   // the page was read
    bool wce = false;    // WCE: the drive's write cache is on
    std::string error;   // why it was not read
};

// WCE from the bytes a MODE SENSE(10) returned: the 8-byte header, its
// block descriptors, then the caching page; nullopt when the reply holds no
// caching page (short, another page, a page too short to hold WCE).
std::optional<bool> caching_page_wce(std::span<const unsigned char> reply);

// Asks the drive behind NODE (/dev/sdX), read-only; a closed or missing
// node, an error from the drive or a reply without the page is said in
// `error`.
DriveCache ask_drive_cache(const std::string& node);
// The same for the disk NAME under block/: its node /dev/NAME.
DriveCache drive_cache_of_node(const std::string& name);

}  // namespace blkpolicy::measure
