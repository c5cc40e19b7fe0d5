// SPDX-License-Identifier: MIT
#include "policy/policy.hpp"

#include "policy/facts.hpp"
#include "util/names.hpp"

namespace blkpolicy::policy {

std::string SourcePos::str() const {
    if (line == 0) return file;
    std::string s = file + ":" + std::to_string(line);
    if (column) s += ":" + std::to_string(column);
    return s;
}

std::string SourcePos::file_line() const {
    if (line == 0) return file;
    return file + ":" + std::to_string(line);
}

std::string PolicyError::str() const { return pos.str() + ": " + message; }

namespace {
constexpr util::Named<Mode> kModes[] = {{Mode::enforce, "enforce"}, {Mode::observe, "observe"}};
static_assert(util::in_enum_order(kModes));

constexpr util::Named<Stack> kStacks[] = {{Stack::none, "none"},
                                          {Stack::dm, "dm"},
                                          {Stack::md, "md"},
                                          {Stack::loop, "loop"},
                                          {Stack::nvme_multipath, "nvme-multipath"}};
static_assert(util::in_enum_order(kStacks));
}  // namespace

const char* to_string(Mode m) { return util::name_of(kModes, m); }
std::optional<Mode> mode_from_string(std::string_view s) { return util::value_named(kModes, s); }

const char* to_string(Stack s) { return util::name_of(kStacks, s); }
std::optional<Stack> stack_from_string(std::string_view s) { return util::value_named(kStacks, s); }
std::vector<std::string> stack_names() { return util::names_of(kStacks); }

}  // namespace blkpolicy::policy
