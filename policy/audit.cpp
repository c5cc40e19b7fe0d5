#include "policy/audit.hpp"

#include <algorithm>
#include <fnmatch.h>
#include <map>
#include <set>

#include "policy/names.hpp"
#include "policy/values.hpp"

namespace blkpolicy::policy {

namespace {
constexpr Named<Severity> kSeverities[] = {
    {Severity::info, "info"},
    {Severity::warning, "warning"},
    {Severity::critical, "critical"},
};
static_assert(in_enum_order(kSeverities));
}  // namespace

const char* to_string(Severity s) { return name_of(kSeverities, s); }

namespace {

bool glob(const char* pattern, const std::string& value) { return ::fnmatch(pattern, value.c_str(), 0) == 0; }

std::string fix_rule(const std::string& name, const std::string& device, const std::string& set) {
    return "[[rule]]\nname = \"" + name + "\"\n[rule.match]\nkernel = \"" + device + "\"\n[rule.set]\n" + set + "\n";
}

std::string id_text(const DeviceFacts& f) {
    std::string s;
    auto add = [&](const char* key, const std::string& value) {
        if (!value.empty()) s += (s.empty() ? "" : " ") + std::string(key) + "=" + value;
    };
    add("driver", f.driver);
    add("vendor", f.vendor);
    add("model", f.model);
    if (f.stack != Stack::none) add("stack", to_string(f.stack));
    add("dm_name", f.dm_name);
    add("dm_uuid", f.dm_uuid);
    add("md_level", f.md_level);
    add("backing_file", f.loop_backing_file);
    return s.empty() ? "kernel=" + f.name : s;
}

// The devices a filesystem on `name` would sit on: follow holders up.
std::set<std::string> tops_of(const std::map<std::string, const AuditDevice*>& by_name, const std::string& name,
                              int depth = 0) {
    auto it = by_name.find(name);
    if (it == by_name.end() || it->second->facts.holders.empty() || depth > 16) return {name};
    std::set<std::string> out;
    for (const auto& h : it->second->facts.holders) {
        auto t = tops_of(by_name, h, depth + 1);
        out.insert(t.begin(), t.end());
    }
    return out;
}

bool manages_anything(const AuditDevice& d) {
    if (!d.plan) return false;
    for (const auto& a : d.plan->actions)
        if (a.kind != ActionKind::skip) return true;
    return false;
}

}  // namespace

std::string virtual_identity(const DeviceFacts& f) {
    for (const auto& d : f.drivers)
        if (d == "virtio_blk" || d == "virtio_scsi" || d == "xen-blkfront" || d == "vmw_pvscsi" || d == "hv_storvsc")
            return "driver " + d;
    const std::string id = f.vendor + " " + f.model;
    static const char* patterns[] = {"*QEMU*", "*VMware*", "*VMW*", "Msft*Virtual Disk*", "*Virtual disk*",
                                     "*Virtual HD*", "*VBOX*", "Amazon Elastic Block Store*", "*PersistentDisk*",
                                     "*Google*"};
    for (const char* p : patterns)
        if (glob(p, id) || glob(p, f.model)) return "model " + trim(id);
    return {};
}

// The policy sets ATTR on this device and it reads as the policy says: the
// operator chose that value, so it is not a finding.
bool policy_keeps(const AuditDevice& d, const std::string& attr) {
    if (!d.plan) return false;
    for (const auto& a : d.plan->actions)
        if (a.attribute == attr && a.kind == ActionKind::unchanged) return true;
    return false;
}

std::vector<Finding> audit(const AuditInput& in) {
    std::vector<Finding> out;
    std::map<std::string, const AuditDevice*> by_name;
    for (const auto& d : in.devices) by_name[d.facts.name] = &d;

    std::vector<std::string> rq_affinity_inert;
    for (const auto& d : in.devices) {
        const auto& f = d.facts;
        const auto& v = d.values;
        if (!f.has_queue) continue;
        if (!d.has_medium && !in.include_empty) continue;
        const std::string name = f.name;
        const std::string why_virtual = f.stack == Stack::none ? virtual_identity(f) : std::string();

        if (!why_virtual.empty() && value_of(v, "rotational") == "1") {
            out.push_back({name, "rotational-claim-virtual", Severity::warning,
                           name + " claims to spin, but its " + why_virtual +
                               " says it is virtual: the kernel derives wbt and readahead defaults from that claim",
                           {{"queue/rotational", "1"}, {"identity", id_text(f)}},
                           fix_rule("virtual disks do not spin", name, "rotational = 0")});
        }
        const auto ra = parse_int(value_of(v, "read_ahead_kb"));
        if (!why_virtual.empty() && ra && *ra >= 1024 && !policy_keeps(d, "read_ahead_kb")) {
            out.push_back({name, "readahead-amplification", Severity::warning,
                           name + " reads ahead " + std::to_string(*ra) + " KiB, " + std::to_string(*ra / 128) +
                               "x the old 128 KiB floor: random mmap reads drag in that much each",
                           {{"queue/read_ahead_kb", value_of(v, "read_ahead_kb")},
                            {"queue/max_sectors_kb", value_of(v, "max_sectors_kb")},
                            {"queue/rotational", value_of(v, "rotational")}},
                           fix_rule("virtual disks read ahead like SSDs", name, "read_ahead_kb = 128")});
        }
        if (!why_virtual.empty() && value_of(v, "wbt_lat_usec") == "75000" && !policy_keeps(d, "wbt_lat_usec")) {
            out.push_back({name, "wbt-rotational-default-virtual", Severity::warning,
                           name + " throttles writeback to a 75 ms target, the default for spinning disks",
                           {{"queue/wbt_lat_usec", "75000"}, {"identity", id_text(f)}},
                           fix_rule("virtual disks do not spin", name, "wbt_lat_usec = 2000")});
        }

        const std::string wc = value_of(v, "write_cache");
        if (!f.cache_type.empty() && !wc.empty()) {
            const bool dev_wb = f.cache_type.rfind("write back", 0) == 0;
            const bool q_wb = wc == "write back";
            if (dev_wb && !q_wb) {
                out.push_back({name, "write-through-volatile-cache", Severity::critical,
                               name + " has a volatile write-back cache, but queue/write_cache says write through: the "
                                      "kernel sends no flushes, fsync returns 0 and data is lost on power failure",
                               {{"queue/write_cache", wc}, {"cache_type", f.cache_type}},
                               fix_rule("keep flushes", name, "write_cache = \"write back\"")});
            } else if (!dev_wb && q_wb) {
                out.push_back({name, "write-cache-mismatch", Severity::warning,
                               name + ": queue/write_cache says write back but the device's own cache mode is " +
                                   f.cache_type + ": somebody wrote it",
                               {{"queue/write_cache", wc}, {"cache_type", f.cache_type}},
                               {}});
            }
        }

        if (value_of(v, "scheduler") == "bfq" && value_of(v, "wbt_lat_usec") == "0" &&
            (!d.wbt_state || *d.wbt_state == 3)) {
            std::vector<std::pair<std::string, std::string>> ev = {{"queue/scheduler", "bfq"},
                                                                   {"queue/wbt_lat_usec", "0"}};
            if (d.wbt_state) ev.push_back({"debugfs rqos/wbt/enabled", "3 (off-default)"});
            out.push_back({name, "bfq-disabled-wbt", Severity::warning,
                           name + " runs bfq, which turned the default writeback throttling off; writing the old "
                                  "latency back alone does nothing",
                           ev, fix_rule("keep wbt under bfq", name, "scheduler = \"bfq\"\nwbt_lat_usec = 2000")});
        }

        if (in.single_llc && *in.single_llc && value_of(v, "rq_affinity") == "1") rq_affinity_inert.push_back(name);

        if (in.with_policy && !f.holders.empty() && manages_anything(d)) {
            for (const auto& top : tops_of(by_name, name)) {
                auto t = by_name.find(top);
                if (t == by_name.end() || manages_anything(*t->second)) continue;
                out.push_back({name, "stack-lower-only", Severity::warning,
                               name + " is tuned by the policy, but filesystems read through " + top +
                                   ", which no rule tunes: readahead and scheduling of " + top + " decide",
                               {{"holders", join(f.holders, " ")}, {"top", top}},
                               fix_rule("tune the device filesystems use", top, "read_ahead_kb = 128")});
            }
        }

        if (d.plan) {
            for (const auto& a : d.plan->actions) {
                if (a.kind == ActionKind::skip) continue;
                if (const auto* w = find_udev_writer(in.udev_rules, name, a.attribute)) {
                    out.push_back({name, "udev-rule-conflict", Severity::warning,
                                   "udev rule " + w->where() + " writes " + a.attribute + "=" + w->value + " on " +
                                       name + ", which the policy sets to " + a.desired + " (" +
                                       a.rule.pos.file_line() + ")",
                                   {{"udev rule", w->where()}, {"policy rule", a.rule.pos.file_line()}},
                                   {}});
                }
            }
            if (in.with_policy && d.plan->matched.empty()) {
                out.push_back({name, "no-matching-rule", Severity::info, "no policy rule matches " + name,
                               {{"identity", id_text(f)}}, {}});
            }
        }
    }
    // A property of the host, not of a device: said once, for all of them.
    if (!rq_affinity_inert.empty()) {
        out.push_back({std::string(kHostDevice), "rq-affinity-inert", Severity::info,
                       "rq_affinity=1 steers completions to the submitting CPU's cache group, but every CPU shares "
                       "one last-level cache, so it behaves as 0 on " + std::to_string(rq_affinity_inert.size()) +
                           " device(s)",
                       {{"devices", join(rq_affinity_inert, " ")},
                        {"queue/rq_affinity", "1"},
                        {"cpu cache", "one last-level cache for all CPUs"}},
                       "[[rule]]\nname = \"complete on the submitting CPU\"\n[rule.set]\nrq_affinity = 2\n"});
    }
    return out;
}

}  // namespace blkpolicy::policy
