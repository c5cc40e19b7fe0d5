// SPDX-License-Identifier: MIT
// Does a rule apply to a device? Pure.
#pragma once

#include <string>
#include <vector>

#include "policy/facts.hpp"
#include "policy/policy.hpp"

namespace blkpolicy::policy {

// The fact values a match key is compared with (several for `driver`: every
// driver on the parent chain). Empty when the device does not have the fact.
std::vector<std::string> fact_values(MatchKey key, const DeviceFacts& facts);

// "kernel, driver, ..., env.<udev property>": every match key, for errors.
std::string known_match_keys_text();

// A glob (fnmatch: *, ?, [...]) against one value. A missing fact (empty
// value) matches only the empty pattern.
bool glob_match(const std::string& pattern, const std::string& value);

bool clause_matches(const MatchClause& clause, const DeviceFacts& facts);

// Every clause must match; a rule without clauses matches every device.
bool rule_matches(const Rule& rule, const DeviceFacts& facts);

// The fact groups (beyond the basics) that matching and planning under
// `policy` read: what its match keys compare, and cache_type when a rule
// sets write_cache.
FactNeeds fact_needs(const Policy& policy);

}  // namespace blkpolicy::policy
