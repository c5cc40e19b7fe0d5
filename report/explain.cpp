// SPDX-License-Identifier: MIT
#include "report/explain.hpp"

#include <algorithm>
#include <iterator>

#include "policy/attributes.hpp"
#include "policy/unit.hpp"
#include "util/text.hpp"

namespace blkpolicy::report {

using namespace blkpolicy::kernel;  // the rows this layer reads

namespace {

// wbt state from debugfs (rqos/wbt/enabled): 1 on-default, 2 on-manual,
// 3 off-default, 4 off-manual.
std::string wbt_state_name(int state) {
    switch (state) {
        case 1:
            return "on-default";
        case 2:
            return "on-manual";
        case 3:
            return "off-default";
        case 4:
            return "off-manual";
    }
    return "unknown (" + std::to_string(state) + ")";
}

std::string version_text(const KernelVersion& k) { return std::to_string(k.major) + "." + std::to_string(k.minor); }

// What writing a queue-limits attribute does on this kernel, as its row says.
std::string limits_commit_text(const KernelVersion& k) {
    if (disturbed_by(WriteCause::limits_commit, Key::read_ahead_kb, k))
        return "writing it is a queue-limits commit: read_ahead_kb is recomputed";
    return "writing it is a queue-limits commit, which on this kernel (before 6.9) leaves read_ahead_kb alone";
}

// What a scheduler switch moves on this kernel, from the rows.
std::string switch_text(const KernelVersion& k) {
    std::vector<std::string> moved;
    if (disturbed_by(WriteCause::scheduler_switch, Key::nr_requests, k)) moved.push_back("resets nr_requests");
    if (disturbed_by(WriteCause::scheduler_switch, Key::async_depth, k)) moved.push_back("resets async_depth");
    if (disturbed_by(WriteCause::scheduler_switch, Key::iosched, k))
        moved.push_back("recreates iosched/ with defaults");
    if (disturbed_by(WriteCause::scheduler_switch, Key::wbt_lat_usec, k))
        moved.push_back("bfq turns a default wbt off");
    std::string out = "a switch";
    for (std::size_t i = 0; i < moved.size(); ++i)
        out += (i == 0 ? " " : i + 1 == moved.size() ? ", and " : ", ") + moved[i];
    return out;
}

void derive_read_ahead(Explanation& e, const policy::DeviceFacts&, const policy::Values& v, const ExplainContext& ctx) {
    const bool rot = policy::value_of(v, Key::rotational) == "1";
    const auto io_opt = util::parse_int(policy::value_of(v, Key::optimal_io_size)).value_or(0);
    const auto max_kb = util::parse_int(policy::value_of(v, Key::max_sectors_kb)).value_or(0);
    e.inputs = {policy::shown_value(v, Key::rotational), policy::shown_value(v, Key::optimal_io_size),
                policy::shown_value(v, Key::max_sectors_kb)};
    const auto& k = ctx.kernel;
    const std::string kv = "kernel " + version_text(k) + ": ";
    const auto& on_commit = kernel_row_for(KQuestion::readahead_on_commit, k);
    e.kernel_rule = on_commit.id;
    e.kernel_rule_standing = standing_on(on_commit, k);
    auto computed = kernel_readahead_kb(k, rot, io_opt, max_kb);
    if (!computed) {
        e.kernel_default = std::to_string(registration_readahead_kb(io_opt));
        e.derivation = kv + "max(2 x optimal_io_size, 128 KiB), computed once when the disk is registered";
        e.disturbs = "nothing recomputes it after registration on this kernel";
        return;
    }
    e.kernel_default = std::to_string(*computed);
    if (rot && io_opt == 0 &&
        kernel_row_for(KQuestion::readahead_default, k).handle == KRow::readahead_default_2x_max_sectors)
        e.derivation = kv + "the queue is rotational and has no optimal_io_size, so 2 x max_sectors_kb = 2 x " +
                       std::to_string(max_kb) + " = " + e.kernel_default + " KiB (6.17+)";
    else
        e.derivation = kv + "max(2 x optimal_io_size, 128 KiB) = " + e.kernel_default + " KiB";
    const std::string commits =
        "every queue-limits commit (writing max_sectors_kb, rotational, discard_max_bytes, "
        "write_cache, add_random, iostats; a rescan; a stacked device recomputing)";
    switch (readahead_on_commit(k)) {
        case ReadaheadOnCommit::raise:
            e.disturbs = commits + " raises it to at least " + e.kernel_default + "; a larger value is kept (6.15+" +
                         (k.at_least(6, 15) ? std::string(")") : std::string(", taken back into this stable series)"));
            break;
        case ReadaheadOnCommit::reset:
            e.disturbs = commits + " resets it to " + e.kernel_default + " (6.9-6.14)";
            break;
        default:
            if (on_commit.beyond_observed(k)) {
                e.disturbs = commits + " recomputes it; that it only raises it was " +
                             e.kernel_rule_standing.substr(0, e.kernel_rule_standing.find(':')) + ", so on " +
                             version_text(k) +
                             " it is not taken on the version's word: blkpolicy reads it back after every write";
                break;
            }
            e.disturbs = commits + " resets it to " + e.kernel_default +
                         ", or only raises it where this stable series took the 6.15 rule back (not known for " +
                         version_text(k) + "." + std::to_string(k.patch) +
                         "): blkpolicy reads it back after every write either way";
            break;
    }
}

// Whether the kernel made this queue rotational when it registered it, and
// why (the input is the driver and what it read from the device).
struct RotationalDefault {
    std::optional<bool> rotational;
    std::string why;
};

// Why the kernel made the queue rotational or not, by the kernel row that
// decides it for this kind of device.
RotationalDefault rotational_default(const policy::DeviceFacts& f, const policy::Values& v, const ExplainContext& ctx) {
    if (f.driver == "virtio_blk") {
        rotational_row(RotationalSource::virtio_blk);
        return {true, "virtio_blk always reports rotational: the host tells the guest nothing about the medium"};
    }
    if (f.driver == "nvme") {
        rotational_row(RotationalSource::nvme);
        return {false, "NVMe namespaces are non-rotational"};
    }
    if (f.driver == "sd") {
        rotational_row(ctx.rotation_rate ? RotationalSource::sd_vpd_b1 : RotationalSource::sd_no_vpd);
        if (!ctx.rotation_rate)
            return {true, "sd found no Block Device Characteristics VPD page (B1h), so the disk claims to spin"};
        if (*ctx.rotation_rate == 1) return {false, "sd read medium rotation rate 1 (non-rotating) from VPD page B1h"};
        return {true, "sd read medium rotation rate " +
                          (*ctx.rotation_rate == 0 ? std::string("0 (not reported)")
                                                   : std::to_string(*ctx.rotation_rate) + " rpm") +
                          " from VPD page B1h, so the disk spins"};
    }
    if (f.stack == policy::Stack::loop) {
        rotational_row(f.loop_backing_file.empty() ? RotationalSource::loop_unbound : RotationalSource::loop_backing);
        if (f.loop_backing_file.empty()) {
            const bool rot = loop_created_rotational(ctx.kernel);
            return {rot, std::string("an unbound loop device starts ") +
                             (rot ? "rotational (before 6.11)" : "non-rotational (6.11+)")};
        }
        if (!ctx.backing_known) return {std::nullopt, "the loop driver takes it from the backing file's device"};
        if (!ctx.backing_rotational)
            return {false,
                    "the backing file is on " + ctx.backing_store + ", which has no block device: non-rotational"};
        return {*ctx.backing_rotational, "the loop driver takes it from the backing file's device, " +
                                             ctx.backing_store +
                                             (*ctx.backing_rotational ? " (rotational)" : " (non-rotational)")};
    }
    if (f.stack == policy::Stack::dm || f.stack == policy::Stack::md) {
        rotational_row(RotationalSource::stacked);
        if (ctx.lowers_rotational.empty()) return {std::nullopt, "stacked on nothing the kernel shows"};
        bool any = false;
        std::string which;
        for (const auto& [name, rot] : ctx.lowers_rotational) {
            any = any || rot;
            which += (which.empty() ? "" : ", ") + name + "=" + (rot ? "1" : "0");
        }
        return {any, "rotational when any device below is (" + which + "), combined at each table load or array start"};
    }
    rotational_row(RotationalSource::driver);
    return {policy::value_of(v, Key::rotational) == "1", "reported by the driver"};
}

void derive_wbt(Explanation& e, const policy::DeviceFacts& f, const policy::Values& v, const ExplainContext& ctx) {
    const bool rot_now = policy::value_of(v, Key::rotational) == "1";
    e.inputs = {policy::shown_value(v, Key::rotational), policy::shown_value(v, Key::scheduler)};
    // Fixed when wbt started on the queue, at registration: from the
    // rotational flag the driver set then (a loop device's creation flag,
    // before any file was attached).
    const std::optional<bool> at_init = f.stack == policy::Stack::loop
                                            ? std::optional<bool>(loop_created_rotational(ctx.kernel))
                                            : rotational_default(f, v, ctx).rotational;
    if (at_init) e.kernel_default = std::to_string(wbt_default_usec(*at_init));
    e.derivation = "75000 if the queue was rotational when wbt was initialised (at registration), else 2000";
    if (f.stack == policy::Stack::loop)
        e.derivation += std::string("; a loop device is created ") +
                        (loop_created_rotational(ctx.kernel) ? "rotational on this kernel (before 6.11)"
                                                             : "non-rotational (6.11+), so it keeps 2000 after attach");
    e.derivation += "; rotational is " + policy::value_of(v, Key::rotational) +
                    " now, so -1 or \"default\" would give " + std::to_string(wbt_default_usec(rot_now));
    const auto& row = kernel_row_for(KQuestion::bfq_off_wbt_reads, ctx.kernel);
    e.kernel_rule = row.id;
    e.kernel_rule_standing = standing_on(row, ctx.kernel);
    e.disturbs =
        std::string("switching to bfq turns a default wbt off (reads 0") +
        (bfq_off_wbt_reads_zero(ctx.kernel) ? ")" : "; this kernel still shows the old latency, debugfs tells)") +
        " and leaving bfq turns it back on; a manual value survives scheduler switches; writing the value "
        "wbt already keeps is a silent no-op";
    if (ctx.wbt_state) e.inputs.push_back({"debugfs rqos/wbt/enabled", std::to_string(*ctx.wbt_state)});
}

void derive_scheduler(Explanation& e, const policy::DeviceFacts& f, const policy::Values& v,
                      const ExplainContext& ctx) {
    e.inputs = {policy::shown_value(v, Key::scheduler), {"mq/ (hardware queues)", std::to_string(ctx.hw_queues)}};
    if (!f.schedulers.empty()) e.inputs.push_back({"loaded schedulers", util::join(f.schedulers, " ")});
    if (ctx.loadable_schedulers)
        e.inputs.push_back({"loadable as modules",
                            ctx.loadable_schedulers->empty() ? "-" : util::join(*ctx.loadable_schedulers, " ")});
    if (ctx.hw_queues == 0) {
        scheduler_default_row(SchedulerDefault::bio_based);
        e.kernel_default = "none";
        e.derivation =
            "bio-based queue: no scheduler here (the file reads none); the devices below schedule the "
            "requests";
        return;
    }
    if (f.stack == policy::Stack::loop) {
        scheduler_default_row(SchedulerDefault::loop_none);
        e.kernel_default = "none";
        e.derivation = "the loop driver asks for no scheduler by default (BLK_MQ_F_NO_SCHED_BY_DEFAULT)";
    } else if (ctx.hw_queues == 1) {
        scheduler_default_row(SchedulerDefault::one_queue_mq_deadline);
        e.kernel_default = "mq-deadline";
        e.derivation = "one hardware queue: the kernel picks mq-deadline when it is available";
    } else if (ctx.hw_queues > 1) {
        scheduler_default_row(SchedulerDefault::many_queues_none);
        e.kernel_default = "none";
        e.derivation = std::to_string(ctx.hw_queues) + " hardware queues: the kernel picks none";
    }
    e.disturbs = switch_text(ctx.kernel);
}

void derive_nr_requests(Explanation& e, const policy::DeviceFacts&, const policy::Values& v,
                        const ExplainContext& ctx) {
    const auto sched = policy::value_of(v, Key::scheduler);
    e.inputs = {{policy::value_path(Key::scheduler), sched},
                {"mq/0/nr_tags (hardware queue depth)", std::to_string(ctx.hw_tags)}};
    if (ctx.hw_queues == 0) {
        kernel_row(KRow::nr_requests_default_bio_based);
        e.kernel_default = "128";
        e.derivation =
            "bio-based queue: it allocates no requests; the file, where the kernel shows it, reads the "
            "fixed default 128";
        e.disturbs = "nothing: there is no scheduler to switch";
        return;
    }
    if (ctx.hw_tags > 0) {
        const bool none = sched == "none" || sched.empty();
        e.kernel_default = std::to_string(nr_requests_default(ctx.hw_tags, none));
        e.derivation = none ? "no scheduler: the hardware queue depth, " + std::to_string(ctx.hw_tags)
                            : "with a scheduler (" + sched + "): 2 x min(queue depth " + std::to_string(ctx.hw_tags) +
                                  ", 128) = " + e.kernel_default;
    } else {
        e.derivation = "set from the hardware tag depth and the scheduler each time a scheduler is attached";
    }
    e.disturbs = "every scheduler switch resets it";
    if (disturbed_by(WriteCause::nr_requests_write, Key::async_depth, ctx.kernel))
        e.disturbs += "; writing it rescales async_depth in proportion";
}

void derive_async_depth(Explanation& e, const policy::DeviceFacts&, const policy::Values& v,
                        const ExplainContext& ctx) {
    const auto sched = policy::value_of(v, Key::scheduler);
    const auto nr = util::parse_int(policy::value_of(v, Key::nr_requests));
    e.inputs = {{policy::value_path(Key::scheduler), sched}, policy::shown_value(v, Key::nr_requests)};
    const auto& row = kernel_row_for(KQuestion::async_depth, ctx.kernel);
    e.kernel_rule = row.id;
    e.kernel_rule_standing = standing_on(row, ctx.kernel);
    if (nr) {
        e.kernel_default = std::to_string(async_depth_default(*nr, sched));
        e.derivation = sched == "kyber" || sched == "bfq"
                           ? "under " + sched + ": 3/4 of nr_requests " + std::to_string(*nr) + " = " + e.kernel_default
                           : "under " + (sched.empty() ? std::string("none") : sched) + ": nr_requests itself, " +
                                 e.kernel_default;
        e.derivation += ", set at each scheduler switch (7.0+)";
    }
    e.disturbs =
        "every scheduler switch resets it; writing nr_requests scales it in proportion; a written value "
        "above nr_requests reads back as nr_requests, and under none the kernel refuses any";
}

void derive_rotational(Explanation& e, const policy::DeviceFacts& f, const policy::Values& v,
                       const ExplainContext& ctx) {
    e.inputs = {{"driver", f.driver.empty() ? "-" : f.driver}};
    if (f.driver == "sd")
        e.inputs.push_back(
            {"device/vpd_pgb1 rotation rate", ctx.rotation_rate ? std::to_string(*ctx.rotation_rate) : "-"});
    if (f.stack == policy::Stack::loop && !f.loop_backing_file.empty())
        e.inputs.push_back({"loop/backing_file", f.loop_backing_file});
    for (const auto& [name, rot] : ctx.lowers_rotational)
        e.inputs.push_back({name + "/queue/rotational", rot ? "1" : "0"});
    const auto d = rotational_default(f, v, ctx);
    if (d.rotational) e.kernel_default = *d.rotational ? "1" : "0";
    e.derivation = d.why;
    if (f.driver == "sd") e.derivation += "; sd revalidation sets it again";
    e.disturbs = limits_commit_text(ctx.kernel) + " (see read_ahead_kb)";
}

void derive_write_cache(Explanation& e, const policy::DeviceFacts& f, const policy::Values&, const ExplainContext&) {
    e.inputs = {{"cache_type (the device's own)", f.cache_type.empty() ? "-" : f.cache_type}};
    if (!f.cache_type.empty()) e.kernel_default = write_cache_readback(f.cache_type).value_or("write through");
    e.derivation = "follows the device's own cache mode; writing it only tells the kernel whether to send flushes";
    e.disturbs = "\"write through\" on a volatile cache drops every flush: fsync still returns 0";
}

void derive_max_sectors(Explanation& e, const policy::DeviceFacts&, const policy::Values& v,
                        const ExplainContext& ctx) {
    e.inputs = {policy::shown_value(v, Key::max_hw_sectors_kb)};
    e.derivation = "the driver's limit, capped by the hardware maximum";
    e.disturbs = limits_commit_text(ctx.kernel);
}

void derive_io_timeout(Explanation& e, const policy::DeviceFacts& f, const policy::Values& v,
                       const ExplainContext& ctx) {
    const auto& by_driver = kernel_row(KRow::io_timeout_default_by_driver);
    e.kernel_rule = by_driver.id;
    e.kernel_rule_standing = standing_on(by_driver, ctx.kernel);
    const bool scsi = std::find(f.drivers.begin(), f.drivers.end(), "sd") != f.drivers.end();
    const bool nvme = std::find(f.drivers.begin(), f.drivers.end(), "nvme") != f.drivers.end();
    if (nvme && ctx.nvme_io_timeout_s)
        e.inputs = {{"module/nvme_core/parameters/io_timeout", std::to_string(*ctx.nvme_io_timeout_s)}};
    if (scsi) e.inputs = {policy::shown_value(v, Key::device_timeout)};
    if (auto ms = io_timeout_default_ms(nvme ? "nvme" : scsi ? "sd" : f.driver, ctx.nvme_io_timeout_s)) {
        e.kernel_default = std::to_string(*ms);
        e.derivation = nvme ? "NVMe sets it from nvme_core.io_timeout (seconds), for every NVMe disk alike"
                            : "sd starts every disk at 30 s (SD_TIMEOUT); udev rules often change device/timeout";
    } else {
        e.derivation = "set by the driver when it adds the disk";
    }
    e.disturbs = "kept in ticks: a write rounds up to a whole tick, and 2^31 ms or more is the longest timer there is";
    if (scsi) {
        kernel_row(KRow::io_timeout_one_timer_with_scsi_timeout);
        e.disturbs += "; device/timeout is the same timer in seconds: writing either moves the other";
    }
}

void derive_nomerges(Explanation& e, const policy::DeviceFacts&, const policy::Values&, const ExplainContext&) {
    e.kernel_default = "0";
    e.derivation = "a queue is made with merging on; only a write turns it off";
    e.disturbs = "nothing the kernel does later";
}

void derive_rq_affinity(Explanation& e, const policy::DeviceFacts&, const policy::Values&, const ExplainContext& ctx) {
    if (ctx.hw_queues == 0) {
        e.derivation = "bio-based queue: no request completes here";
        return;
    }
    e.kernel_default = "1";
    e.derivation = "a blk-mq queue is made completing each request in the submitting CPU's cache group";
    e.disturbs = "nothing the kernel does later";
}

// The attributes whose kernel side explain derives, each with its
// derivation, in the order the ones the policy leaves alone are listed.
using Derive = void (*)(Explanation&, const policy::DeviceFacts&, const policy::Values&, const ExplainContext&);
struct Derivation {
    Key key;
    Derive derive;
};
constexpr Derivation kDerivations[] = {
    {Key::rotational, derive_rotational},      {Key::scheduler, derive_scheduler},
    {Key::nr_requests, derive_nr_requests},    {Key::async_depth, derive_async_depth},
    {Key::wbt_lat_usec, derive_wbt},           {Key::write_cache, derive_write_cache},
    {Key::max_sectors_kb, derive_max_sectors}, {Key::io_timeout, derive_io_timeout},
    {Key::nomerges, derive_nomerges},          {Key::rq_affinity, derive_rq_affinity},
    {Key::read_ahead_kb, derive_read_ahead},
};

const Derivation* derivation_of(std::string_view attribute) {
    const auto key = policy::key_of(attribute);
    for (const auto& d : kDerivations)
        if (key == d.key) return &d;
    return nullptr;
}

}  // namespace

DeviceExplanation explain_device(const policy::DeviceFacts& facts, const policy::Values& values,
                                 const policy::DevicePlan& plan, const ExplainContext& ctx, StackView stack) {
    DeviceExplanation out;
    out.facts = facts;
    out.stack = std::move(stack);

    std::vector<std::string> order;
    for (const auto& a : plan.actions) order.push_back(a.attribute);
    auto notable = [&](policy::Key key) {
        const std::string name(policy::key_text(key));
        if (std::find(order.begin(), order.end(), name) == order.end() && values.count(name)) order.push_back(name);
    };
    for (const auto& d : kDerivations) notable(d.key);
    // Then every attribute whose unit knows its kernel default (bdi, md).
    for (const auto& k : policy::kKeyNames)
        if (const auto* hooks = policy::hooks_of(k.value); hooks && hooks->kernel_default) notable(k.value);

    for (const auto& attr : order) {
        Explanation e;
        e.attribute = attr;
        e.current = policy::value_of(values, attr);
        for (const auto& a : plan.actions) {
            if (a.attribute != attr) continue;
            e.managed = true;
            e.desired = a.expected.empty() ? a.desired : a.expected;
            e.rule = a.rule;
            e.overridden = a.overridden;
            e.plan_note = a.note;
        }
        if (const auto* d = derivation_of(attr)) {
            d->derive(e, facts, values, ctx);
        } else if (const auto key = policy::key_of(attr)) {
            const auto* hooks = policy::hooks_of(*key);
            if (auto k =
                    hooks && hooks->kernel_default ? hooks->kernel_default(*key, facts, values, ctx) : std::nullopt) {
                e.kernel_default = std::move(k->value);
                e.kernel_rule = k->row;
                e.derivation = std::move(k->derivation);
                e.disturbs = std::move(k->disturbs);
            }
        }
        out.attributes.push_back(std::move(e));
    }
    for (const auto& found : writers::writers_of(ctx.writers, ctx.device)) {
        const auto& w = *found.writer;
        auto it = std::find_if(out.attributes.begin(), out.attributes.end(),
                               [&](const Explanation& x) { return x.attribute == w.attribute; });
        if (it == out.attributes.end()) {
            Explanation e;
            e.attribute = w.attribute;
            e.current = policy::value_of(values, w.attribute);
            out.attributes.push_back(std::move(e));
            it = std::prev(out.attributes.end());
        }
        it->written_by.push_back(found);
    }

    if (ctx.wbt_state) {
        out.wbt_state = wbt_state_name(*ctx.wbt_state);
        switch (*ctx.wbt_state) {
            case 1:
                out.wbt_consequence = "the kernel's default latency is in force; bfq would turn it off";
                break;
            case 2:
                out.wbt_consequence = "a written latency is in force and survives scheduler switches";
                break;
            case 3:
                out.wbt_consequence =
                    "bfq turned the default off; writing the retained latency alone is a no-op: "
                    "write 0, then the value";
                break;
            case 4:
                out.wbt_consequence = "someone wrote 0: throttling is off until a value is written";
                break;
        }
    }
    return out;
}

}  // namespace blkpolicy::report
