// SPDX-License-Identifier: MIT
// libFuzzer target: any bytes as what a sysfs attribute reads back.
#include <cstddef>
#include <cstdint>
#include <string>

#include "policy/kernel.hpp"
#include "policy/values.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    using namespace blkpolicy::policy;
    (void)parse_int(text);
    auto line = parse_scheduler_line(text);
    if (!line.active.empty() && line.offered.empty()) __builtin_trap();
    (void)normalise_readback("scheduler", text);
    (void)normalise_readback("read_ahead_kb", text);
    (void)trim(text);
    (void)parse_kernel_release(text);
    if (auto n = parse_int(text); n && *n >= 0 && *n < (1LL << 40)) (void)readahead_readback(*n, 4096);
    return 0;
}
