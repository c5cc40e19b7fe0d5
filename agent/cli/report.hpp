// Human tables and stable JSON for plan, apply and status.
#pragma once

#include <nlohmann/json.hpp>
#include <ctime>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "agent/executor.hpp"
#include "agent/snapshot.hpp"

namespace blkpolicy::agent {

inline constexpr int kJsonFormatVersion = 1;

nlohmann::json facts_json(const policy::DeviceFacts& f);
nlohmann::json rule_json(const policy::RuleRef& r);

// Per attribute in status: where the device stands against the policy.
enum class Standing { ok, drift, skipped, refused };
const char* to_string(Standing s);
Standing standing_of(const policy::Action& a);

// Prints (or, for --json, collects) one device at a time, so that a run over
// thousands of devices keeps only counters in memory.
// "2026-11-30 21:03:05 (12 s ago)": a daemon pass time for people, in local time.
std::string pass_time_text(double when_unix, std::time_t now);

class CommandReport {
public:
    enum class Kind { plan, apply, status };
    CommandReport(Kind kind, bool as_json, std::ostream& out);
    // `result` is the apply result (apply only).
    void device(const DeviceView& v, const DeviceResult* result = nullptr);
    // Footer, or the JSON document; `daemon` goes into status output.
    void finish(const nlohmann::json& daemon = nullptr);
    // plan: the schedulers the running kernel can load as modules (nullopt:
    // unknown), said once after the devices.
    void set_loadable_schedulers(std::optional<std::vector<std::string>> names) { loadable_ = std::move(names); }
    bool drift() const;   // status: something drifted
    bool failed() const;  // apply: something failed, did not stick or was refused
    // The fact groups it shows: all of them in JSON, the identity line in text.
    policy::FactNeeds facts_shown() const;

private:
    Kind kind_;
    bool json_;
    std::ostream& out_;
    nlohmann::json devices_ = nlohmann::json::array();
    std::vector<std::string> unmatched_;
    std::size_t writes_ = 0;    // plan: writes that change a value
    std::size_t rechecks_ = 0;
    std::optional<std::vector<std::string>> loadable_;  // plan: values read again before a write, already as wanted
    std::map<Standing, int> standings_;
    std::map<Outcome, int> outcomes_;
};

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
