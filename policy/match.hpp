// SPDX-License-Identifier: MIT
// Does a rule apply to a device? Pure.
#pragma once

#include <string>
#include <vector>

#include "policy/facts.hpp"
#include "policy/policy.hpp"

namespace blkpolicy::policy {

// "kernel, driver, ..., env.<udev property>": every match key, for errors.
std::string known_match_keys_text();

// Every clause must match; a rule without clauses matches every device.
bool rule_matches(const Rule& rule, const DeviceFacts& facts);

// The fact groups (beyond the basics) that matching and planning under
// `policy` read: what its match keys compare, and cache_type when a rule
// sets write_cache.
FactNeeds fact_needs(const Policy& policy);

}  // namespace blkpolicy::policy
