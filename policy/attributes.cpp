// SPDX-License-Identifier: MIT
#include "policy/attributes.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "policy/policy.hpp"
#include "policy/values.hpp"

namespace blkpolicy::policy {
namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

AttributeSpec make(Key id, std::string path, Phase phase, ValueKind kind, std::int64_t min = 0, std::int64_t max = 0,
                   std::string note = {}) {
    AttributeSpec s;
    s.id = id;
    s.key = std::string(key_text(id));
    s.path = std::move(path);
    s.phase = phase;
    s.kind = kind;
    s.min = min;
    s.max = max;
    s.range_note = std::move(note);
    return s;
}

// The kernel rejects max_sectors_kb above max_hw_sectors_kb.
DeviceCheck within_hw_limit(const std::string& value, const Values& current, const DeviceFacts&,
                            const std::set<std::string>&) {
    auto hw = current.find(std::string(key_text(Key::max_hw_sectors_kb)));
    auto want = parse_int(value);
    if (hw == current.end() || !want) return {};
    auto hwv = parse_int(hw->second);
    if (hwv && *want > *hwv)
        return {DeviceCheck::Verdict::refuse, "above max_hw_sectors_kb (" + hw->second + "): the kernel rejects it"};
    return {};
}

// discard_max_bytes on a device without discard, or off its granularity.
DeviceCheck discard_granular(const std::string& value, const Values& current, const DeviceFacts&,
                             const std::set<std::string>&) {
    auto g = current.find(std::string(key_text(Key::discard_granularity)));
    auto gv = g == current.end() ? std::optional<std::int64_t>{} : parse_int(g->second);
    auto want = parse_int(value).value_or(0);
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
    const auto n = parse_int(value).value_or(0);
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

std::vector<AttributeSpec> build_table() {
    std::vector<AttributeSpec> t;
    // Phase 1: queue-limits commits. rotational first: it changes the
    // readahead formula the later commits apply.
    t.push_back(make(Key::rotational, "queue/rotational", Phase::limits, ValueKind::flag, 0, 1));
    auto ms = make(Key::max_sectors_kb, "queue/max_sectors_kb", Phase::limits, ValueKind::integer, 4, kInt32Max,
                   "at least one 4 KiB page; the kernel rejects values above max_hw_sectors_kb");
    ms.inputs = {Key::max_hw_sectors_kb};
    ms.device_check = within_hw_limit;
    t.push_back(ms);
    auto dm = make(Key::discard_max_bytes, "queue/discard_max_bytes", Phase::limits, ValueKind::integer, 1, kInt64Max,
                   "0 can disable discard for good on recent kernels; leave the key out instead");
    dm.inputs = {Key::discard_granularity};
    dm.device_check = discard_granular;
    t.push_back(dm);
    auto wc = make(Key::write_cache, "queue/write_cache", Phase::limits, ValueKind::choice, 0, 0,
                   "the kernel matches only the start of the text, so a typo would silently apply another mode");
    wc.choices = {"write back", "write through"};
    wc.device_check = flushes_kept;
    t.push_back(wc);
    t.push_back(make(Key::add_random, "queue/add_random", Phase::limits, ValueKind::flag, 0, 1));
    t.push_back(make(Key::iostats, "queue/iostats", Phase::limits, ValueKind::flag, 0, 1));
    for (auto& s : t) s.cause = kernel::WriteCause::limits_commit;

    auto sched = make(Key::scheduler, "queue/scheduler", Phase::scheduler, ValueKind::scheduler);
    sched.mq_only = true;
    sched.cause = kernel::WriteCause::scheduler_switch;
    t.push_back(sched);

    auto nr = make(Key::nr_requests, "queue/nr_requests", Phase::requests, ValueKind::integer, 4, 65536,
                   "the kernel silently raises values below 4");
    nr.mq_only = true;
    nr.cause = kernel::WriteCause::nr_requests_write;
    t.push_back(nr);

    // 7.0+: reset by a scheduler switch and rescaled by an nr_requests write,
    // so it is written after both.
    auto ad = make(Key::async_depth, "queue/async_depth", Phase::requests, ValueKind::integer, 1, 65536,
                   "at least 1; the kernel caps it at nr_requests and refuses it under scheduler none");
    ad.mq_only = true;
    ad.inputs = {Key::nr_requests};
    t.push_back(ad);

    auto wbt = make(Key::wbt_lat_usec, "queue/wbt_lat_usec", Phase::wbt, ValueKind::wbt, 0, 60'000'000,
                    "microseconds, at most 60 s; use \"default\" for the kernel's own value");
    wbt.mq_only = true;
    wbt.readback = wbt_default;
    t.push_back(wbt);

    t.push_back(make(Key::nomerges, "queue/nomerges", Phase::late, ValueKind::integer, 0, 2,
                     "0 merges, 1 simple merges only, 2 no merges"));
    auto rq = make(Key::rq_affinity, "queue/rq_affinity", Phase::late, ValueKind::integer, 0, 2,
                   "the kernel accepts 3 without error and ignores it");
    rq.mq_only = true;
    t.push_back(rq);
    t.push_back(make(Key::device_timeout, "device/timeout", Phase::late, ValueKind::integer, 1, 86400, "seconds"));
    t.push_back(make(Key::device_queue_depth, "device/queue_depth", Phase::late, ValueKind::integer, 1, 65535));

    auto ra = make(Key::read_ahead_kb, "queue/read_ahead_kb", Phase::readahead, ValueKind::integer, 0, 1'048'576,
                   "KiB, at most 1 GiB");
    ra.readback = whole_pages;
    t.push_back(ra);
    return t;
}

const std::vector<AttributeSpec>& table() {
    static const std::vector<AttributeSpec> t = build_table();
    return t;
}

bool valid_tunable_name(std::string_view name) {
    if (name.empty() || name.size() > 64) return false;
    return std::all_of(name.begin(), name.end(),
                       [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

}  // namespace

const AttributeSpec* fixed_attribute(std::string_view key) {
    for (const auto& s : table())
        if (s.key == key) return &s;
    return nullptr;
}

const AttributeSpec& fixed_attribute(Key key) {
    for (const auto& s : table())
        if (s.id == key) return s;
    throw std::logic_error("no attribute row for " + std::string(key_text(key)));
}

std::string value_path(Key key) {
    if (key == Key::iosched) return "queue/iosched";
    if (writable(key)) return fixed_attribute(key).path;
    return "queue/" + std::string(key_text(key));
}

std::pair<std::string, std::string> shown_value(const Values& values, Key key) {
    return {value_path(key), value_of(values, key)};
}

std::optional<AttributeSpec> find_attribute(std::string_view key) {
    if (const auto* fixed = fixed_attribute(key)) return *fixed;
    constexpr std::string_view iosched = "iosched.";
    if (key.substr(0, iosched.size()) == iosched) {
        auto name = key.substr(iosched.size());
        if (!valid_tunable_name(name)) return std::nullopt;
        auto s =
            make(Key::iosched, "queue/iosched/" + std::string(name), Phase::requests, ValueKind::integer, 0, kInt64Max);
        s.key = std::string(key);
        s.mq_only = true;
        // mq-deadline's async_depth moved to queue/async_depth (7.0): that
        // file being there says so.
        if (name == key_text(Key::async_depth)) s.inputs = {Key::async_depth};
        return s;
    }
    return std::nullopt;
}

std::string policy_key_for_attr(const std::string& attr_path) {
    if (attr_path.rfind("queue/iosched/", 0) == 0) return "iosched." + attr_path.substr(14);
    if (attr_path.rfind("queue/", 0) == 0) return attr_path.substr(6);
    if (attr_path == "bdi/read_ahead_kb") return std::string(key_text(Key::read_ahead_kb));
    if (attr_path.rfind("device/", 0) == 0) return "device." + attr_path.substr(7);
    return {};
}

std::vector<std::string> fixed_attribute_keys() {
    std::vector<const AttributeSpec*> specs;
    for (const auto& s : table()) specs.push_back(&s);
    std::stable_sort(specs.begin(), specs.end(),
                     [](const auto* a, const auto* b) { return write_rank(*a) < write_rank(*b); });
    std::vector<std::string> keys;
    for (const auto* s : specs) keys.push_back(s->key);
    return keys;
}

namespace {

// The schedulers the kernel ships; the policy accepts only these names.
const std::vector<std::string>& known_schedulers() {
    static const std::vector<std::string> names = {"none", "mq-deadline", "kyber", "bfq"};
    return names;
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
            std::string msg = spec.key + " must be exactly one of " + quoted_list(spec.choices);
            if (one)
                msg = spec.key + " = " + in_quotes(given.strings.front()) + " is not exactly one of " +
                      quoted_list(spec.choices);
            if (!spec.range_note.empty()) msg += " (" + spec.range_note + ")";
            return refused(msg);
        }
        case ValueKind::scheduler: {
            if (given.type != T::string && given.type != T::strings)
                return refused(spec.key + " must be a string or an array of strings, not " + given.type_name);
            const auto& known = known_schedulers();
            for (const auto& name : given.strings) {
                if (std::find(known.begin(), known.end(), name) == known.end())
                    return refused("unknown scheduler " + in_quotes(name) + " (known: " + quoted_list(known) + ")");
                if (std::count(given.strings.begin(), given.strings.end(), name) > 1)
                    return refused("scheduler " + in_quotes(name) + " is listed twice");
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

}  // namespace blkpolicy::policy
