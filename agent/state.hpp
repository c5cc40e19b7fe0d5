// SPDX-License-Identifier: MIT
// The state directory (--state-dir, default /run/blkpolicy): match facts
// frozen at first sight, so that a rule matching rotational = true keeps
// matching after it set rotational = 0.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "policy/facts.hpp"
#include "udev/sysfs.hpp"
#include "util/status.hpp"

namespace blkpolicy::agent {

// What makes a device the same device: when any of it changes (a loop device
// re-bound, a disk replaced under the same name) the facts are read afresh.
// The device number and diskseq (with the boot id) where the kernel has
// diskseq; otherwise driver, model, serial, wwid, dm uuid and backing file.
std::string identity_of(const policy::DeviceFacts& facts);

// A value blkpolicy changed on a device instance: what the device had
// before blkpolicy first wrote it, and what blkpolicy last wrote (read
// back). What `restore` and a policy that stops declaring the value put
// back, unless someone else moved it since.
struct WrittenValue {
    std::string original;
    std::string written;
    bool operator==(const WrittenValue&) const = default;
};
using WrittenValues = std::map<std::string, WrittenValue>;  // by policy attribute key

class StateDir {
public:
    explicit StateDir(std::filesystem::path dir);
    const std::filesystem::path& dir() const { return dir_; }

    struct Frozen {
        bool rotational = false;
        bool removable = false;
        // queue/write_cache as the driver set it when the device first
        // appeared (empty in records of earlier releases): what the
        // device's own cache is, where nothing else says (measure).
        std::string write_cache;
    };
    // Frozen facts recorded for this device with the same identity. A corrupt
    // record is treated as absent and explained in `problem`.
    std::optional<Frozen> load(const policy::DeviceFacts& live, std::string* problem = nullptr) const;
    // Records the live facts, with queue/write_cache as it reads now (empty:
    // the device has none).
    util::Status save(const policy::DeviceFacts& live, const std::string& write_cache = {}) const;
    // The recorded write_cache of this device instance; empty when none is.
    std::string first_write_cache(const policy::DeviceFacts& live) const;
    // The device's facts and its written values are forgotten (it went away).
    void forget(const std::string& device) const;

    // Values blkpolicy changed on this device instance (written/DEV.json);
    // empty when none are recorded, or for another instance (a value of a
    // disk that is gone is not put back into its successor). A corrupt
    // record is treated as empty and explained in `problem`.
    WrittenValues load_written(const policy::DeviceFacts& live, std::string* problem = nullptr) const;
    // Replaces the record; an empty map removes it.
    util::Status save_written(const policy::DeviceFacts& live, const WrittenValues& values) const;
    // Devices with a record of written values, whatever their instance.
    std::vector<std::string> devices_written() const;

private:
    std::string facts_path(const std::string& device) const;
    std::string written_path(const std::string& device) const;
    std::filesystem::path dir_;
};

// Overlays frozen facts (when recorded for the same identity) on live ones;
// with `record`, first-seen devices are recorded (with their write_cache,
// read from `sysfs`). Warnings go to `warning`.
policy::DeviceFacts freeze_facts(const StateDir& state, policy::DeviceFacts live, bool record, std::string* warning,
                                 const udev::Sysfs* sysfs = nullptr);

// queue/write_cache as it reads now; empty when the device has none.
std::string read_write_cache(const udev::Sysfs& sysfs, const std::string& device);

// Records live facts as frozen, with `write_cache` as read before anything
// was written; a failure's message is a warning for the operator.
util::Status record_facts(const StateDir& state, const policy::DeviceFacts& live, const std::string& write_cache = {});

}  // namespace blkpolicy::agent
