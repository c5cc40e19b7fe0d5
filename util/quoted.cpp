// SPDX-License-Identifier: MIT
#include "util/quoted.hpp"

#include "util/utf8.hpp"

namespace blkpolicy::util {

namespace {

void append_u00(std::string& out, unsigned char c) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += "\\u00";
    out += kHex[c >> 4];
    out += kHex[c & 0xF];
}

}  // namespace

void append_quoted(std::string& out, std::string_view s, Quoting q) {
    out.reserve(out.size() + s.size() + 2);
    out += '"';
    for (std::size_t i = 0; i < s.size();) {
        // Printable ASCII other than " and \ goes over as a run (DEL too, in JSON).
        std::size_t run = i;
        while (run < s.size() && static_cast<unsigned char>(s[run]) >= 0x20 &&
               static_cast<unsigned char>(s[run]) < (q == Quoting::toml ? 0x7f : 0x80) && s[run] != '"' &&
               s[run] != '\\')
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
            default:  // the other control characters (and TOML's DEL): printable ASCII went over as a run
                append_u00(out, c);
        }
        ++i;
    }
    out += '"';
}

}  // namespace blkpolicy::util
