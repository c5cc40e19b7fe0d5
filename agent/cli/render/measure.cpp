// SPDX-License-Identifier: MIT
#include "agent/cli/render/measure.hpp"

#include <nlohmann/json.hpp>

#include "agent/cli/render/common.hpp"
#include "agent/measured.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

namespace {

std::string tracing_line(const MeasureReport& r) {
    const auto& t = r.tracing;
    if (!t.on) return "not traced (" + t.why_not + "): the stat counters only";
    std::string s = "instance " + r.instance_name + ", " + std::to_string(r.buffer_kb_per_cpu) + " KiB a CPU on " +
                    std::to_string(r.cpus) + " CPU(s)";
    if (t.lossy())
        s += "; LOSSY: " + std::to_string(t.lost_events) + " events lost (" + std::to_string(t.missed_pages) +
             " pages flagged): traced counts are at least what they say (--trace-buffer-kb makes room)";
    else
        s += "; no events lost";
    if (!t.missing.empty()) {
        s += "; this kernel lacks";
        for (const auto& m : t.missing) s += " " + m;
    }
    return s;
}

// A labelled sentence, wrapped at semicolons so that each clause is a line.
void clause_lines(std::ostream& out, const std::string& label, const std::string& sentence) {
    const std::string indent(15, ' ');
    std::string head = "  " + label;
    head.resize(indent.size(), ' ');
    out << head;
    std::size_t at = 0;
    bool first = true;
    while (at < sentence.size()) {
        auto semi = sentence.find("; ", at);
        const auto part = sentence.substr(at, semi == std::string::npos ? std::string::npos : semi - at);
        out << (first ? "" : indent) << part << '\n';
        first = false;
        if (semi == std::string::npos) break;
        at = semi + 2;
    }
}

}  // namespace

void print_measure(std::ostream& out, const MeasureReport& r, bool as_json) {
    std::vector<report::Finding> findings;
    for (const auto& d : r.devices) findings.insert(findings.end(), d.findings.begin(), d.findings.end());
    if (as_json) {
        json devices = json::array();
        for (const auto& d : r.devices) devices.push_back(figures_json(d));
        json fs = json::array();
        for (const auto& f : findings) fs.push_back(finding_json(f));
        json tracing = tracing_json(r.tracing, nullptr);
        tracing["instance"] = r.instance_name.empty() ? json(nullptr) : json(r.instance_name);
        tracing["buffer_kb_per_cpu"] = r.tracing.on ? json(r.buffer_kb_per_cpu) : json(nullptr);
        tracing["cpus"] = r.tracing.on ? json(r.cpus) : json(nullptr);
        tracing["buffer_total_kb"] = r.tracing.on ? json(r.buffer_total_kb) : json(nullptr);
        out << json{{"format", kJsonFormatVersion}, {"seconds", r.seconds}, {"interrupted", r.interrupted},
                    {"tracing", tracing},           {"devices", devices},   {"findings", fs}}
                   .dump(2)
            << '\n';
        return;
    }
    out << "measured " << r.devices.size() << " device(s) for " << measure::duration_text(r.seconds)
        << (r.interrupted ? " (interrupted)" : "") << "\ntracing: " << tracing_line(r) << "\n\n";
    for (const auto& d : r.devices) {
        out << d.device << " (" << d.devnum << ")";
        if (!d.stat_ok) out << ": " << d.stat_note;
        out << '\n';
        clause_lines(out, "wbt", d.wbt.state + ": " + d.wbt.state_detail + "; " + measure::wbt_sentence(d));
        clause_lines(out, "flushes", measure::flush_sentence(d));
        clause_lines(out, "readahead", measure::readahead_sentence(d));
        clause_lines(out, "completions", measure::completion_sentence(d));
        for (const auto& f : d.findings)
            out << "  " << report::to_string(f.severity) << " " << f.code << ": " << f.message << '\n';
        out << '\n';
    }
    out << findings.size() << " finding(s)";
    // Critical: data at risk; a warning: writes whose safety cannot be told.
    std::string at_risk, cannot_tell;
    for (const auto& f : findings) (f.severity == report::Severity::critical ? at_risk : cannot_tell) += ' ' + f.device;
    if (!at_risk.empty()) out << ": data at risk on" << at_risk;
    if (!cannot_tell.empty())
        out << (at_risk.empty() ? ":" : ";") << " cannot tell whether data is safe on" << cannot_tell;
    out << '\n';
}

}  // namespace blkpolicy::agent
