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

// env.NAME, attr.NAME, attrs.NAME: a family of keys, one per name.
bool match_key_is_named(MatchKey k);
// What a named key's table holds, for errors: "udev properties, e.g. ...".
std::string named_match_example(MatchKey k);
// Why `name` cannot follow the key (a udev property has only letters,
// digits and _; an attribute is a relative path that never leaves the
// device's directory), or empty.
std::string invalid_match_name(MatchKey k, const std::string& name);
// The attributes attr.NAME and attrs.NAME ask discovery to read.
AttributeNames attribute_names(const Policy& policy);

// Every match clause must match and no unless clause; a rule without
// clauses matches every device.
bool rule_matches(const Rule& rule, const DeviceFacts& facts);

// The fact groups (beyond the basics) that matching and planning under
// `policy` read: what its match keys compare, and cache_type when a rule
// sets write_cache.
FactNeeds fact_needs(const Policy& policy);

}  // namespace blkpolicy::policy
