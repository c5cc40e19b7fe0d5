// SPDX-License-Identifier: MIT
#include "util/text.hpp"

#include <charconv>

namespace blkpolicy::util {

std::string trim(std::string_view s) {
    const auto* ws = " \t\n\r\f\v";
    const auto b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(ws);
    return std::string(s.substr(b, e - b + 1));
}

std::optional<std::int64_t> parse_int(std::string_view s) {
    std::string t = trim(s);
    if (t.empty()) return std::nullopt;
    std::int64_t v = 0;
    const char* first = t.data();
    const char* last = t.data() + t.size();
    if (*first == '+') ++first;
    auto [p, ec] = std::from_chars(first, last, v);
    if (ec != std::errc{} || p != last) return std::nullopt;
    return v;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
    std::string out;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i) out += sep;
        out += parts[i];
    }
    return out;
}

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string quoted_list(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + in_quotes(n);
    return out;
}

}  // namespace blkpolicy::util
