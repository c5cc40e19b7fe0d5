// SPDX-License-Identifier: MIT
#include "agent/cli/import_udev.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/policy_files.hpp"
#include "policy/udev_import.hpp"
#include "udev/rules_files.hpp"
#include "util/files.hpp"

namespace blkpolicy::agent {

namespace fs = std::filesystem;

int run_import_udev(const Options& o, std::ostream& out, std::ostream& err) {
    if (o.devices.empty()) {
        err << "blkpolicy: import-udev needs rules files or directories, e.g. blkpolicy import-udev "
               "/etc/udev/rules.d\nTry 'blkpolicy --help'.\n";
        return kExitUsage;
    }
    std::vector<std::string> files;
    for (const auto& p : o.devices) {
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            std::vector<std::string> in_dir;
            for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
                if (it->path().extension() == ".rules") in_dir.push_back(it->path().string());
            std::sort(in_dir.begin(), in_dir.end());
            files.insert(files.end(), in_dir.begin(), in_dir.end());
        } else if (fs::exists(p, ec)) {
            files.push_back(p);
        } else {
            err << "blkpolicy: " << p << ": no such file or directory\n";
            return kExitUsage;
        }
    }
    std::vector<policy::UdevRule> rules;
    for (const auto& f : files) {
        auto text = util::read_bounded_file(f, udev::kMaxUdevRulesBytes, "a udev rules file");
        if (!text.ok()) {
            err << "blkpolicy: " << f << ": " << text.message() << "\n";
            return kExitRuntime;
        }
        auto parsed = policy::parse_udev_rules_text(f, *text);
        rules.insert(rules.end(), parsed.begin(), parsed.end());
    }
    auto result = policy::import_udev_rules(rules, files);
    for (const auto& d : result.diagnostics) err << d << '\n';
    if (result.tuning_rules == 0) {
        err << "blkpolicy: no tuning rules (queue/, bdi/read_ahead_kb or device/ assignments) in " << files.size()
            << " file(s): nothing to convert\n";
        return kExitOk;
    }
    out << result.toml;
    err << "blkpolicy: " << result.converted << " of " << result.tuning_rules << " tuning rule(s) converted";
    if (result.left_out) err << ", " << result.left_out << " rule(s) left out";
    if (result.attributes_left_out)
        err << ", " << result.attributes_left_out << " assignment(s) left out of converted rules";
    err << (result.left_out || result.attributes_left_out ? " (see above)" : "") << '\n';
    return result.left_out || result.attributes_left_out ? kExitPartial : kExitOk;
}

}  // namespace blkpolicy::agent
