// SPDX-License-Identifier: MIT
#include "util/json_text.hpp"

namespace blkpolicy::util {

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i] (Unicode's
// table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF), or 0.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b0 = byte(i);
    std::size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (i + len > s.size()) return 0;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (std::size_t k = 2; k < len; ++k)
        if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
    return len;
}

void append_u00(std::string& out, unsigned char c) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += "\\u00";
    out += kHex[c >> 4];
    out += kHex[c & 0xF];
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
    out.reserve(out.size() + s.size() + 2);
    out += '"';
    for (std::size_t i = 0; i < s.size();) {
        // Printable ASCII other than " and \ goes over as a run.
        std::size_t run = i;
        while (run < s.size() && static_cast<unsigned char>(s[run]) >= 0x20 &&
               static_cast<unsigned char>(s[run]) < 0x80 && s[run] != '"' && s[run] != '\\')
            ++run;
        if (run > i) {
            out.append(s.substr(i, run - i));
            i = run;
            continue;
        }
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80) {
            if (const auto len = utf8_sequence(s, i)) {
                out.append(s.substr(i, len));
                i += len;
            } else {
                append_u00(out, c);
                ++i;
            }
            continue;
        }
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:  // the other control characters: printable ASCII went over as a run
                append_u00(out, c);
        }
        ++i;
    }
    out += '"';
}

}  // namespace blkpolicy::util
