// SPDX-License-Identifier: MIT
// Well-formed UTF-8 (Unicode's table 3-7, RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), the one check for every layer: JSON
// text written by hand keeps such sequences and escapes any other byte;
// the udev importer leaves a rule out that toml++ would refuse. Header only
// and pure, like util/names.hpp.
#pragma once

#include <cstddef>
#include <string_view>

namespace blkpolicy::util {

// Length of the well-formed sequence starting at s[i] (1 for ASCII), or 0
// when the bytes there are not one.
constexpr std::size_t utf8_sequence(std::string_view s, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b0 = byte(i);
    if (b0 < 0x80) return 1;
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3;
        if (b0 == 0xE0) lo = 0xA0;  // overlong below U+0800
        if (b0 == 0xED) hi = 0x9F;  // surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
        if (b0 == 0xF0) lo = 0x90;  // overlong below U+10000
        if (b0 == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
        return 0;
    }
    if (i + len > s.size()) return 0;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (std::size_t k = 2; k < len; ++k)
        if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
    return len;
}

constexpr bool valid_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto len = utf8_sequence(s, i);
        if (len == 0) return false;
        i += len;
    }
    return true;
}

static_assert(valid_utf8("plain \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
static_assert(!valid_utf8("\xC0\xAF") && !valid_utf8("\xED\xA0\x80") && !valid_utf8("\xF4\x90\x80\x80"));

}  // namespace blkpolicy::util
