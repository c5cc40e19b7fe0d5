// SPDX-License-Identifier: MIT
#include "measure/trace_format.hpp"

#include <charconv>
#include <cstring>

namespace blkpolicy::measure {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

template <typename T>
bool to_number(std::string_view s, T& out, int base = 10) {
    s = trim(s);
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// "unsigned short common_type" -> "common_type"; "char rwbs[10]" -> "rwbs";
// "const char * msg" -> "msg".
std::string_view declared_name(std::string_view decl) {
    decl = trim(decl);
    if (!decl.empty() && decl.back() == ']') {
        const auto bracket = decl.rfind('[');
        if (bracket != std::string_view::npos) decl = trim(decl.substr(0, bracket));
    }
    const auto last = decl.find_last_of(" \t*");
    return last == std::string_view::npos ? decl : decl.substr(last + 1);
}

// The value after "key:" up to the next ';' in a field line.
std::optional<std::string_view> part(std::string_view line, std::string_view key) {
    const auto at = line.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    const auto start = at + key.size();
    const auto end = line.find(';', start);
    if (end == std::string_view::npos) return std::nullopt;
    return line.substr(start, end - start);
}

}  // namespace

const FieldFormat* EventFormat::field(std::string_view n) const {
    for (const auto& f : fields)
        if (f.name == n) return &f;
    return nullptr;
}

std::optional<EventFormat> parse_event_format(std::string_view text) {
    EventFormat ev;
    bool have_id = false;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        const auto line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        const auto t = trim(line);
        if (t.rfind("name:", 0) == 0) {
            ev.name = std::string(trim(t.substr(5)));
        } else if (t.rfind("ID:", 0) == 0) {
            have_id = to_number(t.substr(3), ev.id);
        } else if (t.rfind("field:", 0) == 0) {
            const auto decl = part(t, "field:");
            const auto offset = part(t, "offset:");
            const auto size = part(t, "size:");
            const auto sign = part(t, "signed:");
            FieldFormat f;
            if (!decl || !offset || !size || !to_number(*offset, f.offset) || !to_number(*size, f.size)) continue;
            f.name = std::string(declared_name(*decl));
            f.is_signed = sign && trim(*sign) == "1";
            ev.fields.push_back(std::move(f));
        }
    }
    if (ev.name.empty() || !have_id || ev.fields.empty()) return std::nullopt;
    return ev;
}

std::map<std::uint64_t, std::string> parse_printk_formats(std::string_view text) {
    std::map<std::uint64_t, std::string> out;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        auto line = trim(text.substr(0, nl));
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        const auto colon = line.find(" : ");
        if (colon == std::string_view::npos) continue;
        auto addr = trim(line.substr(0, colon));
        if (addr.rfind("0x", 0) == 0) addr.remove_prefix(2);
        std::uint64_t a = 0;
        if (!to_number(addr, a, 16)) continue;
        auto value = trim(line.substr(colon + 3));
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
        out.emplace(a, std::string(value));
    }
    return out;
}

}  // namespace blkpolicy::measure
