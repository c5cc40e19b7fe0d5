// SPDX-License-Identifier: MIT
// Policies for tests, from TOML text; a test fails at once when its own
// policy does not load.
#pragma once

#include <string>

#include "policy/policy.hpp"

namespace blkpolicy::test {

// A whole policy file's text, loaded as p.toml.
policy::Policy policy_from_toml(const std::string& text);

// One rule named `name`, with the [rule.set] body `set` and, when given, the
// [rule.match] body `match` ("kernel = \"loop*\"\n").
policy::Policy one_rule_policy(const std::string& set, const std::string& name = "r", const std::string& match = "");

}  // namespace blkpolicy::test
