// SPDX-License-Identifier: MIT
// Converting udev tuning rules into policy TOML. Pure: rules in, text and
// diagnostics out. Each tuning line becomes the condition under which udevd
// applies it (writers/udev_flow: its own tests and the file's GOTOs), the
// tests that restate blkpolicy's scope dropped (add and change, block
// devices, whole disks), each remaining path a policy rule. A converted rule
// never matches more devices than the original: a condition that cannot be
// expressed leaves the rule out.
#pragma once

#include <string>
#include <vector>

#include "policy/toml_text.hpp"
#include "writers/udev_rules.hpp"

namespace blkpolicy::writers {

struct ImportResult {
    std::string toml;                      // a policy that passes `blkpolicy check`
    std::vector<std::string> diagnostics;  // "file:line: ..." for stderr
    int tuning_rules = 0;                  // rules that assign queue/, bdi/read_ahead_kb or device/ attributes
    int converted = 0;                     // of those, converted into policy rules
    int left_out = 0;                      // of those, left out whole
    int attributes_left_out = 0;           // single assignments left out of rules that were converted
    int out_of_scope = 0;                  // rules that write attributes of devices that are not block devices
};

// `rules` in reading order (all files); `sources` names them for the header.
ImportResult import_udev_rules(const std::vector<UdevRule>& rules, const std::vector<std::string>& sources);

// Adds to `out.diagnostics` anything `blkpolicy check` would refuse in
// `out.toml`: an import's output must always pass (a bug here otherwise).
void check_import_output(ImportResult& out);

// A writer's value of policy key `key` as a TOML value, validated as check
// validates it; returns why it cannot be one, or empty.
std::string convert_policy_value(const std::string& key, const std::string& raw, std::string& toml_value);

}  // namespace blkpolicy::writers
