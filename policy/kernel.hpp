// What the kernel computes on its own, per version (KERNEL.md "Source
// facts"). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace blkpolicy::policy {

struct KernelVersion {
    int major = 0;
    int minor = 0;
    bool at_least(int ma, int mi) const { return major > ma || (major == ma && minor >= mi); }
};

// "6.18.44-fc-v782" -> {6, 18}; nullopt when it does not start with N.N.
std::optional<KernelVersion> parse_kernel_release(std::string_view release);

// The read_ahead_kb a queue-limits commit computes (blk_apply_bdi_limits):
// 2 x optimal_io_size with a 128 KiB floor, and since 6.17 2 x max_sectors_kb
// for a rotational queue without an optimal I/O size. nullopt before 6.9,
// where commits do not touch read_ahead_kb.
std::optional<std::int64_t> kernel_readahead_kb(const KernelVersion& v, bool rotational,
                                                std::int64_t optimal_io_bytes, std::int64_t max_sectors_kb);

}  // namespace blkpolicy::policy
