// SPDX-License-Identifier: MIT
// agent/daemon/outputs: what the daemon publishes after a pass.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "agent/daemon/outputs.hpp"
#include "support/paths.hpp"
#include "support/reconciler_world.hpp"

using namespace blkpolicy;
using agent::Trigger;
using test::loops_policy;
using test::World;

namespace {
bool has(const std::string& text, const std::string& line) { return text.find(line) != std::string::npos; }

agent::MetricsInput input(double now, const agent::OutOfPolicyClock* clock = nullptr) {
    agent::MetricsInput m;
    m.last_pass_unix = now;
    m.monotonic_now = now;  // the tests' two clocks agree, but for the clock-jump case
    m.verify_interval_seconds = 30;
    m.version = "1.2.3";
    m.policy_loaded_unix = 1699999000;
    m.clock = clock;
    return m;
}
}  // namespace

TEST_CASE("reports: the gap between rewrites is 20 times their cost, from 100 ms to half the verify interval") {
    using std::chrono::milliseconds;
    using std::chrono::nanoseconds;
    const milliseconds interval{2000};
    CHECK(agent::report_gap(nanoseconds(0), interval) == milliseconds(100));      // the floor
    CHECK(agent::report_gap(milliseconds(4), interval) == milliseconds(100));     // 80 ms: still the floor
    CHECK(agent::report_gap(milliseconds(20), interval) == milliseconds(400));    // 1/20 of the time
    CHECK(agent::report_gap(milliseconds(250), interval) == milliseconds(1000));  // not 5 s: half the interval
    CHECK(agent::report_gap(milliseconds(250), milliseconds(30000)) == milliseconds(5000));
    CHECK(agent::report_gap(milliseconds(900), milliseconds(30000)) == milliseconds(15000));
    CHECK(agent::report_gap(milliseconds(10), milliseconds(100)) == milliseconds(100));  // a tiny interval: the floor
}

TEST_CASE("metrics text after a pass: the kept families") {
    World w;
    w.rec.set_policy(loops_policy("read_ahead_kb = 128\n"));
    w.rec.reconcile("loop0", Trigger::added);
    w.poke("read_ahead_kb", "512");
    w.rec.reconcile("loop0", Trigger::verify);
    const auto text = agent::metrics_text(w.rec, input(1700000000.0));
    CHECK(has(text, "blkpolicy_devices_managed 1\n"));
    CHECK(has(text, "blkpolicy_last_verify_timestamp_seconds 1700000000\n"));
    CHECK(has(text, "blkpolicy_attribute_in_policy{device=\"loop0\",attribute=\"read_ahead_kb\"} 1\n"));
    CHECK(has(text, "blkpolicy_drifts_total{device=\"loop0\",attribute=\"read_ahead_kb\"} 1\n"));
    CHECK(has(text, "# TYPE blkpolicy_failures_total counter\n"));
    // Not listening to udevd (yet): the metrics say so.
    CHECK(has(text, "blkpolicy_uevents_received_total{source=\"udev\"} 0\n"));
    CHECK(has(text, "blkpolicy_udev_listening 0\n"));
}

TEST_CASE("metrics and daemon.json: uevents by source, and whether the daemon listens to udevd") {
    World w;
    w.rec.set_policy(loops_policy("read_ahead_kb = 128\n"));
    auto m = input(1700000000.0);
    m.uevents = {12, 7, true};
    const auto text = agent::metrics_text(w.rec, m);
    CHECK(has(text, "# TYPE blkpolicy_uevents_received_total counter\n"));
    CHECK(has(text, "blkpolicy_uevents_received_total{source=\"kernel\"} 12\n"));
    CHECK(has(text, "blkpolicy_uevents_received_total{source=\"udev\"} 7\n"));
    CHECK(has(text, "blkpolicy_udev_listening 1\n"));
    const auto j = agent::daemon_json(w.rec, 42, 1700000000.0, {}, nullptr, {}, m.uevents);
    CHECK(j["uevents"]["kernel"] == 12);
    CHECK(j["uevents"]["udev"] == 7);
    CHECK(j["uevents"]["udev_listening"] == true);
    CHECK(agent::daemon_json(w.rec, 42, 1700000000.0, {})["uevents"]["udev_listening"] == false);
}

TEST_CASE("metrics: build, interval, policy state, identity, values and desired values, text attributes") {
    World w;
    w.rec.set_identity_labels(true);
    w.rec.set_mode(policy::Mode::observe);
    w.rec.set_policy(loops_policy("read_ahead_kb = 128\nscheduler = \"mq-deadline\"\n"));
    w.rec.reconcile("loop0", Trigger::added);
    agent::OutOfPolicyClock clock;
    clock.update(w.rec, 1700000000.0);
    auto m = input(1700000045.0, &clock);
    m.last_reload_ok = false;
    m.reloads = 2;
    const auto text = agent::metrics_text(w.rec, m);
    CHECK(has(text, "blkpolicy_build_info{version=\"1.2.3\"} 1\n"));
    CHECK(has(text, "blkpolicy_verify_interval_seconds 30\n"));
    CHECK(has(text, "blkpolicy_policy_loaded_timestamp_seconds 1699999000\n"));
    CHECK(has(text, "blkpolicy_policy_last_reload_success 0\n"));
    CHECK(has(text, "blkpolicy_policy_reloads_total 2\n"));
    CHECK(has(text, "blkpolicy_policy_info{digest=\"" + w.rec.policy().digest +
                        "\",files=\"1\",rules=\"1\",mode=\"observe\"} 1\n"));
    CHECK(w.rec.policy().digest.size() == 16);
    CHECK(has(text,
              "blkpolicy_device_info{device=\"loop0\",driver=\"\",model=\"\",vendor=\"\",serial=\"\","
              "rotational=\"1\",stack=\"loop\"} 1\n"));
    // Observe mode: both differ and stay so; out of policy for 45 s as of this pass.
    CHECK(has(text, "blkpolicy_attribute_in_policy{device=\"loop0\",attribute=\"read_ahead_kb\"} 0\n"));
    CHECK(has(text, "blkpolicy_attribute_out_of_policy_seconds{device=\"loop0\",attribute=\"read_ahead_kb\"} 45\n"));
    CHECK(has(text, "blkpolicy_attribute_failing{device=\"loop0\",attribute=\"read_ahead_kb\"} 0\n"));
    CHECK(has(text, "blkpolicy_attribute_value{device=\"loop0\",attribute=\"read_ahead_kb\"} 2560\n"));
    CHECK(has(text, "blkpolicy_attribute_desired{device=\"loop0\",attribute=\"read_ahead_kb\"} 128\n"));
    CHECK(has(text,
              "blkpolicy_attribute_text_info{device=\"loop0\",attribute=\"scheduler\",value=\"none\","
              "desired=\"mq-deadline\"} 1\n"));
    CHECK_FALSE(has(text, "blkpolicy_attribute_value{device=\"loop0\",attribute=\"scheduler\""));
    // No audit yet: the counts are there, at 0.
    CHECK(has(text, "blkpolicy_audit_findings{severity=\"critical\"} 0\n"));
    CHECK(has(text, "blkpolicy_audit_last_run_timestamp_seconds 0\n"));

    SUBCASE("the wall clock set back an hour: the duration counts on, from the monotonic clock") {
        auto later = input(1700000045.0 - 3600.0, &clock);  // last_pass as the wall clock says now
        later.monotonic_now = 1700000050.0;                 // 50 s since the attribute left policy
        const auto after = agent::metrics_text(w.rec, later);
        CHECK(
            has(after, "blkpolicy_attribute_out_of_policy_seconds{device=\"loop0\",attribute=\"read_ahead_kb\"} 50\n"));
        CHECK(has(after, "blkpolicy_last_verify_timestamp_seconds 1699996445\n"));
    }
    SUBCASE("back in policy: the clock forgets, the seconds go to 0") {
        w.rec.set_mode(policy::Mode::enforce);
        w.rec.reconcile("loop0", Trigger::verify);
        clock.update(w.rec, 1700000060.0);
        const auto after = agent::metrics_text(w.rec, input(1700000060.0, &clock));
        CHECK(
            has(after, "blkpolicy_attribute_out_of_policy_seconds{device=\"loop0\",attribute=\"read_ahead_kb\"} 0\n"));
        CHECK(has(after, "blkpolicy_attribute_in_policy{device=\"loop0\",attribute=\"read_ahead_kb\"} 1\n"));
    }
}

TEST_CASE("metrics: audit findings, counted per severity, every severity always there") {
    World w;
    w.rec.set_policy(loops_policy("read_ahead_kb = 128\n"));
    w.rec.reconcile("loop0", Trigger::added);
    std::vector<report::Finding> findings = {
        {"sda", "write-through-volatile-cache", report::Severity::critical, "m", {}, {}},
        {"vda", "rotational-claim-virtual", report::Severity::warning, "m", {}, {}},
        {"vdb", "rotational-claim-virtual", report::Severity::warning, "m", {}, {}},
    };
    auto m = input(1700000000.0);
    m.findings = &findings;
    m.audit_unix = 1699999999;
    const auto text = agent::metrics_text(w.rec, m);
    CHECK(has(text, "blkpolicy_audit_findings{severity=\"info\"} 0\n"));
    CHECK(has(text, "blkpolicy_audit_findings{severity=\"warning\"} 2\n"));
    CHECK(has(text, "blkpolicy_audit_findings{severity=\"critical\"} 1\n"));
    CHECK(has(text,
              "blkpolicy_audit_finding{device=\"sda\",code=\"write-through-volatile-cache\","
              "severity=\"critical\"} 1\n"));
    CHECK(has(text, "blkpolicy_audit_last_run_timestamp_seconds 1699999999\n"));
}

TEST_CASE("metrics: label values escaped as the text format wants; every family once, HELP and TYPE first") {
    CHECK(agent::escape_label_value("QEMU \"HARD\"\\DISK\nx") == "QEMU \\\"HARD\\\"\\\\DISK\\nx");
    World w;
    w.rec.set_policy(loops_policy("read_ahead_kb = 128\nnr_requests = 64\n"));
    w.rec.reconcile("loop0", Trigger::added);
    const auto text = agent::metrics_text(w.rec, input(1700000000.0));
    std::map<std::string, int> helps;
    std::string last_family;
    std::set<std::string> closed;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("# HELP ", 0) == 0) {
            const auto name = line.substr(7, line.find(' ', 7) - 7);
            ++helps[name];
            if (!last_family.empty()) closed.insert(last_family);
            last_family = name;
            continue;
        }
        if (line.rfind("# TYPE ", 0) == 0) continue;
        const auto name = line.substr(0, line.find_first_of("{ "));
        CAPTURE(line);
        CHECK(name == last_family);  // samples follow their own HELP and TYPE, never another family's
        CHECK_FALSE(closed.count(name));
    }
    for (const auto& [name, n] : helps) {
        const auto& family = name;  // (named again: clang 14 captures no structured binding)
        CAPTURE(family);
        CHECK(n == 1);
    }
    CHECK(helps.size() == 25);  // every family of blkpolicy(8) METRICS
}

TEST_CASE("metrics: every family is in blkpolicy(8) METRICS and in docs/prometheus.md") {
    World w;
    w.rec.set_identity_labels(true);
    w.rec.set_policy(loops_policy("read_ahead_kb = 128\nscheduler = \"mq-deadline\"\n"));
    w.rec.reconcile("loop0", Trigger::added);
    // With what a measuring daemon adds: a traced window with a finding.
    measure::DeviceSettings s;
    s.name = "loop0";
    s.devnum = "7:0";
    s.request_based = true;
    s.wbt_lat_usec = "2000";
    s.write_cache = "write through";
    s.cache.mode = measure::DeviceCache::Mode::write_back;
    measure::IoStat d;
    d.fields = 17;
    d.values[4] = 10;
    measure::Tracing tr;
    tr.on = true;
    measure::DeviceTally t;
    agent::Measured measured;
    measured.add(1700000000.0, {measure::device_figures(s, 60, &d, "", tr, &t)}, tr);
    auto in_m = input(1700000000.0);
    in_m.measured = &measured;
    const auto text = agent::metrics_text(w.rec, in_m);
    auto slurp = [](const std::string& rel) {
        std::ifstream in(std::string(blkpolicy::test::source_dir()) + "/" + rel);
        REQUIRE(in);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const auto man = slurp("docs/blkpolicy.8.scd");
    const auto doc = slurp("docs/prometheus.md");
    const auto rules = slurp("prometheus/blkpolicy-rules.yml");
    std::istringstream in(text);
    int families = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("# HELP ", 0) != 0) continue;
        const auto name = line.substr(7, line.find(' ', 7) - 7);
        CAPTURE(name);
        ++families;
        CHECK(man.find("*" + name + "*") != std::string::npos);
        CHECK(doc.find("`" + name + "`") != std::string::npos);
    }
    CHECK(families == 40);  // 25, and 15 while measuring
    // And every alert of the rules file has its runbook section.
    for (const char* alert : {"BlkpolicyAttributeDrift", "BlkpolicyApplyFailing", "BlkpolicyNotVerifying",
                              "BlkpolicyPolicyReloadFailed", "BlkpolicyCriticalFinding"}) {
        CAPTURE(alert);
        CHECK(rules.find(std::string("alert: ") + alert) != std::string::npos);
        CHECK(doc.find(std::string("### ") + alert) != std::string::npos);
        CHECK(man.find(alert) != std::string::npos);
    }
}

TEST_CASE("metrics: what the daemon measured (daemon.measure): counters since it began, the last window's finding") {
    World w;
    w.rec.set_policy(loops_policy("read_ahead_kb = 128\n"));
    w.rec.reconcile("loop0", Trigger::added);
    const auto window = [](const std::string& device, std::uint64_t steps_down, bool at_risk) {
        measure::DeviceSettings s;
        s.name = device;
        s.devnum = "7:0";
        s.request_based = true;
        s.wbt_lat_usec = "2000";
        s.write_cache = at_risk ? "write through" : "write back";
        s.cache.mode = measure::DeviceCache::Mode::write_back;
        s.cache.source = "cache_type \"write back\"";
        measure::IoStat d;
        d.fields = 17;
        d.values[4] = 100;                // writes
        d.values[15] = at_risk ? 0 : 10;  // flushes
        measure::DeviceTally t;
        t.wbt.step_down = steps_down;
        t.wbt.windows[1] = 5;
        t.rq.matched = 12;
        t.rq.submitted = 10;  // the exported pair: submitting CPU known, and of those on it
        t.rq.same_cpu = 4;
        measure::Tracing tr;
        tr.on = true;
        return measure::device_figures(s, 60, &d, "", tr, &t);
    };
    agent::Measured m;
    m.window_seconds = 60;
    measure::Tracing tr;
    tr.on = true;
    tr.lost_events = 3;
    m.add(1700000060.0, {window("loop0", 4, false), window("loop9", 1, false)}, tr);
    m.add(1700000120.0, {window("loop0", 2, true)}, tr);  // loop9 went
    REQUIRE(m.totals.count("loop0"));
    CHECK(m.totals.at("loop0").steps_down == 6);
    CHECK(m.totals.at("loop0").completions_matched == 20);
    CHECK_FALSE(m.totals.count("loop9"));
    CHECK(m.lost_events_total == 6);
    auto in = input(1700000120.0);
    in.measured = &m;
    const auto text = agent::metrics_text(w.rec, in);
    CHECK(has(text, "blkpolicy_measure_window_seconds 60\n"));
    CHECK(has(text, "blkpolicy_measure_last_window_timestamp_seconds 1700000120\n"));
    CHECK(has(text, "blkpolicy_measure_traced 1\n"));
    CHECK(has(text, "blkpolicy_measure_lost_events_total 6\n"));
    CHECK(has(text, "blkpolicy_wbt_steps_total{device=\"loop0\",direction=\"down\"} 6\n"));
    CHECK(has(text, "blkpolicy_wbt_windows_total{device=\"loop0\",status=\"ok\"} 10\n"));
    CHECK(has(text, "blkpolicy_completions_same_cpu_total{device=\"loop0\"} 8\n"));
    CHECK(has(text, "blkpolicy_wbt_enabled{device=\"loop0\"} 1\n"));
    CHECK(has(text, "blkpolicy_measure_undercounted{device=\"loop0\"} 0\n"));
    CHECK(has(text,
              "blkpolicy_device_cache_info{device=\"loop0\",write_cache=\"write through\",device_cache=\"write "
              "back\",source=\"cache_type \\\"write back\\\"\"} 1\n"));
    CHECK(has(text, "blkpolicy_measure_finding{device=\"loop0\",code=\"flushes-dropped\",severity=\"critical\"} 1\n"));
    CHECK_FALSE(has(text, "loop9"));
    // A daemon that does not measure has none of these families.
    CHECK_FALSE(has(agent::metrics_text(w.rec, input(1700000120.0)), "blkpolicy_measure_"));
    // daemon.json carries the last window for status and explain.
    const auto j = agent::daemon_json(w.rec, 42, 1700000120.0, {}, &m);
    CHECK(j["measured"]["window_seconds"] == 60.0);
    CHECK(j["measured"]["devices"][0]["flushes"]["at_risk"] == true);
    CHECK(agent::daemon_json(w.rec, 42, 1700000120.0, {})["measured"].is_null());
}
