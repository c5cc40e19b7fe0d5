// Human tables and stable JSON for plan, apply and status.
#pragma once

#include <nlohmann/json.hpp>
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

nlohmann::json plan_json(const std::vector<DeviceView>& views);
nlohmann::json apply_json(const std::vector<DeviceView>& views, const std::vector<DeviceResult>& results);
nlohmann::json status_json(const std::vector<DeviceView>& views);

void print_plan(std::ostream& out, const std::vector<DeviceView>& views);
void print_apply(std::ostream& out, const std::vector<DeviceView>& views, const std::vector<DeviceResult>& results);
void print_status(std::ostream& out, const std::vector<DeviceView>& views);

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
