// SPDX-License-Identifier: MIT
// /sys/block/DEV/stat: the kernel's own I/O counters of a disk
// (Documentation/block/stat.rst). 11 fields before 4.18, 15 from 4.18
// (discards), 17 from 5.5 (flushes); read tolerantly, as more may come.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace blkpolicy::measure {

// Field numbers as the kernel documents them, from 1.
enum class StatField : unsigned {
    reads = 1,          // read requests completed
    reads_merged,       // reads merged into another request
    sectors_read,       // 512-byte sectors read
    read_ms,            // ms spent reading (32 bits: wraps)
    writes,             // write requests completed
    writes_merged,      //
    sectors_written,    //
    write_ms,           // (32 bits)
    in_flight,          // requests in flight now (not a counter)
    io_ms,              // ms with requests in flight (32 bits)
    queue_ms,           // weighted ms (32 bits)
    discards,           // 4.18+
    discards_merged,    //
    sectors_discarded,  //
    discard_ms,         // (32 bits)
    flushes,            // 5.5+: flush requests completed
    flush_ms,           // 5.5+: ms flushing (32 bits)
};
inline constexpr unsigned kStatFields = 17;

struct IoStat {
    std::array<std::uint64_t, kStatFields> values{};
    unsigned fields = 0;  // how many the kernel gave
    std::uint64_t operator[](StatField f) const { return values[static_cast<unsigned>(f) - 1]; }
    bool has(StatField f) const { return static_cast<unsigned>(f) <= fields; }
};

// The text of a stat file; nullopt when it is not whitespace-separated
// numbers, or fewer than the 11 every kernel since 2.6 gives.
std::optional<IoStat> parse_stat(std::string_view text);

// after - before, field by field: counters as 64-bit, the millisecond
// fields modulo 2^32 (the kernel keeps them in an unsigned int), in_flight
// as `after` (a level, not a counter). A counter that went backwards (the
// device was replaced) gives nullopt.
std::optional<IoStat> stat_delta(const IoStat& before, const IoStat& after);

}  // namespace blkpolicy::measure
