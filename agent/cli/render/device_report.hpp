// SPDX-License-Identifier: MIT
// The reports of plan, apply and status: one device at a time (a run over
// thousands of devices keeps only counters), then a footer or the JSON
// document. The shared frame is here; each report is its own class in its
// own file (render/plan.cpp, render/apply.cpp, render/status.cpp).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "agent/executor.hpp"
#include "agent/snapshot.hpp"

namespace blkpolicy::agent {

class DeviceReport {
public:
    DeviceReport(bool as_json, std::ostream& out) : json_(as_json), out_(out) {}
    virtual ~DeviceReport() = default;
    DeviceReport(const DeviceReport&) = delete;
    DeviceReport& operator=(const DeviceReport&) = delete;

    // `result` is the apply result (apply only).
    void device(const DeviceView& v, const DeviceResult* result = nullptr);
    // The footer, or the JSON document.
    void finish();
    // Whether the command found something to exit 1 for (status: drift;
    // apply: a failure, a value that did not stick, a refusal).
    virtual bool found_something() const = 0;
    // Whether a write would change a value (plan).
    virtual bool changes_pending() const { return false; }
    // The fact groups it shows: all of them in JSON, the identity line in text.
    policy::FactNeeds facts_shown() const;
    // The policy the devices were planned under: its host facts are shown.
    void set_policy(const policy::Policy* policy) { policy_ = policy; }

protected:
    // The report's own part of a device: its JSON entries, its counters,
    // its table.
    virtual void add_json(nlohmann::json& device, const DeviceView& v, const DeviceResult* result) const = 0;
    virtual void count(const DeviceView& v, const DeviceResult* result) = 0;
    virtual void print_table(const DeviceView& v, const DeviceResult* result) const = 0;
    // The report's own part of the end: fields of the JSON document, the footer lines.
    virtual void add_json_summary(nlohmann::json& doc) const = 0;
    virtual void print_footer() const = 0;

    bool json_;
    std::ostream& out_;

private:
    const policy::Policy* policy_ = nullptr;
    nlohmann::json devices_ = nlohmann::json::array();
    std::vector<std::string> unmatched_;
};

// plan: the schedulers the running kernel can load as modules (nullopt:
// unknown), said once after the devices.
std::unique_ptr<DeviceReport> plan_report(bool as_json, std::ostream& out,
                                          std::optional<std::vector<std::string>> loadable_schedulers);
std::unique_ptr<DeviceReport> apply_report(bool as_json, std::ostream& out);
// status: `daemon` is the running daemon's daemon.json (null when none runs).
// `boot`: the record of this boot's pass in the initramfs (null: none ran).
std::unique_ptr<DeviceReport> status_report(bool as_json, std::ostream& out, nlohmann::json daemon,
                                            nlohmann::json boot = nullptr);

// Per attribute in status: where the device stands against the policy.
enum class Standing { ok, drift, skipped, refused, unavailable };
const char* to_string(Standing s);
Standing standing_of(const policy::Action& a);

}  // namespace blkpolicy::agent
