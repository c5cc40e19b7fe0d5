// SPDX-License-Identifier: MIT
#include "writers/model.hpp"

#include <fnmatch.h>

#include <algorithm>

#include "policy/values.hpp"
#include "util/names.hpp"

namespace blkpolicy::writers {

namespace {
// Each kind's name (journal fields, JSON) and how a sentence calls it.
struct KindRow {
    WriterKind value;
    const char* name;
    const char* label;
};
constexpr KindRow kKinds[] = {
    {WriterKind::udev_rule, "udev", "udev rule"},
    {WriterKind::tuned, "tuned", "TuneD profile"},
    {WriterKind::sysfsutils, "sysfsutils", "sysfsutils"},
    {WriterKind::tmpfiles, "tmpfiles", "tmpfiles.d"},
    {WriterKind::unit, "unit", "unit"},
    {WriterKind::rc_local, "rc.local", "rc.local"},
};
static_assert(util::in_enum_order(kKinds));
}  // namespace

const char* to_string(WriterKind k) { return util::name_of(kKinds, k); }

const char* label(WriterKind k) {
    const auto i = static_cast<std::size_t>(k);
    return i < std::size(kKinds) ? kKinds[i].label : "?";
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
