// SPDX-License-Identifier: MIT
// The report of `blkpolicy apply`: per attribute, before, after and outcome.
#include <map>

#include "agent/cli/render/common.hpp"
#include "agent/cli/render/device_report.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

namespace {

class ApplyReport final : public DeviceReport {
public:
    using DeviceReport::DeviceReport;
    bool found_something() const override {
        for (const auto& [o, n] : outcomes_)
            if (is_failure(o) && n > 0) return true;
        return false;
    }

private:
    void add_json(json& d, const DeviceView&, const DeviceResult* result) const override {
        d["results"] = json::array();
        for (const auto& r : result->results)
            d["results"].push_back({{"attribute", r.attribute},
                                    {"before", r.before},
                                    {"after", r.after},
                                    {"expected", r.expected},
                                    {"outcome", to_string(r.outcome)},
                                    {"detail", r.detail},
                                    {"attempts", r.attempts},
                                    {"busy", r.busy},
                                    {"busy_wait_ms", std::chrono::duration<double, std::milli>(r.busy_waited).count()},
                                    {"rule", rule_json(r.rule)}});
    }
    void count(const DeviceView&, const DeviceResult* result) override {
        for (const auto& r : result->results) {
            outcomes_[r.outcome]++;
            busy_writes_ += r.busy;
        }
    }
    // The detail column: a write the kernel took only after EBUSY says so.
    static std::string detail(const AttributeResult& r) {
        if (r.busy == 0 || r.outcome == Outcome::busy) return r.detail;
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(r.busy_waited).count();
        const std::string note = "taken at write " + std::to_string(r.attempts) + " after " + std::to_string(r.busy) +
                                 " EBUSY (" + std::to_string(ms) + " ms)";
        return r.detail.empty() ? note : r.detail + "; " + note;
    }
    void print_table(const DeviceView&, const DeviceResult* result) const override {
        Table t({"ATTRIBUTE", "BEFORE", "AFTER", "RESULT", "RULE", "DETAIL"});
        for (const auto& r : result->results)
            t.add({r.attribute, or_dash(r.before), or_dash(r.after), to_string(r.outcome), r.rule.pos.file_line(),
                   detail(r)});
        t.print(out_, "  ");
    }
    void add_json_summary(json& doc) const override {
        json summary = json::object();
        for (auto o : {Outcome::unchanged, Outcome::applied, Outcome::skipped, Outcome::failed, Outcome::not_stuck,
                       Outcome::refused, Outcome::busy, Outcome::unavailable})
            summary[to_string(o)] = n(o);
        doc["summary"] = summary;
        const auto& b = default_busy_retry();
        doc["busy_retry"] = {{"max_attempts", b.max_attempts},
                             {"budget_ms", b.budget.count()},
                             {"first_pause_ms", std::chrono::duration<double, std::milli>(b.first_pause).count()},
                             {"max_pause_ms", std::chrono::duration<double, std::milli>(b.max_pause).count()},
                             {"retried_writes", busy_writes_}};
    }
    void print_footer() const override {
        out_ << n(Outcome::applied) << " applied, " << n(Outcome::unchanged) << " unchanged, " << n(Outcome::skipped)
             << " skipped, " << n(Outcome::failed) << " failed, " << n(Outcome::not_stuck) << " did not stick, "
             << n(Outcome::refused) << " refused, " << n(Outcome::busy) << " busy, " << n(Outcome::unavailable)
             << " unavailable here\n";
        if (busy_writes_ > 0) {
            const auto& b = default_busy_retry();
            out_ << busy_writes_
                 << " write(s) answered EBUSY (another writer held the queue) and were made again, up to "
                 << b.max_attempts << " times or " << b.budget.count() << " ms each\n";
        }
    }
    int n(Outcome o) const {
        auto it = outcomes_.find(o);
        return it == outcomes_.end() ? 0 : it->second;
    }

    std::map<Outcome, int> outcomes_;
    int busy_writes_ = 0;
};

}  // namespace

std::unique_ptr<DeviceReport> apply_report(bool as_json, std::ostream& out) {
    return std::make_unique<ApplyReport>(as_json, out);
}

}  // namespace blkpolicy::agent
