// SPDX-License-Identifier: MIT
// What is known about one block device. Filled in by udev/ from sysfs; read by
// the pure matcher and planner.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/keys.hpp"

namespace blkpolicy::policy {

// nvme_multipath: an NVMe multipath head (nvmeXnY over the hidden paths
// nvmeXcZnY, one per controller), bio-based like dm and md.
enum class Stack { none, dm, md, loop, nvme_multipath };
const char* to_string(Stack s);
std::optional<Stack> stack_from_string(std::string_view s);
std::vector<std::string> stack_names();  // none, dm, md, loop, nvme-multipath

// Facts beyond the basics, in groups read only when something needs them:
// matching a rule reads what its match keys use (fact_needs), a report reads
// what it prints. The basics are always read: name, devnum, diskseq, queue/
// and mq/ presence, rotational, removable and the schedulers.
using FactNeeds = unsigned;
inline constexpr FactNeeds kFactDrivers = 1u << 0;     // syspath and the driver chain
inline constexpr FactNeeds kFactModel = 1u << 1;       // vendor and model (SCSI, NVMe)
inline constexpr FactNeeds kFactSerial = 1u << 2;      // serial (sysfs or VPD page 0x80)
inline constexpr FactNeeds kFactWwid = 1u << 3;        // wwid
inline constexpr FactNeeds kFactCache = 1u << 4;       // cache_type
inline constexpr FactNeeds kFactStack = 1u << 5;       // stack kind, dm name/uuid, md level, loop backing file
inline constexpr FactNeeds kFactTopology = 1u << 6;    // slaves and holders
inline constexpr FactNeeds kFactProperties = 1u << 7;  // uevent properties and udev's database
inline constexpr FactNeeds kFactAttributes = 1u << 8;  // sysfs attributes the policy names (attr.NAME, attrs.NAME)
inline constexpr FactNeeds kAllFacts = (1u << 9) - 1;
// What tells a device instance apart when the kernel gives no diskseq.
inline constexpr FactNeeds kIdentityFacts = kFactDrivers | kFactModel | kFactSerial | kFactWwid | kFactStack;

struct DeviceFacts {
    std::string name;                  // kernel name, e.g. "vda"
    std::string devnum;                // "major:minor"
    std::string diskseq;               // changes whenever the medium or the loop binding changes
    std::string syspath;               // resolved directory, relative to the sysfs root ("devices/...")
    std::string driver;                // first driver found walking up the parents
    std::vector<std::string> drivers;  // every driver on the way up (udev DRIVERS== semantics)
    std::string vendor;                // trimmed of SCSI padding
    std::string model;                 // trimmed of SCSI padding
    std::string serial;
    std::string wwid;
    bool rotational = false;  // as matched: frozen at first sight (see agent/state)
    bool removable = false;
    // A hidden disk (an NVMe multipath path, nvmeXcYnZ): no dev file, no
    // device node, and after boot no uevents; I/O reaches it through its
    // head, whose bdi does the readahead.
    bool hidden = false;
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
    // Sysfs attributes the policy's attr.NAME and attrs.NAME read, trailing
    // whitespace trimmed as udev does: the device's own (absent: not there),
    // and every level's, the device first, that has the attribute.
    std::map<std::string, std::string> own_attributes;
    std::map<std::string, std::vector<std::string>> parent_attributes;
    // The device and its parents, the device first, as udev's KERNELS,
    // SUBSYSTEMS, DRIVERS and ATTRS walk them: read only for a policy's
    // parent tables, each level with the attributes they name (absent: not
    // there).
    struct Level {
        std::string kernel;
        std::string subsystem;
        std::string driver;
        std::map<std::string, std::string> attributes;
    };
    std::vector<Level> levels;
    // True when rotational/removable came from the state directory rather
    // than from this read of sysfs.
    bool facts_frozen = false;
    // Queue attributes read for the basics, normalised as values are
    // ("rotational", "scheduler"): the current values, not read twice.
    std::map<std::string, std::string> live_values;
    // The groups above the basics that were read (FactNeeds bits); a group
    // not read has empty fields, which is not the same as "the device has none".
    FactNeeds read = kAllFacts;
};

// What is known about the host itself, read once when the policy is loaded
// (at start and at each reload) and compared by the host.NAME match keys.
// An empty field is not known, and then matches only an empty pattern.
struct HostFacts {
    std::string kernel;          // release, as uname -r ("6.12.74+deb13-amd64")
    std::string virtualization;  // as systemd-detect-virt --vm names it ("kvm", "amazon", "none")
    std::string sys_vendor;      // DMI (class/dmi/id): the maker, "Amazon EC2", "QEMU"
    std::string product_name;    // DMI: the machine type, on most clouds the instance type ("i3.xlarge")
    std::string hostname;
    std::string source;  // where they were read: "this host", or the fake tree's root
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
inline std::string value_of(const Values& values, Key key, const std::string& fallback = {}) {
    return value_of(values, std::string(key_text(key)), fallback);
}
// The value names of `keys`, for a read of only those values.
inline std::vector<std::string> key_texts(std::initializer_list<Key> keys) {
    std::vector<std::string> out;
    for (const Key k : keys) out.emplace_back(key_text(k));
    return out;
}

}  // namespace blkpolicy::policy
