// SPDX-License-Identifier: MIT
// What every report shares: the JSON format version, facts and rules as
// JSON, the one-line identity of a device, plain-text tables, time for people.
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "agent/snapshot.hpp"

namespace blkpolicy::agent {

inline constexpr int kJsonFormatVersion = 1;

nlohmann::json facts_json(const policy::DeviceFacts& f);
nlohmann::json rule_json(const policy::RuleRef& r);
nlohmann::json rules_json(const std::vector<policy::RuleRef>& rules);  // an array of rule_json
// The host's facts the host.* clauses were decided on, and each rule they
// leave out on this host with why: {"kernel": ..., "not_here": [...]}.
nlohmann::json host_json(const policy::Policy& policy);
// The same as text ("host: kernel 6.12.74 ..." and a line per rule left
// out); nothing when no rule names a host fact.
void print_host(std::ostream& out, const policy::Policy& policy);
// {"device", "facts", "matched", "not_tuned"}: how a device starts in plan,
// apply and status JSON.
nlohmann::json device_head_json(const DeviceView& v);

// "sda  8:0  driver=sd  rotational=1  stack=none  vendor=..."
std::string facts_line(const policy::DeviceFacts& f);
std::string or_dash(const std::string& s);

// "2026-11-30 21:03:05 (12 s ago)": a daemon pass time for people, in local time.
std::string pass_time_text(double when_unix, std::time_t now);

// A plain-text table with left-aligned, auto-sized columns.
class Table {
public:
    explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
    void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
    void print(std::ostream& out, const std::string& indent) const;

private:
    std::vector<std::vector<std::string>> rows_;
};

}  // namespace blkpolicy::agent
