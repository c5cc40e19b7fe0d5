// SPDX-License-Identifier: MIT
// The pages tracefs hands out in per_cpu/cpuN/trace_pipe_raw, taken apart:
// the kernel's ring-buffer layout (events/header_page, events/header_event),
// read rather than formatted as text, so a busy disk costs the reader little.
// Pure: bytes in, records out.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace blkpolicy::measure {

struct RawRecord {
    std::uint64_t ts = 0;                // trace clock, ns
    std::span<const std::uint8_t> data;  // the event's own fields, common_type first
};

struct PageRead {
    bool ok = true;                             // false: a length led past the page (what was read before it is kept)
    bool missed_events = false;                 // the kernel lost events before this page (the buffer was full)
    std::optional<std::uint64_t> missed_count;  // how many, when the kernel had room to say
};

// One page (sub-buffer) as read from trace_pipe_raw. `commit_size` is the
// size of the header's commit field (events/header_page: 8 on a 64-bit
// kernel). Appends each data record to `out` in the order written.
PageRead parse_page(std::span<const std::uint8_t> page, std::size_t commit_size, std::vector<RawRecord>& out);

}  // namespace blkpolicy::measure
