#include "policy/explain.hpp"

#include <algorithm>

#include "policy/attributes.hpp"
#include "policy/values.hpp"

namespace blkpolicy::policy {

std::string wbt_state_name(int state) {
    switch (state) {
        case 1: return "on-default";
        case 2: return "on-manual";
        case 3: return "off-default";
        case 4: return "off-manual";
    }
    return "unknown (" + std::to_string(state) + ")";
}

namespace {

std::string version_text(const KernelVersion& k) {
    return std::to_string(k.major) + "." + std::to_string(k.minor);
}

void derive_read_ahead(Explanation& e, const Values& v, const ExplainContext& ctx) {
    const bool rot = value_of(v, "rotational") == "1";
    const auto io_opt = parse_int(value_of(v, "optimal_io_size")).value_or(0);
    const auto max_kb = parse_int(value_of(v, "max_sectors_kb")).value_or(0);
    e.inputs = {{"queue/rotational", value_of(v, "rotational")},
                {"queue/optimal_io_size", value_of(v, "optimal_io_size")},
                {"queue/max_sectors_kb", value_of(v, "max_sectors_kb")}};
    const auto& k = ctx.kernel;
    const std::string kv = "kernel " + version_text(k) + ": ";
    auto computed = kernel_readahead_kb(k, rot, io_opt, max_kb);
    if (!computed) {
        e.kernel_default = std::to_string(std::max<std::int64_t>(2 * (io_opt / 1024), 128));
        e.derivation = kv + "max(2 x optimal_io_size, 128 KiB), computed once when the disk is registered";
        e.disturbs = "nothing recomputes it after registration on this kernel";
        return;
    }
    e.kernel_default = std::to_string(*computed);
    if (k.at_least(6, 17) && rot && io_opt == 0)
        e.derivation = kv + "the queue is rotational and has no optimal_io_size, so 2 x max_sectors_kb = 2 x " +
                       std::to_string(max_kb) + " = " + e.kernel_default + " KiB (6.17+)";
    else
        e.derivation = kv + "max(2 x optimal_io_size, 128 KiB) = " + e.kernel_default + " KiB";
    if (k.at_least(6, 15))
        e.disturbs = "every queue-limits commit (writing max_sectors_kb, rotational, discard_max_bytes, write_cache, "
                     "add_random, iostats; a rescan; a stacked device recomputing) raises it to at least " +
                     e.kernel_default + "; a larger value is kept (6.15+)";
    else
        e.disturbs = "every queue-limits commit (writing max_sectors_kb, rotational, discard_max_bytes, write_cache, "
                     "add_random, iostats; a rescan) resets it to " + e.kernel_default + " (6.9-6.14)";
}

void derive_wbt(Explanation& e, const Values& v, const ExplainContext& ctx) {
    const bool rot = value_of(v, "rotational") == "1";
    e.inputs = {{"queue/rotational", value_of(v, "rotational")}, {"queue/scheduler", value_of(v, "scheduler")}};
    e.kernel_default = std::to_string(wbt_default_usec(rot));
    e.derivation = "75000 if the queue was rotational when wbt was initialised, else 2000; fixed at initialisation "
                   "(a loop device is created non-rotational, so it keeps 2000 after attach makes it rotational); "
                   "rotational is " + value_of(v, "rotational") + " now, so -1 or \"default\" would give " +
                   e.kernel_default;
    e.disturbs = "switching to bfq turns a default wbt off (reads 0) and leaving bfq turns it back on; a manual "
                 "value survives scheduler switches; writing the value wbt already keeps is a silent no-op";
    if (ctx.wbt_state) e.inputs.push_back({"debugfs rqos/wbt/enabled", std::to_string(*ctx.wbt_state)});
}

void derive_scheduler(Explanation& e, const Values& v, const ExplainContext& ctx) {
    e.inputs = {{"queue/scheduler", value_of(v, "scheduler")}, {"mq/ (hardware queues)", std::to_string(ctx.hw_queues)}};
    if (ctx.hw_queues == 0) {
        e.derivation = "bio-based queue: no scheduler here; the devices below schedule the requests";
        return;
    }
    if (ctx.hw_queues == 1) {
        e.kernel_default = "mq-deadline";
        e.derivation = "one hardware queue: the kernel picks mq-deadline when it is available";
    } else if (ctx.hw_queues > 1) {
        e.kernel_default = "none";
        e.derivation = std::to_string(ctx.hw_queues) + " hardware queues: the kernel picks none";
    }
    e.disturbs = "a switch resets nr_requests, recreates iosched/ with defaults, and bfq turns a default wbt off";
}

void derive_nr_requests(Explanation& e, const Values& v) {
    e.inputs = {{"queue/scheduler", value_of(v, "scheduler")}};
    e.derivation = "set from the hardware tag depth and the scheduler (" + value_of(v, "scheduler") +
                   ") each time a scheduler is attached";
    e.disturbs = "every scheduler switch resets it";
}

void derive_rotational(Explanation& e, const DeviceFacts& f) {
    e.inputs = {{"driver", f.driver.empty() ? "-" : f.driver}};
    if (f.driver == "virtio_blk")
        e.derivation = "virtio_blk always reports rotational: the host tells the guest nothing about the medium";
    else if (f.driver == "sd")
        e.derivation = "sd reads the Block Device Characteristics VPD page (B1h); without it (QEMU HARDDISK, many "
                       "virtual disks) the disk claims to spin. Revalidation sets it again";
    else if (f.stack == Stack::loop)
        e.derivation = "a loop device is created non-rotational and becomes rotational when a file is attached";
    else if (f.stack == Stack::dm || f.stack == Stack::md)
        e.derivation = "stacked devices combine the flags of the devices below at each table load or array start";
    else
        e.derivation = "reported by the driver";
    e.disturbs = "writing it is a queue-limits commit: read_ahead_kb is recomputed (see read_ahead_kb)";
}

void derive_write_cache(Explanation& e, const DeviceFacts& f) {
    e.inputs = {{"cache_type (the device's own)", f.cache_type.empty() ? "-" : f.cache_type}};
    if (!f.cache_type.empty()) e.kernel_default = f.cache_type.rfind("write back", 0) == 0 ? "write back" : "write through";
    e.derivation = "follows the device's own cache mode; writing it only tells the kernel whether to send flushes";
    e.disturbs = "\"write through\" on a volatile cache drops every flush: fsync still returns 0";
}

}  // namespace

DeviceExplanation explain_device(const DeviceFacts& facts, const Values& values, const DevicePlan& plan,
                                 const ExplainContext& ctx, StackView stack) {
    DeviceExplanation out;
    out.facts = facts;
    out.stack = std::move(stack);

    std::vector<std::string> order;
    for (const auto& a : plan.actions) order.push_back(a.attribute);
    for (const char* notable : {"rotational", "scheduler", "nr_requests", "wbt_lat_usec", "write_cache",
                                "max_sectors_kb", "read_ahead_kb"})
        if (std::find(order.begin(), order.end(), notable) == order.end() && values.count(notable))
            order.push_back(notable);

    for (const auto& attr : order) {
        Explanation e;
        e.attribute = attr;
        e.current = value_of(values, attr);
        for (const auto& a : plan.actions) {
            if (a.attribute != attr) continue;
            e.managed = true;
            e.desired = a.expected.empty() ? a.desired : a.expected;
            e.rule = a.rule;
            e.overridden = a.overridden;
            e.plan_note = a.note;
        }
        if (attr == "read_ahead_kb") derive_read_ahead(e, values, ctx);
        else if (attr == "wbt_lat_usec") derive_wbt(e, values, ctx);
        else if (attr == "scheduler") derive_scheduler(e, values, ctx);
        else if (attr == "nr_requests") derive_nr_requests(e, values);
        else if (attr == "rotational") derive_rotational(e, facts);
        else if (attr == "write_cache") derive_write_cache(e, facts);
        else if (attr == "max_sectors_kb") {
            e.inputs = {{"queue/max_hw_sectors_kb", value_of(values, "max_hw_sectors_kb")}};
            e.derivation = "the driver's limit, capped by the hardware maximum";
            e.disturbs = "writing it is a queue-limits commit: read_ahead_kb is recomputed";
        }
        out.attributes.push_back(std::move(e));
    }

    if (ctx.wbt_state) {
        out.wbt_state = wbt_state_name(*ctx.wbt_state);
        switch (*ctx.wbt_state) {
            case 1: out.wbt_consequence = "the kernel's default latency is in force; bfq would turn it off"; break;
            case 2: out.wbt_consequence = "a written latency is in force and survives scheduler switches"; break;
            case 3:
                out.wbt_consequence = "bfq turned the default off; writing the retained latency alone is a no-op: "
                                      "write 0, then the value";
                break;
            case 4: out.wbt_consequence = "someone wrote 0: throttling is off until a value is written"; break;
        }
    }
    return out;
}

}  // namespace blkpolicy::policy
