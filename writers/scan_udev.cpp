// SPDX-License-Identifier: MIT
#include "writers/scan_udev.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "util/files.hpp"
#include "writers/scan.hpp"

namespace blkpolicy::writers {

namespace fs = std::filesystem;
using writers::WriterAssignment;

std::vector<WriterAssignment> scan_udev_rules(const std::vector<std::string>& dirs,
                                              std::vector<std::string>* warnings) {
    std::vector<WriterAssignment> out;
    for (const auto& [name, path] : files_by_name(dirs, ".rules")) {  // earlier dirs win
        auto text = util::read_bounded_file(path, kMaxUdevRulesBytes, "a udev rules file");
        if (!text.ok()) {
            if (warnings)
                warnings->push_back(path + ": " + text.message() + "; its rules are not looked at for conflicts");
            continue;
        }
        auto found = writers::parse_udev_rules(path, *text);
        out.insert(out.end(), found.begin(), found.end());
    }
    return out;
}

}  // namespace blkpolicy::writers
