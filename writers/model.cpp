// SPDX-License-Identifier: MIT
#include "writers/model.hpp"

#include <fnmatch.h>

#include <algorithm>

#include "policy/values.hpp"

namespace blkpolicy::writers {

const char* to_string(WriterKind k) {
    switch (k) {
        case WriterKind::udev_rule:
            return "udev";
        case WriterKind::tuned:
            return "tuned";
        case WriterKind::sysfsutils:
            return "sysfsutils";
        case WriterKind::tmpfiles:
            return "tmpfiles";
        case WriterKind::unit:
            return "unit";
        case WriterKind::rc_local:
            return "rc.local";
    }
    return "?";
}

const char* label(WriterKind k) {
    switch (k) {
        case WriterKind::udev_rule:
            return "udev rule";
        case WriterKind::tuned:
            return "TuneD profile";
        case WriterKind::sysfsutils:
            return "sysfsutils";
        case WriterKind::tmpfiles:
            return "tmpfiles.d";
        case WriterKind::unit:
            return "unit";
        case WriterKind::rc_local:
            return "rc.local";
    }
    return "?";
}

std::string WriterAssignment::describe() const {
    std::string s = std::string(label(kind)) + " " + where();
    if (!context.empty()) s += " (" + context + ")";
    return s;
}

bool WriterAssignment::applies_to(const std::string& device) const {
    auto any = [&](const std::vector<std::string>& patterns) {
        return std::any_of(patterns.begin(), patterns.end(),
                           [&](const std::string& p) { return ::fnmatch(p.c_str(), device.c_str(), 0) == 0; });
    };
    if (!kernel_patterns.empty() && !any(kernel_patterns)) return false;
    return !any(exclude_patterns);
}

const WriterAssignment* find_writer(const std::vector<WriterAssignment>& writers, const std::string& device,
                                    const std::string& attribute, const std::string& current) {
    const WriterAssignment* first = nullptr;
    for (const auto& w : writers) {
        if (w.attribute != attribute || !w.applies_to(device)) continue;
        if (!current.empty() && !w.value.empty() && policy::trim(w.value) == policy::trim(current)) return &w;
        if (!first) first = &w;
    }
    return first;
}

}  // namespace blkpolicy::writers
