// SPDX-License-Identifier: MIT
#include "policy/match.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <compare>
#include <string_view>

#include "policy/attributes.hpp"
#include "util/names.hpp"
#include "util/text.hpp"

namespace blkpolicy::policy {

namespace {

// How a key's patterns are compared with the device's values.
enum class Compare {
    glob,   // fnmatch patterns against each value
    flag,   // true or false
    exact,  // one of a fixed set of words (stack)
    named,  // env.NAME, attr.NAME, attrs.NAME: globs against the values of one property or attribute
};

using FactTexts = std::vector<std::string>;

// One row per match key: its name in the policy, how it compares, the fact
// groups discovery must read for it, and the device's values for it.
struct MatchKeyRow {
    MatchKey value;
    const char* name;
    Compare compare;
    FactNeeds needs;
    FactTexts (*read)(const DeviceFacts&);
};

constexpr MatchKeyRow kMatchKeys[] = {
    {MatchKey::kernel, "kernel", Compare::glob, 0, [](const DeviceFacts& f) { return FactTexts{f.name}; }},
    {MatchKey::driver, "driver", Compare::glob, kFactDrivers, [](const DeviceFacts& f) { return f.drivers; }},
    {MatchKey::model, "model", Compare::glob, kFactModel, [](const DeviceFacts& f) { return FactTexts{f.model}; }},
    {MatchKey::vendor, "vendor", Compare::glob, kFactModel, [](const DeviceFacts& f) { return FactTexts{f.vendor}; }},
    {MatchKey::serial, "serial", Compare::glob, kFactSerial, [](const DeviceFacts& f) { return FactTexts{f.serial}; }},
    {MatchKey::wwid, "wwid", Compare::glob, kFactWwid, [](const DeviceFacts& f) { return FactTexts{f.wwid}; }},
    {MatchKey::stack, "stack", Compare::exact, kFactStack,
     [](const DeviceFacts& f) { return FactTexts{to_string(f.stack)}; }},
    {MatchKey::dm_name, "dm_name", Compare::glob, kFactStack,
     [](const DeviceFacts& f) { return FactTexts{f.dm_name}; }},
    {MatchKey::dm_uuid, "dm_uuid", Compare::glob, kFactStack,
     [](const DeviceFacts& f) { return FactTexts{f.dm_uuid}; }},
    {MatchKey::md_level, "md_level", Compare::glob, kFactStack,
     [](const DeviceFacts& f) { return FactTexts{f.md_level}; }},
    {MatchKey::rotational, "rotational", Compare::flag, 0,
     [](const DeviceFacts& f) { return FactTexts{f.rotational ? "true" : "false"}; }},
    {MatchKey::removable, "removable", Compare::flag, 0,
     [](const DeviceFacts& f) { return FactTexts{f.removable ? "true" : "false"}; }},
    {MatchKey::env, "env", Compare::named, kFactProperties, [](const DeviceFacts&) { return FactTexts{}; }},
    {MatchKey::attr, "attr", Compare::named, kFactAttributes, [](const DeviceFacts&) { return FactTexts{}; }},
    {MatchKey::attrs, "attrs", Compare::named, kFactAttributes, [](const DeviceFacts&) { return FactTexts{}; }},
    {MatchKey::parent, "parent", Compare::named, kFactAttributes, [](const DeviceFacts&) { return FactTexts{}; }},
    {MatchKey::host, "host", Compare::named, 0, [](const DeviceFacts&) { return FactTexts{}; }},
};
static_assert(util::in_enum_order(kMatchKeys));

const MatchKeyRow& row_of(MatchKey k) { return kMatchKeys[static_cast<std::size_t>(k)]; }

// The host facts host.NAME compares, in the order reports list them.
struct HostFactRow {
    const char* name;
    std::string HostFacts::*field;
};
constexpr HostFactRow kHostFacts[] = {
    {"kernel", &HostFacts::kernel},         {"virtualization", &HostFacts::virtualization},
    {"sys_vendor", &HostFacts::sys_vendor}, {"product_name", &HostFacts::product_name},
    {"hostname", &HostFacts::hostname},
};

// A host.kernel comparison's operator, and the release's numbers.
enum class Op { lt, le, gt, ge, eq, ne };
struct Comparison {
    Op op = Op::eq;
    std::vector<unsigned> version;  // two or three numbers: major.minor[.patch]
};

// "6.12.74+deb13-amd64" -> {6, 12, 74}; "7.0" -> {7, 0}: the leading
// numbers, up to three; nullopt without at least major.minor.
std::optional<std::vector<unsigned>> release_numbers(std::string_view text, bool whole) {
    std::vector<unsigned> out;
    std::size_t i = 0;
    while (out.size() < 3) {
        std::size_t start = i;
        unsigned long n = 0;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - start < 6) n = n * 10 + (text[i++] - '0');
        if (i == start) break;
        out.push_back(static_cast<unsigned>(n));
        if (i < text.size() && text[i] == '.' && out.size() < 3) {
            ++i;
            continue;
        }
        break;
    }
    if (out.size() < 2) return std::nullopt;
    if (whole && i != text.size()) return std::nullopt;  // a pattern's version is numbers only
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
}

bool is_comparison(std::string_view pattern) {
    pattern = trim(pattern);
    return !pattern.empty() && std::string_view("<>=!").find(pattern.front()) != std::string_view::npos;
}

// ">= 6.12, < 7.0" -> two comparisons; nullopt (and why) when it is not one.
std::optional<std::vector<Comparison>> parse_comparisons(std::string_view pattern, std::string* why) {
    std::vector<Comparison> out;
    for (std::size_t start = 0; start <= pattern.size();) {
        const auto comma = std::min(pattern.find(',', start), pattern.size());
        auto part = trim(pattern.substr(start, comma - start));
        start = comma + 1;
        static constexpr std::pair<std::string_view, Op> kOps[] = {{"<=", Op::le}, {">=", Op::ge}, {"==", Op::eq},
                                                                   {"!=", Op::ne}, {"<", Op::lt},  {">", Op::gt}};
        Comparison c;
        bool found = false;
        for (const auto& [text, op] : kOps)
            if (part.starts_with(text)) {
                c.op = op;
                part = trim(part.substr(text.size()));
                found = true;
                break;
            }
        auto numbers = found ? release_numbers(part, true) : std::nullopt;
        if (!numbers) {
            if (why)
                *why = "\"" + std::string(trim(pattern)) +
                       "\" is not a kernel comparison such as \">= 6.17\" or \">= 6.12.58, < 7.0\" (operators <, <=, "
                       ">, >=, ==, !=; a version of two or three numbers)";
            return std::nullopt;
        }
        c.version = std::move(*numbers);
        out.push_back(std::move(c));
    }
    return out;
}

// Compares as many parts as the comparison gives: "> 6.12" is 6.13 and
// later, "== 6.12" every 6.12.x.
bool compare(const Comparison& c, const std::vector<unsigned>& release) {
    std::vector<unsigned> have(release.begin(), release.end());
    have.resize(c.version.size(), 0);  // "7.0" has no patch: 7.0.0
    const auto cmp = have <=> c.version;
    switch (c.op) {
        case Op::lt:
            return cmp < 0;
        case Op::le:
            return cmp <= 0;
        case Op::gt:
            return cmp > 0;
        case Op::ge:
            return cmp >= 0;
        case Op::eq:
            return cmp == 0;
        case Op::ne:
            return cmp != 0;
    }
    return false;
}

}  // namespace

std::vector<std::string> host_fact_names() {
    std::vector<std::string> out;
    for (const auto& row : kHostFacts) out.emplace_back(row.name);
    return out;
}

std::string host_fact(const HostFacts& host, const std::string& name) {
    for (const auto& row : kHostFacts)
        if (name == row.name) return host.*row.field;
    return {};
}

std::string invalid_host_pattern(const std::string& name, const std::string& pattern) {
    if (name != "kernel" || !is_comparison(pattern)) return {};
    std::string why;
    parse_comparisons(pattern, &why);
    return why;
}

bool host_pattern_matches(const std::string& name, const std::string& pattern, const std::string& value) {
    if (name == "kernel" && is_comparison(pattern)) {
        const auto release = release_numbers(value, false);
        const auto comparisons = parse_comparisons(pattern, nullptr);
        if (!release || !comparisons) return false;  // a kernel not known matches no comparison
        return std::all_of(comparisons->begin(), comparisons->end(),
                           [&](const Comparison& c) { return compare(c, *release); });
    }
    if (value.empty()) return pattern.empty();
    return ::fnmatch(pattern.c_str(), value.c_str(), 0) == 0;
}

const char* to_string(MatchKey k) { return util::name_of(kMatchKeys, k); }
std::optional<MatchKey> match_key_from_string(std::string_view s) { return util::value_named(kMatchKeys, s); }
std::vector<std::string> match_key_names() { return util::names_of(kMatchKeys); }
bool match_key_is_flag(MatchKey k) { return row_of(k).compare == Compare::flag; }
bool match_key_is_named(MatchKey k) { return row_of(k).compare == Compare::named; }

std::string named_match_example(MatchKey k) {
    if (k == MatchKey::env) return "udev properties, e.g. env.ID_BUS = \"ata\"";
    if (k == MatchKey::host)
        return "host facts (" + util::join(host_fact_names(), ", ") + "), e.g. host.kernel = \">= 6.17\"";
    if (k == MatchKey::attr) return "sysfs attributes of the device, e.g. attr.\"queue/zoned\" = \"host-managed\"";
    if (k == MatchKey::parent)
        return "tests one level of the device and its parents meets together: kernel, subsystem, driver, "
               "attr.<sysfs attribute>, e.g. parent.subsystem = \"usb\" with parent.attr.idVendor = \"0781\"";
    return "sysfs attributes of the device or a parent, e.g. attrs.nsid = \"?*\"";
}

std::string invalid_match_name(MatchKey k, const std::string& name) {
    auto is = [](char c, const char* extra) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
               std::string_view(extra).find(c) != std::string_view::npos;
    };
    if (k == MatchKey::host) {
        const auto names = host_fact_names();
        if (std::find(names.begin(), names.end(), name) == names.end())
            return "not a host fact (known: " + util::join(names, ", ") + ")";
        return {};
    }
    if (k == MatchKey::env) {
        if (name.empty() || !std::all_of(name.begin(), name.end(), [&](char c) { return is(c, ""); }))
            return "a udev property name has only letters, digits and _";
        return {};
    }
    // A path below the device's directory: never out of it.
    const bool chars_ok = std::all_of(name.begin(), name.end(), [&](char c) { return is(c, "-./:"); });
    bool parts_ok = !name.empty() && name.size() <= 128 && name.front() != '/' && name.back() != '/';
    for (std::size_t start = 0; parts_ok && start <= name.size();) {
        const auto slash = std::min(name.find('/', start), name.size());
        const auto part = std::string_view(name).substr(start, slash - start);
        if (part.empty() || part == "." || part == "..") parts_ok = false;
        start = slash + 1;
    }
    if (!chars_ok || !parts_ok)
        return "a sysfs attribute is a relative path of letters, digits, '_', '-', '.' and ':' (at most 128 "
               "characters, no empty, '.' or '..' part)";
    return {};
}

AttributeNames attribute_names(const Policy& policy) {
    AttributeNames names;
    for (const auto& rule : policy.rules)
        for (const auto& c : rule.match) {
            if (c.key == MatchKey::attr) names.own.insert(c.name);
            if (c.key == MatchKey::attrs) names.parents.insert(c.name);
            if (c.key != MatchKey::parent) continue;
            names.levels = true;
            for (const auto& t : c.parent)
                if (t.what == "attr") names.level_attributes.insert(t.name);
        }
    return names;
}

std::string known_match_keys_text() {
    std::string out;
    for (const auto& row : kMatchKeys)
        out += (out.empty() ? "" : ", ") + std::string(row.name) +
               (row.value == MatchKey::env      ? ".<udev property>"
                : row.value == MatchKey::host   ? ".<host fact>"
                : row.value == MatchKey::parent ? ".<level test>"
                : row.compare == Compare::named ? ".<sysfs attribute>"
                                                : "");
    return out;
}

namespace {

// The fact values a match key is compared with (several for `driver`: every
// driver on the parent chain). Empty when the device does not have the fact.
std::vector<std::string> fact_values(MatchKey key, const DeviceFacts& f) { return row_of(key).read(f); }

// A glob (fnmatch: *, ?, [...]) against one value. A missing fact (empty
// value) matches only the empty pattern.
bool glob_match(const std::string& pattern, const std::string& value) {
    if (value.empty()) return pattern.empty();
    return ::fnmatch(pattern.c_str(), value.c_str(), 0) == 0;
}

// The values a named clause compares: the property, the device's own
// attribute, or the attribute at every level that has it; one empty value
// when there is none.
std::vector<std::string> named_values(const MatchClause& clause, const DeviceFacts& facts) {
    if (clause.key == MatchKey::env) {
        auto it = facts.properties.find(clause.name);
        return {it == facts.properties.end() ? std::string() : it->second};
    }
    if (clause.key == MatchKey::attr) {
        auto it = facts.own_attributes.find(clause.name);
        return {it == facts.own_attributes.end() ? std::string() : it->second};
    }
    auto it = facts.parent_attributes.find(clause.name);
    if (it == facts.parent_attributes.end() || it->second.empty()) return {std::string()};
    return it->second;
}

// A parent table: one level (the device itself or a parent) meeting every
// test, as udevd requires of one rule's parent keys. A level without an
// attribute reads it as "", which only the empty pattern matches.
bool parent_matches(const MatchClause& clause, const DeviceFacts& facts) {
    return std::any_of(facts.levels.begin(), facts.levels.end(), [&](const DeviceFacts::Level& level) {
        return std::all_of(clause.parent.begin(), clause.parent.end(), [&](const ParentTest& t) {
            std::string value;
            if (t.what == "kernel") value = level.kernel;
            if (t.what == "subsystem") value = level.subsystem;
            if (t.what == "driver") value = level.driver;
            if (t.what == "attr") {
                auto it = level.attributes.find(t.name);
                if (it != level.attributes.end()) value = it->second;
            }
            return std::any_of(t.patterns.begin(), t.patterns.end(),
                               [&](const std::string& p) { return glob_match(p, value); });
        });
    });
}

bool clause_matches(const MatchClause& clause, const DeviceFacts& facts) {
    if (clause.key == MatchKey::parent) return parent_matches(clause, facts);
    std::vector<std::string> values =
        match_key_is_named(clause.key) ? named_values(clause, facts) : fact_values(clause.key, facts);
    const auto compare = row_of(clause.key).compare;
    for (const auto& pattern : clause.patterns) {
        if (compare == Compare::flag || compare == Compare::exact) {
            if (!values.empty() && values.front() == pattern) return true;
            continue;
        }
        for (const auto& v : values)
            if (glob_match(pattern, v)) return true;
    }
    return false;
}

}  // namespace

bool host_clause_matches(const MatchClause& clause, const HostFacts& host) {
    const auto value = host_fact(host, clause.name);
    return std::any_of(clause.patterns.begin(), clause.patterns.end(),
                       [&](const std::string& p) { return host_pattern_matches(clause.name, p, value); });
}

void bind_host(Policy& policy, HostFacts host) {
    for (auto& rule : policy.rules) {
        rule.host_ok = true;
        rule.host_why.clear();
        for (const auto& c : rule.match) {
            if (c.key != MatchKey::host || host_clause_matches(c, host) != c.negated) continue;
            const auto value = host_fact(host, c.name);
            const std::string shown = value.empty() ? "not known" : "\"" + value + "\"";
            std::string patterns;
            for (const auto& p : c.patterns) patterns += (patterns.empty() ? "\"" : ", \"") + p + "\"";
            rule.host_why = (c.negated ? "unless." : "match.") + std::string("host.") + c.name + " " + patterns +
                            (c.negated ? " holds" : " does not hold") + " here: host." + c.name + " is " + shown +
                            " (" + c.pos.file_line() + ")";
            rule.host_ok = false;
            break;
        }
    }
    policy.host = std::move(host);
    policy.host_bound = true;
}

bool rule_matches(const Rule& rule, const DeviceFacts& facts) {
    if (!rule.host_ok) return false;
    for (const auto& c : rule.match)
        if (c.key != MatchKey::host && clause_matches(c, facts) == c.negated) return false;  // host: decided
    return true;
}

FactNeeds fact_needs(MatchKey key) { return row_of(key).needs; }

FactNeeds fact_needs(const Policy& policy) {
    FactNeeds needs = 0;
    for (const auto& rule : policy.rules) {
        for (const auto& c : rule.match) needs |= fact_needs(c.key);
        for (const auto& s : rule.set) needs |= fixed_attribute(s.id).fact_needs;  // what its device check reads
    }
    return needs;
}

}  // namespace blkpolicy::policy
