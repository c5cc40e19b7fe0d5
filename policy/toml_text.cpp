// SPDX-License-Identifier: MIT
#include "policy/toml_text.hpp"

#include <algorithm>

#include "util/quoted.hpp"
#include "util/utf8.hpp"

namespace blkpolicy::policy {

std::string toml_quote(const std::string& s) {
    std::string out;
    util::append_quoted(out, s, util::Quoting::toml);
    return out;
}

// One line, valid UTF-8, no control characters: the original rule, say.
std::string comment_text(const std::string& s) {
    std::string out;
    const bool utf8 = util::valid_utf8(s);
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f || (!utf8 && u >= 0x80))
            out += '?';
        else
            out += c;
    }
    return out;
}

std::string toml_list(const std::vector<std::string>& items) {
    if (items.size() == 1) return toml_quote(items.front());
    std::string s = "[";
    for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + toml_quote(items[i]);
    return s + "]";
}

namespace {
std::string line(const TomlEntry& e) {
    return e.key + " = " + e.value + (e.comment.empty() ? "" : "  # " + comment_text(e.comment)) + "\n";
}
}  // namespace

std::string emit_rule(const RuleToml& rule) {
    std::string out = "[[rule]]\nname = " + toml_quote(rule.name) + "\n";
    if (!rule.acknowledge.empty()) {
        std::string codes;
        for (const auto& c : rule.acknowledge) codes += (codes.empty() ? "" : ", ") + toml_quote(c);
        out += line({"acknowledge", "[" + codes + "]", rule.acknowledge_comment});
    }
    if (!rule.match.empty()) {
        out += "[rule.match]\n";
        for (const auto& m : rule.match) out += line(m);
    }
    if (!rule.unless.empty()) {
        out += "[rule.unless]\n";
        for (const auto& m : rule.unless) out += line(m);
    }
    out += "[rule.set]\n";
    for (const auto& e : rule.set) out += line(e);
    return out;
}

std::string toml_dotted(const std::string& family, const std::string& name) {
    const bool bare = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
    return family + "." + (bare ? name : toml_quote(name));
}

std::string import_document(const std::string& title, const std::vector<std::string>& sources,
                            const std::string& counts, const std::string& body) {
    std::string out = "# " + title + "\n";
    for (const auto& s : sources) out += "#   " + comment_text(s) + "\n";
    return out + "# " + counts + " (see the comments and the messages on stderr).\n" + body;
}

}  // namespace blkpolicy::policy
