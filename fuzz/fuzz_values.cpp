// SPDX-License-Identifier: MIT
// libFuzzer target: any bytes as what a sysfs attribute reads back, and as a
// serial or model written into the frozen-facts record's JSON.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kernel/rows.hpp"
#include "udev/sysfs_text.hpp"
#include "util/quoted.hpp"
#include "util/text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    using namespace blkpolicy::policy;
    using namespace blkpolicy::udev;
    using namespace blkpolicy::util;
    using namespace blkpolicy::kernel;
    (void)parse_int(text);
    auto line = parse_scheduler_line(text);
    if (!line.active.empty() && line.offered.empty()) __builtin_trap();
    (void)normalise_readback("scheduler", text);
    (void)normalise_readback("read_ahead_kb", text);
    (void)trim(text);
    (void)parse_kernel_release(text);
    if (auto n = parse_int(text); n && *n >= 0 && *n < (1LL << 40)) (void)readahead_readback(*n, 4096);
    // The hand-written JSON string is always valid JSON, and where
    // nlohmann::json can write the string at all, the same bytes.
    std::string quoted;
    blkpolicy::util::append_json_string(quoted, text);
    if (nlohmann::json::parse(quoted, nullptr, false).is_discarded()) __builtin_trap();
    std::string theirs;
    try {
        theirs = nlohmann::json(text).dump();
    } catch (const nlohmann::json::exception&) {
        return 0;  // not UTF-8: nlohmann refuses it
    }
    if (theirs != quoted) __builtin_trap();
    return 0;
}
