// SPDX-License-Identifier: MIT
// Device facts and current attribute values, read from sysfs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "policy/facts.hpp"
#include "policy/policy.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::udev {

// A kernel block device name: letters, digits, '.', '_', '-', ':' and '!'
// only; never a path.
bool valid_device_name(std::string_view name);

// Names under <root>/block, sorted. Partitions are never listed there.
std::vector<std::string> list_block_devices(const Sysfs& sysfs);

// Facts as the kernel reports them now; nullopt when the device is gone.
// The basics always, and the groups in `needs` (policy/facts.hpp): a device
// without a diskseq also gets every group its identity needs.
// Properties: the kernel's uevent ones and, with `udev_db` (udev's database
// directory), those udev's rules added.
// With kFactAttributes, the sysfs attributes `attributes` names (the
// policy's attr.NAME and attrs.NAME).
std::optional<policy::DeviceFacts> read_facts(const Sysfs& sysfs, const std::string& name,
                                              const std::string& udev_db = {},
                                              policy::FactNeeds needs = policy::kAllFacts,
                                              const policy::AttributeNames& attributes = {});

// A sysfs attribute as udev matches it: trailing whitespace removed;
// nullopt when it cannot be read (not there).
std::optional<std::string> read_attribute(const Sysfs& sysfs, const std::string& path);

// The device's directory and its parents that are devices (an uevent
// file), the device first: the levels udev's KERNELS, SUBSYSTEMS, DRIVERS
// and ATTRS walk. `syspath` as DeviceFacts has it ("devices/...").
struct DeviceLevel {
    std::string dir;  // relative to the sysfs root
    std::string kernel;
    std::string subsystem;  // empty: no subsystem link
    std::string driver;     // empty: no driver bound
};
std::vector<DeviceLevel> device_levels(const Sysfs& sysfs, const std::string& syspath);

// I/O schedulers the kernel in MODULES_DIR (/lib/modules/RELEASE) can load
// when one is named, found as modprobe finds them: an alias NAME-iosched in
// modules.alias, or a module of that name in modules.dep or
// modules.builtin; nullopt when none of them can be read (the daemon's unit
// hides the modules directory).
std::optional<std::vector<std::string>> loadable_schedulers(const std::string& modules_dir);

// Inputs of the kernel's own defaults (explain):
// sd: the medium rotation rate of VPD page B1h (0 not reported, 1 solid
// state, else rpm); nullopt when the device has no such page.
std::optional<int> rotation_rate(const Sysfs& s, const std::string& name);
// The hardware queue depth (mq/0/nr_tags); 0 for a bio-based queue.
std::int64_t hw_tags(const Sysfs& s, const std::string& name);
// What a bound loop device's backing file lives on: the block device under
// its filesystem and whether that is rotational, or no block device at all
// (tmpfs). known is false when the file cannot be looked at.
struct BackingStore {
    bool known = false;
    std::string what;                // "vda2", "tmpfs", ...
    std::string disk;                // the whole disk under it ("vda"); "" without a block device
    std::optional<bool> rotational;  // nullopt: no block device under it
    std::string write_cache;         // that disk's queue/write_cache; "" when not read
};
BackingStore loop_backing_store(const Sysfs& s, const std::string& backing_file);
// NVMe multipath: a head nvme<S>n<N> (bio-based, under
// devices/virtual/nvme-subsystem) over one hidden path nvme<S>c<C>n<N> per
// controller. The kernel links them neither in slaves/ nor in holders/ (6.1
// to 7.3), so they are paired by name, as the kernel names them.
// The paths of a head, sorted; empty for anything else.
std::vector<std::string> nvme_paths_of(const Sysfs& s, const std::string& head);
// The head a path belongs to, when it is there; nullopt for anything else.
std::optional<std::string> nvme_head_of(const Sysfs& s, const std::string& path);
// The devices below NAME: its slaves/ and, for a multipath head, its paths.
std::vector<std::string> lower_devices(const Sysfs& s, const std::string& name);
// The devices above NAME: its holders/ and, for a multipath path, its head.
std::vector<std::string> upper_devices(const Sysfs& s, const std::string& name);

// A queue attribute of each device below NAME (lower_devices; a partition
// counts as its disk), as read now; the devices whose queue cannot be read are left out.
std::vector<std::pair<std::string, std::string>> lowers_queue(const Sysfs& s, const std::string& name,
                                                              const std::string& attribute);
// Whether each device below NAME is rotational now.
std::vector<std::pair<std::string, bool>> lowers_rotational(const Sysfs& s, const std::string& name);

// One attribute (a policy key, or a read-only input such as
// max_hw_sectors_kb) as the kernel really has it: normalised, and
// wbt_lat_usec as 0 where debugfs says writeback throttling is off.
ReadResult read_value(const Sysfs& s, const std::string& name, const std::string& key);

// Current values of every writable attribute the device has, normalised,
// plus the read-only inputs the planner uses (max_hw_sectors_kb,
// discard_granularity, optimal_io_size) and every iosched tunable of the
// active scheduler.
policy::Values read_values(const Sysfs& sysfs, const std::string& name);
// Only the given keys (policy attribute keys or the read-only inputs above);
// those in `known` (read a moment ago, e.g. DeviceFacts::live_values) are not read again.
policy::Values read_values(const Sysfs& sysfs, const std::string& name, const std::vector<std::string>& keys,
                           const policy::Values& known = {});

}  // namespace blkpolicy::udev
