// SPDX-License-Identifier: MIT
// What tracefs says about its own records: an event's layout (its
// events/SYSTEM/EVENT/format file) and the strings that pointer fields point
// at (printk_formats: wbt_step's "scale up" and "scale down"). Pure.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace blkpolicy::measure {

struct FieldFormat {
    std::string name;  // "rwbs", "dev", "common_type"
    std::size_t offset = 0;
    std::size_t size = 0;
    bool is_signed = false;
};

struct EventFormat {
    std::string name;  // "block_rq_issue"
    unsigned id = 0;   // common_type of its records
    std::vector<FieldFormat> fields;
    const FieldFormat* field(std::string_view name) const;
};

// A format file's text; nullopt when it has no name, no ID or no fields.
std::optional<EventFormat> parse_event_format(std::string_view text);

// printk_formats: "0xffffffff8283e7a2 : \"scale down\"" lines, address -> string.
std::map<std::uint64_t, std::string> parse_printk_formats(std::string_view text);

// A field of a record: an unsigned integer of the field's size (1, 2, 4 or
// 8 bytes, host byte order), or nullopt when the record is too short.
// Inline: it runs several times for every traced event.
inline std::optional<std::uint64_t> read_unsigned(std::span<const std::uint8_t> record, const FieldFormat& f) {
    if (f.offset + f.size > record.size()) return std::nullopt;
    const auto* p = record.data() + f.offset;
    switch (f.size) {
        case 1:
            return *p;
        case 2: {
            std::uint16_t v;
            std::memcpy(&v, p, 2);
            return v;
        }
        case 4: {
            std::uint32_t v;
            std::memcpy(&v, p, 4);
            return v;
        }
        case 8: {
            std::uint64_t v;
            std::memcpy(&v, p, 8);
            return v;
        }
        default:
            return std::nullopt;
    }
}
// A fixed char array field (rwbs, wbt's name), up to its first NUL.
inline std::optional<std::string_view> read_chars(std::span<const std::uint8_t> record, const FieldFormat& f) {
    if (f.offset + f.size > record.size()) return std::nullopt;
    const auto* p = reinterpret_cast<const char*>(record.data() + f.offset);
    std::size_t n = 0;
    while (n < f.size && p[n] != '\0') ++n;
    return std::string_view(p, n);
}

}  // namespace blkpolicy::measure
