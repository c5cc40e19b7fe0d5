#include "policy/match.hpp"

#include <fnmatch.h>

namespace blkpolicy::policy {

std::vector<std::string> fact_values(MatchKey key, const DeviceFacts& f) {
    switch (key) {
        case MatchKey::kernel: return {f.name};
        case MatchKey::driver: return f.drivers;
        case MatchKey::model: return {f.model};
        case MatchKey::vendor: return {f.vendor};
        case MatchKey::serial: return {f.serial};
        case MatchKey::wwid: return {f.wwid};
        case MatchKey::stack: return {to_string(f.stack)};
        case MatchKey::dm_name: return {f.dm_name};
        case MatchKey::dm_uuid: return {f.dm_uuid};
        case MatchKey::md_level: return {f.md_level};
        case MatchKey::rotational: return {f.rotational ? "true" : "false"};
        case MatchKey::removable: return {f.removable ? "true" : "false"};
        case MatchKey::env: return {};  // per property: see clause_matches
    }
    return {};
}

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
    for (const auto& pattern : clause.patterns) {
        if (match_key_is_flag(clause.key) || clause.key == MatchKey::stack) {
            if (!values.empty() && values.front() == pattern) return true;
            continue;
        }
        for (const auto& v : values)
            if (glob_match(pattern, v)) return true;
    }
    return false;
}

bool rule_matches(const Rule& rule, const DeviceFacts& facts) {
    for (const auto& c : rule.match)
        if (!clause_matches(c, facts)) return false;
    return true;
}

FactNeeds fact_needs(MatchKey key) {
    switch (key) {
        case MatchKey::kernel:
        case MatchKey::rotational:
        case MatchKey::removable: return 0;
        case MatchKey::driver: return kFactDrivers;
        case MatchKey::model:
        case MatchKey::vendor: return kFactModel;
        case MatchKey::serial: return kFactSerial;
        case MatchKey::wwid: return kFactWwid;
        case MatchKey::stack:
        case MatchKey::dm_name:
        case MatchKey::dm_uuid:
        case MatchKey::md_level: return kFactStack;
        case MatchKey::env: return kFactProperties;
    }
    return kAllFacts;
}

FactNeeds fact_needs(const Policy& policy) {
    FactNeeds needs = 0;
    for (const auto& rule : policy.rules) {
        for (const auto& c : rule.match) needs |= fact_needs(c.key);
        for (const auto& s : rule.set)
            if (s.attribute == "write_cache") needs |= kFactCache;
    }
    return needs;
}

}  // namespace blkpolicy::policy
