// SPDX-License-Identifier: MIT
#include "policy/values.hpp"

#include <charconv>

#include "policy/keys.hpp"

namespace blkpolicy::policy {

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

SchedulerLine parse_scheduler_line(std::string_view line) {
    SchedulerLine out;
    std::string text = trim(line);
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && text[i] == ' ') ++i;
        std::size_t j = i;
        while (j < text.size() && text[j] != ' ') ++j;
        if (j > i) {
            std::string word = text.substr(i, j - i);
            if (word.size() >= 2 && word.front() == '[' && word.back() == ']') {
                word = word.substr(1, word.size() - 2);
                out.active = word;
            }
            out.offered.push_back(word);
        }
        i = j;
    }
    return out;
}

std::string normalise_readback(std::string_view attribute, std::string_view raw) {
    if (attribute == key_text(Key::scheduler)) return parse_scheduler_line(raw).active;
    return trim(raw);
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

}  // namespace blkpolicy::policy
