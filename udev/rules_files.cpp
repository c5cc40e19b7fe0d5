// SPDX-License-Identifier: MIT
#include "udev/rules_files.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "util/files.hpp"

namespace blkpolicy::udev {

namespace fs = std::filesystem;
using policy::WriterAssignment;

std::vector<WriterAssignment> scan_udev_rules(const std::vector<std::string>& dirs,
                                              std::vector<std::string>* warnings) {
    std::map<std::string, fs::path> by_name;
    for (const auto& dir : dirs) {
        std::error_code ec;
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
            if (it->path().extension() != ".rules") continue;
            by_name.emplace(it->path().filename().string(), it->path());  // earlier dirs win
        }
    }
    std::vector<WriterAssignment> out;
    for (const auto& [name, path] : by_name) {
        auto text = util::read_bounded_file(path.string(), kMaxUdevRulesBytes, "a udev rules file");
        if (!text.ok()) {
            if (warnings)
                warnings->push_back(path.string() + ": " + text.message() +
                                    "; its rules are not looked at for conflicts");
            continue;
        }
        auto found = policy::parse_udev_rules(path.string(), *text);
        out.insert(out.end(), found.begin(), found.end());
    }
    return out;
}

}  // namespace blkpolicy::udev
