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

// host.NAME: the facts it can name ("kernel", "virtualization",
// "sys_vendor", "product_name", "hostname") and one's value.
std::vector<std::string> host_fact_names();
std::string host_fact(const HostFacts& host, const std::string& name);
// Why a host.NAME pattern cannot be used, or empty. host.kernel takes
// comparisons (">= 6.17", ">= 6.12.58, < 7.0": comma means and) beside
// globs ("6.12.*"); a comparison looks at as many numbers as it gives.
std::string invalid_host_pattern(const std::string& name, const std::string& pattern);
bool host_pattern_matches(const std::string& name, const std::string& pattern, const std::string& value);
bool host_clause_matches(const MatchClause& clause, const HostFacts& host);
// Decides every rule's host.* clauses on `host` (Rule::host_ok and
// host_why) and keeps the facts in the policy, for reports. Called when the
// policy is loaded: host facts do not change while it runs.
void bind_host(Policy& policy, HostFacts host);

// Every match clause must match and no unless clause; a rule without
// clauses matches every device. host.* clauses are as bind_host decided.
bool rule_matches(const Rule& rule, const DeviceFacts& facts);

// The fact groups (beyond the basics) that matching and planning under
// `policy` read: what its match keys compare, and cache_type when a rule
// sets write_cache.
FactNeeds fact_needs(const Policy& policy);

}  // namespace blkpolicy::policy
