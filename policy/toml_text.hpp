// SPDX-License-Identifier: MIT
// Policy TOML written by blkpolicy itself (import's output, audit's
// suggested fixes): quoting, comments, and one rule emitted from its parts
// by one function, so every rule blkpolicy writes has the same shape.
#pragma once

#include <string>
#include <vector>

namespace blkpolicy::policy {

// A TOML basic string, quoted and escaped.
std::string toml_quote(const std::string& s);
// One string as it is, a list of several: "a" or ["a", "b"].
std::string toml_list(const std::vector<std::string>& items);
// Text fit for a TOML comment (control bytes and bad UTF-8 as "?").
std::string comment_text(const std::string& s);

// key = value  # comment (value already TOML text; no comment when empty).
struct TomlEntry {
    std::string key;
    std::string value;
    std::string comment;
};

struct RuleToml {
    std::string name;
    std::vector<std::string> acknowledge;  // acknowledgement codes, if any
    std::string acknowledge_comment;
    std::vector<TomlEntry> match;  // no [rule.match] when empty: every device
    std::vector<TomlEntry> set;
    std::vector<TomlEntry> unless = {};  // [rule.unless], when not empty
};

// A dotted key of a named match family: env.ID_BUS, attr."queue/zoned".
std::string toml_dotted(const std::string& family, const std::string& name);

// [[rule]], name, acknowledge, [rule.match], [rule.unless] and [rule.set],
// each line ending in a newline.
std::string emit_rule(const RuleToml& rule);

// An import's output: a comment naming what it was converted from and the
// counts, then the body.
std::string import_document(const std::string& title, const std::vector<std::string>& sources,
                            const std::string& counts, const std::string& body);

}  // namespace blkpolicy::policy
