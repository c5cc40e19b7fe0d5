// SPDX-License-Identifier: MIT
#include "policy/attributes.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>

#include "policy/policy.hpp"
#include "policy/units/units.hpp"
#include "util/text.hpp"

namespace blkpolicy::policy {
namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

// The kernel rejects max_sectors_kb above max_hw_sectors_kb.
DeviceCheck within_hw_limit(const std::string& value, const Values& current, const DeviceFacts&,
                            const std::set<std::string>&) {
    auto hw = current.find(std::string(key_text(Key::max_hw_sectors_kb)));
    auto want = util::parse_int(value);
    if (hw == current.end() || !want) return {};
    auto hwv = util::parse_int(hw->second);
    if (hwv && *want > *hwv)
        return {DeviceCheck::Verdict::refuse, "above max_hw_sectors_kb (" + hw->second + "): the kernel rejects it"};
    return {};
}

// discard_max_bytes on a device without discard, or off its granularity.
DeviceCheck discard_granular(const std::string& value, const Values& current, const DeviceFacts&,
                             const std::set<std::string>&) {
    auto g = current.find(std::string(key_text(Key::discard_granularity)));
    auto gv = g == current.end() ? std::optional<std::int64_t>{} : util::parse_int(g->second);
    auto want = util::parse_int(value).value_or(0);
    if (gv && *gv == 0)
        return {DeviceCheck::Verdict::skip, "device does not support discard (discard_granularity is 0)"};
    if (gv && want % *gv != 0)
        return {DeviceCheck::Verdict::refuse, "not a multiple of discard_granularity (" + g->second + ")"};
    return {};
}

// write through over a device whose own cache is write back drops the
// flushes that make that cache durable: only with the acknowledgement.
DeviceCheck flushes_kept(const std::string& value, const Values&, const DeviceFacts& facts,
                         const std::set<std::string>& acknowledged) {
    if (value == "write through" && facts.cache_type.rfind("write back", 0) == 0 &&
        !acknowledged.count(kAckVolatileCache))
        return {DeviceCheck::Verdict::refuse,
                std::string("the device's own cache is write back: write through would drop the flushes that "
                            "make its volatile cache durable; add \"") +
                    kAckVolatileCache + "\" to the rule's acknowledge list to allow it"};
    return {};
}

// read_ahead_kb reads back in whole pages.
Readback whole_pages(const std::string& value, const ReadbackContext& ctx) {
    const auto n = util::parse_int(value).value_or(0);
    Readback r{value, std::to_string(kernel::readahead_readback(n, ctx.page_size)), {}};
    if (r.expected != r.value) r.note = "reads back as " + r.expected + " (whole pages)";
    return r;
}

// wbt "default" is written as -1 and reads back as the latency the kernel
// picks for the queue's final rotational flag.
Readback wbt_default(const std::string& value, const ReadbackContext& ctx) {
    if (value != "default") return {value, value, {}};
    return {"-1", std::to_string(kernel::wbt_default_usec(ctx.final_rotational)),
            std::string("kernel default for a ") + (ctx.final_rotational ? "rotational" : "non-rotational") + " queue"};
}

// io_timeout is kept in ticks: what reads back is the written value
// rounded up to a whole tick, and from 2^31 ms on the longest timer there is.
Readback whole_ticks(const std::string& value, const ReadbackContext& ctx) {
    const auto ms = util::parse_int(value).value_or(0);
    Readback r{value, std::to_string(kernel::io_timeout_readback(ms, ctx.hz)), {}};
    if (r.expected != r.value)
        r.note = "reads back as " + r.expected + " (the kernel keeps it in ticks of " +
                 (ctx.hz_known ? "" : "an assumed ") + std::to_string(ctx.hz) + " Hz" +
                 (ms >= kernel::kIoTimeoutLongest ? "; 2^31 ms or more is the longest timer it has" : "") + ")";
    return r;
}

// One row per writable Key, in Key order, so in write order (a row's write
// rank is its place): everything about the attribute. A Key without its
// row, or a row out of place, does not build.
struct Row {
    Key value;
    std::string_view path;
    Phase phase;
    ValueKind kind;
    std::int64_t min = 0;
    std::int64_t max = 0;
    std::string_view note = {};
    kernel::WriteCause cause = kernel::WriteCause::none;
    bool mq_only = false;
    bool by_driver = false;
    std::optional<Key> input = {};
    DeviceCheckFn device_check = nullptr;
    ReadbackFn readback = nullptr;
    std::array<std::string_view, 3> choices = {};
    FactNeeds fact_needs = 0;
    std::string_view alias = {};
    const UnitHooks* hooks = nullptr;
};

using kernel::WriteCause;
constexpr Row kRows[] = {
    // Queue-limits commits. rotational first: it changes the readahead
    // formula the later commits apply.
    {.value = Key::rotational,
     .path = "queue/rotational",
     .phase = Phase::limits,
     .kind = ValueKind::flag,
     .max = 1,
     .cause = WriteCause::limits_commit},
    {.value = Key::max_sectors_kb,
     .path = "queue/max_sectors_kb",
     .phase = Phase::limits,
     .kind = ValueKind::integer,
     .min = 4,
     .max = kInt32Max,
     .note = "at least one 4 KiB page; the kernel rejects values above max_hw_sectors_kb",
     .cause = WriteCause::limits_commit,
     .input = Key::max_hw_sectors_kb,
     .device_check = within_hw_limit},
    {.value = Key::discard_max_bytes,
     .path = "queue/discard_max_bytes",
     .phase = Phase::limits,
     .kind = ValueKind::integer,
     .min = 1,
     .max = kInt64Max,
     .note = "0 can disable discard for good on recent kernels; leave the key out instead",
     .cause = WriteCause::limits_commit,
     .input = Key::discard_granularity,
     .device_check = discard_granular},
    {.value = Key::write_cache,
     .path = "queue/write_cache",
     .phase = Phase::limits,
     .kind = ValueKind::choice,
     .note = "the kernel matches only the start of the text, so a typo would silently apply another mode",
     .cause = WriteCause::limits_commit,
     .device_check = flushes_kept,
     .choices = {"write back", "write through"},
     .fact_needs = kFactCache},
    {.value = Key::add_random,
     .path = "queue/add_random",
     .phase = Phase::limits,
     .kind = ValueKind::flag,
     .max = 1,
     .cause = WriteCause::limits_commit},
    {.value = Key::iostats,
     .path = "queue/iostats",
     .phase = Phase::limits,
     .kind = ValueKind::flag,
     .max = 1,
     .cause = WriteCause::limits_commit},
    {.value = Key::scheduler,
     .path = "queue/scheduler",
     .phase = Phase::scheduler,
     .kind = ValueKind::scheduler,
     .cause = WriteCause::scheduler_switch,
     .mq_only = true},
    {.value = Key::nr_requests,
     .path = "queue/nr_requests",
     .phase = Phase::requests,
     .kind = ValueKind::integer,
     .min = 4,
     .max = 65536,
     .note = "the kernel silently raises values below 4",
     .cause = WriteCause::nr_requests_write,
     .mq_only = true,
     .hooks = &units::kNrRequests},
    // 7.0+: reset by a scheduler switch and rescaled by an nr_requests
    // write, so it is written after both.
    {.value = Key::async_depth,
     .path = "queue/async_depth",
     .phase = Phase::requests,
     .kind = ValueKind::integer,
     .min = 1,
     .max = 65536,
     .note = "at least 1; the kernel caps it at nr_requests and refuses it under scheduler none",
     .mq_only = true,
     .input = Key::nr_requests,
     .hooks = &units::kAsyncDepth},
    // The family iosched.NAME: each tunable's row is this one with its name.
    {.value = Key::iosched,
     .path = "queue/iosched",
     .phase = Phase::requests,
     .kind = ValueKind::integer,
     .max = kInt64Max,
     .mq_only = true,
     .hooks = &units::kIosched},
    {.value = Key::wbt_lat_usec,
     .path = "queue/wbt_lat_usec",
     .phase = Phase::wbt,
     .kind = ValueKind::wbt,
     .max = 60'000'000,
     .note = "microseconds, at most 60 s; use \"default\" for the kernel's own value",
     .mq_only = true,
     .readback = wbt_default,
     .hooks = &units::kWbt},
    {.value = Key::nomerges,
     .path = "queue/nomerges",
     .phase = Phase::late,
     .kind = ValueKind::integer,
     .max = 2,
     .note = "0 merges, 1 simple merges only, 2 no merges"},
    {.value = Key::rq_affinity,
     .path = "queue/rq_affinity",
     .phase = Phase::late,
     .kind = ValueKind::integer,
     .max = 2,
     .note = "the kernel accepts 3 without error and ignores it",
     .mq_only = true},
    {.value = Key::device_timeout,
     .path = "device/timeout",
     .phase = Phase::late,
     .kind = ValueKind::integer,
     .min = 1,
     .max = 86400,
     .note = "seconds"},
    {.value = Key::device_queue_depth,
     .path = "device/queue_depth",
     .phase = Phase::late,
     .kind = ValueKind::integer,
     .min = 1,
     .max = 65535},
    // An NVMe multipath head's device/ is its subsystem (nvme-subsysN), shared
    // by every namespace of it: how the kernel picks a path for each I/O.
    // queue-depth came with 6.11; an older kernel refuses it (EINVAL).
    {.value = Key::device_iopolicy,
     .path = "device/iopolicy",
     .phase = Phase::late,
     .kind = ValueKind::choice,
     .note = "numa (the default), round-robin, or queue-depth (6.11 and later); only NVMe multipath heads have it",
     .choices = {"numa", "round-robin", "queue-depth"}},
    // Milliseconds; the kernel refuses 0 and keeps whole ticks. SCSI's
    // device/timeout is the same timer in seconds (kernel row
    // io-timeout:one-timer-with-scsi-timeout).
    {.value = Key::io_timeout,
     .path = "queue/io_timeout",
     .phase = Phase::late,
     .kind = ValueKind::integer,
     .min = 1,
     .max = 4'294'967'295,
     .note = "milliseconds, 1 to 4294967295; only blk-mq drivers with a timeout handler (NVMe, SCSI) have it",
     .mq_only = true,
     .by_driver = true,
     .readback = whole_ticks,
     .hooks = &units::kIoTimeout},
    // The device's writeback limits (its bdi, class/bdi/MAJ:MIN): no queue
    // write, nothing moves them but each other (policy/units/bdi.cpp).
    {.value = Key::bdi_max_ratio,
     .path = "bdi/max_ratio",
     .phase = Phase::late,
     .kind = ValueKind::integer,
     .max = 100,
     .note = "percent of the dirty page cache this device's writeback may hold; 100 is the kernel's default",
     .input = Key::bdi_min_ratio,
     .hooks = &units::kBdiMaxRatio},
    {.value = Key::bdi_min_ratio,
     .path = "bdi/min_ratio",
     .phase = Phase::late,
     .kind = ValueKind::integer,
     .max = 100,
     .note = "percent of the dirty page cache kept for this device; at most its bdi.max_ratio, and all devices' "
             "together under 100",
     .input = Key::bdi_max_ratio,
     .hooks = &units::kBdiMinRatio},
    {.value = Key::bdi_strict_limit,
     .path = "bdi/strict_limit",
     .phase = Phase::late,
     .kind = ValueKind::flag,
     .max = 1,
     .hooks = &units::kBdiStrictLimit},
    // An md array's own tunables (md/ of the array; policy/units/md.cpp):
    // no queue write, nothing moves them, the array's stop drops them.
    {.value = Key::md_stripe_cache_size,
     .path = "md/stripe_cache_size",
     .phase = Phase::late,
     .kind = ValueKind::integer,
     .min = 17,
     .max = 32768,
     .note = "stripes in a raid4/5/6 array's cache, a page per member disk each (the kernel refuses fewer than 17 "
             "and more than 32768); 256 is the kernel's default",
     .hooks = &units::kMdStripeCache},
    {.value = Key::md_sync_speed_min,
     .path = "md/sync_speed_min",
     .phase = Phase::late,
     .kind = ValueKind::integer,
     .min = 1,
     .max = 2'147'483'647,
     .note = "KiB/s a resync, recovery or check of the array keeps to even while other I/O waits (the kernel "
             "refuses 0); the sysctl dev.raid.speed_limit_min's by default",
     .hooks = &units::kMdSyncSpeed},
    {.value = Key::md_sync_speed_max,
     .path = "md/sync_speed_max",
     .phase = Phase::late,
     .kind = ValueKind::integer,
     .min = 1,
     .max = 2'147'483'647,
     .note = "KiB/s a resync, recovery or check of the array never goes above (the kernel refuses 0); the sysctl "
             "dev.raid.speed_limit_max's by default",
     .hooks = &units::kMdSyncSpeed},
    // Written last: every earlier kind of write can move it.
    {.value = Key::read_ahead_kb,
     .path = "queue/read_ahead_kb",
     .phase = Phase::readahead,
     .kind = ValueKind::integer,
     .max = 1'048'576,
     .note = "KiB, at most 1 GiB",
     .readback = whole_pages,
     .alias = "bdi/read_ahead_kb",
     .hooks = &units::kReadAhead},
};
static_assert(util::in_enum_order(kRows), "a row per writable Key, in Key order");
static_assert(std::size(kRows) == static_cast<std::size_t>(kLastWritable) + 1, "no row for a read-only Key");

constexpr bool phases_in_order() {
    for (std::size_t i = 1; i < std::size(kRows); ++i)
        if (kRows[i].phase < kRows[i - 1].phase) return false;
    return true;
}
static_assert(phases_in_order(), "Key's writable order is the write order: phases may not go back");

AttributeSpec spec_of(const Row& r) {
    AttributeSpec s;
    s.id = r.value;
    s.key = std::string(key_text(r.value));
    s.path = std::string(r.path);
    s.phase = r.phase;
    s.kind = r.kind;
    s.min = r.min;
    s.max = r.max;
    for (const auto c : r.choices)
        if (!c.empty()) s.choices.emplace_back(c);
    s.cause = r.cause;
    s.mq_only = r.mq_only;
    s.by_driver = r.by_driver;
    s.range_note = std::string(r.note);
    if (r.input) s.inputs = {*r.input};
    s.device_check = r.device_check;
    s.readback = r.readback;
    s.fact_needs = r.fact_needs;
    s.hooks = r.hooks;
    return s;
}

// Every row as an AttributeSpec, indexed by Key.
const std::vector<AttributeSpec>& specs() {
    static const std::vector<AttributeSpec> all = [] {
        std::vector<AttributeSpec> out;
        for (const auto& r : kRows) out.push_back(spec_of(r));
        return out;
    }();
    return all;
}

bool valid_tunable_name(std::string_view name) {
    if (name.empty() || name.size() > 64) return false;
    return std::all_of(name.begin(), name.end(),
                       [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

}  // namespace

const AttributeSpec* fixed_attribute(std::string_view key) {
    const auto k = key_of(key);
    if (!k || !writable(*k) || *k == Key::iosched) return nullptr;
    return &specs()[static_cast<std::size_t>(*k)];
}

const AttributeSpec& fixed_attribute(Key key) {
    if (!writable(key)) throw std::logic_error(std::string(key_text(key)) + " is read only: it has no row");
    return specs()[static_cast<std::size_t>(key)];
}

std::string value_path(Key key) {
    if (writable(key)) return fixed_attribute(key).path;
    return "queue/" + std::string(key_text(key));
}

std::pair<std::string, std::string> shown_value(const Values& values, Key key) {
    return {value_path(key), value_of(values, key)};
}

std::optional<AttributeSpec> find_attribute(std::string_view key) {
    if (const auto* fixed = fixed_attribute(key)) return *fixed;
    const auto family = std::string(key_text(Key::iosched)) + ".";
    if (key.substr(0, family.size()) == family) {
        auto name = key.substr(family.size());
        if (!valid_tunable_name(name)) return std::nullopt;
        auto s = fixed_attribute(Key::iosched);
        s.key = std::string(key);
        s.path += "/" + std::string(name);
        // mq-deadline's async_depth moved to queue/async_depth (7.0): that
        // file being there says so.
        if (name == key_text(Key::async_depth)) s.inputs = {Key::async_depth};
        return s;
    }
    return std::nullopt;
}

std::string policy_key_for_attr(const std::string& attr_path) {
    for (const auto& r : kRows)
        if (!r.alias.empty() && attr_path == r.alias) return std::string(key_text(r.value));
    if (attr_path.rfind("queue/iosched/", 0) == 0) return "iosched." + attr_path.substr(14);
    if (attr_path.rfind("queue/", 0) == 0) return attr_path.substr(6);
    if (attr_path.rfind("device/", 0) == 0) return "device." + attr_path.substr(7);
    if (attr_path.rfind("bdi/", 0) == 0) return "bdi." + attr_path.substr(4);
    if (attr_path.rfind("md/", 0) == 0) return "md." + attr_path.substr(3);
    return {};
}

std::vector<std::string> fixed_attribute_keys() {
    std::vector<std::string> keys;
    for (const auto& r : kRows)
        if (r.value != Key::iosched) keys.emplace_back(key_text(r.value));
    return keys;
}

namespace {

// The schedulers the kernel ships; the policy accepts only these names.
const std::vector<std::string>& known_schedulers() {
    static const std::vector<std::string> names = {"none", "mq-deadline", "kyber", "bfq"};
    return names;
}

// Edits (insert, delete, replace) between two short names.
std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diag = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

std::string scheduler_name_problem(const std::string& name) {
    const auto& known = known_schedulers();
    if (std::find(known.begin(), known.end(), name) != known.end()) return {};
    if (name == "deadline")
        return "scheduler \"deadline\" is the kernel's alias of mq-deadline, and sysfs shows mq-deadline: write "
               "\"mq-deadline\"";
    if (name == "noop" || name == "cfq" || name == "anticipatory")
        return "scheduler " + util::in_quotes(name) +
               " went with the legacy block layer in Linux 5.0: a blk-mq kernel refuses it (\"none\" and bfq "
               "are today's nearest)";
    // The kernel's elevator names: at most 15 characters (ELV_NAME_MAX).
    const bool well_formed = !name.empty() && name.size() <= 15 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
    if (!well_formed)
        return "scheduler " + util::in_quotes(name) +
               " is not a scheduler's name (1 to 15 of a-z, 0-9, '-' and '_', as the kernel registers them)";
    // A typo of one of the kernel's own four is refused; any other name
    // is an out-of-tree scheduler's (adios, say), taken as written:
    // unavailable on a kernel that has no such scheduler.
    for (const auto& k : known) {
        const std::size_t near = k.size() <= 4 ? 1 : 2;
        if (edit_distance(name, k) <= near)
            return "unknown scheduler " + util::in_quotes(name) + ": did you mean " + util::in_quotes(k) +
                   "? (a name that is not a typo of " + util::quoted_list(known) +
                   " is taken as an out-of-tree scheduler's)";
    }
    return {};
}

CheckedValue refused(std::string why) { return {{}, std::move(why)}; }

CheckedValue in_range(const AttributeSpec& spec, std::int64_t n) {
    if (n >= spec.min && n <= spec.max) return {{std::to_string(n)}, {}};
    std::string msg = spec.key + " = " + std::to_string(n) + " is out of range: ";
    if (n < 0 && spec.min >= 0) msg = spec.key + " = " + std::to_string(n) + " is negative: ";
    msg += "must be " + std::to_string(spec.min) + ".." + std::to_string(spec.max);
    if (!spec.range_note.empty()) msg += " (" + spec.range_note + ")";
    return refused(msg);
}

}  // namespace

CheckedValue check_value(const AttributeSpec& spec, const GivenValue& given) {
    using T = GivenValue::Type;
    switch (spec.kind) {
        case ValueKind::integer:
            if (given.type != T::integer) return refused(spec.key + " must be an integer, not " + given.type_name);
            return in_range(spec, given.integer);
        case ValueKind::flag:
            if (given.type == T::boolean) return {{given.boolean ? "1" : "0"}, {}};
            if (given.type != T::integer || (given.integer != 0 && given.integer != 1))
                return refused(spec.key + " must be 0, 1, true or false");
            return {{std::to_string(given.integer)}, {}};
        case ValueKind::choice: {
            const bool one = given.type == T::string;
            if (one && std::find(spec.choices.begin(), spec.choices.end(), given.strings.front()) != spec.choices.end())
                return {{given.strings.front()}, {}};
            std::string msg = spec.key + " must be exactly one of " + util::quoted_list(spec.choices);
            if (one)
                msg = spec.key + " = " + util::in_quotes(given.strings.front()) + " is not exactly one of " +
                      util::quoted_list(spec.choices);
            if (!spec.range_note.empty()) msg += " (" + spec.range_note + ")";
            return refused(msg);
        }
        case ValueKind::scheduler: {
            if (given.type != T::string && given.type != T::strings)
                return refused(spec.key + " must be a string or an array of strings, not " + given.type_name);
            for (const auto& name : given.strings) {
                if (auto why = scheduler_name_problem(name); !why.empty()) return refused(why);
                if (std::count(given.strings.begin(), given.strings.end(), name) > 1)
                    return refused("scheduler " + util::in_quotes(name) + " is listed twice");
            }
            return {given.strings, {}};
        }
        case ValueKind::wbt:
            if (given.type == T::string) {
                if (given.strings.front() == "default") return {{"default"}, {}};
                return refused(spec.key + " must be an integer (microseconds, 0 turns wbt off) or \"default\"");
            }
            if (given.type != T::integer)
                return refused(spec.key + " must be an integer (microseconds) or \"default\", not " + given.type_name);
            return in_range(spec, given.integer);
    }
    return refused(spec.key + ": no check for this kind of value");
}

int write_rank(const AttributeSpec& spec) { return static_cast<int>(spec.id); }

const UnitHooks* hooks_of(Key id) { return writable(id) ? fixed_attribute(id).hooks : nullptr; }

}  // namespace blkpolicy::policy
