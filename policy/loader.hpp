// SPDX-License-Identifier: MIT
// TOML text -> Policy, with every error as file:line:col. Pure: the caller
// reads the files (agent/policy_files) and passes their text.
#pragma once

#include <string>
#include <vector>

#include "policy/policy.hpp"

namespace blkpolicy::policy {

// Bounds on what a policy may be, each reported as a plain error: a policy
// is small and hand-written, and nothing in it should make blkpolicy slow.
inline constexpr std::size_t kMaxPolicyBytes = 1 << 20;  // per file
inline constexpr std::size_t kMaxRules = 4096;           // across all files
inline constexpr std::size_t kMaxPatternLength = 256;
inline constexpr std::size_t kMaxPatternStars = 8;  // a*a*a*...b backtracks
inline constexpr std::size_t kMaxPatternsPerKey = 256;

struct PolicySource {
    std::string name;  // shown in errors and reports, usually the path
    std::string text;
};

struct LoadResult {
    Policy policy;
    std::vector<PolicyError> errors;
    bool missing = false;  // no policy file at all: nothing to read, which is not an invalid policy
    bool ok() const { return errors.empty(); }
};

// Parses and validates every source in order. Rules keep file order; a
// later [daemon] key overrides an earlier one. All errors are collected.
LoadResult load_policy(const std::vector<PolicySource>& sources);

// What is valid but will not do what it says on some kernels, as
// file:line:col warnings (check prints them; the policy still loads).
std::vector<PolicyError> policy_warnings(const Policy& policy);

// "30s", "500ms", "5m", "1h", "1m30s" -> milliseconds; nullopt when malformed.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace blkpolicy::policy
