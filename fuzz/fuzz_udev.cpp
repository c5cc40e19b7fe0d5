// SPDX-License-Identifier: MIT
// libFuzzer target: any bytes as a udev rules file, through the tokenizer and
// the importer. The importer's output must always pass the policy loader.
#include <cstddef>
#include <cstdint>
#include <string>

#include "policy/loader.hpp"
#include "writers/udev_import.hpp"
#include "writers/udev_rules.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto rules = blkpolicy::writers::parse_udev_rules_text("fuzz.rules", text);
    auto result = blkpolicy::writers::import_udev_rules(rules, {"fuzz.rules"});
    for (const auto& d : result.diagnostics)
        if (d.rfind("internal error", 0) == 0) __builtin_trap();  // the converter wrote an invalid policy
    (void)blkpolicy::writers::parse_udev_rules("fuzz.rules", text);
    return 0;
}
