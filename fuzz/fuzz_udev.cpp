// SPDX-License-Identifier: MIT
// libFuzzer target: any bytes as a udev rules file, through the tokenizer,
// the control-flow reading and the importer. The importer's output must
// always pass the policy loader; a writer's condition is decided on a
// device known by its name alone, and a yes there holds on any device of
// that name (a name-only device leaves everything else undecided).
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
    using namespace blkpolicy::writers;
    for (const auto& w : parse_udev_rules("fuzz.rules", text)) {
        const auto by_name = w.selects(UdevDevice::named("sda"));
        auto known = UdevDevice::named("sda");
        known.properties_known = true;  // no properties: ENV{} reads ""
        // Knowing more may decide what was undecided, never undo a decision.
        const auto more = w.selects(known);
        if (by_name.verdict != Selects::may && more.verdict != by_name.verdict) __builtin_trap();
    }
    return 0;
}
