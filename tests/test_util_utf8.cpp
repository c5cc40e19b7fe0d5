// SPDX-License-Identifier: MIT
// The one well-formed UTF-8 check (util/utf8.hpp), shared by the JSON text
// writer and the udev importer: each boundary of Unicode's table 3-7.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "util/utf8.hpp"

using blkpolicy::util::utf8_sequence;
using blkpolicy::util::valid_utf8;

TEST_CASE("UTF-8: each boundary of the well-formed table, and the bytes just past it") {
    struct Row {
        std::string bytes;
        std::size_t len;  // what utf8_sequence says at index 0
    };
    const std::vector<Row> rows = {
        {"A", 1},
        {"\x7F", 1},
        {"\xC2\x80", 2},          // U+0080, the first two-byte
        {"\xC1\xBF", 0},          // overlong U+007F
        {"\xDF\xBF", 2},          // U+07FF
        {"\xE0\xA0\x80", 3},      // U+0800
        {"\xE0\x9F\xBF", 0},      // overlong U+07FF
        {"\xED\x9F\xBF", 3},      // U+D7FF
        {"\xED\xA0\x80", 0},      // U+D800, a surrogate
        {"\xEE\x80\x80", 3},      // U+E000
        {"\xF0\x90\x80\x80", 4},  // U+10000
        {"\xF0\x8F\xBF\xBF", 0},  // overlong U+FFFF
        {"\xF4\x8F\xBF\xBF", 4},  // U+10FFFF
        {"\xF4\x90\x80\x80", 0},  // past U+10FFFF
        {"\xF5\x80\x80\x80", 0},
        {"\x80", 0},              // a continuation byte alone
        {"\xE2\x82", 0},          // cut short
        {"\xE2\x28\xA1", 0},      // a second byte that is not a continuation
        {"\xF0\x9F\x98\x28", 0},  // a fourth byte that is not one
    };
    for (const auto& r : rows) {
        CAPTURE(r.bytes);
        CHECK(utf8_sequence(r.bytes, 0) == r.len);
        CHECK(valid_utf8(r.bytes) == (r.len == r.bytes.size()));
    }
    CHECK(valid_utf8(""));
    CHECK(valid_utf8("disk \xC3\xA9t\xC3\xA9 \xF0\x9F\x92\xBE"));
    CHECK_FALSE(valid_utf8("disk \xC3\xA9t\xC3"));
}
