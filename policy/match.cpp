// SPDX-License-Identifier: MIT
#include "policy/match.hpp"

#include <fnmatch.h>

#include "policy/attributes.hpp"
#include "util/names.hpp"

namespace blkpolicy::policy {

namespace {

// How a key's patterns are compared with the device's values.
enum class Compare {
    glob,   // fnmatch patterns against each value
    flag,   // true or false
    exact,  // one of a fixed set of words (stack)
    env,    // env.NAME: a glob against one udev property
};

using Values = std::vector<std::string>;

// One row per match key: its name in the policy, how it compares, the fact
// groups discovery must read for it, and the device's values for it.
struct MatchKeyRow {
    MatchKey value;
    const char* name;
    Compare compare;
    FactNeeds needs;
    Values (*read)(const DeviceFacts&);
};

constexpr MatchKeyRow kMatchKeys[] = {
    {MatchKey::kernel, "kernel", Compare::glob, 0, [](const DeviceFacts& f) { return Values{f.name}; }},
    {MatchKey::driver, "driver", Compare::glob, kFactDrivers, [](const DeviceFacts& f) { return f.drivers; }},
    {MatchKey::model, "model", Compare::glob, kFactModel, [](const DeviceFacts& f) { return Values{f.model}; }},
    {MatchKey::vendor, "vendor", Compare::glob, kFactModel, [](const DeviceFacts& f) { return Values{f.vendor}; }},
    {MatchKey::serial, "serial", Compare::glob, kFactSerial, [](const DeviceFacts& f) { return Values{f.serial}; }},
    {MatchKey::wwid, "wwid", Compare::glob, kFactWwid, [](const DeviceFacts& f) { return Values{f.wwid}; }},
    {MatchKey::stack, "stack", Compare::exact, kFactStack,
     [](const DeviceFacts& f) { return Values{to_string(f.stack)}; }},
    {MatchKey::dm_name, "dm_name", Compare::glob, kFactStack, [](const DeviceFacts& f) { return Values{f.dm_name}; }},
    {MatchKey::dm_uuid, "dm_uuid", Compare::glob, kFactStack, [](const DeviceFacts& f) { return Values{f.dm_uuid}; }},
    {MatchKey::md_level, "md_level", Compare::glob, kFactStack,
     [](const DeviceFacts& f) { return Values{f.md_level}; }},
    {MatchKey::rotational, "rotational", Compare::flag, 0,
     [](const DeviceFacts& f) { return Values{f.rotational ? "true" : "false"}; }},
    {MatchKey::removable, "removable", Compare::flag, 0,
     [](const DeviceFacts& f) { return Values{f.removable ? "true" : "false"}; }},
    {MatchKey::env, "env", Compare::env, kFactProperties, [](const DeviceFacts&) { return Values{}; }},
};
static_assert(util::in_enum_order(kMatchKeys));

const MatchKeyRow& row_of(MatchKey k) { return kMatchKeys[static_cast<std::size_t>(k)]; }

}  // namespace

const char* to_string(MatchKey k) { return util::name_of(kMatchKeys, k); }
std::optional<MatchKey> match_key_from_string(std::string_view s) { return util::value_named(kMatchKeys, s); }
std::vector<std::string> match_key_names() { return util::names_of(kMatchKeys); }
bool match_key_is_flag(MatchKey k) { return row_of(k).compare == Compare::flag; }

std::string known_match_keys_text() {
    std::string out;
    for (const auto& row : kMatchKeys)
        out +=
            (out.empty() ? "" : ", ") + std::string(row.name) + (row.compare == Compare::env ? ".<udev property>" : "");
    return out;
}

namespace {

// The fact values a match key is compared with (several for `driver`: every
// driver on the parent chain). Empty when the device does not have the fact.
std::vector<std::string> fact_values(MatchKey key, const DeviceFacts& f) { return row_of(key).read(f); }

// A glob (fnmatch: *, ?, [...]) against one value. A missing fact (empty
// value) matches only the empty pattern.
bool glob_match(const std::string& pattern, const std::string& value) {
    if (value.empty()) return pattern.empty();
    return ::fnmatch(pattern.c_str(), value.c_str(), 0) == 0;
}

bool clause_matches(const MatchClause& clause, const DeviceFacts& facts) {
    std::vector<std::string> values = fact_values(clause.key, facts);
    if (clause.key == MatchKey::env) {
        auto it = facts.properties.find(clause.env_name);
        values = {it == facts.properties.end() ? std::string() : it->second};
    }
    const auto compare = row_of(clause.key).compare;
    for (const auto& pattern : clause.patterns) {
        if (compare == Compare::flag || compare == Compare::exact) {
            if (!values.empty() && values.front() == pattern) return true;
            continue;
        }
        for (const auto& v : values)
            if (glob_match(pattern, v)) return true;
    }
    return false;
}

}  // namespace

bool rule_matches(const Rule& rule, const DeviceFacts& facts) {
    for (const auto& c : rule.match)
        if (!clause_matches(c, facts)) return false;
    return true;
}

FactNeeds fact_needs(MatchKey key) { return row_of(key).needs; }

FactNeeds fact_needs(const Policy& policy) {
    FactNeeds needs = 0;
    for (const auto& rule : policy.rules) {
        for (const auto& c : rule.match) needs |= fact_needs(c.key);
        for (const auto& s : rule.set) needs |= fixed_attribute(s.id).fact_needs;  // what its device check reads
    }
    return needs;
}

}  // namespace blkpolicy::policy
