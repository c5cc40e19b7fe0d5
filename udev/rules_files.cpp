// SPDX-License-Identifier: MIT
#include "udev/rules_files.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "udev/writer_files.hpp"
#include "util/files.hpp"

namespace blkpolicy::udev {

namespace fs = std::filesystem;
using policy::WriterAssignment;

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
        auto found = policy::parse_udev_rules(path, *text);
        out.insert(out.end(), found.begin(), found.end());
    }
    return out;
}

}  // namespace blkpolicy::udev
