// SPDX-License-Identifier: MIT
// `blkpolicy measure`'s report: per device each figure beside the counter
// that proves it, then the findings; or the JSON document.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "measure/figures.hpp"

namespace blkpolicy::agent {

struct MeasureReport {
    double seconds = 0;
    bool interrupted = false;
    measure::Tracing tracing;
    std::string instance_name;  // the tracing instance it used (removed again)
    unsigned buffer_kb_per_cpu = 0;
    std::size_t cpus = 0;
    std::uint64_t buffer_total_kb = 0;
    std::vector<measure::DeviceFigures> devices;
};

void print_measure(std::ostream& out, const MeasureReport& r, bool as_json);

}  // namespace blkpolicy::agent
