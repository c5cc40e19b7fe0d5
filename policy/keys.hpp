// SPDX-License-Identifier: MIT
// Every queue value blkpolicy names in its code, as an enum: the writable
// attributes in write order, then the read-only values planning, explain
// and audit read beside them. Code names a value by its Key, so a misspelt
// attribute does not build; the text is this table's, the sysfs path and
// everything else about a writable one its row's (policy/attributes).
// Header only and pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "util/names.hpp"

namespace blkpolicy::policy {

enum class Key : std::uint8_t {
    // writable, in write order: policy/attributes.cpp has a row for each, in
    // this order (checked when it builds)
    rotational,
    max_sectors_kb,
    discard_max_bytes,
    write_cache,
    add_random,
    iostats,
    scheduler,
    nr_requests,
    async_depth,
    iosched,  // the iosched.NAME family: the scheduler's own tunables
    wbt_lat_usec,
    nomerges,
    rq_affinity,
    device_timeout,
    device_queue_depth,
    device_iopolicy,  // an NVMe multipath head's subsystem: how I/O is spread over its paths
    io_timeout,       // after device.timeout: the same request timer on SCSI
    bdi_max_ratio,    // the device's writeback (bdi): its share of the dirty page cache
    bdi_min_ratio,    // after the max: the kernel refuses a min above it
    bdi_strict_limit,
    md_stripe_cache_size,  // an md raid4/5/6 array's stripe cache (policy/units/md.cpp)
    md_sync_speed_min,     // an md array's resync and check speed, KiB/s
    md_sync_speed_max,
    read_ahead_kb,
    // read only
    max_hw_sectors_kb,
    discard_granularity,
    optimal_io_size,
};

inline constexpr util::Named<Key> kKeyNames[] = {
    {Key::rotational, "rotational"},
    {Key::max_sectors_kb, "max_sectors_kb"},
    {Key::discard_max_bytes, "discard_max_bytes"},
    {Key::write_cache, "write_cache"},
    {Key::add_random, "add_random"},
    {Key::iostats, "iostats"},
    {Key::scheduler, "scheduler"},
    {Key::nr_requests, "nr_requests"},
    {Key::async_depth, "async_depth"},
    {Key::iosched, "iosched"},
    {Key::wbt_lat_usec, "wbt_lat_usec"},
    {Key::nomerges, "nomerges"},
    {Key::rq_affinity, "rq_affinity"},
    {Key::device_timeout, "device.timeout"},
    {Key::device_queue_depth, "device.queue_depth"},
    {Key::device_iopolicy, "device.iopolicy"},
    {Key::io_timeout, "io_timeout"},
    {Key::bdi_max_ratio, "bdi.max_ratio"},
    {Key::bdi_min_ratio, "bdi.min_ratio"},
    {Key::bdi_strict_limit, "bdi.strict_limit"},
    {Key::md_stripe_cache_size, "md.stripe_cache_size"},
    {Key::md_sync_speed_min, "md.sync_speed_min"},
    {Key::md_sync_speed_max, "md.sync_speed_max"},
    {Key::read_ahead_kb, "read_ahead_kb"},
    {Key::max_hw_sectors_kb, "max_hw_sectors_kb"},
    {Key::discard_granularity, "discard_granularity"},
    {Key::optimal_io_size, "optimal_io_size"},
};
static_assert(util::in_enum_order(kKeyNames));

// The last writable key; the read-only ones follow it.
inline constexpr Key kLastWritable = Key::read_ahead_kb;
constexpr bool writable(Key k) { return k <= kLastWritable; }

// The policy key as users write it ("device.timeout"; "iosched" for the family).
constexpr std::string_view key_text(Key k) { return util::name_of(kKeyNames, k); }

// The Key of a policy key or value name: "iosched.fifo_batch" is the iosched
// family; nullopt for a name blkpolicy does not know.
constexpr std::optional<Key> key_of(std::string_view text) {
    if (text.starts_with("iosched.")) return Key::iosched;
    if (text == "iosched") return std::nullopt;
    return util::value_named(kKeyNames, text);
}

}  // namespace blkpolicy::policy
