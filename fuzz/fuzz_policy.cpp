// SPDX-License-Identifier: MIT
// libFuzzer target: any bytes as a policy file. Must never crash, hang or
// leak; every rejection is an error with a position.
#include <cstddef>
#include <cstdint>
#include <string>

#include "policy/loader.hpp"
#include "policy/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto r = blkpolicy::policy::load_policy({{"fuzz.toml", text}});
    if (r.ok()) {
        // A valid policy must plan on any device without trouble.
        blkpolicy::policy::DeviceFacts f;
        f.name = "sda";
        f.has_queue = true;
        f.request_based = true;
        f.schedulers = {"none", "mq-deadline", "bfq"};
        f.scheduler = "none";
        blkpolicy::policy::Values v = {{"rotational", "1"},
                                       {"scheduler", "none"},
                                       {"read_ahead_kb", "128"},
                                       {"max_hw_sectors_kb", "1280"},
                                       {"discard_granularity", "4096"}};
        (void)blkpolicy::policy::plan_device(r.policy, f, v, {});
    } else {
        for (const auto& e : r.errors)
            if (e.message.empty()) __builtin_trap();
    }
    return 0;
}
