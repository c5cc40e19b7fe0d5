// SPDX-License-Identifier: MIT
// Converting another writer's assignments (TuneD, sysfsutils, tmpfiles.d)
// into policy TOML, with the udev import's promise: each one exact, or left out
// with the reason; a converted rule never matches more devices than the
// writer wrote to. Pure.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "writers/model.hpp"
#include "writers/udev_import.hpp"

namespace blkpolicy::writers {

// Who a device is now, for a rule that names it by kernel name.
struct DeviceIdentity {
    std::string vendor, model, serial, wwid;
};
using IdentityLookup = std::function<std::optional<DeviceIdentity>(const std::string& kernel_name)>;

// `writers` in the order the writer applies them (a later one wins, as a
// later policy rule does); `sources` name the files for the header.
ImportResult import_writers(const std::vector<WriterAssignment>& writers, const std::vector<std::string>& sources,
                            const IdentityLookup& identity = {});

}  // namespace blkpolicy::writers
