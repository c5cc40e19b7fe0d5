// SPDX-License-Identifier: MIT
#include "agent/daemon/outputs.hpp"

#include <cstdio>
#include <initializer_list>

#include "agent/measured.hpp"
#include "policy/attributes.hpp"
#include "util/text.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

namespace {
// The last window, for status and explain: null before the first window ends
// or when the daemon does not measure.
json measured_json(const Measured* m) {
    if (!m || m->ended_unix == 0) return nullptr;
    json devices = json::array();
    for (const auto& f : m->last) devices.push_back(figures_json(f));
    return {{"ended", m->ended_unix},
            {"window_seconds", m->window_seconds},
            {"tracing", tracing_json(m->tracing, nullptr)},
            {"devices", devices}};
}
}  // namespace

void Measured::add(double ended, std::vector<measure::DeviceFigures> figures, const measure::Tracing& t) {
    ended_unix = ended;
    tracing = t;
    lost_events_total += t.lost_events;
    std::map<std::string, MeasuredTotals> next;
    for (const auto& f : figures) {
        auto& n = next[f.device];
        if (auto it = totals.find(f.device); it != totals.end()) n = it->second;
        const auto& w = f.wbt.counts;
        n.violations += w.violations;
        n.steps_down += w.step_down;
        n.steps_up += w.step_up;
        n.steps_unknown += w.step_unknown;
        for (std::size_t i = 0; i < n.windows.size(); ++i) n.windows[i] += w.windows[i];
        n.read_sectors += f.readahead.read_sectors;
        n.readahead_sectors += f.readahead.readahead_sectors;
        n.completions_matched += f.completion.counts.submitted;
        n.completions_same_cpu += f.completion.counts.same_cpu;
    }
    totals = std::move(next);
    last = std::move(figures);
}

json daemon_json(const Reconciler& r, long pid, double last_pass_unix, const ReloadOutcome& reload,
                 const Measured* measured, const systemd::JournalDelivery& journal, const UeventCounts& uevents) {
    const auto s = r.summary();
    json devices = json::array();
    for (const auto& [name, d] : r.devices()) {
        if (d.attrs.empty()) continue;
        json attrs = json::array();
        for (const auto& [attr, rec] : d.attrs)
            attrs.push_back({{"attribute", attr},
                             {"expected", rec.expected},
                             {"actual", rec.actual},
                             {"state", to_string(rec.status)},
                             {"rule", rec.rule},
                             {"drifts", rec.drifts},
                             {"failures", rec.failures}});
        devices.push_back({{"device", name}, {"attributes", attrs}});
    }
    return {
        {"pid", pid},
        {"mode", policy::to_string(r.mode())},
        {"last_pass", last_pass_unix},
        {"devices_managed", s.devices},
        {"drifted", s.drifted},
        {"failed", s.failed},
        {"busy", s.busy},
        {"devices", devices},
        {"reload", {{"generation", reload.generation}, {"ok", reload.ok}, {"errors", reload.errors}}},
        {"measured", measured_json(measured)},
        {"journal", {{"queued", journal.queued}, {"sent_late", journal.sent_late}, {"lost", journal.lost}}},
        {"uevents", {{"kernel", uevents.kernel}, {"udev", uevents.udev}, {"udev_listening", uevents.udev_listening}}}};
}

std::string escape_label_value(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    for (char c : v) {
        if (c == '\\' || c == '"') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

std::chrono::nanoseconds report_gap(std::chrono::nanoseconds last_write_cost,
                                    std::chrono::milliseconds verify_interval) {
    constexpr std::chrono::nanoseconds floor = std::chrono::milliseconds(100);
    const std::chrono::nanoseconds cap = std::max<std::chrono::nanoseconds>(floor, verify_interval / 2);
    return std::min(cap, std::max(floor, 20 * last_write_cost));
}

void OutOfPolicyClock::update(const Reconciler& r, double now_monotonic) {
    std::map<std::pair<std::string, std::string>, double> next;
    for (const auto& [name, d] : r.devices())
        for (const auto& [attr, rec] : d.attrs) {
            if (rec.status == AttrStatus::ok) continue;
            auto key = std::make_pair(name, attr);
            auto it = since_.find(key);
            next.emplace(key, it == since_.end() ? now_monotonic : it->second);
        }
    since_ = std::move(next);
}

double OutOfPolicyClock::seconds(const std::string& device, const std::string& attribute, double now_monotonic) const {
    auto it = since_.find({device, attribute});
    return it == since_.end() ? 0.0 : std::max(0.0, now_monotonic - it->second);
}

namespace {

// One metric family: HELP and TYPE, then its samples, kept together as the
// text format requires.
class Family {
public:
    Family(std::string name, const char* type, const char* help) : name_(std::move(name)) {
        text_ = "# HELP " + name_ + " " + help + "\n# TYPE " + name_ + " " + type + "\n";
    }
    // labels: alternating name, value.
    Family& sample(std::initializer_list<std::string_view> labels, std::string_view value) {
        text_ += name_;
        if (labels.size() > 0) {
            text_ += '{';
            bool first = true;
            for (auto it = labels.begin(); it != labels.end(); it += 2) {
                if (!first) text_ += ',';
                first = false;
                text_ += *it;
                text_ += "=\"";
                text_ += escape_label_value(*(it + 1));
                text_ += '"';
            }
            text_ += '}';
        }
        text_ += ' ';
        text_ += value;
        text_ += '\n';
        return *this;
    }
    const std::string& text() const { return text_; }

private:
    std::string name_;
    std::string text_;
};

std::string number(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.17g", v);
    return b;
}
std::string number(std::uint64_t v) { return std::to_string(v); }

// The value as a sample: the integer it reads as, or NaN when it is not one
// (not read).
std::string sample_value(const std::string& v) {
    auto n = util::parse_int(v);
    return n ? std::to_string(*n) : std::string("NaN");
}

bool is_text_attribute(const std::string& attr) {
    auto spec = policy::find_attribute(attr);
    return spec && (spec->kind == policy::ValueKind::choice || spec->kind == policy::ValueKind::scheduler);
}

// The measured families (daemon.measure), as of the last window.
std::string measured_metrics(const Measured& m) {
    std::string out;
    out += Family("blkpolicy_measure_window_seconds", "gauge",
                  "The length of each measuring window (daemon.measure_window).")
               .sample({}, number(m.window_seconds))
               .text();
    out += Family("blkpolicy_measure_last_window_timestamp_seconds", "gauge",
                  "When the last measuring window ended (Unix time; 0: none yet).")
               .sample({}, number(static_cast<std::uint64_t>(m.ended_unix)))
               .text();
    out += Family("blkpolicy_measure_traced", "gauge",
                  "1 when the last window was traced (tracefs); 0 when only the stat counters were read.")
               .sample({}, m.tracing.on ? "1" : "0")
               .text();
    out += Family("blkpolicy_measure_lost_events_total", "counter",
                  "Trace events the kernel could not keep (a full buffer) since measuring began: the traced counts "
                  "are lower bounds when this grows.")
               .sample({}, number(m.lost_events_total))
               .text();
    Family undercounted("blkpolicy_measure_undercounted", "gauge",
                        "1 when the device's traced counts of the last window are lower bounds (events were lost).");
    Family enabled("blkpolicy_wbt_enabled", "gauge",
                   "1 when writeback throttling is on for the device at the end of the last window.");
    Family violations("blkpolicy_wbt_latency_violations_total", "counter",
                      "Windows whose latency exceeded wbt's target (tracepoint wbt_lat).");
    Family steps("blkpolicy_wbt_steps_total", "counter",
                 "wbt's write-depth steps (tracepoint wbt_step): direction down (throttled more), up, or unknown.");
    Family windows("blkpolicy_wbt_windows_total", "counter", "wbt's windows by their status (tracepoint wbt_timer).");
    Family read_sectors("blkpolicy_read_sectors_issued_total", "counter",
                        "Sectors of read requests issued to the driver (tracepoint block_rq_issue).");
    Family readahead("blkpolicy_readahead_sectors_issued_total", "counter",
                     "Of those, sectors of readahead requests (rwbs A).");
    Family matched("blkpolicy_completions_matched_total", "counter",
                   "Requests whose submitting CPU, issue and completion were all traced (block_getrq, "
                   "block_rq_issue, block_rq_complete).");
    Family same_cpu("blkpolicy_completions_same_cpu_total", "counter",
                    "Of those, requests completed on the CPU that submitted them (where rq_affinity steers them).");
    Family cache("blkpolicy_device_cache_info", "gauge",
                 "The queue's write_cache beside the device's own cache mode and where that was read.");
    Family finding(
        "blkpolicy_measure_finding", "gauge",
        "A measured finding of the last window (flushes-dropped: writes with no flush over a volatile cache).");
    static constexpr const char* kWindow[] = {"other", "ok", "unknown", "unknown_writes", "exceeded"};
    for (const auto& f : m.last) {
        const std::initializer_list<std::string_view> dev = {"device", f.device};
        undercounted.sample(dev, f.undercounted ? "1" : "0");
        if (f.wbt.state != "none") enabled.sample(dev, f.wbt.state == "on" ? "1" : "0");
        cache.sample({"device", f.device, "write_cache", f.flush.write_cache, "device_cache",
                      measure::to_string(f.flush.cache.mode), "source", f.flush.cache.source},
                     "1");
        for (const auto& x : f.findings)
            finding.sample({"device", x.device, "code", x.code, "severity", report::to_string(x.severity)}, "1");
        const auto it = m.totals.find(f.device);
        if (it == m.totals.end() || !f.wbt.traced) continue;
        const auto& t = it->second;
        violations.sample(dev, number(t.violations));
        steps.sample({"device", f.device, "direction", "down"}, number(t.steps_down));
        steps.sample({"device", f.device, "direction", "up"}, number(t.steps_up));
        steps.sample({"device", f.device, "direction", "unknown"}, number(t.steps_unknown));
        for (std::size_t i = 0; i < t.windows.size(); ++i)
            windows.sample({"device", f.device, "status", kWindow[i]}, number(t.windows[i]));
        read_sectors.sample(dev, number(t.read_sectors));
        readahead.sample(dev, number(t.readahead_sectors));
        matched.sample(dev, number(t.completions_matched));
        same_cpu.sample(dev, number(t.completions_same_cpu));
    }
    for (const auto* f : {&undercounted, &enabled, &violations, &steps, &windows, &read_sectors, &readahead, &matched,
                          &same_cpu, &cache, &finding})
        out += f->text();
    return out;
}

}  // namespace

std::string metrics_text(const Reconciler& r, const MetricsInput& in) {
    const auto s = r.summary();
    const double now = in.last_pass_unix;
    std::string out;
    out += Family("blkpolicy_build_info", "gauge", "The running blkpolicy's version, as a label.")
               .sample({"version", in.version}, "1")
               .text();
    out +=
        Family("blkpolicy_devices_managed", "gauge", "Block devices with at least one attribute managed by the policy.")
            .sample({}, number(static_cast<std::uint64_t>(s.devices)))
            .text();
    out += Family("blkpolicy_verify_interval_seconds", "gauge",
                  "How often the daemon re-reads every managed value (daemon.verify_interval).")
               .sample({}, number(in.verify_interval_seconds))
               .text();
    out += Family("blkpolicy_last_verify_timestamp_seconds", "gauge",
                  "When the daemon last compared devices with the policy (Unix time).")
               .sample({}, number(static_cast<std::uint64_t>(now)))
               .text();
    const auto& pol = r.policy();
    out += Family("blkpolicy_policy_loaded_timestamp_seconds", "gauge",
                  "When the policy in force was loaded (Unix time): at start or at the last reload that took.")
               .sample({}, number(static_cast<std::uint64_t>(in.policy_loaded_unix)))
               .text();
    out += Family("blkpolicy_policy_last_reload_success", "gauge",
                  "1 when the last reload (SIGHUP) took the new policy, or none was asked for; 0 when the new policy "
                  "was invalid and the old one is kept.")
               .sample({}, in.last_reload_ok ? "1" : "0")
               .text();
    out += Family("blkpolicy_policy_reloads_total", "counter", "Reloads (SIGHUP) asked for since the daemon started.")
               .sample({}, number(static_cast<std::uint64_t>(in.reloads)))
               .text();
    out += Family("blkpolicy_policy_info", "gauge",
                  "The policy in force: its digest (the same on hosts that run the same files), files, rules and mode.")
               .sample({"digest", pol.digest, "files", std::to_string(pol.files.size()), "rules",
                        std::to_string(pol.rules.size()), "mode", policy::to_string(r.mode())},
                       "1")
               .text();

    Family info("blkpolicy_device_info", "gauge",
                "Who each block device is; join node_exporter's node_disk_info on device. rotational is what the "
                "device claimed before blkpolicy wrote anything.");
    Family in_policy("blkpolicy_attribute_in_policy", "gauge", "1 when the attribute reads as the policy says.");
    Family out_secs(
        "blkpolicy_attribute_out_of_policy_seconds", "gauge",
        "How long the attribute has read otherwise than the policy says, as of the last pass; 0 in policy.");
    Family failing("blkpolicy_attribute_failing", "gauge",
                   "1 when the daemon could not set the attribute (refused, unavailable on this host, failed, or busy "
                   "at two passes).");
    Family value("blkpolicy_attribute_value", "gauge", "The attribute's value as last read (numeric attributes).");
    Family desired("blkpolicy_attribute_desired", "gauge", "The value the policy asks for (numeric attributes).");
    Family text("blkpolicy_attribute_text_info", "gauge",
                "Text attributes (scheduler, write_cache): the value as last read and the policy's, as labels.");
    Family drifts("blkpolicy_drifts_total", "counter", "Times the attribute was found moved away from the policy.");
    Family failures("blkpolicy_failures_total", "counter", "Times the attribute could not be set.");
    for (const auto& [name, d] : r.devices()) {
        if (d.labels.known)
            info.sample(
                {"device", name, "driver", d.labels.driver, "model", d.labels.model, "vendor", d.labels.vendor,
                 "serial", d.labels.serial, "rotational", d.labels.rotational ? "1" : "0", "stack", d.labels.stack},
                "1");
        for (const auto& [attr, rec] : d.attrs) {
            const std::initializer_list<std::string_view> labels = {"device", name, "attribute", attr};
            in_policy.sample(labels, rec.status == AttrStatus::ok ? "1" : "0");
            out_secs.sample(labels, number(in.clock ? in.clock->seconds(name, attr, in.monotonic_now) : 0.0));
            failing.sample(labels, rec.status == AttrStatus::failed ? "1" : "0");
            if (is_text_attribute(attr)) {
                text.sample({"device", name, "attribute", attr, "value", rec.actual, "desired", rec.expected}, "1");
            } else {
                value.sample(labels, sample_value(rec.actual));
                desired.sample(labels, sample_value(rec.expected));
            }
            drifts.sample(labels, number(static_cast<std::uint64_t>(rec.drifts)));
            failures.sample(labels, number(static_cast<std::uint64_t>(rec.failures)));
        }
    }
    for (const auto* f : {&info, &in_policy, &out_secs, &failing, &value, &desired, &text, &drifts, &failures})
        out += f->text();

    Family counts("blkpolicy_audit_findings", "gauge", "Audit findings per severity, as of the last audit.");
    Family found("blkpolicy_audit_finding", "gauge", "One audit finding (blkpolicy audit), as of the last audit.");
    std::map<report::Severity, std::uint64_t> per;
    for (auto sev : {report::Severity::info, report::Severity::warning, report::Severity::critical}) per[sev] = 0;
    if (in.findings)
        for (const auto& f : *in.findings) {
            ++per[f.severity];
            found.sample({"device", f.device, "code", f.code, "severity", report::to_string(f.severity)}, "1");
        }
    for (const auto& [sev, n] : per) counts.sample({"severity", report::to_string(sev)}, number(n));
    out += counts.text();
    out += found.text();
    out += Family("blkpolicy_audit_last_run_timestamp_seconds", "gauge",
                  "When the findings were last refreshed (Unix time; 0: not yet).")
               .sample({}, number(static_cast<std::uint64_t>(in.audit_unix)))
               .text();
    out += Family("blkpolicy_journal_queued_entries", "gauge",
                  "Journal entries (alerts, log lines) kept because journald could not take them; sent when it can.")
               .sample({}, number(static_cast<std::uint64_t>(in.journal.queued)))
               .text();
    out += Family("blkpolicy_journal_sent_late_total", "counter",
                  "Journal entries kept while journald could not take them and sent afterwards.")
               .sample({}, number(in.journal.sent_late))
               .text();
    out += Family("blkpolicy_journal_lost_total", "counter",
                  "Journal entries dropped: journald took none for so long that the queue was full.")
               .sample({}, number(in.journal.lost))
               .text();
    // A daemon that stopped hearing udevd (or never did) shows it here: the
    // udev count stands still while the kernel's grows.
    out += Family("blkpolicy_uevents_received_total", "counter",
                  "Block uevents received since the daemon started, by source: the kernel's, and udevd's once "
                  "it ran its rules (counted only while the daemon listens to udevd).")
               .sample({"source", "kernel"}, number(in.uevents.kernel))
               .sample({"source", "udev"}, number(in.uevents.udev))
               .text();
    out += Family("blkpolicy_udev_listening", "gauge",
                  "1 when the daemon listens to udevd's events; 0 while udevd has not been found running.")
               .sample({}, in.uevents.udev_listening ? "1" : "0")
               .text();
    if (in.measured) out += measured_metrics(*in.measured);
    return out;
}

}  // namespace blkpolicy::agent
