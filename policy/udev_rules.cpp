#include "policy/udev_rules.hpp"

#include <algorithm>
#include <fnmatch.h>
#include <regex>
#include <sstream>

namespace blkpolicy::policy {

namespace {

std::vector<std::string> split_alternatives(const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
        if (c == '|') {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

std::string policy_key(const std::string& attr_path) {
    if (attr_path.rfind("queue/", 0) == 0) return attr_path.substr(6);
    if (attr_path == "bdi/read_ahead_kb") return "read_ahead_kb";
    if (attr_path.rfind("device/", 0) == 0) return "device." + attr_path.substr(7);
    return {};
}

}  // namespace

std::vector<UdevAssignment> parse_udev_rules(const std::string& file, const std::string& text) {
    std::vector<UdevAssignment> out;
    static const std::regex kernel_re(R"re(KERNEL=="([^"]*)")re");
    static const std::regex attr_re(R"re(ATTR\{([^}]+)\}\s*:?=\s*"([^"]*)")re");
    std::istringstream in(text);
    std::string physical;
    int line_no = 0;
    while (std::getline(in, physical)) {
        ++line_no;
        const int first_line = line_no;
        std::string logical = physical;
        while (!logical.empty() && logical.back() == '\\' && std::getline(in, physical)) {
            logical.pop_back();
            logical += physical;
            ++line_no;
        }
        auto start = logical.find_first_not_of(" \t");
        if (start == std::string::npos || logical[start] == '#') continue;

        std::vector<std::string> kernels;
        std::smatch m;
        if (std::regex_search(logical, m, kernel_re)) kernels = split_alternatives(m[1]);
        for (auto it = std::sregex_iterator(logical.begin(), logical.end(), attr_re); it != std::sregex_iterator();
             ++it) {
            auto key = policy_key((*it)[1]);
            if (key.empty()) continue;
            out.push_back({file, first_line, key, (*it)[2], kernels});
        }
    }
    return out;
}

const UdevAssignment* find_udev_writer(const std::vector<UdevAssignment>& rules, const std::string& device,
                                       const std::string& attribute) {
    for (const auto& r : rules) {
        if (r.attribute != attribute) continue;
        if (r.kernel_patterns.empty()) return &r;
        for (const auto& p : r.kernel_patterns)
            if (::fnmatch(p.c_str(), device.c_str(), 0) == 0) return &r;
    }
    return nullptr;
}

}  // namespace blkpolicy::policy
