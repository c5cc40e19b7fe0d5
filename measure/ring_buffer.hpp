// SPDX-License-Identifier: MIT
// The pages tracefs hands out in per_cpu/cpuN/trace_pipe_raw, taken apart:
// the kernel's ring-buffer layout (events/header_page, events/header_event),
// read rather than formatted as text, so a busy disk costs the reader little.
// Pure: bytes in, records out.
#pragma once

#include <bit>
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
    std::uint64_t page_ts = 0;                  // the page's time stamp (where a loss was, at the latest)
};

// One page (sub-buffer) as read from trace_pipe_raw. `commit_size` is the
// size of the header's commit field (events/header_page: 8 on a 64-bit
// kernel). Appends each data record to `out` in the order written.
// `order` is the byte order of the kernel that wrote it: the host's own
// when read from trace_pipe_raw. On a big-endian kernel (s390x, ppc64) the
// words are big-endian and the entry header's bit fields are laid out from
// the top: type_len is the word's highest 5 bits, not its lowest. (The
// records' own fields are in the same order; the decoder reads them in the
// host's, which is the kernel's.)
PageRead parse_page(std::span<const std::uint8_t> page, std::size_t commit_size, std::vector<RawRecord>& out,
                    std::endian order = std::endian::native);

}  // namespace blkpolicy::measure
