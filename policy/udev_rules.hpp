// Which udev rules write block queue attributes: to name the rule behind a
// conflict. A light reading of rule syntax (comments, continuations,
// KERNEL== and ATTR{...}= assignments); import-udev needs a full parser.
// Parsing is pure; scan_udev_rules (agent/udev_scan) reads the files.
#pragma once

#include <string>
#include <vector>

namespace blkpolicy::policy {

struct UdevAssignment {
    std::string file;
    int line = 0;
    std::string attribute;                    // policy key: read_ahead_kb, device.timeout, ...
    std::string value;
    std::vector<std::string> kernel_patterns;  // from KERNEL=="a|b"; empty: any device
    std::string where() const { return file + ":" + std::to_string(line); }
};

// Every assignment to a queue/, bdi/read_ahead_kb or device/ attribute in one
// rules file's text.
std::vector<UdevAssignment> parse_udev_rules(const std::string& file, const std::string& text);

// The first assignment that writes `attribute` on a device named `device`.
const UdevAssignment* find_udev_writer(const std::vector<UdevAssignment>& rules, const std::string& device,
                                       const std::string& attribute);

}  // namespace blkpolicy::policy
