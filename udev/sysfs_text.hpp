// SPDX-License-Identifier: MIT
// The text the kernel shows in sysfs queue attributes, taken apart where it
// is more than a trimmed value: the scheduler line. Pure (no I/O); the layer
// that reads sysfs owns it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "policy/attributes.hpp"

namespace blkpolicy::udev {

// "none [mq-deadline] kyber bfq" -> the offered names and the active one.
struct SchedulerLine {
    std::vector<std::string> offered;
    std::string active;  // empty when no name is bracketed
};
SchedulerLine parse_scheduler_line(std::string_view line);

// The value of an attribute as it reads back, in the form the policy compares:
// the bracketed scheduler name, what the attribute's unit reads where it
// reads otherwise (md's "1000 (system)": "system"), trimmed text otherwise.
// SPEC: the attribute's row (nullptr: a value no row writes).
std::string normalise_readback(const policy::AttributeSpec* spec, std::string_view raw);
// The same by the attribute's policy key (its row looked up).
std::string normalise_readback(std::string_view attribute, std::string_view raw);

}  // namespace blkpolicy::udev
