// SPDX-License-Identifier: MIT
#include "measure/ring_buffer.hpp"

#include <cstring>

namespace blkpolicy::measure {

namespace {
// The compressed entry header (events/header_event): type_len 5 bits,
// time_delta 27 bits, then array[0] for the types that need it.
constexpr unsigned kPadding = 29;
constexpr unsigned kTimeExtend = 30;
constexpr unsigned kTimeStamp = 31;
constexpr unsigned kTsShift = 27;
constexpr std::uint64_t kMissedEvents = 1ULL << 31;
constexpr std::uint64_t kMissedStored = 1ULL << 30;
// An absolute time stamp keeps 59 bits; the rest comes from the page's.
constexpr std::uint64_t kTsMsb = 0xf8ULL << 56;

// Integers as the writing kernel stored them.
template <typename T>
T in_order(T v, std::endian order) {
    if (order == std::endian::native) return v;
    T swapped = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) swapped = static_cast<T>((swapped << 8) | ((v >> (8 * i)) & 0xff));
    return swapped;
}
template <typename T>
T read_at(std::span<const std::uint8_t> b, std::size_t offset, std::endian order) {
    T v;
    std::memcpy(&v, b.data() + offset, sizeof v);
    return in_order(v, order);
}
}  // namespace

PageRead parse_page(std::span<const std::uint8_t> page, std::size_t commit_size, std::vector<RawRecord>& out,
                    std::endian order) {
    const auto u32_at = [order](std::span<const std::uint8_t> b, std::size_t offset) {
        return read_at<std::uint32_t>(b, offset, order);
    };
    // The entry header's bit fields: type_len:5 then time_delta:27, allocated
    // from the low bits on a little-endian kernel and from the high bits on
    // a big-endian one.
    const bool big = order == std::endian::big;
    PageRead r;
    const std::size_t header = 8 + commit_size;
    if (page.size() < header || (commit_size != 4 && commit_size != 8)) {
        r.ok = false;
        return r;
    }
    const std::uint64_t page_ts = read_at<std::uint64_t>(page, 0, order);
    r.page_ts = page_ts;
    const std::uint64_t commit = commit_size == 8 ? read_at<std::uint64_t>(page, 8, order) : u32_at(page, 8);
    r.missed_events = (commit & kMissedEvents) != 0;
    const bool stored = (commit & kMissedStored) != 0;
    const std::size_t length = static_cast<std::size_t>(commit & (kMissedStored - 1));
    if (header + length > page.size()) {
        r.ok = false;
        return r;
    }
    const auto data = page.subspan(header, length);
    if (stored && header + length + 8 <= page.size())
        r.missed_count = read_at<std::uint64_t>(page, header + length, order);

    std::uint64_t ts = page_ts;
    std::size_t at = 0;
    while (at + 4 <= data.size()) {
        const std::uint32_t h = u32_at(data, at);
        const unsigned type_len = big ? h >> 27 : h & 0x1f;
        const std::uint64_t delta = big ? h & ((1u << 27) - 1) : h >> 5;
        const auto array0 = [&]() -> std::optional<std::uint32_t> {
            if (at + 8 > data.size()) return std::nullopt;
            return u32_at(data, at + 4);
        };
        if (type_len == kPadding) {
            // delta 0: the rest of the page is padding; else a discarded record.
            if (delta == 0) break;
            const auto len = array0();
            if (!len || at + 4 + *len > data.size()) {
                r.ok = false;
                break;
            }
            at += 4 + *len;
        } else if (type_len == kTimeExtend || type_len == kTimeStamp) {
            const auto hi = array0();
            if (!hi) {
                r.ok = false;
                break;
            }
            const std::uint64_t value = (static_cast<std::uint64_t>(*hi) << kTsShift) | delta;
            if (type_len == kTimeExtend) {
                ts += value;
            } else {
                // As the kernel's rb_fix_abs_ts: only a page stamp with its
                // top bits set lends them, and only then can the sum wrap. A
                // stamp below an ordinary page's stays what it says.
                ts = value;
                if ((page_ts & kTsMsb) != 0) {
                    ts |= page_ts & kTsMsb;
                    if (ts < page_ts) ts += 1ULL << 59;
                }
            }
            at += 8;
        } else if (type_len == 0) {
            // Length in array[0] (including array[0] itself), data after it.
            const auto len = array0();
            if (!len || *len < 4 || at + 4 + *len > data.size()) {
                r.ok = false;
                break;
            }
            ts += delta;
            out.push_back({ts, data.subspan(at + 8, *len - 4)});
            at += 4 + *len;
        } else {
            const std::size_t len = type_len * 4u;
            if (at + 4 + len > data.size()) {
                r.ok = false;
                break;
            }
            ts += delta;
            out.push_back({ts, data.subspan(at + 4, len)});
            at += 4 + len;
        }
    }
    return r;
}

}  // namespace blkpolicy::measure
