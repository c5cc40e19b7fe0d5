// SPDX-License-Identifier: MIT
#include "support/policies.hpp"

#include <doctest/doctest.h>

#include "policy/loader.hpp"

namespace blkpolicy::test {

policy::Policy policy_from_toml(const std::string& text) {
    auto r = policy::load_policy({{"p.toml", text}});
    for (const auto& e : r.errors) MESSAGE(e.str());
    REQUIRE(r.ok());
    return r.policy;
}

policy::Policy one_rule_policy(const std::string& set, const std::string& name, const std::string& match) {
    std::string text = "[[rule]]\nname = \"" + name + "\"\n";
    if (!match.empty()) text += "[rule.match]\n" + match;
    return policy_from_toml(text + "[rule.set]\n" + set);
}

}  // namespace blkpolicy::test
