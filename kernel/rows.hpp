// SPDX-License-Identifier: MIT
// What the kernel does on its own, as one table of rows (kernel/rows.cpp;
// `blkpolicy explain --kernel-rules` lists them): what a
// write recomputes or resets, how each default is derived, what a value
// reads back as. Each row says for which kernel versions it holds, how
// blkpolicy knows it holds on the running kernel, and where it was observed.
// Everything else (the planner, the executor, the reconciler, explain, the
// test kernel model) asks these rows through the functions below and keeps
// no copy of its own. Pure.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/keys.hpp"

namespace blkpolicy::kernel {

// The attributes are the policy's names for them (policy/keys: an enum
// and its names, header only, below the kernel rows).
using policy::Key;

struct KernelVersion {
    int major = 0;
    int minor = 0;
    int patch = 0;  // the stable release (6.12.117 -> 117); 0 when not given
    bool at_least(int ma, int mi) const { return major > ma || (major == ma && minor >= mi); }
    bool series(int ma, int mi) const { return major == ma && minor == mi; }
    friend constexpr auto operator<=>(const KernelVersion&, const KernelVersion&) = default;
};

// "6.18.44-fc-v782" -> {6, 18, 44}; nullopt when it does not start with N.N.
std::optional<KernelVersion> parse_kernel_release(std::string_view release);

// [from, until); an `until` of 0.0 is open-ended, so {} is every version.
// `used` false marks a row's unused second range.
struct VersionRange {
    KernelVersion from;
    KernelVersion until;
    bool used = true;
    constexpr bool contains(const KernelVersion& v) const {
        return used && !(v < from) && (until.major == 0 || v < until);
    }
};

// How blkpolicy knows that a row holds on the running kernel.
enum class KnownBy {
    always,             // the same on every kernel it supports
    version,            // from the kernel release alone
    version_and_probe,  // the release, and a probe of the kernel's own state confirms it
    probe,              // only from the device or the kernel (driver, VPD page, backing file, debugfs)
    read_back,          // cannot know in advance: it reads the value back after writing
};
const char* to_string(KnownBy k);

// One handle per row, in the rows' order (checked at compile time): code
// names a row by its handle, so a row that does not exist does not build.
enum class KRow : std::uint8_t {
    readahead_on_commit_raise,
    readahead_on_commit_unknown,
    readahead_on_commit_reset,
    readahead_on_commit_untouched,
    readahead_default_2x_max_sectors,
    readahead_default_2x_io_opt,
    read_ahead_whole_pages,
    limits_commit_recomputes_read_ahead,
    scheduler_switch_resets_nr_requests,
    scheduler_switch_recreates_iosched,
    scheduler_switch_resets_async_depth,
    bfq_attach_turns_default_wbt_off,
    nr_requests_write_rescales_async_depth,
    bfq_off_wbt_reads_0,
    bfq_off_wbt_reads_latency,
    wbt_default_rotational_at_init,
    wbt_store_retained_value_noop,
    wbt_store_unknown,
    wbt_store_off_retained_applies,
    write_contended_ebusy,
    write_contended_unknown,
    write_contended_waits,
    async_depth_queue_attribute,
    async_depth_iosched_tunable,
    async_depth_default_by_scheduler,
    async_depth_write_capped_refused_under_none,
    loop_created_rotational_1,
    loop_created_rotational_0,
    nr_requests_default_scheduler,
    nr_requests_default_none,
    nr_requests_default_bio_based,
    write_cache_two_words,
    rq_affinity_3_ignored,
    io_timeout_whole_ticks,
    io_timeout_one_timer_with_scsi_timeout,
    io_timeout_default_by_driver,
    rotational_default_virtio_blk,
    rotational_default_nvme,
    rotational_default_sd_vpd_b1,
    rotational_default_sd_no_vpd,
    rotational_default_loop_backing,
    rotational_default_loop_unbound,
    rotational_default_stacked,
    rotational_default_driver,
    scheduler_default_loop_none,
    scheduler_default_one_queue_mq_deadline,
    scheduler_default_many_queues_none,
    scheduler_default_bio_based,
    bdi_defaults,
    bdi_min_not_above_max,
    bdi_strict_limit_present,
    md_defaults,
    md_stripe_cache_raid456,
    md_sync_speed_redundancy,
    md_sync_speed_local_or_system,
    md_sync_speed_min_over_max_taken,
};
inline constexpr std::size_t kKernelRowCount = 56;

// The questions a kernel's version answers: one row of each holds on every
// release (checked at compile time at every range's ends).
enum class KQuestion {
    readahead_on_commit,
    readahead_default,
    wbt_store,
    write_contended,
    async_depth,
    bfq_off_wbt_reads,
    loop_created_rotational,
};

// What a write can disturb: a queue-limits commit, a scheduler switch, or a
// write of nr_requests (which rescales async_depth on 7.0+).
enum class WriteCause { none, limits_commit, scheduler_switch, nr_requests_write };

struct KernelRow {
    KRow handle;
    std::string_view id;                   // "question:answer"; the rows of one question exclude each other
    std::string_view behaviour;            // what the kernel does, in a sentence
    std::array<VersionRange, 2> versions;  // where it holds: either range (the second may be unused)
    KnownBy known_by;
    std::string_view how;                 // the probe, the read-back, or the version rule
    std::string_view observed;            // kernels it was seen on, on these machines; empty: from the source only
    WriteCause cause = WriteCause::none;  // for "a write disturbs" rows: which writes
    std::optional<Key> disturbs;          // ... and the attribute (Key::iosched: every tunable)
    std::string_view source;              // kernel function and file
    // For a row keyed on the version with an open-ended range: the newest
    // kernel series it was observed on here. On a newer kernel blkpolicy
    // does not take the version's word for it (see beyond_observed).
    KernelVersion newest_seen{};
    constexpr bool holds_on(const KernelVersion& v) const {
        for (const auto& r : versions)
            if (r.contains(v)) return true;
        return false;
    }
    // Whether the row is keyed on the version (known_by version or
    // version+probe) and `v` lies past the newest kernel it was observed on,
    // in a range that is open-ended: nobody here has seen it hold there.
    // Then blkpolicy acts on what it can know without the version: it reads
    // every write back, and probes where the row names a probe.
    bool beyond_observed(const KernelVersion& v) const;
    constexpr std::string_view question() const { return id.substr(0, id.find(':')); }
    constexpr std::string_view answer() const { return id.substr(id.find(':') + 1); }
};

// Every row, in the order the questions are asked.
std::span<const KernelRow> kernel_rows();
const KernelRow& kernel_row(KRow handle);
// The first row of a version question that holds on `v` (there is one).
const KernelRow& kernel_row_for(KQuestion question, const KernelVersion& v);
// The rows every call above has returned in this process, for the test that
// checks each row is exercised by some test.
std::vector<std::string_view> kernel_rows_consulted();

// How read_ahead_kb behaves when a queue-limits commit (a write of
// max_sectors_kb, rotational, ...) recomputes it (blk_apply_bdi_limits):
enum class ReadaheadOnCommit {
    untouched,  // before 6.9: computed once at registration
    reset,      // 6.9-6.14 as released: set to the computed value, lowering a larger one
    raise,      // 6.15+, and stable kernels that took the fix back: max(current, computed)
    unknown,    // a stable series that may or may not carry the fix: blkpolicy verifies after writing
};
ReadaheadOnCommit readahead_on_commit(const KernelVersion& v);

// How the row stands on `v`, for `explain --kernel-rules`: "holds",
// "does not hold", or "not observed past 7.3: read back" (or ": probe").
std::string standing_on(const KernelRow& r, const KernelVersion& v);

// Whether a new loop device starts rotational (before 6.11 it does).
bool loop_created_rotational(const KernelVersion& v);

// After bfq turned a default wbt off, whether queue/wbt_lat_usec reads 0
// (6.2+) or still the old latency (only debugfs rqos/wbt/enabled=3 tells).
bool bfq_off_wbt_reads_zero(const KernelVersion& v);

// nr_requests when a scheduler is attached (blk_mq_init_sched): twice the
// hardware tag depth capped at 128; with none, the tag depth itself.
std::int64_t nr_requests_default(std::int64_t hw_tags, bool scheduler_none);

// The read_ahead_kb the kernel computes (blk_apply_bdi_limits): 2 x
// optimal_io_size with a 128 KiB floor, and since 6.17 2 x max_sectors_kb
// for a rotational queue without an optimal I/O size. nullopt before 6.9,
// where commits do not touch read_ahead_kb.
std::optional<std::int64_t> kernel_readahead_kb(const KernelVersion& v, bool rotational, std::int64_t optimal_io_bytes,
                                                std::int64_t max_sectors_kb);
// The same on a kernel that computes it only at registration (before 6.9).
std::int64_t registration_readahead_kb(std::int64_t optimal_io_bytes);

// wbt's default latency, fixed when wbt starts on the queue: 75 ms if the
// queue was rotational then, else 2 ms.
std::int64_t wbt_default_usec(bool rotational);

// What read_ahead_kb reads back after writing `kb`: whole pages.
std::int64_t readahead_readback(std::int64_t kb, std::int64_t page_size);

// What queue/write_cache reads back after writing `value` ("write back" or
// "write through"; the kernel matches prefixes), nullopt when it refuses it.
std::optional<std::string> write_cache_readback(std::string_view value);

// What queue/io_timeout reads back after writing `ms` on a kernel ticking
// at `hz`: the kernel keeps ticks (msecs_to_jiffies, rounding up), and from
// 2^31 ms on it keeps the longest timer it has, whose ticks it then shows
// as milliseconds in 32 bits (4294967288 at 250 Hz).
inline constexpr std::int64_t kIoTimeoutLongest = std::int64_t{1} << 31;
std::int64_t io_timeout_readback(std::int64_t ms, int hz);
// The request timer a driver starts a disk with, in ms: NVMe's
// nvme_core.io_timeout (seconds), sd's 30 s; nullopt for a driver without one.
std::optional<std::int64_t> io_timeout_default_ms(std::string_view driver,
                                                  std::optional<std::int64_t> nvme_io_timeout_s);

// Whether writing `value` to rq_affinity is accepted but changes nothing (3, any value above 2).
bool rq_affinity_write_ignored(std::int64_t value);

// queue/async_depth (7.0+): its default after a scheduler is attached
// (nr_requests under none and mq-deadline, 3/4 of it under kyber and bfq);
// what it becomes when nr_requests is written (scaled in proportion); what
// a written value reads back as (capped at nr_requests). nullopt: the
// kernel refuses the write (0, or any value under none).
std::int64_t async_depth_default(std::int64_t nr_requests, std::string_view scheduler);
std::int64_t async_depth_rescaled(std::int64_t async_depth, std::int64_t old_nr, std::int64_t new_nr);
std::optional<std::int64_t> async_depth_readback(std::int64_t value, std::int64_t nr_requests,
                                                 std::string_view scheduler);

// The row behind "a write of this cause can move this attribute" on `v`
// (v.major == 0: the kernel is not known, and a kernel newer than any seen
// here is treated the same: every such row counts), or null.
const KernelRow* disturbed_by(WriteCause cause, Key attribute, const KernelVersion& v);

// The row of the question "rotational-default" that explains how the
// driver decides (virtio-blk, nvme, sd with and without VPD B1h, loop,
// dm/md, anything else).
enum class RotationalSource { virtio_blk, nvme, sd_vpd_b1, sd_no_vpd, loop_backing, loop_unbound, stacked, driver };
const KernelRow& rotational_row(RotationalSource s);

// The row that picks the default scheduler.
enum class SchedulerDefault { loop_none, one_queue_mq_deadline, many_queues_none, bio_based };
const KernelRow& scheduler_default_row(SchedulerDefault s);

// A block device's writeback limits (its bdi) as the kernel starts them:
// max_ratio 100, min_ratio 0, strict_limit 0; nullopt for another key.
std::optional<std::int64_t> bdi_default(Key key);
// Whether the kernel takes a bdi's min_ratio MIN beside its max_ratio MAX
// (it refuses a min above the max, either way round: EINVAL).
bool bdi_ratios_accepted(std::int64_t min, std::int64_t max);

// An md array's tunables as the kernel starts them: stripe_cache_size 256,
// sync_speed_min and _max following the sysctls dev.raid.speed_limit_min
// and _max (read back as "system"); nullopt for another key.
std::optional<std::string> md_default(Key key);
// Whether an md array of LEVEL ("raid5", as md/level reads) has a stripe
// cache (raid4, raid5, raid6), and whether it ever resyncs (every level
// with redundancy: it has sync_speed_min and _max).
bool md_has_stripe_cache(std::string_view level);
bool md_resyncs(std::string_view level);
// md/sync_speed_min or _max as read ("5000 (local)", "1000 (system)") in
// the form a policy compares and a restore writes: "5000", "system".
std::string md_speed_value(std::string_view read);
// Whether a resync of an array with sync_speed_min MIN and _max MAX is
// held to MAX: the kernel takes a min above the max (either written
// first) and then never holds a resync back below the min.
bool md_speed_max_holds(std::int64_t min, std::int64_t max);

}  // namespace blkpolicy::kernel
