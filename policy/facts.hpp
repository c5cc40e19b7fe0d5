// What is known about one block device. Filled in by udev/ from sysfs; read by
// the pure matcher and planner.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace blkpolicy::policy {

enum class Stack { none, dm, md, loop };
const char* to_string(Stack s);

struct DeviceFacts {
    std::string name;     // kernel name, e.g. "vda"
    std::string devnum;   // "major:minor"
    std::string diskseq;  // changes whenever the medium or the loop binding changes
    std::string syspath;  // resolved directory, relative to the sysfs root ("devices/...")
    std::string driver;                // first driver found walking up the parents
    std::vector<std::string> drivers;  // every driver on the way up (udev DRIVERS== semantics)
    std::string vendor;   // trimmed of SCSI padding
    std::string model;    // trimmed of SCSI padding
    std::string serial;
    std::string wwid;
    bool rotational = false;  // as matched: frozen at first sight (see agent/state)
    bool removable = false;
    bool has_queue = false;      // queue/ exists: something to tune at all
    bool request_based = false;  // mq/ exists: scheduler, nr_requests, wbt, rq_affinity
    Stack stack = Stack::none;
    std::string dm_name;
    std::string dm_uuid;
    std::string md_level;
    std::string loop_backing_file;
    std::vector<std::string> slaves;
    std::vector<std::string> holders;
    std::vector<std::string> schedulers;  // offered
    std::string scheduler;                // active
    // The device's own cache mode (SCSI scsi_disk/*/cache_type, virtio
    // cache_type): "write back", "write through", ... or empty when unknown.
    std::string cache_type;
    // udev properties (E: lines of udev's database); empty without udevd.
    std::map<std::string, std::string> properties;
    // True when rotational/removable came from the state directory rather
    // than from this read of sysfs.
    bool facts_frozen = false;
};

// Current attribute values of one device, keyed by policy attribute key
// ("read_ahead_kb", "iosched.fifo_batch", "device.timeout"), as read back and
// normalised. A key that is absent means the device has no such attribute.
// Also carries read-only inputs the planner needs: "max_hw_sectors_kb",
// "discard_granularity".
using Values = std::map<std::string, std::string>;

// The value read for `key`, or `fallback` when the device has no such attribute.
inline std::string value_of(const Values& values, const std::string& key, const std::string& fallback = {}) {
    auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
}

}  // namespace blkpolicy::policy
