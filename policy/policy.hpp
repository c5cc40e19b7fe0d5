// SPDX-License-Identifier: MIT
// The policy model: rules with their source positions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "policy/facts.hpp"
#include "policy/keys.hpp"

namespace blkpolicy::policy {

struct SourcePos {
    std::string file;
    std::uint32_t line = 0;
    std::uint32_t column = 0;
    // "file:line:col", or "file:line" when column is 0, or "file".
    std::string str() const;
    // "file:line", what reports show for a rule.
    std::string file_line() const;
};

struct PolicyError {
    SourcePos pos;
    std::string message;
    std::string str() const;  // "file:line:col: message"
};

enum class MatchKey {
    kernel,
    driver,
    model,
    vendor,
    serial,
    wwid,
    stack,
    dm_name,
    dm_uuid,
    md_level,
    rotational,
    removable,
    env,     // a udev property (env.NAME), from udev's database when udevd runs
    attr,    // a sysfs attribute of the device (attr.NAME), as udev's ATTR{NAME}==
    attrs,   // a sysfs attribute of the device or a parent (attrs.NAME), as udev's ATTRS{NAME}==
    parent,  // one level of the device and its parents meeting every test of a table (parent.kernel,
             // parent.subsystem, parent.driver, parent.attr.NAME), as one udev rule's KERNELS, SUBSYSTEMS,
             // DRIVERS and ATTRS, which udevd requires of one device
    host,    // a fact of the host (host.kernel, host.virtualization, ...): see HostFacts
};
// Names, how each key matches and what it reads: one table, policy/match.cpp.
const char* to_string(MatchKey k);
std::optional<MatchKey> match_key_from_string(std::string_view s);
std::vector<std::string> match_key_names();  // in declaration order
bool match_key_is_flag(MatchKey k);          // true/false, not globs (rotational, removable)

// One test of a parent table: what of a level it compares (kernel,
// subsystem, driver or attr), the attribute's name for attr, any of the
// patterns (globs).
struct ParentTest {
    std::string what;
    std::string name;
    std::vector<std::string> patterns;
    bool operator==(const ParentTest&) const = default;
};

struct MatchClause {
    MatchKey key = MatchKey::kernel;
    std::vector<std::string> patterns;  // any of (globs); for flags "true"/"false"
    std::string name;                   // env, attr, attrs: the property or attribute
    std::vector<ParentTest> parent;     // parent: every test, on one level
    bool negated = false;               // from [rule.unless]: the rule applies only where this does not match
    SourcePos pos;
};

struct Setting {
    Key id = Key::rotational;         // the attribute's row (Key::iosched for every iosched.NAME)
    std::string attribute;            // policy key, validated against the allow-list
    std::vector<std::string> values;  // normalised; more than one only for a scheduler preference list
    SourcePos pos;
};

// Acknowledgements a rule can carry to allow dangerous settings.
inline constexpr const char* kAckWriteThrough = "write-through-drops-flushes";
inline constexpr const char* kAckVolatileCache = "volatile-cache-data-loss";

struct Rule {
    std::string name;
    SourcePos pos;                   // the [[rule]] header
    std::vector<MatchClause> match;  // [rule.match] and [rule.unless] (negated) alike
    std::vector<Setting> set;
    std::set<std::string> acknowledge;
    // Whether the rule's host.* clauses hold on this host (bind_host), and
    // the first that does not, for reports. A rule with host clauses never
    // matches before the host's facts are bound.
    bool host_ok = true;
    std::string host_why;
    bool has_host_clauses() const {
        for (const auto& c : match)
            if (c.key == MatchKey::host) return true;
        return false;
    }
};

enum class Mode { enforce, observe };
const char* to_string(Mode m);
std::optional<Mode> mode_from_string(std::string_view s);

struct DaemonConfig {
    Mode mode = Mode::enforce;
    std::chrono::milliseconds verify_interval{30'000};
    // Measure what the values do (blkpolicy measure's figures, back to back
    // windows of measure_window): off unless the policy turns it on.
    bool measure = false;
    std::chrono::milliseconds measure_window{60'000};
    // The share of each 10 s the request tracepoints are on, in percent:
    // what tracing every I/O costs a busy disk, bounded (bench/README.md).
    unsigned measure_sample = 10;
    // A value the policy stops declaring for a device (a rule removed or
    // changed at a reload, a device whose facts no longer match) goes back
    // to what the device had before blkpolicy first wrote it: the policy is
    // the whole truth, as switching a TuneD profile rolls the old one back.
    // false: it stays as it is until the next boot.
    bool restore_on_removal = true;
};

// The sysfs attributes the match keys attr.NAME and attrs.NAME read.
struct AttributeNames {
    std::set<std::string> own;      // attr.NAME: the device's own
    std::set<std::string> parents;  // attrs.NAME: the device's and its parents'
    // A parent table: every level's kernel name, subsystem and driver, and
    // the attributes its tables name, level by level.
    bool levels = false;
    std::set<std::string> level_attributes;
    bool empty() const { return own.empty() && parents.empty() && !levels; }
};

struct Policy {
    DaemonConfig daemon;
    std::vector<Rule> rules;
    std::vector<std::string> files;  // in the order they were read
    // What was loaded, as 16 hex digits (FNV-1a over each file's name and
    // text): two hosts with the same digest run the same policy.
    std::string digest;
    // Each file's own digest (the same hash over its name and text alone),
    // in the order of `files`: what the initramfs hook notes per file, so
    // that audit names the file edited since.
    std::vector<std::string> file_digests;
    // The host the rules' host.* clauses were decided on (bind_host).
    HostFacts host;
    bool host_bound = false;
};

// A reference to the rule that decided something, for reports.
struct RuleRef {
    std::string name;
    SourcePos pos;
};

}  // namespace blkpolicy::policy
