// SPDX-License-Identifier: MIT
// How `blkpolicy audit` shows its findings.
#pragma once

#include <ostream>
#include <vector>

#include "report/audit.hpp"

namespace blkpolicy::agent {

void print_findings(std::ostream& out, const std::vector<report::Finding>& findings, bool as_json, bool with_policy);

}  // namespace blkpolicy::agent
