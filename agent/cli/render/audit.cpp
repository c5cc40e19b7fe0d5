// SPDX-License-Identifier: MIT
#include "agent/cli/render/audit.hpp"

#include <map>
#include <nlohmann/json.hpp>

#include "agent/cli/render/common.hpp"
#include "agent/measured.hpp"

namespace blkpolicy::agent {

using nlohmann::json;

void print_findings(std::ostream& out, const std::vector<report::Finding>& findings, bool as_json, bool with_policy) {
    std::map<report::Severity, int> count;
    for (const auto& f : findings) count[f.severity]++;
    if (as_json) {
        json arr = json::array();
        for (const auto& f : findings) arr.push_back(finding_json(f));
        out << json{{"format", kJsonFormatVersion}, {"policy", with_policy}, {"findings", arr}}.dump(2) << '\n';
    } else {
        for (const auto& f : findings) {
            out << report::to_string(f.severity) << "  " << f.device << "  " << f.code << "\n  " << f.message << '\n';
            for (const auto& [k, v] : f.evidence) out << "  evidence: " << k << " = " << v << '\n';
            if (!f.fix.empty()) {
                out << "  fix:\n";
                std::string line;
                for (char c : f.fix) {
                    if (c == '\n') {
                        out << "    " << line << '\n';
                        line.clear();
                    } else {
                        line += c;
                    }
                }
            }
            out << '\n';
        }
        out << findings.size() << " finding(s): " << count[report::Severity::critical] << " critical, "
            << count[report::Severity::warning] << " warning, " << count[report::Severity::info] << " info"
            << (with_policy ? "" : " (no policy: policy checks skipped)") << '\n';
    }
}

}  // namespace blkpolicy::agent
