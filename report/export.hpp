// SPDX-License-Identifier: MIT
// `blkpolicy export`: a host's values that differ from the kernel's own
// defaults (explain's side of each attribute), written as a policy keyed
// the way an operator keys one: the stack or the driver, the model, the
// rotational claim; the serial only when asked, or where devices that
// share a key hold different values (then export then plan would write).
// Pure: the CLI (agent/cli/export) reads the devices and prints the text.
#pragma once

#include <string>
#include <vector>

#include "policy/facts.hpp"
#include "report/explain.hpp"

namespace blkpolicy::report {

struct ExportOptions {
    bool by_serial = false;  // every rule keyed by the device's serial too
};

// One device as explain sees it, with every value read.
struct ExportInput {
    DeviceExplanation explained;
    policy::Values values;
};

struct ExportedValue {
    std::string attribute;   // the policy key, e.g. "read_ahead_kb"
    std::string toml_value;  // 1024, "bfq"
    std::string why;         // what the kernel's own default is and how it comes about
};

struct ExportedRule {
    std::string name;
    std::vector<std::pair<std::string, std::string>> match;  // key, TOML value
    std::vector<std::string> devices;                        // the devices it was read on
    std::vector<ExportedValue> set;                          // in write order
    // Values blkpolicy has no kernel default for here: shown, not exported.
    std::vector<std::string> not_compared;
    std::string keyed_note;  // why the rule names a serial or a kernel name, when it does
};

struct PolicyExport {
    std::vector<ExportedRule> rules;
    std::vector<std::string> notes;  // for stderr: devices keyed narrower than asked, values left out
    std::size_t devices_read = 0;
};

PolicyExport export_policy(const std::vector<ExportInput>& devices, const ExportOptions& options);

// The policy file: a header (HEADER, each line a comment), then the rules.
std::string export_toml(const PolicyExport& exported, const std::vector<std::string>& header);

}  // namespace blkpolicy::report
