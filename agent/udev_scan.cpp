#include "agent/udev_scan.hpp"

#include "agent/policy_files.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace blkpolicy::agent {

namespace fs = std::filesystem;
using policy::UdevAssignment;

std::vector<UdevAssignment> scan_udev_rules(const std::vector<std::string>& dirs, std::vector<std::string>* warnings) {
    std::map<std::string, fs::path> by_name;
    for (const auto& dir : dirs) {
        std::error_code ec;
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
            if (it->path().extension() != ".rules") continue;
            by_name.emplace(it->path().filename().string(), it->path());  // earlier dirs win
        }
    }
    std::vector<UdevAssignment> out;
    for (const auto& [name, path] : by_name) {
        std::string text;
        if (auto err = read_bounded_file(path.string(), kMaxUdevRulesBytes, "a udev rules file", text); !err.empty()) {
            if (warnings) warnings->push_back(path.string() + ": " + err + "; its rules are not looked at for conflicts");
            continue;
        }
        auto found = policy::parse_udev_rules(path.string(), text);
        out.insert(out.end(), found.begin(), found.end());
    }
    return out;
}

}  // namespace blkpolicy::agent
