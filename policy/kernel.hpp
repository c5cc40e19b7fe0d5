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
    int patch = 0;  // the stable release (6.12.117 -> 117); 0 when not given
    bool at_least(int ma, int mi) const { return major > ma || (major == ma && minor >= mi); }
    bool series(int ma, int mi) const { return major == ma && minor == mi; }
};

// "6.18.44-fc-v782" -> {6, 18, 44}; nullopt when it does not start with N.N.
std::optional<KernelVersion> parse_kernel_release(std::string_view release);

// How read_ahead_kb behaves when a queue-limits commit (a write of
// max_sectors_kb, rotational, ...) recomputes it (blk_apply_bdi_limits):
enum class ReadaheadOnCommit {
    untouched,  // before 6.9: computed once at registration (observed 6.1.0 Debian 12)
    reset,      // 6.9-6.14 as released: set to the computed value, lowering a larger one
    raise,      // 6.15+, and stable kernels that took the fix back: max(current, computed)
                // (observed 6.12.117 Debian 13, 6.18.44)
    unknown,    // a stable series that may or may not carry the fix: blkpolicy verifies after writing
};
ReadaheadOnCommit readahead_on_commit(const KernelVersion& v);

// Whether a new loop device starts rotational: before 6.11 queues were
// rotational unless the driver said otherwise (observed 6.1.0: unbound
// loops read 1, wbt 75000); since 6.11 rotational is a feature a driver
// opts into and loop does not (observed 6.12.117, 6.18.44: 0, wbt 2000).
// Attaching a file then takes the flag from the backing store.
bool loop_created_rotational(const KernelVersion& v);

// After bfq turned a default wbt off, queue/wbt_lat_usec reads 0 (6.2+;
// observed 6.12.117, 6.18.44) or still the old latency (observed 6.1.0
// Debian 12, where only debugfs rqos/wbt/enabled=3 tells).
bool bfq_off_wbt_reads_zero(const KernelVersion& v);

// nr_requests when a scheduler is attached (blk_mq_init_sched): twice the
// hardware tag depth capped at 128 (BLKDEV_DEFAULT_RQ); with none, the tag
// depth itself. Observed on 6.1.0, 6.12.117 and 6.18.44.
std::int64_t nr_requests_default(std::int64_t hw_tags, bool scheduler_none);

// The read_ahead_kb a queue-limits commit computes (blk_apply_bdi_limits):
// 2 x optimal_io_size with a 128 KiB floor, and since 6.17 2 x max_sectors_kb
// for a rotational queue without an optimal I/O size. nullopt before 6.9,
// where commits do not touch read_ahead_kb.
std::optional<std::int64_t> kernel_readahead_kb(const KernelVersion& v, bool rotational,
                                                std::int64_t optimal_io_bytes, std::int64_t max_sectors_kb);

}  // namespace blkpolicy::policy
