// SPDX-License-Identifier: MIT
// What the daemon leaves behind after each pass: <state-dir>/daemon.json
// (read by `blkpolicy status`) and, when asked, Prometheus text metrics.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/daemon/reconciler.hpp"
#include "measure/figures.hpp"
#include "report/audit.hpp"
#include "systemd/journal.hpp"

namespace blkpolicy::agent {

// The outcome of the last SIGHUP, for `blkpolicy reload` (systemctl reload)
// to wait for: generation counts reloads since the daemon started.
struct ReloadOutcome {
    unsigned long generation = 0;
    bool ok = true;
    std::vector<std::string> errors;  // file:line:col: message, when not ok
};

// What the daemon measured (daemon.measure): the last window's figures and,
// per device, the traced counts since it began measuring (the metrics'
// counters).
struct MeasuredTotals {
    std::uint64_t violations = 0;
    std::uint64_t steps_down = 0, steps_up = 0, steps_unknown = 0;
    std::array<std::uint64_t, 5> windows{};  // by measure::WbtWindow
    std::uint64_t read_sectors = 0, readahead_sectors = 0;
    std::uint64_t completions_matched = 0, completions_same_cpu = 0;
};
struct Measured {
    double ended_unix = 0;      // the end of the last window (0: none yet)
    double window_seconds = 0;  // daemon.measure_window
    measure::Tracing tracing;   // of the last window
    std::uint64_t lost_events_total = 0;
    std::vector<measure::DeviceFigures> last;
    std::map<std::string, MeasuredTotals> totals;
    // Adds a window: its figures become `last`, its traced counts go into
    // the totals, and devices no longer there leave them.
    void add(double ended, std::vector<measure::DeviceFigures> figures, const measure::Tracing& t);
};

// How long the daemon waits between two rewrites of its reports (daemon.json
// and the metrics), given what the last rewrite cost in CPU time: writing
// them takes at most 1/20 of the daemon's time, so the gap is 100 ms or 20
// times that cost (at 10,000 devices the metrics alone are 20 MiB:
// bench/README.md). Never more than half the verify interval, though: the
// reports say when the last pass was, and three intervals without one is an
// alert (BlkpolicyNotVerifying), so a report may not lag its pass that long.
std::chrono::nanoseconds report_gap(std::chrono::nanoseconds last_write_cost,
                                    std::chrono::milliseconds verify_interval);

// The uevents received since the daemon started, by source, and whether it
// listens to udevd (it does from the first pass that finds udevd running).
struct UeventCounts {
    std::uint64_t kernel = 0;
    std::uint64_t udev = 0;
    bool udev_listening = false;
};

// `measured`: null when the daemon does not measure.
// `journal`: what the journal could not take at once.
nlohmann::json daemon_json(const Reconciler& r, long pid, double last_pass_unix, const ReloadOutcome& reload,
                           const Measured* measured = nullptr, const systemd::JournalDelivery& journal = {},
                           const UeventCounts& uevents = {});

// Since when each managed attribute has been out of policy (drifted, failed
// or busy), as of the reports written so far: the reconciler owns no clock,
// the daemon stamps each report with its pass time. Monotonic seconds
// (CLOCK_MONOTONIC): a wall clock set forward or back by an hour changes no
// duration.
class OutOfPolicyClock {
public:
    void update(const Reconciler& r, double now_monotonic);
    // Seconds out of policy as of `now_monotonic`; 0 when in policy.
    double seconds(const std::string& device, const std::string& attribute, double now_monotonic) const;

private:
    std::map<std::pair<std::string, std::string>, double> since_;
};

// What the metrics say beside the reconciler's records (blkpolicy(8)
// METRICS lists every family; the format is kept stable like --json).
struct MetricsInput {
    double last_pass_unix = 0;
    double monotonic_now = 0;  // the same moment on CLOCK_MONOTONIC, for durations
    double verify_interval_seconds = 0;
    std::string version;
    // The policy: when it was (last) loaded, whether the last reload took,
    // how many reloads were asked for, and its digest, files and rules.
    double policy_loaded_unix = 0;
    bool last_reload_ok = true;
    unsigned long reloads = 0;
    // The last audit (refreshed when a device appears or changes and at
    // reload; null before the first), and when it ran.
    const std::vector<report::Finding>* findings = nullptr;
    double audit_unix = 0;
    const OutOfPolicyClock* clock = nullptr;
    const Measured* measured = nullptr;  // daemon.measure on
    systemd::JournalDelivery journal;    // entries journald could not take at once
    UeventCounts uevents;
};
std::string metrics_text(const Reconciler& r, const MetricsInput& in);

// A Prometheus label value as the text format wants it: backslash, double
// quote and newline escaped.
std::string escape_label_value(std::string_view v);

}  // namespace blkpolicy::agent
