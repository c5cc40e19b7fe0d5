// SPDX-License-Identifier: MIT
#include "measure/stat.hpp"

#include <charconv>

namespace blkpolicy::measure {

namespace {
bool is_millis(unsigned index0) {
    switch (static_cast<StatField>(index0 + 1)) {
        case StatField::read_ms:
        case StatField::write_ms:
        case StatField::io_ms:
        case StatField::queue_ms:
        case StatField::discard_ms:
        case StatField::flush_ms:
            return true;
        default:
            return false;
    }
}
}  // namespace

std::optional<IoStat> parse_stat(std::string_view text) {
    IoStat s;
    std::size_t at = 0;
    unsigned n = 0;
    while (true) {
        while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n')) ++at;
        if (at == text.size()) break;
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data() + at, text.data() + text.size(), v);
        if (ec != std::errc() || end == text.data() + at) return std::nullopt;
        if (end != text.data() + text.size() && *end != ' ' && *end != '\t' && *end != '\n') return std::nullopt;
        if (n < kStatFields) s.values[n] = v;
        ++n;
        at = static_cast<std::size_t>(end - text.data());
    }
    if (n < 11) return std::nullopt;
    s.fields = n < kStatFields ? n : kStatFields;
    return s;
}

std::optional<IoStat> stat_delta(const IoStat& before, const IoStat& after) {
    IoStat d;
    d.fields = before.fields < after.fields ? before.fields : after.fields;
    for (unsigned i = 0; i < d.fields; ++i) {
        if (static_cast<StatField>(i + 1) == StatField::in_flight) {
            d.values[i] = after.values[i];
        } else if (is_millis(i)) {
            d.values[i] = (after.values[i] - before.values[i]) & 0xffffffffULL;
        } else {
            if (after.values[i] < before.values[i]) return std::nullopt;
            d.values[i] = after.values[i] - before.values[i];
        }
    }
    return d;
}

}  // namespace blkpolicy::measure
