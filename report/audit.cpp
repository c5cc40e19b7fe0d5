// SPDX-License-Identifier: MIT
#include "report/audit.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <set>

#include "policy/toml_text.hpp"
#include "util/names.hpp"
#include "util/text.hpp"

namespace blkpolicy::report {

using namespace blkpolicy::kernel;  // the rows this layer reads

namespace {
constexpr util::Named<Severity> kSeverities[] = {
    {Severity::info, "info"},
    {Severity::warning, "warning"},
    {Severity::critical, "critical"},
};
static_assert(util::in_enum_order(kSeverities));
}  // namespace

const char* to_string(Severity s) { return util::name_of(kSeverities, s); }

namespace {

// A fix's policy key.
std::string key(Key k) { return std::string(policy::key_text(k)); }

bool glob(const char* pattern, const std::string& value) { return ::fnmatch(pattern, value.c_str(), 0) == 0; }

std::string fix_rule(const std::string& name, const std::string& device, std::vector<policy::TomlEntry> set) {
    return policy::emit_rule({name, {}, {}, {{"kernel", policy::toml_quote(device), {}}}, std::move(set)});
}

std::string id_text(const policy::DeviceFacts& f) {
    std::string s;
    auto add = [&](const char* key, const std::string& value) {
        if (!value.empty()) s += (s.empty() ? "" : " ") + std::string(key) + "=" + value;
    };
    add("driver", f.driver);
    add("vendor", f.vendor);
    add("model", f.model);
    if (f.stack != policy::Stack::none) add("stack", to_string(f.stack));
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
        if (a.kind != policy::ActionKind::skip && a.kind != policy::ActionKind::unavailable) return true;
    return false;
}

}  // namespace

std::string virtual_identity(const policy::DeviceFacts& f) {
    for (const auto& d : f.drivers)
        if (d == "virtio_blk" || d == "virtio_scsi" || d == "xen-blkfront" || d == "vmw_pvscsi" || d == "hv_storvsc")
            return "driver " + d;
    const std::string id = f.vendor + " " + f.model;
    static const char* patterns[] = {"*QEMU*",           "*VMware*",     "*VMW*",  "Msft*Virtual Disk*",
                                     "*Virtual disk*",   "*Virtual HD*", "*VBOX*", "Amazon Elastic Block Store*",
                                     "*PersistentDisk*", "*Google*"};
    for (const char* p : patterns)
        if (glob(p, id) || glob(p, f.model)) return "model " + util::trim(id);
    return {};
}

// The policy sets ATTR on this device and it reads as the policy says: the
// operator chose that value, so it is not a finding.
bool policy_keeps(const AuditDevice& d, Key attr) {
    if (!d.plan) return false;
    for (const auto& a : d.plan->actions)
        if (a.id == attr && a.kind == policy::ActionKind::unchanged) return true;
    return false;
}

namespace {

// What a check sees: the device, the whole input, every device by name, and
// the host-wide lists that checks fill for a finding said once at the end.
struct AuditState {
    const AuditInput& in;
    std::map<std::string, const AuditDevice*> by_name;
    std::vector<std::string> rq_affinity_inert;
};

struct Subject {
    const AuditDevice& d;
    const policy::DeviceFacts& f;
    const policy::Values& v;
    const std::string& name;
    const std::string& why_virtual;  // why the identity says virtual; empty for a real drive (and for stacks)
};

// A check adds what it found; code and severity come from its row.
struct Found {
    std::string device;
    std::string message;
    std::vector<std::pair<std::string, std::string>> evidence;
    std::string fix;
};
using Findings = std::vector<Found>;

void rotational_claim_virtual(const Subject& s, AuditState&, Findings& out) {
    if (s.why_virtual.empty() || policy::value_of(s.v, Key::rotational) != "1") return;
    out.push_back({s.name,
                   s.name + " claims to spin, but its " + s.why_virtual +
                       " says it is virtual: the kernel derives wbt and readahead defaults from that claim",
                   {{policy::value_path(Key::rotational), "1"}, {"identity", id_text(s.f)}},
                   fix_rule("virtual disks do not spin", s.name, {{key(Key::rotational), "0", {}}})});
}

void readahead_amplification(const Subject& s, AuditState&, Findings& out) {
    const auto ra = util::parse_int(policy::value_of(s.v, Key::read_ahead_kb));
    if (s.why_virtual.empty() || !ra || *ra < 1024 || policy_keeps(s.d, Key::read_ahead_kb)) return;
    out.push_back({s.name,
                   s.name + " reads ahead " + std::to_string(*ra) + " KiB, " + std::to_string(*ra / 128) +
                       "x the old 128 KiB floor: random mmap reads drag in that much each",
                   {policy::shown_value(s.v, Key::read_ahead_kb), policy::shown_value(s.v, Key::max_sectors_kb),
                    policy::shown_value(s.v, Key::rotational)},
                   fix_rule("virtual disks read ahead like SSDs", s.name, {{key(Key::read_ahead_kb), "128", {}}})});
}

void wbt_rotational_default_virtual(const Subject& s, AuditState&, Findings& out) {
    if (s.why_virtual.empty() || policy::value_of(s.v, Key::wbt_lat_usec) != "75000" ||
        policy_keeps(s.d, Key::wbt_lat_usec))
        return;
    out.push_back({s.name,
                   s.name + " throttles writeback to a 75 ms target, the default for spinning disks",
                   {{policy::value_path(Key::wbt_lat_usec), "75000"}, {"identity", id_text(s.f)}},
                   fix_rule("virtual disks do not spin", s.name, {{key(Key::wbt_lat_usec), "2000", {}}})});
}

// The device's own cache mode against queue/write_cache: nullopt when
// either is unknown, else {device caches write-back, queue says write back}.
std::optional<std::pair<bool, bool>> cache_modes(const Subject& s) {
    const std::string wc = policy::value_of(s.v, Key::write_cache);
    if (s.f.cache_type.empty() || wc.empty()) return std::nullopt;
    return std::pair{s.f.cache_type.rfind("write back", 0) == 0, wc == "write back"};
}

void write_through_volatile_cache(const Subject& s, AuditState&, Findings& out) {
    const auto m = cache_modes(s);
    if (!m || !m->first || m->second) return;
    out.push_back({s.name,
                   s.name + " has a volatile write-back cache, but queue/write_cache says write through: the "
                            "kernel sends no flushes, fsync returns 0 and data is lost on power failure",
                   {policy::shown_value(s.v, Key::write_cache), {"cache_type", s.f.cache_type}},
                   keep_flushes_fix(s.name)});
}

void write_cache_mismatch(const Subject& s, AuditState&, Findings& out) {
    const auto m = cache_modes(s);
    if (!m || m->first || !m->second) return;
    out.push_back({s.name,
                   s.name + ": queue/write_cache says write back but the device's own cache mode is " + s.f.cache_type +
                       ": somebody wrote it",
                   {policy::shown_value(s.v, Key::write_cache), {"cache_type", s.f.cache_type}},
                   {}});
}

// Whether bfq turned the default wbt off: debugfs says so (enabled = 3);
// without debugfs, sysfs reading 0 says so only on a kernel that shows it
// that way (the bfq-off-wbt-reads rows: 6.1 still shows the old latency,
// and a 0 there was written by someone).
void bfq_disabled_wbt(const Subject& s, AuditState& st, Findings& out) {
    if (policy::value_of(s.v, Key::scheduler) != "bfq") return;
    const std::string shown = policy::value_of(s.v, Key::wbt_lat_usec);
    const bool reads_zero = st.in.host.kernel.major == 0 || bfq_off_wbt_reads_zero(st.in.host.kernel);
    const bool off = s.d.wbt_state ? *s.d.wbt_state == 3 : reads_zero && shown == "0";
    if (!off) return;
    std::vector<std::pair<std::string, std::string>> ev = {{policy::value_path(Key::scheduler), "bfq"},
                                                           {policy::value_path(Key::wbt_lat_usec), shown}};
    if (s.d.wbt_state) ev.push_back({"debugfs rqos/wbt/enabled", "3 (off-default)"});
    out.push_back({s.name,
                   s.name + " runs bfq, which turned the default writeback throttling off; writing the old "
                            "latency back alone does nothing",
                   ev,
                   fix_rule("keep wbt under bfq", s.name,
                            {{key(Key::scheduler), "\"bfq\"", {}}, {key(Key::wbt_lat_usec), "2000", {}}})});
}

void stack_lower_only(const Subject& s, AuditState& st, Findings& out) {
    if (!st.in.with_policy || s.f.holders.empty() || !manages_anything(s.d)) return;
    for (const auto& top : tops_of(st.by_name, s.name)) {
        auto t = st.by_name.find(top);
        if (t == st.by_name.end() || manages_anything(*t->second)) continue;
        out.push_back({s.name,
                       s.name + " is tuned by the policy, but filesystems read through " + top +
                           ", which no rule tunes: readahead and scheduling of " + top + " decide",
                       {{"holders", util::join(s.f.holders, " ")}, {"top", top}},
                       fix_rule("tune the device filesystems use", top, {{key(Key::read_ahead_kb), "128", {}}})});
    }
}

// A finding for each policy write that another writer also makes; `udev`
// picks udev rules (udev-rule-conflict) or every other writer (writer-conflict).
void writer_conflicts(const Subject& s, AuditState& st, Findings& out, bool udev) {
    if (!s.d.plan) return;
    for (const auto& a : s.d.plan->actions) {
        if (a.kind == policy::ActionKind::skip || a.kind == policy::ActionKind::unavailable) continue;
        for (const auto& w : st.in.writers) {
            if ((w.kind == writers::WriterKind::udev_rule) != udev) continue;
            if (w.attribute != a.attribute) continue;
            const auto selection = w.selects(s.d.udev);
            if (selection.verdict == writers::Selects::no) continue;
            const bool may = selection.verdict == writers::Selects::may;
            // Two writers of the same value do not fight; a udev rule is named
            // whatever value it writes (udev-rule-conflict names every udev
            // writer of a managed attribute).
            if (!udev && !w.value.empty() && util::trim(w.value) == a.desired) continue;
            std::string what = w.value.empty() ? a.attribute + " (" + w.why_inexact + ")" : a.attribute + "=" + w.value;
            if (!w.value.empty() && !w.why_inexact.empty()) what += " (" + w.why_inexact + ")";
            std::vector<std::pair<std::string, std::string>> evidence;
            if (udev) {
                evidence.emplace_back("udev rule", w.where());
            } else {
                evidence.emplace_back("writer", w.where());
                evidence.emplace_back("writer kind", to_string(w.kind));
                if (!w.context.empty()) evidence.emplace_back("writer context", w.context);
            }
            evidence.emplace_back("policy rule", a.rule.pos.file_line());
            if (may) evidence.emplace_back("depends on", selection.because);
            out.push_back({s.name,
                           w.describe() + (may ? " may write " : " writes ") + what + " on " + s.name +
                               (may ? " (depending on " + selection.because + ")" : "") +
                               ", which the policy sets to " + a.desired + " (" + a.rule.pos.file_line() + ")",
                           std::move(evidence),
                           {}});
            if (udev) break;  // one finding per action: the first udev rule that writes it
        }
    }
}

void udev_rule_conflict(const Subject& s, AuditState& st, Findings& out) { writer_conflicts(s, st, out, true); }
void writer_conflict(const Subject& s, AuditState& st, Findings& out) { writer_conflicts(s, st, out, false); }

void no_matching_rule(const Subject& s, AuditState& st, Findings& out) {
    if (!s.d.plan || !st.in.with_policy || !s.d.plan->matched.empty()) return;
    out.push_back({s.name, "no policy rule matches " + s.name, {{"identity", id_text(s.f)}}, {}});
}

// A property of the host, not of a device: each device notes itself, and
// the finding is said once, for all of them, after the devices.
void rq_affinity_inert_note(const Subject& s, AuditState& st, Findings&) {
    if (st.in.single_llc && *st.in.single_llc && policy::value_of(s.v, Key::rq_affinity) == "1")
        st.rq_affinity_inert.push_back(s.name);
}

void rq_affinity_inert(AuditState& st, Findings& out) {
    if (st.rq_affinity_inert.empty()) return;
    out.push_back(
        {std::string(kHostDevice),
         "rq_affinity=1 steers completions to the submitting CPU's cache group, but every CPU shares "
         "one last-level cache, so it behaves as 0 on " +
             std::to_string(st.rq_affinity_inert.size()) + " device(s)",
         {{"devices", util::join(st.rq_affinity_inert, " ")},
          {policy::value_path(Key::rq_affinity), "1"},
          {"cpu cache", "one last-level cache for all CPUs"}},
         policy::emit_rule({"complete on the submitting CPU", {}, {}, {}, {{key(Key::rq_affinity), "2", {}}}})});
}

// The policy in the initramfs (what its hook packed last, else what this
// boot's pass ran) is not the one in /etc: the next boot's early pass would
// set other values than the daemon, until the initramfs is made again.
void initramfs_policy_stale(AuditState& st, Findings& out) {
    const auto& in = st.in;
    const bool packed = !in.initramfs_digest.empty();
    const auto& theirs = packed ? in.initramfs_digest : in.boot_digest;
    if (!in.with_policy || theirs.empty() || theirs == in.policy_digest) return;
    // Which files, where the hook noted them one by one.
    std::vector<std::string> edited, added, removed;
    if (packed && !in.initramfs_files.empty()) {
        std::map<std::string, std::string> then(in.initramfs_files.begin(), in.initramfs_files.end());
        for (const auto& [path, digest] : in.policy_files) {
            auto it = then.find(path);
            if (it == then.end())
                added.push_back(path);
            else if (it->second != digest)
                edited.push_back(path);
            if (it != then.end()) then.erase(it);
        }
        for (const auto& [path, digest] : then) removed.push_back(path);
    }
    std::string which;
    auto say = [&](const char* how, const std::vector<std::string>& paths) {
        if (paths.empty()) return;
        which += std::string(which.empty() ? " (" : "; ") + how + ": " + util::join(paths, ", ");
    };
    say("edited since", edited);
    say("added since", added);
    say("removed since", removed);
    if (!which.empty()) which += ")";
    std::vector<std::pair<std::string, std::string>> evidence = {
        {"policy digest", in.policy_digest},
        {packed ? "initramfs digest (its hook)" : "initramfs digest (this boot's pass)", theirs}};
    for (const auto& p : edited) evidence.push_back({"edited since the initramfs was made", p});
    for (const auto& p : added) evidence.push_back({"added since the initramfs was made", p});
    for (const auto& p : removed) evidence.push_back({"removed since the initramfs was made", p});
    evidence.push_back({"fix", "update-initramfs -u (initramfs-tools) or dracut -f (dracut)"});
    out.push_back({std::string(kHostDevice),
                   "the policy in the initramfs differs from /etc/blkpolicy" + which +
                       ": early boot sets the values of another policy; make the initramfs again (update-initramfs "
                       "-u, or dracut -f)",
                   evidence,
                   {}});
}

// This boot's initramfs: a run of blkpolicy its runner stopped at the
// boot's budget, or saw crash, fail or not start. The daemon applied the
// policy after boot; what held it there (a write the kernel blocked, a
// broken binary or policy) may hold the next boot's too.
void initramfs_pass_unfinished(AuditState& st, Findings& out) {
    const auto& lines = st.in.boot_unfinished;
    if (lines.empty()) return;
    std::vector<std::pair<std::string, std::string>> evidence;
    for (std::size_t i = 0; i < lines.size(); ++i) evidence.push_back({"run " + std::to_string(i + 1), lines[i]});
    evidence.push_back({"where", "/run/blkpolicy/boot-bound; the kernel log of this boot (journalctl -k -b)"});
    out.push_back({std::string(kHostDevice),
                   "blkpolicy did not finish in this boot's initramfs (" + lines.front() +
                       (lines.size() > 1 ? ", and " + std::to_string(lines.size() - 1) + " more" : "") +
                       "): the values came from the daemon after the root was mounted",
                   evidence,
                   {}});
}

// Every finding, in the order a device's findings are listed. A check runs
// per device (`device`), or once after the devices (`host`), or both.
struct FindingRow {
    FindingKind kind;
    void (*device)(const Subject&, AuditState&, Findings&);
    void (*host)(AuditState&, Findings&);
};

constexpr FindingRow kFindingRows[] = {
    {{"rotational-claim-virtual", Severity::warning, "a virtual disk claims to spin"},
     rotational_claim_virtual,
     nullptr},
    {{"readahead-amplification", Severity::warning, "a virtual disk reads ahead 1 MiB or more"},
     readahead_amplification,
     nullptr},
    {{"wbt-rotational-default-virtual", Severity::warning, "a virtual disk has the spinning-disk wbt target"},
     wbt_rotational_default_virtual,
     nullptr},
    {{"write-through-volatile-cache", Severity::critical, "write through over a volatile cache: no flushes"},
     write_through_volatile_cache,
     nullptr},
    {{"write-cache-mismatch", Severity::warning, "write back over a device that does not cache"},
     write_cache_mismatch,
     nullptr},
    {{"bfq-disabled-wbt", Severity::warning, "bfq turned the default wbt off"}, bfq_disabled_wbt, nullptr},
    {{"rq-affinity-inert", Severity::info, "rq_affinity=1 on a host with one last-level cache"},
     rq_affinity_inert_note,
     rq_affinity_inert},
    {{"stack-lower-only", Severity::warning, "the policy tunes a lower device, not the one filesystems use"},
     stack_lower_only,
     nullptr},
    {{"udev-rule-conflict", Severity::warning, "a udev rule writes what the policy manages"},
     udev_rule_conflict,
     nullptr},
    {{"writer-conflict", Severity::warning,
      "TuneD, sysfsutils, tmpfiles.d, a unit or rc.local writes what the policy manages"},
     writer_conflict,
     nullptr},
    {{"no-matching-rule", Severity::info, "no policy rule matches the device"}, no_matching_rule, nullptr},
    {{"initramfs-policy-stale", Severity::warning, "the policy in the initramfs differs from /etc/blkpolicy"},
     nullptr,
     initramfs_policy_stale},
    {{"initramfs-pass-unfinished", Severity::warning, "blkpolicy did not finish in this boot's initramfs"},
     nullptr,
     initramfs_pass_unfinished},
};

}  // namespace

std::vector<FindingKind> finding_kinds() {
    std::vector<FindingKind> out;
    for (const auto& r : kFindingRows) out.push_back(r.kind);
    return out;
}

std::string keep_flushes_fix(const std::string& device) {
    return fix_rule("keep flushes", device, {{key(Key::write_cache), "\"write back\"", {}}});
}

std::vector<Finding> audit(const AuditInput& in) {
    AuditState st{in, {}, {}};
    for (const auto& d : in.devices) st.by_name[d.facts.name] = &d;

    std::vector<Finding> out;
    auto add = [&out](const FindingRow& row, Findings& found) {
        for (auto& f : found)
            out.push_back({std::move(f.device), std::string(row.kind.code), row.kind.severity, std::move(f.message),
                           std::move(f.evidence), std::move(f.fix)});
        found.clear();
    };
    Findings found;
    for (const auto& d : in.devices) {
        if (!d.facts.has_queue) continue;
        if (!d.has_medium && !in.include_empty) continue;
        const std::string why_virtual =
            d.facts.stack == policy::Stack::none ? virtual_identity(d.facts) : std::string();
        const Subject s{d, d.facts, d.values, d.facts.name, why_virtual};
        for (const auto& row : kFindingRows) {
            if (!row.device) continue;
            row.device(s, st, found);
            add(row, found);
        }
    }
    for (const auto& row : kFindingRows) {
        if (!row.host) continue;
        row.host(st, found);
        add(row, found);
    }
    return out;
}

}  // namespace blkpolicy::report
