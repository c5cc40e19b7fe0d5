// SPDX-License-Identifier: MIT
#include "agent/measured.hpp"

#include <ctime>

namespace blkpolicy::agent {

using nlohmann::json;

namespace {
json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
json text_or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json stat_json(const measure::IoStat& s) {
    static constexpr const char* kNames[measure::kStatFields] = {
        "reads",           "reads_merged",      "sectors_read", "read_ms", "writes",   "writes_merged",
        "sectors_written", "write_ms",          "in_flight",    "io_ms",   "queue_ms", "discards",
        "discards_merged", "sectors_discarded", "discard_ms",   "flushes", "flush_ms"};
    json j = {{"fields", s.fields}};
    for (unsigned i = 0; i < s.fields; ++i) j[kNames[i]] = s.values[i];
    return j;
}

// {"CPU": count} for the CPUs with a count.
json per_cpu(const std::vector<std::uint64_t>& by_cpu) {
    json j = json::object();
    for (std::size_t cpu = 0; cpu < by_cpu.size(); ++cpu)
        if (by_cpu[cpu]) j[std::to_string(cpu)] = by_cpu[cpu];
    return j;
}
}  // namespace

json finding_json(const report::Finding& f) {
    json ev = json::object();
    for (const auto& [k, v] : f.evidence) ev[k] = v;
    return {{"device", f.device},   {"code", f.code}, {"severity", report::to_string(f.severity)},
            {"message", f.message}, {"evidence", ev}, {"fix", f.fix.empty() ? json(nullptr) : json(f.fix)}};
}

json tracing_json(const measure::Tracing& t, const measure::TraceInstance* instance) {
    return {{"on", t.on},
            {"why_not", text_or_null(t.why_not)},
            {"instance", instance ? json(instance->name()) : json(nullptr)},
            {"buffer_kb_per_cpu", instance ? json(instance->buffer_kb_per_cpu()) : json(nullptr)},
            {"cpus", instance ? json(instance->cpus()) : json(nullptr)},
            {"missing_events", t.missing},
            {"requests_traced", t.requests_traced},
            {"lost_events", t.lost_events},
            {"missed_pages", t.missed_pages},
            {"bad_pages", t.bad_pages},
            {"lossy", t.lossy()}};
}

json figures_json(const measure::DeviceFigures& f) {
    const auto& w = f.wbt;
    const auto& fl = f.flush;
    const auto& ra = f.readahead;
    const auto& c = f.completion;
    json findings = json::array();
    for (const auto& x : f.findings) findings.push_back(finding_json(x));
    return {
        {"device", f.device},
        {"devnum", f.devnum},
        {"seconds", f.seconds},
        {"stat", f.stat_ok ? stat_json(f.delta) : json(nullptr)},
        {"stat_note", text_or_null(f.stat_note)},
        {"undercounted", f.undercounted},
        {"requests_traced", f.requests_traced},
        {"wbt",
         {{"state", w.state},
          {"detail", w.state_detail},
          {"traced", w.traced},
          {"violations", w.counts.violations},
          {"max_violation_usec", w.counts.max_violation_usec},
          {"step_down", w.counts.step_down},
          {"step_up", w.counts.step_up},
          {"step_unknown", w.counts.step_unknown},
          {"deepest_step", w.counts.deepest_step},
          {"windows",
           {{"ok", w.counts.windows[1]},
            {"unknown", w.counts.windows[2]},
            {"unknown_writes", w.counts.windows[3]},
            {"exceeded", w.counts.windows[4]},
            {"other", w.counts.windows[0]}}},
          {"writes", w.writes},
          {"zero_reason", text_or_null(w.zero_reason)},
          {"sentence", measure::wbt_sentence(f)}}},
        {"flushes",
         {{"counted", fl.counted},
          {"flushes", fl.flushes},
          {"flush_ms", fl.flush_ms},
          {"writes", fl.writes},
          {"write_cache", fl.write_cache},
          {"device_cache", measure::to_string(fl.cache.mode)},
          {"device_cache_source", fl.cache.source},
          {"at_risk", fl.at_risk},
          {"note", text_or_null(fl.note)},
          {"sentence", measure::flush_sentence(f)}}},
        {"readahead",
         {{"reads", ra.reads},
          {"sectors_read", ra.sectors_read},
          {"sectors_per_read", optional_number(ra.sectors_per_read())},
          {"read_ahead_kb", ra.read_ahead_kb},
          {"traced", ra.traced},
          {"read_requests", ra.read_requests},
          {"read_sectors", ra.read_sectors},
          {"readahead_requests", ra.readahead_requests},
          {"readahead_sectors", ra.readahead_sectors},
          {"readahead_share", optional_number(ra.readahead_share())},
          {"asked_traced", ra.asked_traced},
          {"asked_pages", ra.asked_pages},
          {"faults", ra.faults},
          {"page_size", ra.page_size},
          {"amplification", optional_number(ra.amplification())},
          {"asked_note", text_or_null(ra.asked_note)},
          {"note", text_or_null(ra.note)},
          {"sentence", measure::readahead_sentence(f)}}},
        {"completions",
         {{"completed", c.completed},
          {"traced", c.traced},
          {"issued", c.counts.issued},
          {"traced_completed", c.counts.completed},
          {"matched", c.counts.matched},
          {"submitted", c.counts.submitted},
          {"same_cpu", c.counts.same_cpu},
          {"same_cpu_share", optional_number(c.same_cpu_share())},
          {"same_cpu_as_issue", c.counts.same_cpu_as_issue},
          {"issuing_cpu_share", optional_number(c.issuing_cpu_share())},
          {"completed_on", per_cpu(c.counts.completed_on)},
          {"issued_on", per_cpu(c.counts.issued_on)},
          {"submitted_on", per_cpu(c.counts.submitted_on)},
          {"rq_affinity", c.rq_affinity},
          {"hw_queues", c.hw_queues},
          {"note", text_or_null(c.note)},
          {"sentence", measure::completion_sentence(f)}}},
        {"findings", findings},
    };
}

namespace {
// The figure that shows what each attribute does, in figures_json.
constexpr std::pair<policy::Key, const char*> kShownBy[] = {
    {policy::Key::wbt_lat_usec, "wbt"},
    {policy::Key::write_cache, "flushes"},
    {policy::Key::read_ahead_kb, "readahead"},
    {policy::Key::rq_affinity, "completions"},
};
}  // namespace

json measured_device(const json& daemon, const std::string& device) {
    if (!daemon.is_object() || !daemon.contains("measured") || !daemon["measured"].is_object()) return nullptr;
    const auto& devices = daemon["measured"]["devices"];
    if (!devices.is_array()) return nullptr;
    for (const auto& d : devices)
        if (d.is_object() && d.value("device", "") == device) return d;
    return nullptr;
}

std::string measured_sentence(const json& figures, const std::string& attribute) {
    if (!figures.is_object()) return {};
    for (const auto& [attr, figure] : kShownBy) {
        if (attribute != policy::key_text(attr) || !figures.contains(figure) || !figures[figure].is_object()) continue;
        const auto& f = figures[figure];
        return f.contains("sentence") && f["sentence"].is_string() ? f["sentence"].get<std::string>() : std::string();
    }
    return {};
}

std::string measured_when(const json& daemon) {
    if (!daemon.is_object() || !daemon.contains("measured") || !daemon["measured"].is_object()) return {};
    const auto& m = daemon["measured"];
    if (!m.contains("ended") || !m["ended"].is_number()) return {};
    const double ended = m["ended"].get<double>();
    const std::time_t t = static_cast<std::time_t>(ended);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    const long ago = static_cast<long>(::time(nullptr) - t);
    std::string out = "measured by the daemon";
    if (m.contains("window_seconds") && m["window_seconds"].is_number())
        out += " in its window of " + measure::duration_text(m["window_seconds"].get<double>());
    return out + " that ended " + when + " (" + std::to_string(ago < 0 ? 0 : ago) + " s ago)";
}

}  // namespace blkpolicy::agent
