// SPDX-License-Identifier: MIT
// The fixed allow-list of attributes blkpolicy may write, with where they live
// in sysfs, how their values are validated, and when in the write order they
// go. Nothing outside this list is ever written; policy keys never become
// paths except through it.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernel/rows.hpp"
#include "policy/facts.hpp"
#include "policy/keys.hpp"

namespace blkpolicy::policy {

struct UnitHooks;  // policy/unit: what makes an attribute special

// Write order (README.md "Write order"); lower phases are written first.
enum class Phase : int {
    limits = 1,     // queue-limits commits: each can raise read_ahead_kb again
    scheduler = 2,  // resets nr_requests, recreates iosched/, may disable wbt
    requests = 3,   // nr_requests, then async_depth, then iosched.* tunables
    wbt = 4,        // wbt_lat_usec
    late = 5,       // nomerges, rq_affinity, SCSI device.*
    readahead = 6,  // read_ahead_kb last
};

enum class ValueKind {
    integer,    // a whole number within [min, max]
    flag,       // 0/1, also written as false/true
    choice,     // one of `choices`, exactly
    scheduler,  // a scheduler name or a preference list of them
    wbt,        // microseconds, or "default" (the kernel's own default, written as -1)
};

// What a device's limits say of a value the policy asks for, before any
// write: fine, not for this device (skip), or not to be written (refuse).
struct DeviceCheck {
    enum class Verdict { fine, skip, refuse };
    Verdict verdict = Verdict::fine;
    std::string note;
};
// A row's own check: the value to write, the device's current values (its
// inputs among them), its facts, and the rule's acknowledgements.
using DeviceCheckFn = DeviceCheck (*)(const std::string& value, const Values& current, const DeviceFacts& facts,
                                      const std::set<std::string>& acknowledged);

// What planning knows when it works out a value's read-back.
struct ReadbackContext {
    std::int64_t page_size = 4096;
    bool final_rotational = false;  // rotational once the plan has run
    int hz = 250;                   // the kernel's tick rate (CONFIG_HZ): io_timeout is kept in ticks
    bool hz_known = false;          // false: 250 (Debian's) assumed
};
// The value to write and what reading it back shows, where the kernel makes
// them differ from what the policy says (whole pages, wbt's "default").
struct Readback {
    std::string value;
    std::string expected;
    std::string note;  // why they differ; empty when they do not
};
using ReadbackFn = Readback (*)(const std::string& value, const ReadbackContext& ctx);

struct AttributeSpec {
    Key id = Key::rotational;  // what code names it by (Key::iosched for every iosched.NAME)
    std::string key;           // policy key, e.g. "read_ahead_kb", "iosched.fifo_batch"
    std::string path;          // relative to the device's sysfs directory
    Phase phase = Phase::late;
    ValueKind kind = ValueKind::integer;
    std::int64_t min = 0;
    std::int64_t max = 0;
    std::vector<std::string> choices;
    // What writing this attribute can disturb elsewhere: a queue-limits
    // commit (the kernel recomputes read_ahead_kb), a scheduler switch, an
    // nr_requests write. The kernel rows (disturbed_by) say what moves.
    kernel::WriteCause cause = kernel::WriteCause::none;
    // Present only on request-based (blk-mq) queues.
    bool mq_only = false;
    // Whether a queue has it depends on its driver, not on the kernel
    // (io_timeout: only drivers with a timeout handler): a queue without it
    // is skipped, not "unavailable".
    bool by_driver = false;
    // Why the range (or for a choice, the exactness) is what it is, shown
    // in validation errors.
    std::string range_note;
    // Other values read to plan it (a limit it must stay within, an
    // attribute that caps it), beside its own.
    std::vector<Key> inputs;
    // Whether this device can take the value (nullptr: any in range can).
    DeviceCheckFn device_check = nullptr;
    // What is written and read back for a value (nullptr: it is written as
    // the policy says it, and reads back the same).
    ReadbackFn readback = nullptr;
    // The fact groups its device check reads (write_cache: the cache type).
    FactNeeds fact_needs = 0;
    // What else makes it special, asked by plan, apply and the daemon
    // (policy/unit; its own file under policy/units/); nullptr: plain.
    const UnitHooks* hooks = nullptr;
};

// The spec for a policy set-key, or nullopt when the key is not writable.
// Handles the fixed names and the `iosched.NAME` family.
std::optional<AttributeSpec> find_attribute(std::string_view key);
// The table's own entry for a fixed key (not iosched.NAME), or nullptr:
// no copy, for the per-device paths.
const AttributeSpec* fixed_attribute(std::string_view key);
// The row of a writable key (for Key::iosched, the family's: key
// "iosched", path queue/iosched). Every writable key has one: checked when
// the table is built.
const AttributeSpec& fixed_attribute(Key key);

// Where a value is read under the device's sysfs directory: its row's path
// for a writable attribute ("queue/rotational", "device/timeout"),
// queue/NAME for a read-only value ("queue/optimal_io_size").
std::string value_path(Key key);
// The path and the value read there, as explain and audit show their inputs.
std::pair<std::string, std::string> shown_value(const Values& values, Key key);

// The policy key a sysfs path under the device stands for, as other tools
// name it ("queue/nr_requests" -> "nr_requests", "bdi/read_ahead_kb" ->
// "read_ahead_kb", "device/timeout" -> "device.timeout"), or empty for
// anything else. Whether blkpolicy writes that key is find_attribute's answer.
std::string policy_key_for_attr(const std::string& attr_path);

// Every fixed attribute key, in write order (for help texts and documentation).
std::vector<std::string> fixed_attribute_keys();

// A value for an attribute as its author wrote it, whoever wrote it down:
// a policy file (the loader turns the TOML node into one), a udev rule or
// another tool's file (the importers turn the text into one).
struct GivenValue {
    enum class Type { integer, boolean, string, strings, other };
    Type type = Type::other;
    std::int64_t integer = 0;
    bool boolean = false;
    std::vector<std::string> strings;  // one for Type::string
    std::string type_name;             // "a float", for Type::other: what the author wrote instead

    static GivenValue of_integer(std::int64_t n) { return {Type::integer, n, false, {}, "an integer"}; }
    static GivenValue of_boolean(bool b) { return {Type::boolean, 0, b, {}, "a boolean"}; }
    static GivenValue of_string(std::string s) { return {Type::string, 0, false, {std::move(s)}, "a string"}; }
    static GivenValue of_strings(std::vector<std::string> l) {
        return {Type::strings, 0, false, std::move(l), "an array"};
    }
};

// The one check of a value against its attribute's row (kind, range,
// choices, known schedulers), for the loader and both importers alike.
// `values` is what is to be written (a scheduler preference list can hold
// several names); `error` says why not, in the words `blkpolicy check` uses.
struct CheckedValue {
    std::vector<std::string> values;
    std::string error;
    bool ok() const { return error.empty(); }
};
CheckedValue check_value(const AttributeSpec& spec, const GivenValue& given);

// Rank for sorting actions into write order: the row's place in Key, whose
// writable values are listed in write order (their phases in order too).
int write_rank(const AttributeSpec& spec);

}  // namespace blkpolicy::policy
